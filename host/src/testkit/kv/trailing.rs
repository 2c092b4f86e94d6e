//! Keys that differ only in their trailing bytes: a trailing space or
//! two, trailing zero bytes, a key and the same key extended, a prefix of
//! a key. A store that compares keys as a pad-space collation does (SQL's
//! `CHAR`, and `VARCHAR` under many collations, ignore trailing spaces), as
//! a C string does (the key ends at its first zero byte) or that trims keys
//! would read, write, scan or delete one such key as another. It owns these
//! keys and what every operation must answer for them; it must never accept
//! an answer that takes two keys differing in any byte for one, or orders
//! them otherwise than bytewise.

use std::collections::BTreeMap;

use crate::storage::backend::{Backend, Entry, Mode, Write};
use crate::testkit::report::Failure;
use crate::testkit::steps::{begin, ensure, failed, put, scan_all, show, tenant, write};

/// The keys written: one stem with every ending a store might fold into
/// it, or cut it at. Pad-space collations order a key ending in a byte
/// below a space (`\t`, `\x1f`, `\0`) before the stem; bytewise, after it.
fn written() -> Vec<Vec<u8>> {
    [
        &b"pad"[..],
        b"pad ",
        b"pad  ",
        b"pad\0",
        b"pad\0\0",
        b"pad \0",
        b"pad\0 ",
        b"pad\t",
        b"pad\x1f",
        b"pad!",
        b"pad\0x",
        b"pad x",
        b"pa",
        b"padd",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect()
}

/// Keys never written, each folding into a written one under some store's
/// comparison: more trailing spaces or zero bytes, a written prefix with a
/// space or a zero byte added, a longer key cut at its zero byte.
fn never_written() -> Vec<Vec<u8>> {
    [
        &b"pad   "[..],
        b"pad\0\0\0",
        b"pad \0 ",
        b"pa ",
        b"pa\0",
        b"padd ",
        b"padd\0",
        b"pad\0y",
        b"pad\0x\0",
        b"p",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect()
}

/// What a tenant must hold.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn listed(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(|(k, v)| format!("{}={}", show(k), show(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every read of `tenant` agrees with `model` for every key of `probes`:
/// `get`, `get_many` (in no order, each key twice), scans of the whole
/// tenant both ways, and scans that start, end or both at each probe, in a
/// read and in a write transaction. `when` says which step of the check
/// this is, for a failure's words.
fn agrees<B: Backend>(
    c: &'static str,
    b: &B,
    tenant: &str,
    model: &Model,
    probes: &[Vec<u8>],
    when: &str,
) -> Result<(), Failure> {
    let all: Vec<Entry> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut sorted: Vec<Vec<u8>> = probes.to_vec();
    sorted.sort();
    sorted.dedup();
    // Each probe twice, the second pass reversed, so a key is asked beside
    // the keys it could be confused with in both orders.
    let mut asked: Vec<Vec<u8>> = probes.to_vec();
    asked.extend(probes.iter().rev().cloned());
    let inside = |start: &[u8], end: Option<&[u8]>| -> Vec<Entry> {
        all.iter()
            .filter(|(k, _)| k.as_slice() >= start && end.is_none_or(|e| k.as_slice() < e))
            .cloned()
            .collect()
    };
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(c, b, tenant, mode)?;
        for k in probes {
            let got = txn.get(k).map_err(failed(c, "get"))?;
            ensure(c, got.as_ref() == model.get(k), || {
                format!(
                    "keys that differ only in trailing bytes, {when} ({mode:?}): get of {} answered {:?}, not {:?}",
                    show(k),
                    got.as_deref().map(show),
                    model.get(k).map(|v| show(v))
                )
            })?;
        }
        let many = txn.get_many(&asked).map_err(failed(c, "get-many"))?;
        let want: Vec<Option<Vec<u8>>> = asked.iter().map(|k| model.get(k).cloned()).collect();
        if let Some(at) = (0..want.len()).find(|&i| many.get(i) != Some(&want[i])) {
            return Err(Failure::new(
                c,
                format!(
                    "keys that differ only in trailing bytes, {when} ({mode:?}): get-many answered {:?} for {} (place {at} of {}), not {:?}",
                    many.get(at).map(|v| v.as_deref().map(show)),
                    show(&asked[at]),
                    asked.len(),
                    want[at].as_deref().map(show)
                ),
            ));
        }
        for reverse in [false, true] {
            let got = scan_all(c, txn.as_mut(), reverse)?;
            let mut want = all.clone();
            if reverse {
                want.reverse();
            }
            ensure(c, got == want, || {
                format!(
                    "keys that differ only in trailing bytes, {when} ({mode:?}): a {} scan answered [{}], not [{}]",
                    if reverse { "reverse" } else { "forward" },
                    listed(&got),
                    listed(&want)
                )
            })?;
        }
        // From each probe to its end, up to each probe, and from each
        // probe to the next: a bound is a key like any other, so one that
        // differs from a key only in trailing bytes is not that key.
        let mut bounds: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for (i, p) in sorted.iter().enumerate() {
            bounds.push((p.clone(), None));
            bounds.push((Vec::new(), Some(p.clone())));
            if let Some(next) = sorted.get(i + 1) {
                bounds.push((p.clone(), Some(next.clone())));
            }
            let mut just_past = p.clone();
            just_past.push(0);
            bounds.push((p.clone(), Some(just_past)));
        }
        for (start, end) in &bounds {
            for reverse in [false, true] {
                for limit in [1u32, 3] {
                    let (got, _) = txn
                        .scan(start, end.as_deref(), limit, reverse, usize::MAX)
                        .map_err(failed(c, "scan"))?;
                    let mut want = inside(start, end.as_deref());
                    if reverse {
                        want.reverse();
                    }
                    want.truncate(limit as usize);
                    ensure(c, got == want, || {
                        format!(
                            "keys that differ only in trailing bytes, {when} ({mode:?}): scan [{}, {}) limit {limit} reverse {reverse} answered [{}], not [{}]",
                            show(start),
                            end.as_deref().map_or("end".into(), show),
                            listed(&got),
                            listed(&want)
                        )
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Keys that differ only in trailing bytes (spaces, zero bytes, a longer
/// key sharing a prefix, a key that is a prefix of another) are distinct
/// keys in every operation: each reads back its own value by `get` and
/// `get_many`, and none is read for a never-written neighbour; scans order
/// them bytewise and their bounds cut between them; a put replaces one
/// alone, and a delete takes one alone; and two tenants writing such keys
/// keep them apart.
pub fn keys_differing_only_in_trailing_bytes_are_distinct<B: Backend>(
    make: &dyn Fn() -> B,
) -> Result<(), Failure> {
    const C: &str = "keys_differing_only_in_trailing_bytes_are_distinct";
    let b = make();
    let t = tenant("");
    let keys = written();
    let mut probes = keys.clone();
    probes.extend(never_written());
    let mut model: Model = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), format!("v{i}").into_bytes()))
        .collect();
    // One batch, in an order that is not the sorted one: a store that
    // folds two keys into one keeps only the later put.
    let mut batch: Vec<Write> = model.iter().rev().map(|(k, v)| put(k, v)).collect();
    batch.rotate_left(3);
    write(C, &b, &t, batch)?;
    agrees(C, &b, &t, &model, &probes, "as written")?;

    // A put replaces its own key, and none that differs in trailing bytes.
    let replaced: [&[u8]; 3] = [b"pad ", b"pad\0", b"pa"];
    let batch = replaced
        .iter()
        .map(|k| {
            let v = [b"new ".as_slice(), k].concat();
            model.insert(k.to_vec(), v.clone());
            put(k, &v)
        })
        .collect();
    write(C, &b, &t, batch)?;
    agrees(C, &b, &t, &model, &probes, "after replacing some")?;

    // A delete takes its own key; deletes of never-written neighbours
    // take nothing.
    let gone: [&[u8]; 3] = [b"pad ", b"pad\0", b"pad"];
    let mut batch: Vec<Write> = gone
        .iter()
        .map(|k| {
            model.remove(*k);
            Write::Delete(k.to_vec())
        })
        .collect();
    batch.extend(never_written().into_iter().map(Write::Delete));
    write(C, &b, &t, batch)?;
    agrees(C, &b, &t, &model, &probes, "after deleting some")?;

    // A second tenant whose name differs only in a trailing byte writes
    // some of the same keys: each tenant reads its own, and a delete in
    // one leaves the other's alone.
    let other = format!("{t}.");
    let mut theirs: Model = [&b"pad"[..], b"pad ", b"pad\0", b"padd"]
        .iter()
        .map(|k| (k.to_vec(), [b"other's ".as_slice(), k].concat()))
        .collect();
    write(
        C,
        &b,
        &other,
        theirs.iter().map(|(k, v)| put(k, v)).collect(),
    )?;
    agrees(C, &b, &other, &theirs, &probes, "in a second tenant")?;
    agrees(C, &b, &t, &model, &probes, "beside a second tenant")?;
    write(C, &b, &other, vec![Write::Delete(b"padd".to_vec())])?;
    theirs.remove(&b"padd"[..]);
    agrees(
        C,
        &b,
        &other,
        &theirs,
        &probes,
        "after a second tenant's delete",
    )?;
    agrees(C, &b, &t, &model, &probes, "after a second tenant's delete")
}
