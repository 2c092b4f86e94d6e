//! Tenancy: no read or write of one tenant reaches another's keys, for
//! every pair of names a backend might plausibly merge. It owns the names
//! tried and what each tenant must read; it must never treat two names that
//! differ in any byte as one tenant (names are case-sensitive, and a dot is
//! a byte like any other).

use std::collections::{BTreeMap, BTreeSet};

use crate::storage::backend::{Backend, Entry, Mode, Write};
use crate::storage::tenant_name::MAX_TENANT_BYTES;
use crate::testkit::report::Failure;
use crate::testkit::steps::{begin, ensure, everything, failed, put, show, tenant, write};

/// A tenant of the check: the group of names it was tried among, its name,
/// and what it holds.
struct Named {
    group: &'static str,
    name: String,
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// A group of names, each with the extra keys it writes.
type Group = (&'static str, Vec<(String, Vec<Entry>)>);

/// Groups of tenant names that differ only in a way some backend could
/// lose: one a prefix of another, letter case, trailing or leading dots,
/// which separator, a name joined to a key with a separator that names may
/// hold, and names that share all but their last byte at the length limit
/// (a column or identifier that truncates them), with the extra keys each
/// name writes beside the key `k` every name writes.
fn name_groups(stem: &str) -> Vec<Group> {
    let e = |k: &str, v: &str| (k.as_bytes().to_vec(), v.as_bytes().to_vec());
    let plain = |n: String| (n, Vec::new());
    let long = "l".repeat((MAX_TENANT_BYTES - 1).saturating_sub(stem.len()));
    vec![
        (
            // Joined without a separator, a's "b1" and ab's "1" would be one key.
            "one name a prefix of another",
            vec![
                (format!("{stem}a"), vec![e("b1", "a's b1"), e("x", "a's x")]),
                (
                    format!("{stem}ab"),
                    vec![e("1", "ab's 1"), e("x", "ab's x")],
                ),
                (
                    format!("{stem}b"),
                    vec![(vec![0xff], b"b's ff".to_vec()), e("x", "b's x")],
                ),
            ],
        ),
        (
            // Joined with one of these separators, j's "x.k" and j.x's "k"
            // would be one key.
            "a name joined to a key with a separator names may hold",
            vec![
                (
                    format!("{stem}j"),
                    vec![
                        e("x.k", "j's x.k"),
                        e("x-k", "j's x-k"),
                        e("x_k", "j's x_k"),
                    ],
                ),
                plain(format!("{stem}j.x")),
                plain(format!("{stem}j-x")),
                plain(format!("{stem}j_x")),
            ],
        ),
        (
            "names that differ only in case",
            vec![
                plain(format!("{stem}Case")),
                plain(format!("{stem}case")),
                plain(format!("{stem}CASE")),
            ],
        ),
        (
            "names that differ only in trailing or leading dots",
            vec![
                plain(format!("{stem}d")),
                plain(format!("{stem}d.")),
                plain(format!("{stem}d..")),
                plain(format!(".{stem}d")),
            ],
        ),
        (
            "names that differ only in a separator",
            vec![
                plain(format!("{stem}x-y")),
                plain(format!("{stem}x_y")),
                plain(format!("{stem}x.y")),
            ],
        ),
        (
            "names at the length limit that differ only in their last byte",
            vec![
                plain(format!("{stem}{long}")),
                plain(format!("{stem}{long}a")),
                plain(format!("{stem}{long}b")),
            ],
        ),
    ]
}

/// No read or write of one tenant reaches another's keys, for names that
/// differ only in case, in trailing or leading dots, in a separator, in
/// their last byte at the length limit, or by one extending the other, and
/// for keys that would meet if names and keys were simply joined.
pub fn tenants_are_apart<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "tenants_are_apart";
    let b = make();
    let stem = tenant("");
    let groups = name_groups(&stem);
    // Every tenant's own entries: its extra keys, and `k` holding its name.
    let mut own: Vec<Named> = Vec::new();
    for (group, names) in groups {
        for (name, extra) in names {
            let mut entries: BTreeMap<Vec<u8>, Vec<u8>> = extra.into_iter().collect();
            entries.insert(b"k".to_vec(), name.as_bytes().to_vec());
            own.push(Named {
                group,
                name,
                entries,
            });
        }
    }
    let every_key: Vec<Vec<u8>> = own
        .iter()
        .flat_map(|n| n.entries.keys().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for n in &own {
        let batch = n.entries.iter().map(|(k, v)| put(k, v)).collect();
        write(C, &b, &n.name, batch)?;
    }
    check_each_reads_its_own(C, &b, &own, &every_key)?;
    // A delete in every other tenant leaves the rest alone.
    for (i, n) in own.iter_mut().enumerate() {
        if i % 2 == 0 {
            write(C, &b, &n.name, vec![Write::Delete(b"k".to_vec())])?;
            n.entries.remove(&b"k"[..]);
        }
    }
    check_each_reads_its_own(C, &b, &own, &every_key)
}

/// Each tenant's scans both ways, point reads of every key any tenant
/// wrote, and a writer's read of `k`, answer that tenant's entries alone.
fn check_each_reads_its_own<B: Backend>(
    c: &'static str,
    b: &B,
    own: &[Named],
    every_key: &[Vec<u8>],
) -> Result<(), Failure> {
    let listed = |entries: &[Entry]| -> String {
        entries
            .iter()
            .map(|(k, v)| format!("{}={}", show(k), show(v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for Named {
        group,
        name,
        entries,
    } in own
    {
        let want: Vec<Entry> = entries
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let got = everything(c, b, name, false)?;
        ensure(c, got == want, || {
            format!(
                "{group}: tenant {name} scanned [{}], not its own [{}]",
                listed(&got),
                listed(&want)
            )
        })?;
        let mut back = everything(c, b, name, true)?;
        back.reverse();
        ensure(c, back == want, || {
            format!(
                "{group}: tenant {name} scanned in reverse [{}], not its own [{}]",
                listed(&back),
                listed(&want)
            )
        })?;
        let mut txn = begin(c, b, name, Mode::Read)?;
        let many = txn.get_many(every_key).map_err(failed(c, "get-many"))?;
        let want_many: Vec<Option<Vec<u8>>> =
            every_key.iter().map(|k| entries.get(k).cloned()).collect();
        ensure(c, many == want_many, || {
            let stray: Vec<String> = every_key
                .iter()
                .zip(&many)
                .zip(&want_many)
                .filter(|((_, got), want)| got != want)
                .map(|((k, got), _)| format!("{}={:?}", show(k), got.as_deref().map(show)))
                .collect();
            format!(
                "{group}: tenant {name}'s get-many of every tenant's keys answered {}",
                stray.join(", ")
            )
        })?;
        drop(txn);
        let mut w = begin(c, b, name, Mode::Write)?;
        let k = w.get(b"k").map_err(failed(c, "get"))?;
        ensure(c, k.as_ref() == entries.get(&b"k"[..]), || {
            format!(
                "{group}: tenant {name}'s writer read k as {:?}, not {:?}",
                k.as_deref().map(show),
                entries.get(&b"k"[..]).map(|v| show(v))
            )
        })?;
    }
    Ok(())
}

/// Tenant names that extend one another, differ in case or in a separator,
/// or sort differently bytewise than a collation would: `acme` before
/// `acme-eu` before `acme.eu` before `acme_eu` before `acmeeu`, and upper
/// case before lower case.
fn listed_names(stem: &str) -> Vec<String> {
    [
        "", "-eu", "-eu-west", ".eu", "_eu", "eu", "A", "a", "Z", "-",
    ]
    .iter()
    .map(|s| format!("{stem}{s}"))
    .chain([format!("A{stem}"), format!("a{stem}"), format!("{stem}.")])
    .collect()
}

/// [`Backend::tenants`] lists every tenant written, once each, in bytewise
/// order, names that extend one another or differ only in case or a
/// separator included; a tenant written several times, or on both sides
/// of a listing, is listed once. A backend that cannot list tenants
/// (`None`) has nothing to check here: the sweeper then starts from the
/// tenants called since the process started.
pub fn tenants_are_listed<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "tenants_are_listed";
    let b = make();
    let stem = tenant("");
    let names = listed_names(&stem);
    // Each tenant more than once, in an order that is not the sorted one,
    // some with many keys so that a listing that steps over keys rather
    // than tenants is tried too.
    for (i, name) in names.iter().enumerate().rev() {
        let batch = (0..(1 + i * 7))
            .map(|j| put(format!("k{j:03}").as_bytes(), name.as_bytes()))
            .collect();
        write(C, &b, name, batch)?;
    }
    let first = listing(C, &b, &stem)?;
    for name in names.iter().step_by(3) {
        write(C, &b, name, vec![put(b"again", b"1")])?;
    }
    let Some(first) = first else {
        return Ok(());
    };
    let second = listing(C, &b, &stem)?.unwrap_or_default();
    let mut want = names.clone();
    want.sort();
    for listed in [first, second] {
        ensure(C, listed == want, || {
            let missing: Vec<&String> = want.iter().filter(|n| !listed.contains(n)).collect();
            format!(
                "tenants() listed {listed:?} of the tenants written, not {want:?}{}",
                if missing.is_empty() {
                    String::new()
                } else {
                    format!(" (missing {missing:?})")
                }
            )
        })?;
    }
    Ok(())
}

/// The listing's names that this check wrote (they all hold its stem),
/// after checking that the whole listing is in bytewise order without
/// repeats.
fn listing<B: Backend>(c: &'static str, b: &B, stem: &str) -> Result<Option<Vec<String>>, Failure> {
    let Some(all) = b.tenants().map_err(failed(c, "listing tenants"))? else {
        return Ok(None);
    };
    if let Some(w) = all.windows(2).find(|w| w[0].as_bytes() >= w[1].as_bytes()) {
        return Err(Failure::new(
            c,
            format!(
                "tenants() listed {:?} before {:?}: not in bytewise order, or listed twice",
                w[0], w[1]
            ),
        ));
    }
    Ok(Some(all.into_iter().filter(|n| n.contains(stem)).collect()))
}
