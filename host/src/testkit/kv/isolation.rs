//! What a reader sees while others commit: one snapshot for every read of a
//! transaction, and batches that land whole under a reader running beside
//! them. It owns these checks; it must never accept a read of a write
//! committed after the reader began, and never depend on timing to pass.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::storage::backend::{Backend, Mode, Write};
use crate::testkit::report::Failure;
use crate::testkit::steps::{begin, ensure, everything, failed, put, scan_all, tenant, write};

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
