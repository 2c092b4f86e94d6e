//! The consistency check: every row against its index entries and counters,
//! and every index entry against the row it claims to come from.
//!
//! It streams (one row or entry at a time, point reads for the other side),
//! so memory stays flat however large the tenant is; it never repairs
//! anything, only reports.

use crate::keys::{self, Elem, Key};
use crate::kv::Kv;
use crate::model::{Discrepancy, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
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

pub fn check<K: Kv + ?Sized>(kv: &mut K) -> Result<Vec<Discrepancy>, StoreError> {
    let mut f = Findings(Vec::new());
    if let Err(StoreError::Corrupt(d)) = store::check_layout(kv, false) {
        f.add("layout", "meta/layout", d);
        return Ok(f.0);
    }
    check_tasks(kv, &mut f)?;
    check_task_indexes(kv, &mut f)?;
    check_timers(kv, &mut f)?;
    if f.full() {
        f.0.push(Discrepancy {
            structure: "check".into(),
            subject: "findings".into(),
            detail: format!("stopped listing after {MAX_FINDINGS} findings"),
        });
    }
    Ok(f.0)
}

fn check_tasks<K: Kv + ?Sized>(kv: &mut K, f: &mut Findings) -> Result<(), StoreError> {
    let mut pending = 0u64;
    let mut leased = 0u64;
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
        pending += u64::from(row.task.state.is_pending());
        leased += u64::from(row.is_leased());
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
    let counted = store::read_counter(kv, schema::OPEN_TASKS)?;
    if counted != pending && !f.full() {
        f.add(
            "open-count",
            schema::OPEN_TASKS,
            format!("the counter says {counted}; {pending} pending task rows exist"),
        );
    }
    let counted = store::read_counter(kv, schema::LEASED_CLAIMS)?;
    if counted != leased && !f.full() {
        f.add(
            "leased-count",
            schema::LEASED_CLAIMS,
            format!("the counter says {counted}; {leased} task rows hold a leased claim"),
        );
    }
    Ok(())
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

fn check_timers<K: Kv + ?Sized>(kv: &mut K, f: &mut Findings) -> Result<(), StoreError> {
    let mut armed = 0u64;
    let prefix = schema::timers();
    store::walk(kv, &prefix, |kv, key, value| {
        let Some(elems) = decoded(f, "timer", &key, &prefix) else {
            return Ok(!f.full());
        };
        let subject = text(&elems);
        armed += 1;
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
    let counted = store::read_counter(kv, schema::ARMED_TIMERS)?;
    if counted != armed && !f.full() {
        f.add(
            "pending-count",
            schema::ARMED_TIMERS,
            format!("the counter says {counted}; {armed} timer rows exist"),
        );
    }
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
    })
}
