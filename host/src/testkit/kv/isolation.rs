//! What a reader sees while others commit: one snapshot for every read of a
//! transaction, and batches that land whole under a reader running beside
//! them. It owns these checks; it must never accept a read of a write
//! committed after the reader began, and never depend on timing to pass.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::time::Instant;

use crate::config::Limits;
use crate::storage::backend::{Backend, Entry, Mode, Write, take_within};
use crate::testkit::report::Failure;
use crate::testkit::steps::{
    DOORS, Door, LINES, WAIT, begin_at, ensure, failed, keys, put, scan_all, show, tenant, write,
    write_at,
};

/// A read transaction sees one snapshot: writes committed after it began
/// are invisible to every kind of read it makes (point reads, scans both
/// ways, over the whole tenant and bounded ranges, capped or not), whichever
/// entry point began it.
pub fn reads_see_one_snapshot<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    let b = make();
    for door in DOORS {
        snapshot_through(&b, door)?;
    }
    Ok(())
}

/// A scan's start, end, limit and byte cap.
type Shape<'a> = (&'a [u8], Option<&'a [u8]>, u32, usize);

fn snapshot_through<B: Backend>(b: &B, door: Door) -> Result<(), Failure> {
    const C: &str = "reads_see_one_snapshot";
    let t = tenant("");
    write(
        C,
        b,
        &t,
        vec![
            put(b"k", b"v1"),
            put(b"gone", b"g"),
            put(b"m1", b"1"),
            put(b"m3", b"3"),
        ],
    )?;
    let mut r = begin_at(C, door, b, &t, Mode::Read)?;
    let first = r.get(b"k").map_err(failed(C, "get"))?;
    ensure(C, first.as_deref() == Some(&b"v1"[..]), || {
        format!("{door}: get answered {first:?} before any concurrent write")
    })?;
    // Writes at both ends of the tenant and inside a bounded range, so that
    // a scan of any shape crosses one.
    write(
        C,
        b,
        &t,
        vec![
            put(b"k", b"v2"),
            put(b"new", b"n"),
            put(b"m2", b"2"),
            put(b"a", b"first"),
            put(b"z", b"last"),
            Write::Delete(b"gone".to_vec()),
            Write::Delete(b"m3".to_vec()),
        ],
    )?;
    let k = r.get(b"k").map_err(failed(C, "get"))?;
    ensure(C, k.as_deref() == Some(&b"v1"[..]), || {
        format!("{door}: a reader saw a value committed after it began: {k:?}")
    })?;
    let new = r.get(b"new").map_err(failed(C, "get"))?;
    ensure(C, new.is_none(), || {
        format!("{door}: a reader saw a key committed after it began")
    })?;
    let many = r
        .get_many(&[b"gone".to_vec(), b"new".to_vec()])
        .map_err(failed(C, "get-many"))?;
    ensure(C, many == vec![Some(b"g".to_vec()), None], || {
        format!("{door}: get-many saw writes committed after the reader began: {many:?}")
    })?;
    let want: Vec<Entry> = [
        (&b"gone"[..], &b"g"[..]),
        (b"k", b"v1"),
        (b"m1", b"1"),
        (b"m3", b"3"),
    ]
    .iter()
    .map(|(k, v)| (k.to_vec(), v.to_vec()))
    .collect();
    // Every shape of scan: whole, bounded, from a start, up to an end,
    // limited, capped; each both ways.
    let shapes: [Shape; 6] = [
        (b"", None, 4096, usize::MAX),
        (b"m", Some(b"n"), 100, usize::MAX),
        (b"h", None, 100, usize::MAX),
        (b"", Some(b"m2"), 100, usize::MAX),
        (b"", None, 2, usize::MAX),
        (b"", None, 100, 9),
    ];
    for (start, end, limit, cap) in shapes {
        for reverse in [false, true] {
            let (got, _) = r
                .scan(start, end, limit, reverse, cap)
                .map_err(failed(C, "scan"))?;
            let mut inside: Vec<Entry> = want
                .iter()
                .filter(|(k, _)| k.as_slice() >= start && end.is_none_or(|e| k.as_slice() < e))
                .cloned()
                .collect();
            if reverse {
                inside.reverse();
            }
            inside.truncate(limit as usize);
            let (inside, _) = take_within(inside.into_iter().map(Ok::<_, Failure>), cap)?;
            ensure(C, got == inside, || {
                format!(
                    "{door}: a scan [{}, {}) limit {limit} cap {cap} reverse {reverse} saw writes committed after the reader began: {:?}, not {:?}",
                    show(start),
                    end.map_or("end".to_owned(), show),
                    keys(&got).iter().map(|k| show(k)).collect::<Vec<_>>(),
                    keys(&inside).iter().map(|k| show(k)).collect::<Vec<_>>()
                )
            })?;
        }
    }
    let mut later = begin_at(C, door, b, &t, Mode::Read)?;
    let k = later.get(b"k").map_err(failed(C, "get"))?;
    ensure(C, k.as_deref() == Some(&b"v2"[..]), || {
        format!("{door}: a reader that began after the commit saw {k:?}")
    })
}

/// Batches committed one after another, each rewriting the same 32 keys,
/// never show a reader running beside them a mix of two batches, whichever
/// entry points began the writer and the reader.
pub fn batches_land_whole_under_a_concurrent_reader<B: Backend>(
    make: &dyn Fn() -> B,
) -> Result<(), Failure> {
    const C: &str = "batches_land_whole_under_a_concurrent_reader";
    const KEYS: u32 = 32;
    const BATCHES: u32 = 20;
    let b = Arc::new(make());
    let t = tenant("");
    let committed = Arc::new(AtomicU32::new(0));
    // The writer runs on a thread of its own, so that a writer that never
    // finishes fails the check instead of holding it up.
    let (tx, rx) = mpsc::channel();
    {
        let (b, t, committed) = (b.clone(), t.clone(), committed.clone());
        std::thread::spawn(move || {
            let out = (1..=BATCHES).try_for_each(|g| {
                let batch = (0..KEYS)
                    .map(|i| put(format!("g{i:02}").as_bytes(), &g.to_be_bytes()))
                    .collect();
                // Each batch through the next entry point.
                let door = DOORS[g as usize % DOORS.len()];
                write_at(C, door, b.as_ref(), &t, batch)?;
                committed.store(g, Ordering::Release);
                Ok(())
            });
            let _ = tx.send(out);
        });
    }
    let bound = 2 * WAIT;
    let started = Instant::now();
    let mut reads = 0u32;
    let mut written = None;
    // At least a few reads even if the writer finishes first.
    while written.is_none() || reads < 3 {
        if written.is_none() {
            written = match rx.try_recv() {
                Ok(out) => Some(out),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => {
                    return Err(Failure::new(
                        C,
                        "the writer stopped without an answer (did the backend panic?)",
                    ));
                }
            };
        }
        if written.is_none() && started.elapsed() > bound {
            return Err(Failure::new(
                C,
                format!(
                    "the writer had committed {} of its {BATCHES} batches after {bound:?}",
                    committed.load(Ordering::Acquire)
                ),
            ));
        }
        reads += 1;
        // Each reader begun through the next entry point, every other one
        // scanning in reverse.
        let door = DOORS[reads as usize % DOORS.len()];
        let mut r = begin_at(C, door, b.as_ref(), &t, Mode::Read)?;
        let all = scan_all(C, r.as_mut(), reads.is_multiple_of(2))?;
        drop(r);
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
    written.unwrap_or(Ok(()))
}

/// A batch as large as one call may stage: its entries, and what a reader
/// beside it asks to see all of or none of.
struct Largest {
    what: String,
    batch: Vec<Entry>,
    sample: Vec<Vec<u8>>,
}

/// Entries of `key(i)` whose keys and values hold `total` bytes exactly,
/// each value at most `most_value` bytes long and unlike any other.
fn filled(total: usize, most_value: usize, key: impl Fn(usize) -> Vec<u8>) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut left = total;
    while left > 0 {
        let i = out.len();
        let k = key(i);
        let room = left.saturating_sub(k.len());
        let mut len = room.min(most_value);
        // Never leave less than the next key and a byte of its value.
        let rest = room - len;
        if rest > 0 && rest <= k.len() {
            len = len.saturating_sub(k.len() + 1);
        }
        // The entry's number, then its low byte again: every value differs.
        let mut value = vec![i as u8; len];
        let head = (i as u64).to_be_bytes();
        let n = head.len().min(len);
        value[..n].copy_from_slice(&head[..n]);
        left = left.saturating_sub(k.len() + len);
        out.push((k, value));
    }
    out
}

/// The batches at the engine's limits ([`Limits::call_write_bytes`], in
/// values as large as [`Limits::value_bytes`], and in entries four times as
/// many as a scan may answer), with a small first and last key so that a
/// reader can ask for both ends cheaply.
fn largest() -> Vec<Largest> {
    let limits = Limits::default();
    let budget = limits.call_write_bytes;
    let (first, last) = (
        (b"0first".to_vec(), b"1".to_vec()),
        (b"~last".to_vec(), b"1".to_vec()),
    );
    let marks = first.0.len() + first.1.len() + last.0.len() + last.1.len();
    let ends = |body: Vec<Entry>| -> Vec<Entry> {
        let mut all = vec![first.clone()];
        all.extend(body);
        all.push(last.clone());
        all
    };
    let big = ends(filled(budget - marks, limits.value_bytes, |i| {
        format!("big{i:04}").into_bytes()
    }));
    let many_entries = 4 * limits.scan_entries as usize;
    let per_entry = (budget - marks) / many_entries;
    let many = ends(filled(budget - marks, per_entry - 16, |i| {
        format!("many{i:012}").into_bytes()
    }));
    let held = |batch: &[Entry]| -> usize { batch.iter().map(|(k, v)| k.len() + v.len()).sum() };
    debug_assert_eq!((held(&big), held(&many)), (budget, budget));
    // Keys spread over the batch whose values are small, so that a reader
    // asks for them many times while the commit runs: the ends, at least.
    let sample = |batch: &[Entry]| -> Vec<Vec<u8>> {
        let step = (batch.len() / 16).max(1);
        let mut keys: Vec<Vec<u8>> = batch
            .iter()
            .step_by(step)
            .filter(|(_, v)| v.len() <= 4096)
            .map(|(k, _)| k.clone())
            .collect();
        keys.extend(batch.last().map(|(k, _)| k.clone()));
        keys
    };
    vec![
        Largest {
            what: format!(
                "a batch of the most bytes a call may write ({budget}) in values of up to {} bytes",
                limits.value_bytes
            ),
            sample: sample(&big),
            batch: big,
        },
        Largest {
            what: format!("a batch of {budget} bytes in {} entries", many.len()),
            sample: sample(&many),
            batch: many,
        },
    ]
}

/// The batches as large as one call may stage (the most bytes, in values
/// as large as a call may write, and the same bytes in thousands of
/// entries, more than a scan answers) commit whole: a reader beside the
/// commit, begun through each entry point in turn, sees all of a batch or
/// none of it, and once it is acknowledged every entry is there, in order,
/// with its value. A store that caps a transaction, splits a commit in
/// pieces or keeps the first so many writes fails here.
pub fn largest_batches_land_whole<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "largest_batches_land_whole";
    let b = Arc::new(make());
    // Written through the entry points a writing call begins through.
    let doors = [Door::WithDeadline, Door::InLine(LINES[0])];
    for (
        Largest {
            what,
            batch,
            sample,
        },
        door,
    ) in largest().into_iter().zip(doors)
    {
        let t = tenant("");
        let (tx, rx) = mpsc::channel();
        // The commit starts once the reader has read: the reader is
        // running, not yet to be scheduled, while the commit lands.
        let (ready, reading) = mpsc::channel::<()>();
        {
            let (b, t) = (b.clone(), t.clone());
            let writes: Vec<Write> = batch
                .iter()
                .map(|(k, v)| Write::Put(k.clone(), v.clone()))
                .collect();
            std::thread::spawn(move || {
                let _ = reading.recv_timeout(WAIT);
                let _ = tx.send(write_at(C, door, b.as_ref(), &t, writes));
            });
        }
        let mut ready = Some(ready);
        let started = Instant::now();
        let mut reads = 0usize;
        let mut written = None;
        while written.is_none() || reads < DOORS.len() {
            if written.is_none() {
                written = match rx.try_recv() {
                    Ok(out) => Some(out),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => {
                        return Err(Failure::new(
                            C,
                            format!(
                                "{what}: the writer stopped without an answer (did the backend panic?)"
                            ),
                        ));
                    }
                };
                if written.is_none() && started.elapsed() > 6 * WAIT {
                    return Err(Failure::new(
                        C,
                        format!("{what}: the commit had not answered after {:?}", 6 * WAIT),
                    ));
                }
            }
            let door = DOORS[reads % DOORS.len()];
            reads += 1;
            let mut r = begin_at(C, door, b.as_ref(), &t, Mode::Read)?;
            // The sample's keys alone: the values are the same bytes again.
            let (seen, _) = r
                .scan(&[], None, 1, reads.is_multiple_of(2), 64)
                .map_err(failed(C, "scan"))?;
            let present = r.get_many(&sample).map_err(failed(C, "get-many"))?;
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            let n = present.iter().filter(|v| v.is_some()).count();
            ensure(C, n == 0 || n == sample.len(), || {
                format!(
                    "{what}: a reader begun through {door} beside the commit saw {n} of {} keys spread over the batch",
                    sample.len()
                )
            })?;
            ensure(C, seen.is_empty() == (n == 0), || {
                format!(
                    "{what}: a reader begun through {door} beside the commit scanned an end of the batch but did not read its keys"
                )
            })?;
        }
        written.unwrap_or(Ok(()))?;
        let mut r = begin_at(C, Door::Begin, b.as_ref(), &t, Mode::Read)?;
        let mut from = Vec::new();
        let mut at = 0usize;
        loop {
            let (page, _) = r
                .scan(
                    &from,
                    None,
                    Limits::default().scan_entries,
                    false,
                    usize::MAX,
                )
                .map_err(failed(C, "scan"))?;
            let Some((last, _)) = page.last() else {
                break;
            };
            from = [last.as_slice(), &[0]].concat();
            for entry in page {
                ensure(C, batch.get(at) == Some(&entry), || {
                    format!(
                        "{what}: once acknowledged, entry {at} of {} read back as {} ({} bytes), not as written",
                        batch.len(),
                        show(&entry.0),
                        entry.1.len()
                    )
                })?;
                at += 1;
            }
        }
        ensure(C, at == batch.len(), || {
            format!(
                "{what}: once acknowledged, {at} of its {} entries were there",
                batch.len()
            )
        })?;
    }
    Ok(())
}
