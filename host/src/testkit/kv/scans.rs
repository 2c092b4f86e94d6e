//! Range scans: bytewise order both ways, limits and bounds, byte caps,
//! several ranges in one `scan_many`, and scans long enough to cross any
//! page a backend reads in. It owns these
//! checks' keys and the answers they expect; it must never accept a scan
//! that skips, repeats or reorders a key, or answers past its bounds.

use crate::storage::backend::{Backend, Entry, Mode, ScanRange, Write, take_within};
use crate::testkit::report::Failure;
use crate::testkit::steps::{begin, ensure, everything, failed, keys, put, show, tenant, write};

/// Keys that differ only in how bytewise order treats them: a prefix before
/// its extensions, `0x00` after nothing, `0x80` and `0xff` as unsigned,
/// letter case as bytes.
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
        // Upper case before lower bytewise; a locale's collation puts
        // `A` and `a` together.
        b"A".to_vec(),
        b"B".to_vec(),
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
    let bounds: [(&[u8], Option<&[u8]>); 11] = [
        (&[0x00], Some(&[0x01])),
        (&[0x00, 0x00], Some(&[0x7f])),
        (&[0x80], None),
        (b"a", Some(b"ab")),
        (&[0xff], Some(&[0xff, 0xff])),
        (&[0x7f, 0xff], Some(&[0xff, 0x00, 0x00])),
        // An end past the last key: a reverse scan starts at the last key,
        // not at nothing.
        (&[0x80], Some(&[0xff, 0xff, 0x00])),
        (&[], Some(&[0xff, 0xff, 0xff, 0xff])),
        // A start past the last key, and a range between two keys.
        (&[0xff, 0xff, 0x00], None),
        (&[0xff, 0xff, 0x00], Some(&[0xff, 0xff, 0x01])),
        (b"a\0\0", Some(b"aa")),
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

/// `scan_many` answers each range, in the order asked, as `scan` answers it
/// alone: every shape together (in a read and in a write transaction), the
/// forward ranges with ends alone (what a backend may answer in one
/// statement), a range asked twice, and none; and its byte cap holds the
/// answers together, stopping at the range that goes over.
pub fn scan_many_answers_each_range_as_scan<B: Backend>(
    make: &dyn Fn() -> B,
) -> Result<(), Failure> {
    const C: &str = "scan_many_answers_each_range_as_scan";
    let b = make();
    let t = tenant("");
    let k = |i: u8| vec![b'k', b'0' + i];
    // Ten entries of ten bytes: a 2-byte key and an 8-byte value.
    write(C, &b, &t, (0..10).map(|i| put(&k(i), &[i; 8])).collect())?;
    type Asked = (Vec<u8>, Option<Vec<u8>>, u32, bool);
    let every: Vec<Asked> = vec![
        (k(2), Some(k(6)), 2, false),
        (vec![], None, 3, true),
        (k(5), Some(k(5)), 4, false),
        (k(0), Some(k(3)), 0, false),
        (k(7), None, 10, false),
        (k(3), Some(k(8)), 10, true),
        (k(6), Some(k(2)), 10, false),
        (k(2), Some(k(6)), 2, false),
        (k(8), Some(b"l".to_vec()), 5, false),
        (b"l".to_vec(), Some(b"m".to_vec()), 5, false),
    ];
    let forward: Vec<Asked> = every
        .iter()
        .filter(|(_, end, _, reverse)| end.is_some() && !reverse)
        .cloned()
        .collect();
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        for asked in [&every, &forward, &Vec::new()] {
            let batch: Vec<ScanRange<'_>> = asked
                .iter()
                .map(|(start, end, limit, reverse)| ScanRange {
                    start,
                    end: end.as_deref(),
                    limit: *limit,
                    reverse: *reverse,
                })
                .collect();
            let (got, over) = txn
                .scan_many(&batch, usize::MAX)
                .map_err(failed(C, "scan-many"))?;
            ensure(C, !over && got.len() == batch.len(), || {
                format!(
                    "{mode:?}: scan-many of {} ranges answered {} (stopped early: {over})",
                    batch.len(),
                    got.len()
                )
            })?;
            for (r, answer) in batch.iter().zip(&got) {
                let (alone, _) = txn
                    .scan(r.start, r.end, r.limit, r.reverse, usize::MAX)
                    .map_err(failed(C, "scan"))?;
                ensure(C, answer == &alone, || {
                    format!(
                        "{mode:?}: scan-many answered [{:?}, {:?}) limit {} reverse {} with {:?}, where the scan alone answers {:?}",
                        r.start,
                        r.end,
                        r.limit,
                        r.reverse,
                        keys(answer),
                        keys(&alone)
                    )
                })?;
            }
        }
        // Two forward ranges of 30 bytes each: together within 60, and cut
        // at the second below it.
        let two = [
            ScanRange {
                start: &k(0),
                end: Some(&k(3)),
                limit: 10,
                reverse: false,
            },
            ScanRange {
                start: &k(5),
                end: Some(&k(8)),
                limit: 10,
                reverse: false,
            },
        ];
        for (cap, want_over, want) in [(60, false, [3, 3]), (50, true, [3, 2]), (25, true, [2, 0])]
        {
            let (got, over) = txn.scan_many(&two, cap).map_err(failed(C, "scan-many"))?;
            let lens: Vec<usize> = got.iter().map(Vec::len).collect();
            ensure(C, over == want_over && lens == want, || {
                format!(
                    "{mode:?}: two ranges of 30 bytes capped at {cap} answered {lens:?} entries (stopped early: {over}), not {want:?} ({want_over})"
                )
            })?;
        }
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

/// On every shape of scan (whole, from a start, up to an end, bounded both
/// ways, limited, each forward and in reverse), with a byte cap below,
/// exactly at and above what the entries hold, the scan answers the head
/// of its range that fits and says it stopped early exactly when the cap,
/// not the limit or the range's end, stopped it: the engine traps a call
/// whose scan says so, so a flag set wrongly fails calls that should pass,
/// and a flag not set hands the guest a short page as if it were the end.
pub fn scan_flags_on_every_shape<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "scan_flags_on_every_shape";
    let b = make();
    let t = tenant("");
    // Entries of growing size, so that caps fall between and on them.
    let all: Vec<Entry> = (0..12u8)
        .map(|i| (vec![b'f', b'a' + i], vec![i; usize::from(i) + 1]))
        .collect();
    write(C, &b, &t, all.iter().map(|(k, v)| put(k, v)).collect())?;
    let k = |i: u8| vec![b'f', b'a' + i];
    let shapes: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![
        (vec![], None),
        (k(3), None),
        (vec![], Some(k(8))),
        (k(2), Some(k(9))),
        (b"f".to_vec(), Some(b"g".to_vec())),
        (k(4), Some(k(5))),
        (k(5), Some(k(5))),
    ];
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        for (start, end) in &shapes {
            let inside: Vec<Entry> = all
                .iter()
                .filter(|(key, _)| key >= start && end.as_ref().is_none_or(|e| key < e))
                .cloned()
                .collect();
            for reverse in [false, true] {
                let mut ordered = inside.clone();
                if reverse {
                    ordered.reverse();
                }
                for limit in [0u32, 1, 3, 100] {
                    let limited: Vec<Entry> =
                        ordered.iter().take(limit as usize).cloned().collect();
                    let held: usize = limited.iter().map(|(k, v)| k.len() + v.len()).sum();
                    let first = limited.first().map_or(0, |(k, v)| k.len() + v.len());
                    let mut caps = vec![
                        0,
                        first.saturating_sub(1),
                        first,
                        held.saturating_sub(1),
                        held,
                        held + 1,
                        usize::MAX,
                    ];
                    caps.dedup();
                    for cap in caps {
                        let want = take_within(limited.iter().cloned().map(Ok::<_, Failure>), cap)?;
                        let got = txn
                            .scan(start, end.as_deref(), limit, reverse, cap)
                            .map_err(failed(C, "scan"))?;
                        ensure(C, got == want, || {
                            format!(
                                "{mode:?}: scan [{}, {}) limit {limit} reverse {reverse} cap {cap} answered {:?} and stopped early: {}, not {:?} and {} (its entries hold {held} bytes)",
                                show(start),
                                end.as_deref().map_or("end".to_owned(), show),
                                keys(&got.0).iter().map(|k| show(k)).collect::<Vec<_>>(),
                                got.1,
                                keys(&want.0).iter().map(|k| show(k)).collect::<Vec<_>>(),
                                want.1
                            )
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Chains of four keys, each key the one before it with a zero byte added,
/// then the next chain: wherever a page of a scan ends, the key after it
/// extends the page's last key or starts the next chain, so a cursor that
/// resumes past the wrong key skips one.
fn chained_keys(chains: u16) -> Vec<Entry> {
    let mut out = Vec::with_capacity(usize::from(chains) * 4);
    for c in 0..chains {
        let [hi, lo] = c.to_be_bytes();
        for zeros in 0..4u8 {
            let mut key = vec![b'L', hi, lo];
            key.extend(std::iter::repeat_n(0u8, usize::from(zeros)));
            let value = vec![hi, lo, zeros];
            out.push((key, value));
        }
    }
    out
}

/// The first place two scans' keys differ, for a message.
fn first_difference(got: &[Entry], want: &[Entry]) -> String {
    match (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        Some(i) => format!(
            "at place {i} it answered {} where {} was due",
            show(&got[i].0),
            show(&want[i].0)
        ),
        None if got.len() < want.len() => format!(
            "it stopped after {} entries of {}, before {}",
            got.len(),
            want.len(),
            show(&want[got.len()].0)
        ),
        None => format!("it answered {} entries of {}", got.len(), want.len()),
    }
}

/// Scans of thousands of entries, starting and ending at each of four
/// neighbouring keys, answer every entry once, in order, both ways, whatever
/// page size the backend reads them in; so do scans cut short by a limit or
/// a byte cap that falls among them.
pub fn long_scans_skip_nothing<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "long_scans_skip_nothing";
    let b = make();
    let t = tenant("");
    let all = chained_keys(1024);
    let n = all.len();
    write(
        C,
        &b,
        &t,
        all.iter()
            .map(|(k, v)| Write::Put(k.clone(), v.clone()))
            .collect(),
    )?;
    let room = u32::try_from(n + 8).unwrap_or(u32::MAX);
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        // The Write transaction repeats only the first scan each way.
        let offsets = if mode == Mode::Read { 0..4 } else { 0..1 };
        for s in offsets {
            let from = &all[s].0;
            let (got, _) = txn
                .scan(from, None, room, false, usize::MAX)
                .map_err(failed(C, "scan"))?;
            let want = &all[s..];
            ensure(C, got == want, || {
                format!(
                    "{mode:?}: a forward scan from {} over {} entries went wrong: {}",
                    show(from),
                    want.len(),
                    first_difference(&got, want)
                )
            })?;
            let to = &all[n - 1 - s].0;
            let (got, _) = txn
                .scan(&[], Some(to), room, true, usize::MAX)
                .map_err(failed(C, "scan"))?;
            let want: Vec<Entry> = all[..n - 1 - s].iter().rev().cloned().collect();
            ensure(C, got == want, || {
                format!(
                    "{mode:?}: a reverse scan before {} over {} entries went wrong: {}",
                    show(to),
                    want.len(),
                    first_difference(&got, &want)
                )
            })?;
        }
    }
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let (got, _) = txn
        .scan(&[], None, room, true, usize::MAX)
        .map_err(failed(C, "scan"))?;
    let want: Vec<Entry> = all.iter().rev().cloned().collect();
    ensure(C, got == want, || {
        format!(
            "a reverse scan of the whole tenant went wrong: {}",
            first_difference(&got, &want)
        )
    })?;
    // Cut short by a limit, then by a byte cap, somewhere among the pages.
    let (got, _) = txn
        .scan(&all[1].0, None, 3000, false, usize::MAX)
        .map_err(failed(C, "scan"))?;
    ensure(C, got == all[1..3001], || {
        format!(
            "a forward scan limited to 3000 went wrong: {}",
            first_difference(&got, &all[1..3001])
        )
    })?;
    let cap: usize = all[..2500].iter().map(|(k, v)| k.len() + v.len()).sum();
    let (got, over) = txn
        .scan(&[], None, room, false, cap)
        .map_err(failed(C, "scan"))?;
    ensure(C, over && got == all[..2500], || {
        format!(
            "a forward scan capped at the bytes of its first 2500 entries (stopped early: {over}) went wrong: {}",
            first_difference(&got, &all[..2500])
        )
    })?;
    let cap: usize = all[n - 2500..].iter().map(|(k, v)| k.len() + v.len()).sum();
    let (got, over) = txn
        .scan(&[], None, room, true, cap)
        .map_err(failed(C, "scan"))?;
    let want: Vec<Entry> = all[n - 2500..].iter().rev().cloned().collect();
    ensure(C, over && got == want, || {
        format!(
            "a reverse scan capped at the bytes of its first 2500 entries (stopped early: {over}) went wrong: {}",
            first_difference(&got, &want)
        )
    })
}
