//! The storage trait's promises, each checked directly on a backend. Every
//! check takes a fresh backend from `make`, works in tenants named for it
//! alone, and answers the first promise it saw broken. It owns what a
//! promise means in bytes; it must never accept an answer the trait's
//! documentation rules out, and never depend on timing to pass: a check
//! that runs threads side by side accepts every interleaving a conforming
//! backend can produce.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::config::Limits;
use crate::storage::backend::{Backend, Entry, Mode, Txn, Write};
use crate::storage::error::StorageError;
use crate::testkit::report::{Check, Failure};

/// Every check of this module, by name (the list is
/// `leasehold_host::__kv_checks!`'s).
pub fn checks<B: Backend>() -> Vec<Check<B>> {
    crate::__kv_checks!(checks(B))
}

/// Long enough for any healthy store; a check never waits on it to pass.
const WAIT: Duration = Duration::from_secs(10);

/// A tenant name no other check, run or process uses.
fn tenant(suffix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "kit{}-{}-{nanos}{suffix}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A failure of `check` unless `holds`.
fn ensure(check: &'static str, holds: bool, what: impl FnOnce() -> String) -> Result<(), Failure> {
    if holds {
        Ok(())
    } else {
        Err(Failure::new(check, what()))
    }
}

/// A storage error where none was expected.
fn failed(check: &'static str, doing: &str) -> impl FnOnce(StorageError) -> Failure {
    let doing = doing.to_owned();
    move |e| Failure::new(check, format!("{doing} failed: {e}"))
}

fn begin<B: Backend>(
    check: &'static str,
    b: &B,
    tenant: &str,
    mode: Mode,
) -> Result<Box<dyn Txn>, Failure> {
    b.begin(tenant, mode, WAIT)
        .map_err(failed(check, &format!("beginning a {mode:?} transaction")))
}

/// Commits `batch` in a write transaction of its own and waits for it.
fn write<B: Backend>(
    check: &'static str,
    b: &B,
    tenant: &str,
    batch: Vec<Write>,
) -> Result<(), Failure> {
    let txn = begin(check, b, tenant, Mode::Write)?;
    txn.commit(batch)
        .and_then(|p| p.wait())
        .map_err(failed(check, "committing a batch"))
}

fn put(key: &[u8], value: &[u8]) -> Write {
    Write::Put(key.to_vec(), value.to_vec())
}

/// Every entry of `tenant`, read in one snapshot, in scan order.
fn everything<B: Backend>(
    check: &'static str,
    b: &B,
    tenant: &str,
    reverse: bool,
) -> Result<Vec<Entry>, Failure> {
    let mut txn = begin(check, b, tenant, Mode::Read)?;
    scan_all(check, txn.as_mut(), reverse)
}

fn scan_all(check: &'static str, txn: &mut dyn Txn, reverse: bool) -> Result<Vec<Entry>, Failure> {
    let (entries, over) = txn
        .scan(&[], None, 4096, reverse, usize::MAX)
        .map_err(failed(check, "scanning"))?;
    ensure(check, !over, || {
        "a scan with no byte cap stopped early".into()
    })?;
    Ok(entries)
}

fn keys(entries: &[Entry]) -> Vec<Vec<u8>> {
    entries.iter().map(|(k, _)| k.clone()).collect()
}

/// A fresh tenant answers nothing to every kind of read.
pub fn empty_store_reads_nothing<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "empty_store_reads_nothing";
    let b = make();
    let t = tenant("");
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        let got = txn.get(b"k").map_err(failed(C, "get"))?;
        ensure(C, got.is_none(), || {
            format!("get of an absent key answered {got:?}")
        })?;
        let many = txn
            .get_many(&[b"a".to_vec(), b"b".to_vec()])
            .map_err(failed(C, "get-many"))?;
        ensure(C, many == vec![None, None], || {
            format!("get-many of absent keys answered {many:?}")
        })?;
        let none = txn.get_many(&[]).map_err(failed(C, "get-many"))?;
        ensure(C, none.is_empty(), || {
            "get-many of no keys answered some".into()
        })?;
        for reverse in [false, true] {
            let all = scan_all(C, txn.as_mut(), reverse)?;
            ensure(C, all.is_empty(), || {
                format!("a fresh tenant's scan answered {} entries", all.len())
            })?;
        }
    }
    Ok(())
}

/// What was put is read back, by every kind of read, in the order asked;
/// a put replaces.
pub fn puts_read_back<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "puts_read_back";
    let b = make();
    let t = tenant("");
    write(
        C,
        &b,
        &t,
        vec![put(b"a", b"1"), put(b"b", b""), put(b"c", &[0, 255, 0])],
    )?;
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        for (k, v) in [(&b"a"[..], &b"1"[..]), (b"b", b""), (b"c", &[0, 255, 0])] {
            let got = txn.get(k).map_err(failed(C, "get"))?;
            ensure(C, got.as_deref() == Some(v), || {
                format!("{mode:?}: get {k:?} answered {got:?}, not {v:?}")
            })?;
        }
        let asked = [b"c".to_vec(), b"zz".to_vec(), b"a".to_vec(), b"a".to_vec()];
        let many = txn.get_many(&asked).map_err(failed(C, "get-many"))?;
        let want = vec![
            Some(vec![0, 255, 0]),
            None,
            Some(b"1".to_vec()),
            Some(b"1".to_vec()),
        ];
        ensure(C, many == want, || {
            format!("{mode:?}: get-many answered {many:?}, not {want:?} in the order asked")
        })?;
    }
    write(C, &b, &t, vec![put(b"a", b"2")])?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let got = txn.get(b"a").map_err(failed(C, "get"))?;
    ensure(C, got.as_deref() == Some(&b"2"[..]), || {
        format!("a put did not replace the value: {got:?}")
    })
}

/// Keys that differ only in how bytewise order treats them: a prefix before
/// its extensions, `0x00` after nothing, `0x80` and `0xff` as unsigned.
fn tricky_keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = vec![
        vec![0x00],
        vec![0x00, 0x00],
        vec![0x00, 0x01],
        vec![0x01],
        vec![0x7f],
        vec![0x80],
        vec![0x80, 0x00],
        vec![0xfe, 0xff],
        vec![0xff],
        vec![0xff, 0x00],
        vec![0xff, 0xff],
        b"a".to_vec(),
        b"a\0".to_vec(),
        b"ab".to_vec(),
        b"b".to_vec(),
    ];
    keys.sort();
    keys
}

/// Scans walk keys in bytewise order, and its reverse, over any range.
pub fn bytewise_order_both_ways<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "bytewise_order_both_ways";
    let b = make();
    let t = tenant("");
    let sorted = tricky_keys();
    // Put in an order that is not the sorted one.
    let mut batch: Vec<Write> = sorted.iter().rev().map(|k| put(k, k)).collect();
    batch.rotate_left(5);
    write(C, &b, &t, batch)?;
    let forward = everything(C, &b, &t, false)?;
    ensure(C, keys(&forward) == sorted, || {
        format!(
            "a forward scan answered {:?}, not {sorted:?}",
            keys(&forward)
        )
    })?;
    let backward = everything(C, &b, &t, true)?;
    let mut want: Vec<Vec<u8>> = sorted.clone();
    want.reverse();
    ensure(C, keys(&backward) == want, || {
        format!(
            "a reverse scan answered {:?}, not {want:?}",
            keys(&backward)
        )
    })?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let bounds: [(&[u8], Option<&[u8]>); 6] = [
        (&[0x00], Some(&[0x01])),
        (&[0x00, 0x00], Some(&[0x7f])),
        (&[0x80], None),
        (b"a", Some(b"ab")),
        (&[0xff], Some(&[0xff, 0xff])),
        (&[0x7f, 0xff], Some(&[0xff, 0x00, 0x00])),
    ];
    for (start, end) in bounds {
        let inside: Vec<Vec<u8>> = sorted
            .iter()
            .filter(|k| k.as_slice() >= start && end.is_none_or(|e| k.as_slice() < e))
            .cloned()
            .collect();
        for reverse in [false, true] {
            for limit in [1u32, 2, 100] {
                let (got, _) = txn
                    .scan(start, end, limit, reverse, usize::MAX)
                    .map_err(failed(C, "scan"))?;
                let mut want = inside.clone();
                if reverse {
                    want.reverse();
                }
                want.truncate(limit as usize);
                ensure(C, keys(&got) == want, || {
                    format!(
                        "scan [{start:?}, {end:?}) limit {limit} reverse {reverse} answered {:?}, not {want:?}",
                        keys(&got)
                    )
                })?;
                ensure(C, got.iter().all(|(k, v)| k == v), || {
                    "a scan paired a key with another key's value".into()
                })?;
            }
        }
    }
    Ok(())
}

/// A scan answers at most `limit` entries from the right end of its range;
/// fewer than `limit` means the range is exhausted.
pub fn scan_limits_and_bounds<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "scan_limits_and_bounds";
    let b = make();
    let t = tenant("");
    let k = |i: u8| vec![b'k', b'0' + i];
    write(C, &b, &t, (0..10).map(|i| put(&k(i), &[i])).collect())?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let mut scan = |start: Vec<u8>, end: Option<Vec<u8>>, limit: u32, reverse: bool| {
        txn.scan(&start, end.as_deref(), limit, reverse, usize::MAX)
            .map(|(entries, _)| keys(&entries))
            .map_err(failed(C, "scan"))
    };
    /// start, end, limit, reverse, and the keys expected.
    type Case = (Vec<u8>, Option<Vec<u8>>, u32, bool, Vec<Vec<u8>>);
    let cases: Vec<Case> = vec![
        (vec![], None, 0, false, vec![]),
        (vec![], None, 0, true, vec![]),
        (vec![], None, 3, false, vec![k(0), k(1), k(2)]),
        (vec![], None, 3, true, vec![k(9), k(8), k(7)]),
        (k(3), None, 1, false, vec![k(3)]),
        (vec![], Some(k(5)), 1, true, vec![k(4)]),
        (k(3), Some(k(6)), 2, true, vec![k(5), k(4)]),
        (k(3), Some(k(6)), 10, false, vec![k(3), k(4), k(5)]),
        (k(5), Some(k(5)), 10, false, vec![]),
        (k(6), Some(k(2)), 10, false, vec![]),
        (k(6), Some(k(2)), 10, true, vec![]),
        (b"l".to_vec(), None, 10, false, vec![]),
        (vec![], None, 100, false, (0..10).map(k).collect()),
    ];
    for (start, end, limit, reverse, want) in cases {
        let got = scan(start.clone(), end.clone(), limit, reverse)?;
        ensure(C, got == want, || {
            format!(
                "scan [{start:?}, {end:?}) limit {limit} reverse {reverse} answered {got:?}, not {want:?}"
            )
        })?;
    }
    Ok(())
}

/// A scan stops once its entries would hold more than `max_bytes`, says so,
/// and answers only entries that fit.
pub fn scan_byte_caps<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "scan_byte_caps";
    let b = make();
    let t = tenant("");
    // Five entries of ten bytes each: a 2-byte key and an 8-byte value.
    write(
        C,
        &b,
        &t,
        (0..5u8).map(|i| put(&[b'k', i], &[i; 8])).collect(),
    )?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    for reverse in [false, true] {
        let (all, over) = txn
            .scan(&[], None, 100, reverse, 50)
            .map_err(failed(C, "scan"))?;
        ensure(C, all.len() == 5 && !over, || {
            format!(
                "entries of exactly max-bytes answered {} entries, stopped early: {over}",
                all.len()
            )
        })?;
        for cap in [0usize, 9, 10, 29, 30, 49] {
            let (got, over) = txn
                .scan(&[], None, 100, reverse, cap)
                .map_err(failed(C, "scan"))?;
            let bytes: usize = got.iter().map(|(k, v)| k.len() + v.len()).sum();
            ensure(C, over, || {
                format!("a scan over {cap} bytes of 50 did not say it stopped early")
            })?;
            ensure(C, bytes <= cap && got.len() == cap / 10, || {
                format!(
                    "a scan capped at {cap} bytes answered {} entries ({bytes} bytes), not {}",
                    got.len(),
                    cap / 10
                )
            })?;
            ensure(C, keys(&got) == keys(&all)[..got.len()], || {
                "a capped scan did not answer the head of the range".into()
            })?;
        }
    }
    Ok(())
}

/// The largest key and value the sandbox lets a call write are stored and
/// read back whole.
pub fn largest_key_and_value<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "largest_key_and_value";
    let b = make();
    let t = tenant("");
    let limits = Limits::default();
    let key: Vec<u8> = (0..limits.key_bytes).map(|i| (i % 251) as u8).collect();
    let value: Vec<u8> = (0..limits.value_bytes).map(|i| (i % 253) as u8).collect();
    write(C, &b, &t, vec![put(&key, &value), put(b"small", b"v")])?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let got = txn.get(&key).map_err(failed(C, "get"))?;
    ensure(C, got.as_ref() == Some(&value), || {
        format!(
            "a {}-byte key's {}-byte value came back as {:?} bytes",
            key.len(),
            value.len(),
            got.as_ref().map(Vec::len)
        )
    })?;
    let many = txn
        .get_many(std::slice::from_ref(&key))
        .map_err(failed(C, "get-many"))?;
    ensure(
        C,
        many.first().and_then(Option::as_ref) == Some(&value),
        || "get-many did not answer the largest value whole".into(),
    )?;
    let all = scan_all(C, txn.as_mut(), false)?;
    ensure(
        C,
        all.len() == 2 && all[0] == (key.clone(), value.clone()),
        || "a scan did not answer the largest key and value whole".into(),
    )
}

/// An empty batch commits and changes nothing, in a write transaction or a
/// read one.
pub fn empty_batches_commit_nothing<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "empty_batches_commit_nothing";
    let b = make();
    let t = tenant("");
    write(C, &b, &t, vec![put(b"a", b"1")])?;
    let before = everything(C, &b, &t, false)?;
    write(C, &b, &t, Vec::new())?;
    let mut w = begin(C, &b, &t, Mode::Write)?;
    w.get(b"a").map_err(failed(C, "get"))?;
    w.commit(Vec::new())
        .and_then(|p| p.wait())
        .map_err(failed(C, "an empty commit after a read"))?;
    let r = begin(C, &b, &t, Mode::Read)?;
    r.commit(Vec::new())
        .and_then(|p| p.wait())
        .map_err(failed(C, "a read transaction's empty commit"))?;
    let after = everything(C, &b, &t, false)?;
    ensure(C, before == after, || {
        format!("empty batches changed the tenant: {before:?} became {after:?}")
    })
}

/// Deleting an absent key is no error, and a delete removes.
pub fn deletes_of_absent_keys<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "deletes_of_absent_keys";
    let b = make();
    let t = tenant("");
    write(
        C,
        &b,
        &t,
        vec![Write::Delete(b"never".to_vec()), put(b"x", b"1")],
    )?;
    let all = everything(C, &b, &t, false)?;
    ensure(C, all == vec![(b"x".to_vec(), b"1".to_vec())], || {
        format!("after deleting an absent key and putting x: {all:?}")
    })?;
    write(
        C,
        &b,
        &t,
        vec![Write::Delete(b"x".to_vec()), Write::Delete(b"y".to_vec())],
    )?;
    let all = everything(C, &b, &t, false)?;
    ensure(C, all.is_empty(), || {
        format!("a deleted key is still there: {all:?}")
    })?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let got = txn.get(b"x").map_err(failed(C, "get"))?;
    ensure(C, got.is_none(), || {
        format!("get of a deleted key answered {got:?}")
    })
}

/// A transaction dropped without committing leaves nothing and holds no
/// one up; a committed batch lands whole for the next reader.
pub fn batches_are_all_or_nothing<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "batches_are_all_or_nothing";
    let b = make();
    let t = tenant("");
    write(C, &b, &t, vec![put(b"keep", b"1")])?;
    let before = everything(C, &b, &t, false)?;
    {
        let mut w = begin(C, &b, &t, Mode::Write)?;
        w.get(b"keep").map_err(failed(C, "get"))?;
        drop(w);
    }
    let after = everything(C, &b, &t, false)?;
    ensure(C, before == after, || {
        "a write transaction dropped without committing changed the tenant".into()
    })?;
    let batch: Vec<Write> = (0..200u32)
        .map(|i| put(format!("row{i:04}").as_bytes(), &i.to_be_bytes()))
        .collect();
    // Begins (and reads, so a lazy snapshot is taken) before the commit.
    let mut early = begin(C, &b, &t, Mode::Read)?;
    early.get(b"keep").map_err(failed(C, "get"))?;
    write(C, &b, &t, batch)?;
    let seen = scan_all(C, early.as_mut(), false)?;
    ensure(C, seen == before, || {
        format!(
            "a reader that began before a batch saw {} of its 200 writes",
            seen.len() - before.len().min(seen.len())
        )
    })?;
    let all = everything(C, &b, &t, false)?;
    ensure(C, all.len() == 201, || {
        format!("a reader after the batch saw {} of 201 entries", all.len())
    })
}

/// A read transaction sees one snapshot: writes committed after it began
/// are invisible to every kind of read it makes.
pub fn reads_see_one_snapshot<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "reads_see_one_snapshot";
    let b = make();
    let t = tenant("");
    write(C, &b, &t, vec![put(b"k", b"v1"), put(b"gone", b"g")])?;
    let mut r = begin(C, &b, &t, Mode::Read)?;
    let first = r.get(b"k").map_err(failed(C, "get"))?;
    ensure(C, first.as_deref() == Some(&b"v1"[..]), || {
        format!("get answered {first:?} before any concurrent write")
    })?;
    write(
        C,
        &b,
        &t,
        vec![
            put(b"k", b"v2"),
            put(b"new", b"n"),
            Write::Delete(b"gone".to_vec()),
        ],
    )?;
    let k = r.get(b"k").map_err(failed(C, "get"))?;
    ensure(C, k.as_deref() == Some(&b"v1"[..]), || {
        format!("a reader saw a value committed after it began: {k:?}")
    })?;
    let new = r.get(b"new").map_err(failed(C, "get"))?;
    ensure(C, new.is_none(), || {
        "a reader saw a key committed after it began".into()
    })?;
    let many = r
        .get_many(&[b"gone".to_vec(), b"new".to_vec()])
        .map_err(failed(C, "get-many"))?;
    ensure(C, many == vec![Some(b"g".to_vec()), None], || {
        format!("get-many saw writes committed after the reader began: {many:?}")
    })?;
    let all = scan_all(C, r.as_mut(), false)?;
    let want = vec![
        (b"gone".to_vec(), b"g".to_vec()),
        (b"k".to_vec(), b"v1".to_vec()),
    ];
    ensure(C, all == want, || {
        format!("a scan saw writes committed after the reader began: {all:?}")
    })?;
    let mut later = begin(C, &b, &t, Mode::Read)?;
    let k = later.get(b"k").map_err(failed(C, "get"))?;
    ensure(C, k.as_deref() == Some(&b"v2"[..]), || {
        format!("a reader that began after the commit saw {k:?}")
    })
}

/// Batches committed one after another, each rewriting the same 32 keys,
/// never show a reader running beside them a mix of two batches.
pub fn batches_land_whole_under_a_concurrent_reader<B: Backend>(
    make: &dyn Fn() -> B,
) -> Result<(), Failure> {
    const C: &str = "batches_land_whole_under_a_concurrent_reader";
    const KEYS: u32 = 32;
    const BATCHES: u32 = 20;
    let b = make();
    let t = tenant("");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let out = (1..=BATCHES).try_for_each(|g| {
                let batch = (0..KEYS)
                    .map(|i| put(format!("g{i:02}").as_bytes(), &g.to_be_bytes()))
                    .collect();
                write(C, &b, &t, batch)
            });
            done.store(true, Ordering::Release);
            out
        });
        let mut reads = 0u32;
        // At least a few reads even if the writer finishes first.
        while !done.load(Ordering::Acquire) || reads < 3 {
            reads += 1;
            let all = everything(C, &b, &t, reads.is_multiple_of(2))?;
            let generations: BTreeMap<Vec<u8>, usize> =
                all.iter().fold(BTreeMap::new(), |mut m, (_, v)| {
                    *m.entry(v.clone()).or_default() += 1;
                    m
                });
            ensure(
                C,
                all.is_empty() || (all.len() == KEYS as usize && generations.len() == 1),
                || {
                    format!(
                        "one snapshot held {} keys from {} batches",
                        all.len(),
                        generations.len()
                    )
                },
            )?;
        }
        writer
            .join()
            .map_err(|_| Failure::new(C, "the writer panicked"))?
    })
}

/// Two write transactions that read the same value and write what they
/// computed from it never both commit: one waits for the other, or one
/// answers a conflict (or that its turn did not come) and writes nothing.
pub fn writers_are_serializable<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "writers_are_serializable";
    let b = make();
    let t = tenant("");
    let counter = |v: Option<Vec<u8>>| {
        v.map_or(0, |v| {
            u64::from_be_bytes(v.as_slice().try_into().unwrap_or([0; 8]))
        })
    };
    let read_counter = |txn: &mut dyn Txn| -> Result<u64, Failure> {
        txn.get(b"counter").map(counter).map_err(failed(C, "get"))
    };
    // A writer that lost the race (a conflict, no turn, an aborted group)
    // answers `false`; any other failure fails the check.
    let lost = |e: StorageError, doing: &str| -> Result<bool, Failure> {
        if e.is_retryable() {
            Ok(false)
        } else {
            Err(Failure::new(
                C,
                format!("a racing writer's {doing} failed: {e}"),
            ))
        }
    };
    let bump = |txn: Box<dyn Txn>, seen: u64| -> Result<bool, Failure> {
        match txn
            .commit(vec![put(b"counter", &(seen + 1).to_be_bytes())])
            .and_then(|p| p.wait())
        {
            Ok(()) => Ok(true),
            Err(e) => lost(e, "commit"),
        }
    };
    for round in 0..5 {
        let start = {
            let mut r = begin(C, &b, &t, Mode::Read)?;
            read_counter(r.as_mut())?
        };
        let mut first = begin(C, &b, &t, Mode::Write)?;
        let seen = read_counter(first.as_mut())?;
        let (first_ok, second_ok) = std::thread::scope(|s| {
            let second = s.spawn(|| -> Result<bool, Failure> {
                let mut txn = match b.begin(&t, Mode::Write, WAIT) {
                    Ok(txn) => txn,
                    Err(e) => return lost(e, "begin"),
                };
                match txn.get(b"counter") {
                    Ok(v) => bump(txn, counter(v)),
                    Err(e) => lost(e, "read"),
                }
            });
            let first_ok = bump(first, seen);
            let second_ok = second
                .join()
                .map_err(|_| Failure::new(C, "the second writer panicked"))
                .and_then(|r| r);
            (first_ok, second_ok)
        });
        let oks = u64::from(first_ok?) + u64::from(second_ok?);
        let end = {
            let mut r = begin(C, &b, &t, Mode::Read)?;
            read_counter(r.as_mut())?
        };
        ensure(C, end == start + oks, || {
            format!(
                "round {round}: {oks} writers committed a bump of the counter from {start}, \
                 but it ended at {end}: an update was lost"
            )
        })?;
    }
    Ok(())
}

/// No read or write of one tenant reaches another's keys, including a
/// tenant whose name extends the other's and keys that would meet if names
/// and keys were simply joined.
pub fn tenants_are_apart<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "tenants_are_apart";
    let b = make();
    let stem = tenant("");
    let (a, ab, other) = (format!("{stem}a"), format!("{stem}ab"), format!("{stem}b"));
    // Joined without a separator, a's "b1" and ab's "1" would be one key.
    write(C, &b, &a, vec![put(b"b1", b"a's"), put(b"x", b"a-x")])?;
    write(C, &b, &ab, vec![put(b"1", b"ab's"), put(b"x", b"ab-x")])?;
    write(
        C,
        &b,
        &other,
        vec![put(b"x", b"b-x"), put(&[0xff], b"b-ff")],
    )?;
    let want_a = vec![
        (b"b1".to_vec(), b"a's".to_vec()),
        (b"x".to_vec(), b"a-x".to_vec()),
    ];
    let want_ab = vec![
        (b"1".to_vec(), b"ab's".to_vec()),
        (b"x".to_vec(), b"ab-x".to_vec()),
    ];
    for (name, want) in [(&a, &want_a), (&ab, &want_ab)] {
        let got = everything(C, &b, name, false)?;
        ensure(C, &got == want, || {
            format!("tenant {name} scanned {got:?}, not its own {want:?}")
        })?;
        let mut back = everything(C, &b, name, true)?;
        back.reverse();
        ensure(C, &back == want, || {
            format!("tenant {name} scanned in reverse {back:?}")
        })?;
    }
    let mut txn = begin(C, &b, &a, Mode::Read)?;
    let got = txn.get(b"b1").map_err(failed(C, "get"))?;
    ensure(C, got.as_deref() == Some(&b"a's"[..]), || {
        format!("tenant {a}'s key b1 answered {got:?}")
    })?;
    let stray = txn
        .get_many(&[b"1".to_vec(), vec![0xff]])
        .map_err(failed(C, "get-many"))?;
    ensure(C, stray == vec![None, None], || {
        format!("tenant {a} read other tenants' keys: {stray:?}")
    })?;
    drop(txn);
    write(C, &b, &a, vec![Write::Delete(b"x".to_vec())])?;
    let got = everything(C, &b, &ab, false)?;
    ensure(C, got == want_ab, || {
        format!("a delete in tenant {a} changed tenant {ab}: {got:?}")
    })
}
