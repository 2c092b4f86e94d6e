//! The consistency check: every row against its index entries and counters,
//! and every index entry against the row it claims to come from.
//!
//! It streams (one row or entry at a time, point reads for the other side),
//! so memory stays flat however large the tenant is; it never repairs
//! anything, only reports. Where a keyspace spreads counts by row (layouts 3
//! and 4), counters are checked shard by shard against the rows that count in
//! each shard, which is stronger than checking their sums: a count in the
//! wrong shard leaves the sum right, yet can later make a correct write fail
//! as taking a shard below zero. Spread by writer (layout 5), a row's count
//! may sit in any shard, so each counter's sum is checked.

use crate::keys::{self, Elem, Key};
use crate::kv::Kv;
use crate::model::{Discrepancy, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema::{self, Shards};
use crate::store;

/// Past this many findings the check stops listing and says so.
pub const MAX_FINDINGS: usize = 1000;

struct Findings(Vec<Discrepancy>);

impl Findings {
    fn add(&mut self, structure: &str, subject: &str, detail: impl Into<String>) {
        if self.0.len() < MAX_FINDINGS {
            self.0.push(Discrepancy {
                structure: structure.to_owned(),
                subject: subject.to_owned(),
                detail: detail.into(),
            });
        }
    }

    fn full(&self) -> bool {
        self.0.len() >= MAX_FINDINGS
    }
}

fn text(elems: &[Elem]) -> String {
    elems
        .iter()
        .map(|e| match e {
            Elem::Str(s) => s.clone(),
            Elem::Int(n) => n.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A count per counter shard; spread by writer, the whole count in the first.
type PerShard = [u64; schema::MAX_SHARDS as usize];

/// Where [`PerShard`] keeps the count of a row whose own shard is `own`.
fn tally(shards: Shards, own: impl FnOnce() -> u8) -> usize {
    if shards.by_writer() {
        0
    } else {
        usize::from(own())
    }
}

pub fn check<K: Kv + ?Sized>(kv: &mut K) -> Result<Vec<Discrepancy>, StoreError> {
    let mut f = Findings(Vec::new());
    if let Err(StoreError::Corrupt(d)) = store::check_layout(kv, false) {
        f.add("layout", "meta/layout", d);
        return Ok(f.0);
    }
    let shards = store::shards(kv)?;
    let (pending, leased) = check_tasks(kv, &mut f, shards)?;
    check_task_indexes(kv, &mut f)?;
    let armed = check_timers(kv, &mut f, shards)?;
    check_counters(
        kv,
        &mut f,
        shards,
        [
            Expected {
                name: schema::OPEN_TASKS,
                structure: "open-count",
                rows: "pending task rows",
                per_shard: pending,
            },
            Expected {
                name: schema::LEASED_CLAIMS,
                structure: "leased-count",
                rows: "task rows holding a leased claim",
                per_shard: leased,
            },
            Expected {
                name: schema::ARMED_TIMERS,
                structure: "pending-count",
                rows: "timer rows",
                per_shard: armed,
            },
        ],
    )?;
    if f.full() {
        f.0.push(Discrepancy {
            structure: "check".into(),
            subject: "findings".into(),
            detail: format!("stopped listing after {MAX_FINDINGS} findings"),
        });
    }
    Ok(f.0)
}

/// Checks every task row, answering how many pending and leased rows count
/// in each shard.
fn check_tasks<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    shards: Shards,
) -> Result<(PerShard, PerShard), StoreError> {
    let mut pending: PerShard = [0; schema::MAX_SHARDS as usize];
    let mut leased: PerShard = [0; schema::MAX_SHARDS as usize];
    let prefix = schema::tasks();
    store::walk(kv, &prefix, |kv, key, value| {
        let Some(elems) = decoded(f, "task", &key, &prefix) else {
            return Ok(!f.full());
        };
        let id = match elems.as_slice() {
            [Elem::Str(id)] => id.clone(),
            other => {
                f.add("task", &text(other), "a task key has the wrong shape");
                return Ok(!f.full());
            }
        };
        let row = match store::decode_task(&value) {
            Ok(row) => row,
            Err(e) => {
                f.add("task", &id, format!("the row does not decode: {e}"));
                return Ok(!f.full());
            }
        };
        if row.task.id != id {
            f.add(
                "task",
                &id,
                format!("the row says its id is {}", row.task.id),
            );
        }
        // Where the row's writes counted it: by the id it is stored under.
        let shard = tally(shards, || shards.task(&id));
        pending[shard] += u64::from(row.task.state.is_pending());
        leased[shard] += u64::from(row.is_leased());
        // Only a claim is held: a lease on anything else would be a lease
        // no index entry stands for.
        if row.task.lease_until.is_some() && !row.is_leased() {
            f.add(
                "task",
                &id,
                format!("a {} task carries a lease", row.task.state),
            );
        }
        for k in row.index_keys() {
            if kv.get(&k)?.is_none() {
                f.add(
                    index_name(&k),
                    &id,
                    "the row implies this entry; it is missing",
                );
            }
        }
        Ok(!f.full())
    })?;
    Ok((pending, leased))
}

/// The tuple after `prefix` in `key`, or a finding when it does not decode.
fn decoded(f: &mut Findings, structure: &str, key: &[u8], prefix: &Key) -> Option<Vec<Elem>> {
    match store::suffix(key, prefix) {
        Ok(elems) => Some(elems),
        Err(_) => {
            f.add(structure, &keys::to_hex(key), "the key does not decode");
            None
        }
    }
}

/// Names the index a key belongs to, for findings.
fn index_name(key: &[u8]) -> &'static str {
    let starts = |p: Key| key.starts_with(p.as_bytes());
    if starts(schema::queue_roles()) || starts(schema::queue_any()) {
        "queue-index"
    } else if starts(schema::overdue()) {
        "overdue-index"
    } else if starts(schema::cases()) {
        "case-index"
    } else if starts(schema::leases()) {
        "lease-index"
    } else {
        "index"
    }
}

/// The task id at the end of an index key, whatever the index.
fn indexed_id(elems: &[Elem]) -> Option<&str> {
    match elems.last() {
        Some(Elem::Str(id)) => Some(id),
        _ => None,
    }
}

fn check_task_indexes<K: Kv + ?Sized>(kv: &mut K, f: &mut Findings) -> Result<(), StoreError> {
    for prefix in [
        schema::queue_roles(),
        schema::queue_any(),
        schema::overdue(),
        schema::cases(),
        schema::leases(),
    ] {
        store::walk(kv, &prefix, |kv, key, _| {
            let structure = index_name(&key);
            let Some(elems) = decoded(f, structure, &key, &prefix) else {
                return Ok(!f.full());
            };
            let Some(id) = indexed_id(&elems) else {
                f.add(structure, &text(&elems), "an entry has the wrong shape");
                return Ok(!f.full());
            };
            match kv.get(schema::task(id).as_bytes())? {
                None => f.add(structure, id, "an entry for a task with no row"),
                Some(bytes) => {
                    // A row that does not decode was reported by the row walk.
                    if let Ok(row) = store::decode_task(&bytes)
                        && !row.index_keys().contains(&key)
                    {
                        f.add(
                            structure,
                            id,
                            format!("an entry the row does not imply ({})", text(&elems)),
                        );
                    }
                }
            }
            Ok(!f.full())
        })?;
    }
    Ok(())
}

/// Checks every timer row and due entry, answering how many timer rows count
/// in each shard.
fn check_timers<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    shards: Shards,
) -> Result<PerShard, StoreError> {
    let mut armed: PerShard = [0; schema::MAX_SHARDS as usize];
    let prefix = schema::timers();
    store::walk(kv, &prefix, |kv, key, value| {
        let Some(elems) = decoded(f, "timer", &key, &prefix) else {
            return Ok(!f.full());
        };
        let subject = text(&elems);
        let [Elem::Str(run), Elem::Str(effect)] = elems.as_slice() else {
            f.add("timer", &subject, "a timer key has the wrong shape");
            return Ok(!f.full());
        };
        armed[tally(shards, || shards.timer(run, effect))] += 1;
        match store::decode_timer(&value) {
            Err(e) => f.add("timer", &subject, format!("the row does not decode: {e}")),
            Ok(row) => {
                if schema::timer(&row.timer.run, &row.timer.effect).as_bytes() != key.as_slice() {
                    f.add("timer", &subject, "the row names another identity");
                }
                if kv.get(row.due_key().as_bytes())?.is_none() {
                    f.add(
                        "due-index",
                        &subject,
                        format!("no entry at {} for this timer", row.claimable_at()),
                    );
                }
            }
        }
        Ok(!f.full())
    })?;
    let due = schema::due();
    store::walk(kv, &due, |kv, key, _| {
        let Some(elems) = decoded(f, "due-index", &key, &due) else {
            return Ok(!f.full());
        };
        let [Elem::Int(_), Elem::Str(run), Elem::Str(effect)] = elems.as_slice() else {
            f.add("due-index", &text(&elems), "an entry has the wrong shape");
            return Ok(!f.full());
        };
        match kv.get(schema::timer(run, effect).as_bytes())? {
            None => f.add(
                "due-index",
                &text(&elems),
                "an entry for a timer with no row",
            ),
            Some(bytes) => {
                if let Ok(row) = store::decode_timer(&bytes)
                    && row.due_key().as_bytes() != key.as_slice()
                {
                    f.add(
                        "due-index",
                        &text(&elems),
                        format!("the row is claimable at {}, not here", row.claimable_at()),
                    );
                }
            }
        }
        Ok(!f.full())
    })?;
    Ok(armed)
}

/// What one counter's shards should hold, from the rows.
struct Expected {
    name: &'static str,
    /// The finding's structure: the verb that reads the counter.
    structure: &'static str,
    /// What the counter counts, for findings.
    rows: &'static str,
    per_shard: PerShard,
}

/// Walks every key in the counters' range (an absent shard is zero), then
/// compares each of the keyspace's `shards` with the rows that count in it.
fn check_counters<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    shards: Shards,
    expected: [Expected; 3],
) -> Result<(), StoreError> {
    const SHARDS: usize = schema::MAX_SHARDS as usize;
    let mut stored = [[0i64; SHARDS]; 3];
    // A shard already reported as unreadable is not compared as well.
    let mut unreadable = [[false; SHARDS]; 3];
    let prefix = schema::counters();
    store::walk(kv, &prefix, |_, key, value| {
        let Some(elems) = decoded(f, "counter", &key, &prefix) else {
            return Ok(!f.full());
        };
        let found = match elems.as_slice() {
            [Elem::Str(name), Elem::Int(shard)] => expected
                .iter()
                .position(|e| e.name == name)
                .zip(u8::try_from(*shard).ok())
                .filter(|&(_, s)| s < shards.count()),
            _ => None,
        };
        let Some((c, shard)) = found else {
            f.add(
                "counter",
                &text(&elems),
                "a key among the counters that is no counter's shard",
            );
            return Ok(!f.full());
        };
        let e = &expected[c];
        match <[u8; 8]>::try_from(value.as_slice()) {
            Ok(raw) => stored[c][usize::from(shard)] = i64::from_be_bytes(raw),
            Err(_) => {
                unreadable[c][usize::from(shard)] = true;
                f.add(
                    e.structure,
                    &format!("{}/{shard}", e.name),
                    format!(
                        "counter {}, shard {shard}, holds {} bytes, not 8",
                        e.name,
                        value.len()
                    ),
                );
            }
        }
        Ok(!f.full())
    })?;
    for (c, e) in expected.iter().enumerate() {
        if shards.by_writer() {
            if unreadable[c].iter().any(|&u| u) {
                continue;
            }
            let counted: i128 = stored[c].iter().map(|&n| i128::from(n)).sum();
            let rows = e.per_shard[0];
            if counted != i128::from(rows) {
                f.add(
                    e.structure,
                    e.name,
                    format!(
                        "the shards of counter {} sum to {counted}; there are {rows} {}",
                        e.name, e.rows
                    ),
                );
            }
            continue;
        }
        for shard in 0..shards.count() {
            let s = usize::from(shard);
            let (counted, rows) = (stored[c][s], e.per_shard[s]);
            if i128::from(counted) != i128::from(rows) && !unreadable[c][s] {
                f.add(
                    e.structure,
                    &format!("{}/{shard}", e.name),
                    format!(
                        "counter {}, shard {shard}, says {counted}; {rows} {} count in that shard",
                        e.name, e.rows
                    ),
                );
            }
        }
    }
    Ok(())
}
