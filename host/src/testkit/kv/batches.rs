//! Committing: empty batches, deletes, batches that land whole or not at
//! all, read transactions that refuse a batch, and a commit seen by every
//! transaction begun once it is acknowledged. It owns these checks; it must
//! never accept a batch applied in part, a deleted key that any read still
//! answers, or an acknowledged commit that a later transaction cannot see.

use crate::storage::backend::{Backend, Entry, Mode, Write};
use crate::storage::error::StorageError;
use crate::testkit::report::Failure;
use crate::testkit::steps::{
    begin, ensure, everything, failed, put, scan_all, show, tenant, write,
};

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

/// A deleted key is gone for every kind of read, in both kinds of
/// transaction: `get`, `get_many` beside live keys, scans both ways, and a
/// scan's limit, which counts only live entries. Put again, it is back.
pub fn deleted_keys_are_gone<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "deleted_keys_are_gone";
    let b = make();
    let t = tenant("");
    let key = |i: u8| format!("d{i:02}").into_bytes();
    write(C, &b, &t, (0..20).map(|i| put(&key(i), &[i])).collect())?;
    // Every other key deleted, and a put beside them in the same batch.
    let mut batch: Vec<Write> = (1..20).step_by(2).map(|i| Write::Delete(key(i))).collect();
    batch.push(put(b"e", b"new"));
    write(C, &b, &t, batch)?;
    let deleted: Vec<Vec<u8>> = (1..20).step_by(2).map(key).collect();
    let live: Vec<Entry> = (0..20)
        .step_by(2)
        .map(|i| (key(i), vec![i]))
        .chain([(b"e".to_vec(), b"new".to_vec())])
        .collect();
    let mut asked: Vec<Vec<u8>> = Vec::new();
    let mut want: Vec<Option<Vec<u8>>> = Vec::new();
    for (d, (k, v)) in deleted.iter().zip(&live) {
        asked.extend([d.clone(), k.clone(), d.clone()]);
        want.extend([None, Some(v.clone()), None]);
    }
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        for k in &deleted {
            let got = txn.get(k).map_err(failed(C, "get"))?;
            ensure(C, got.is_none(), || {
                format!("{mode:?}: get of deleted key {} answered {got:?}", show(k))
            })?;
        }
        let got = txn.get_many(&asked).map_err(failed(C, "get-many"))?;
        ensure(C, got == want, || {
            format!(
                "{mode:?}: get-many of deleted keys beside live ones answered {got:?}, not {want:?}"
            )
        })?;
        for reverse in [false, true] {
            let mut want_all = live.clone();
            if reverse {
                want_all.reverse();
            }
            let all = scan_all(C, txn.as_mut(), reverse)?;
            ensure(C, all == want_all, || {
                format!(
                    "{mode:?}: a scan (reverse: {reverse}) after deletes answered {:?}",
                    all.iter().map(|(k, _)| show(k)).collect::<Vec<_>>()
                )
            })?;
            for limit in [1u32, 3, 5] {
                let (got, _) = txn
                    .scan(&[], None, limit, reverse, usize::MAX)
                    .map_err(failed(C, "scan"))?;
                let want = &want_all[..limit as usize];
                ensure(C, got == want, || {
                    format!(
                        "{mode:?}: a scan limited to {limit} (reverse: {reverse}) among deleted keys answered {:?}, not {:?}",
                        got.iter().map(|(k, _)| show(k)).collect::<Vec<_>>(),
                        want.iter().map(|(k, _)| show(k)).collect::<Vec<_>>()
                    )
                })?;
            }
        }
        // A range that holds only a deleted key.
        let (got, over) = txn
            .scan(&key(1), Some(&key(2)), 10, false, usize::MAX)
            .map_err(failed(C, "scan"))?;
        ensure(C, got.is_empty() && !over, || {
            format!(
                "{mode:?}: a scan of a deleted key's range answered {} entries",
                got.len()
            )
        })?;
    }
    write(C, &b, &t, vec![put(&key(1), b"again")])?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let got = txn.get(&key(1)).map_err(failed(C, "get"))?;
    ensure(C, got.as_deref() == Some(&b"again"[..]), || {
        format!("a deleted key put again answered {got:?}")
    })
}

/// Keys that extend one another: each a prefix of the ones after it in
/// its chain, with a separator, a zero byte, `0xff` and a letter case a
/// store might fold.
fn nested_keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = vec![
        b"a".to_vec(),
        b"a\0".to_vec(),
        b"a\0\0".to_vec(),
        b"a/x".to_vec(),
        b"a/x/y".to_vec(),
        b"aA".to_vec(),
        b"ab".to_vec(),
        b"abc".to_vec(),
        b"a\xff".to_vec(),
        b"A".to_vec(),
        b"Ab".to_vec(),
        b"b".to_vec(),
    ];
    keys.sort();
    keys
}

/// A delete removes its key alone: not the keys that extend it (`a` takes
/// no `ab`, `a/x` or `a\0`), not the keys it extends (`ab` takes no `a`),
/// not a key that differs from it only in case or in trailing zero bytes.
/// Each key of a chain is deleted in turn, beside all the others, and every
/// read of both kinds of transaction must see exactly the rest.
pub fn deletes_take_no_longer_or_shorter_keys<B: Backend>(
    make: &dyn Fn() -> B,
) -> Result<(), Failure> {
    const C: &str = "deletes_take_no_longer_or_shorter_keys";
    let b = make();
    let all = nested_keys();
    for gone in &all {
        let t = tenant("");
        write(C, &b, &t, all.iter().map(|k| put(k, k)).collect())?;
        write(C, &b, &t, vec![Write::Delete(gone.clone())])?;
        let want: Vec<Entry> = all
            .iter()
            .filter(|k| *k != gone)
            .map(|k| (k.clone(), k.clone()))
            .collect();
        for mode in [Mode::Read, Mode::Write] {
            let mut txn = begin(C, &b, &t, mode)?;
            let seen = scan_all(C, txn.as_mut(), false)?;
            ensure(C, seen == want, || {
                format!(
                    "{mode:?}: after deleting {} alone, a scan answered [{}]",
                    show(gone),
                    seen.iter()
                        .map(|(k, _)| show(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            let got = txn.get_many(&all).map_err(failed(C, "get-many"))?;
            for (k, v) in all.iter().zip(got) {
                let due = (k != gone).then(|| k.clone());
                ensure(C, v == due, || {
                    format!(
                        "{mode:?}: after deleting {} alone, get-many of {} answered {:?}",
                        show(gone),
                        show(k),
                        v.as_deref().map(show)
                    )
                })?;
            }
        }
    }
    // Two deletes in one batch, one key extending the other, beside a put
    // of a third that extends both.
    let t = tenant("");
    write(C, &b, &t, all.iter().map(|k| put(k, k)).collect())?;
    write(
        C,
        &b,
        &t,
        vec![
            Write::Delete(b"a".to_vec()),
            Write::Delete(b"ab".to_vec()),
            put(b"abc", b"again"),
        ],
    )?;
    let want: Vec<Entry> = all
        .iter()
        .filter(|k| k.as_slice() != b"a" && k.as_slice() != b"ab")
        .map(|k| {
            let v = if k.as_slice() == b"abc" {
                b"again".to_vec()
            } else {
                k.clone()
            };
            (k.clone(), v)
        })
        .collect();
    let seen = everything(C, &b, &t, false)?;
    ensure(C, seen == want, || {
        format!(
            "after deleting a and ab beside a put of abc, a scan answered [{}]",
            seen.iter()
                .map(|(k, _)| show(k))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// A read transaction refuses a batch with [`StorageError::ReadOnly`] and
/// writes none of it.
pub fn read_transactions_refuse_batches<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "read_transactions_refuse_batches";
    let b = make();
    let t = tenant("");
    write(C, &b, &t, vec![put(b"a", b"1")])?;
    let before = everything(C, &b, &t, false)?;
    let mut r = begin(C, &b, &t, Mode::Read)?;
    r.get(b"a").map_err(failed(C, "get"))?;
    let answer = r
        .commit(vec![put(b"a", b"2"), put(b"b", b"1")])
        .and_then(|p| p.wait());
    match answer {
        Err(StorageError::ReadOnly) => {}
        Err(e) => {
            return Err(Failure::new(
                C,
                format!("a read transaction's batch was refused with {e}, not as read-only"),
            ));
        }
        Ok(()) => {
            return Err(Failure::new(C, "a read transaction committed a batch"));
        }
    }
    let after = everything(C, &b, &t, false)?;
    ensure(C, before == after, || {
        format!(
            "a read transaction's refused batch changed the tenant: {before:?} became {after:?}"
        )
    })
}

/// A commit is seen whole by every transaction begun once it is
/// acknowledged: at once when `commit` answers [`Pending::done`], else once
/// [`Pending::wait`] answers. Before that, a reader sees all of the batch or
/// none of it.
///
/// [`Pending::done`]: crate::storage::commit::Pending::done
/// [`Pending::wait`]: crate::storage::commit::Pending::wait
pub fn commits_are_seen_once_acknowledged<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "commits_are_seen_once_acknowledged";
    let b = make();
    let t = tenant("");
    let mut model: Vec<Entry> = Vec::new();
    for round in 0u8..3 {
        let before = model.clone();
        let mut batch: Vec<Write> = (0u8..50)
            .map(|i| put(format!("r{round}-{i:02}").as_bytes(), &[round, i]))
            .collect();
        // Each round also deletes the first key of the round before.
        if round > 0 {
            batch.push(Write::Delete(format!("r{}-00", round - 1).into_bytes()));
        }
        for w in &batch {
            match w {
                Write::Put(k, v) => model.push((k.clone(), v.clone())),
                Write::Delete(k) => model.retain(|(m, _)| m != k),
            }
        }
        model.sort();
        let txn = begin(C, &b, &t, Mode::Write)?;
        let pending = txn.commit(batch).map_err(failed(C, "committing a batch"))?;
        let settled = pending.is_done();
        if !settled {
            let seen = everything(C, &b, &t, false)?;
            ensure(C, seen == before || seen == model, || {
                format!(
                    "round {round}: while its commit was still becoming durable, a reader saw {} entries: neither the {} before the batch nor the {} after",
                    seen.len(),
                    before.len(),
                    model.len()
                )
            })?;
            pending.wait().map_err(failed(C, "waiting for a commit"))?;
        }
        let how = if settled {
            "answered done"
        } else {
            "was waited for"
        };
        let seen = everything(C, &b, &t, false)?;
        ensure(C, seen == model, || {
            format!(
                "round {round}: a commit that {how} was not all there for a reader begun after it: it saw {} entries of {}",
                seen.len(),
                model.len()
            )
        })?;
        let mut w = begin(C, &b, &t, Mode::Write)?;
        let seen = scan_all(C, w.as_mut(), false)?;
        ensure(C, seen == model, || {
            format!(
                "round {round}: a commit that {how} was not all there for a writer begun after it: it saw {} entries of {}",
                seen.len(),
                model.len()
            )
        })?;
    }
    Ok(())
}
