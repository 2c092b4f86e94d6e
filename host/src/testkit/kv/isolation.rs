//! What a reader sees while others commit: one snapshot for every read of a
//! transaction, and batches that land whole under a reader running beside
//! them. It owns these checks; it must never accept a read of a write
//! committed after the reader began, and never depend on timing to pass.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::time::Instant;

use crate::storage::backend::{Backend, Mode, Write};
use crate::testkit::report::Failure;
use crate::testkit::steps::{
    WAIT, begin, ensure, everything, failed, put, scan_all, tenant, write,
};

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
                write(C, b.as_ref(), &t, batch)?;
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
        let all = everything(C, b.as_ref(), &t, reads.is_multiple_of(2))?;
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
