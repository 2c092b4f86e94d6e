//! The consistency check: every row against its index entries and counters,
//! and every index entry against the row it claims to come from.
//!
//! It streams (one row or entry at a time, point reads for the other side),
//! so memory stays flat however large the tenant is; the point reads of each
//! chunk of a walk are read ahead in a batch or two where the keyspace is a
//! database server's (`store::walk_ahead`), so there a check costs a few
//! round trips per chunk, not one per key. It never repairs anything, only reports. Where a keyspace spreads counts by row (layouts 3
//! and 4), counters are checked shard by shard against the rows that count in
//! each shard, which is stronger than checking their sums: a count in the
//! wrong shard leaves the sum right, yet can later make a correct write fail
//! as taking a shard below zero. Spread by writer (layouts 5 to 7), a row's
//! count may sit in any shard, so each counter's sum is checked.
//!
//! The change record is checked against the rows and against itself: every
//! task's last history entry says what its row says; each history entry and
//! the feed entry of the same change name each other, so every change not
//! trimmed is in the feed exactly once; each slot of the feed holds every
//! number from its floor to its head and nothing else; each entry's
//! predecessor is an earlier change of the same task or timer. Where the
//! history is kept in the feed (layout 9), following each task's changes
//! back from its log must step one change of that task at a time, down to
//! its first kept entry or to entries under their own keys, all there; and
//! the changes so reached must number as many as the feed holds within the
//! tasks' kept histories, so none is in the feed twice or on no history. In layouts 6
//! and 7, which have recorded every change, every task and timer must have a
//! record; in earlier layouts rows may predate it. The record's keys are
//! read as the keyspace's layout spells them (apart in 6, beside in 7).

use crate::changes::{Slots, read_slots};
use crate::keys::{self, Elem, Key};
use crate::kv::Kv;
use crate::model::{Change, Discrepancy, StoreError, TimerEvent};
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

/// Reads `keys` ahead of the point reads that follow, in batches the host
/// takes (its `get-many` is bounded), each key once.
fn read_ahead<K: Kv + ?Sized>(kv: &mut K, mut keys: Vec<Vec<u8>>) -> Result<(), StoreError> {
    keys.sort_unstable();
    keys.dedup();
    for batch in keys.chunks(AHEAD_BATCH) {
        kv.prefetch(batch)?;
    }
    Ok(())
}

/// Keys per batch read ahead: well under the hosts' bound on `get-many`.
const AHEAD_BATCH: usize = 1024;

/// The task id of a row's key in the tasks' range, `None` for any other key
/// there (the record beside its row, or a key of no known shape).
fn row_id(shards: Shards, key: &[u8], prefix: &Key) -> Option<String> {
    let elems = store::suffix(key, prefix).ok()?;
    if shards.beside() {
        match task_key(&elems) {
            Some(TaskKey::Row(id)) => Some(id.to_owned()),
            _ => None,
        }
    } else {
        match elems.as_slice() {
            [Elem::Str(id)] => Some(id.clone()),
            _ => None,
        }
    }
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
    let mark = kv.get(schema::layout().as_bytes())?;
    let every = store::records_from_the_start(mark.as_deref());
    let in_feed = store::history_in_feed(mark.as_deref());
    let (pending, leased) = check_tasks(kv, &mut f, shards, every, in_feed)?;
    check_task_indexes(kv, &mut f)?;
    let armed = check_timers(kv, &mut f, shards, every)?;
    check_record(kv, &mut f, in_feed)?;
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
    every: bool,
    in_feed: bool,
) -> Result<(PerShard, PerShard), StoreError> {
    let mut pending: PerShard = [0; schema::MAX_SHARDS as usize];
    let mut leased: PerShard = [0; schema::MAX_SHARDS as usize];
    let prefix = schema::tasks();
    // Ahead of each chunk's rows: their index entries and logs, then the
    // history entries the logs name.
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        let mut ids = Vec::new();
        for (key, value) in chunk {
            let Some(id) = row_id(shards, key, &prefix) else {
                continue;
            };
            if let Ok(row) = store::decode_task(value) {
                keys.extend(row.index_keys());
            }
            keys.push(schema::task_log(shards, &id).into_bytes());
            ids.push(id);
        }
        read_ahead(kv, keys)?;
        let mut keys = Vec::new();
        for id in ids {
            if let Some(bytes) = kv.get(schema::task_log(shards, &id).as_bytes())?
                && let Ok(log) = store::decode_task_log(&bytes)
            {
                keys.push(schema::history_entry(shards, &id, log.last).into_bytes());
                keys.push(schema::feed_entry(log.position.slot, log.position.seq).into_bytes());
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, store::SCAN_CHUNK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "task", &key, &prefix) else {
            return Ok(!f.full());
        };
        let key = if shards.beside() {
            task_key(&elems)
        } else {
            match elems.as_slice() {
                [Elem::Str(id)] => Some(TaskKey::Row(id)),
                _ => None,
            }
        };
        let id = match key {
            Some(TaskKey::Row(id)) => id.to_owned(),
            // The record beside the row: the walks of the record check it.
            Some(TaskKey::Log(_) | TaskKey::History(..)) => return Ok(!f.full()),
            None => {
                f.add("task", &text(&elems), "a task key has the wrong shape");
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
        check_last_change(kv, f, shards, &id, &row, every, in_feed)?;
        Ok(!f.full())
    })?;
    Ok((pending, leased))
}

/// What a key of a task's range is, in a keyspace with the record beside
/// its rows, by its elements after `("task")`.
enum TaskKey<'a> {
    Row(&'a str),
    Log(&'a str),
    History(&'a str, u64),
}

/// `None` for a key of no known shape.
fn task_key(elems: &[Elem]) -> Option<TaskKey<'_>> {
    match elems {
        [Elem::Str(id)] => Some(TaskKey::Row(id)),
        [Elem::Str(id), Elem::Str(log)] if log == "log" => Some(TaskKey::Log(id)),
        [Elem::Str(id), Elem::Str(h), Elem::Int(q)] if h == "history" && *q > 0 => {
            Some(TaskKey::History(id, *q as u64))
        }
        _ => None,
    }
}

/// The task's last history entry must say what its row says.
fn check_last_change<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    sh: Shards,
    id: &str,
    row: &store::TaskRow,
    every: bool,
    in_feed: bool,
) -> Result<(), StoreError> {
    let Some(bytes) = kv.get(schema::task_log(sh, id).as_bytes())? else {
        if every {
            f.add(
                "history",
                id,
                "the task has no history in a keyspace that records every change",
            );
        }
        return Ok(());
    };
    // A log that does not decode is reported by the walk of the logs.
    let Ok(log) = store::decode_task_log(&bytes) else {
        return Ok(());
    };
    let last = match store::load_history_entry(kv, sh, id, &log, log.last, in_feed) {
        Ok(Some(last)) => last,
        Ok(None) => {
            f.add(
                "history",
                id,
                format!("the log's last entry, {}, is missing", log.last),
            );
            return Ok(());
        }
        // An entry that does not decode, or a change in the feed that is
        // not the task's: the walks of the record name it.
        Err(StoreError::Corrupt(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let (e, t) = (&last.entry, &row.task);
    let differs = [
        ("state", e.after != t.state),
        ("assignee", e.assignee != t.assignee),
        ("lease end", e.lease_until != t.lease_until),
        ("candidate roles", e.candidate_roles != t.candidate_roles),
        ("excluded actors", e.excluded_actors != t.excluded_actors),
    ];
    for (what, wrong) in differs {
        if wrong {
            f.add(
                "history",
                id,
                format!(
                    "the last entry, {}, and the row disagree on the {what}",
                    log.last
                ),
            );
        }
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
        let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
            let keys = chunk
                .iter()
                .filter_map(|(key, _)| {
                    let elems = store::suffix(key, &prefix).ok()?;
                    Some(schema::task(indexed_id(&elems)?).into_bytes())
                })
                .collect();
            read_ahead(kv, keys)
        };
        store::walk_ahead(kv, &prefix, store::SCAN_CHUNK, ahead, |kv, key, _| {
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
    every: bool,
) -> Result<PerShard, StoreError> {
    let mut armed: PerShard = [0; schema::MAX_SHARDS as usize];
    let prefix = schema::timers();
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        for (_, value) in chunk {
            if let Ok(row) = store::decode_timer(value) {
                keys.push(row.due_key().into_bytes());
                if every {
                    keys.push(schema::timer_log(&row.timer.run, &row.timer.effect).into_bytes());
                }
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, store::SCAN_CHUNK, ahead, |kv, key, value| {
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
                if every && kv.get(schema::timer_log(run, effect).as_bytes())?.is_none() {
                    f.add(
                        "timer-log",
                        &subject,
                        "the timer has no record in a keyspace that records every change",
                    );
                }
            }
        }
        Ok(!f.full())
    })?;
    let due = schema::due();
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let keys = chunk
            .iter()
            .filter_map(|(key, _)| match store::suffix(key, &due).ok()?.as_slice() {
                [Elem::Int(_), Elem::Str(run), Elem::Str(effect)] => {
                    Some(schema::timer(run, effect).into_bytes())
                }
                _ => None,
            })
            .collect();
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &due, store::SCAN_CHUNK, ahead, |kv, key, _| {
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

/// Checks the feed, the task logs, the histories and the timer logs against
/// each other (the rows' side is checked with the rows).
fn check_record<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    in_feed: bool,
) -> Result<(), StoreError> {
    let slots = match read_slots(kv) {
        Ok(Some(slots)) => slots,
        Ok(None) => return Ok(()),
        Err(StoreError::Corrupt(d)) => {
            f.add("feed", "heads", d);
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    // Where history is kept in the feed, every change of a task the feed
    // holds at or past its history's first kept entry must be reached by
    // following that task's changes back from its log: the two counts below
    // are equal exactly when none is left out, since each change reached is
    // a distinct feed entry of its own task.
    let mut in_histories = 0u64;
    let mut reached = 0u64;
    check_feed(kv, f, &slots, in_feed.then_some(&mut in_histories))?;
    check_task_logs(kv, f, &slots, in_feed.then_some(&mut reached))?;
    check_histories(kv, f, &slots, in_feed)?;
    if in_feed && in_histories != reached && !f.full() {
        f.add(
            "feed",
            "tasks",
            format!(
                "the feed holds {in_histories} changes within their tasks' kept histories, \
                 and following each task's changes back from its log reaches {reached}"
            ),
        );
    }
    check_timer_logs(kv, f, &slots)
}

/// A feed position as findings name it.
fn at(p: store::Position) -> String {
    format!("{}.{}", p.slot, p.seq)
}

/// Whether a position lies in the feed as it stands (past its slot's floor,
/// at or below its head); one at or below the floor was trimmed.
fn kept(slots: &Slots, p: store::Position) -> bool {
    p.slot < slots.shards.count()
        && p.seq > slots.floor.get(p.slot)
        && p.seq <= slots.head.get(p.slot)
}

fn past_head(slots: &Slots, p: store::Position) -> bool {
    p.slot >= slots.shards.count() || p.seq > slots.head.get(p.slot)
}

/// The feed entry at `p`, if it is there and decodes.
fn feed_row<K: Kv + ?Sized>(
    kv: &mut K,
    p: store::Position,
) -> Result<Option<store::FeedRow>, StoreError> {
    Ok(kv
        .get(schema::feed_entry(p.slot, p.seq).as_bytes())?
        .and_then(|b| store::decode_feed_row(&b).ok()))
}

/// Walks the feed: each slot holds every number from its floor to its
/// head, each entry decodes, follows an earlier change of its own task or
/// timer, and (for a task) is the change its history entry records.
fn check_feed<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
    mut in_histories: Option<&mut u64>,
) -> Result<(), StoreError> {
    let prefix = schema::feed();
    // The next number each slot should hold.
    let mut next: [u64; schema::MAX_SHARDS as usize] = [0; schema::MAX_SHARDS as usize];
    for s in 0..slots.shards.count() {
        next[usize::from(s)] = slots.floor.get(s) + 1;
    }
    // Ahead of each chunk: the entries each follows and the logs of their
    // tasks, then the history entries of their changes.
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        let mut changes = Vec::new();
        for (_, value) in chunk {
            let Ok(row) = store::decode_feed_row(value) else {
                continue;
            };
            if let Some(prev) = row.prev
                && kept(slots, prev)
            {
                keys.push(schema::feed_entry(prev.slot, prev.seq).into_bytes());
            }
            if let Change::Task(t) = row.change {
                keys.push(schema::task_log(slots.shards, &t.id).into_bytes());
                changes.push((t.id, t.entry.seq));
            }
        }
        read_ahead(kv, keys)?;
        let keys = changes
            .iter()
            .map(|(id, seq)| schema::history_entry(slots.shards, id, *seq).into_bytes())
            .collect();
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, RECORD_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "feed", &key, &prefix) else {
            return Ok(!f.full());
        };
        let p = match elems.as_slice() {
            // A slot's head, beside its entries: read with the heads, so
            // only one of a slot the keyspace does not have is news here.
            [Elem::Int(s), Elem::Int(schema::FEED_HEAD_SEQ)] if slots.shards.beside() => {
                if !u8::try_from(*s).is_ok_and(|slot| slot < slots.shards.count()) {
                    f.add("feed", &text(&elems), "a head outside the feed's slots");
                }
                return Ok(!f.full());
            }
            [Elem::Int(s), Elem::Int(q)] => match (u8::try_from(*s), u64::try_from(*q)) {
                (Ok(slot), Ok(seq)) if slot < slots.shards.count() => store::Position { slot, seq },
                _ => {
                    f.add("feed", &text(&elems), "an entry outside the feed's slots");
                    return Ok(!f.full());
                }
            },
            other => {
                f.add("feed", &text(other), "a feed key has the wrong shape");
                return Ok(!f.full());
            }
        };
        let n = &mut next[usize::from(p.slot)];
        if p.seq < *n {
            f.add(
                "feed",
                &at(p),
                "an entry at or below its slot's floor was kept",
            );
            return Ok(!f.full());
        }
        if p.seq > slots.head.get(p.slot) {
            f.add("feed", &at(p), "an entry past its slot's head");
            return Ok(!f.full());
        }
        if p.seq > *n {
            f.add(
                "feed",
                &at(store::Position {
                    slot: p.slot,
                    seq: *n,
                }),
                format!("entries {} to {} of the slot are missing", *n, p.seq - 1),
            );
        }
        *n = p.seq + 1;
        let row = match store::decode_feed_row(&value) {
            Ok(row) => row,
            Err(e) => {
                f.add("feed", &at(p), format!("the entry does not decode: {e}"));
                return Ok(!f.full());
            }
        };
        check_prev(kv, f, slots, p, &row)?;
        if let Change::Task(t) = &row.change {
            check_feed_task(
                kv,
                f,
                slots.shards,
                p,
                &t.id,
                &t.entry,
                in_histories.as_deref_mut(),
            )?;
        }
        Ok(!f.full())
    })?;
    for s in 0..slots.shards.count() {
        let n = next[usize::from(s)];
        if n <= slots.head.get(s) {
            f.add(
                "feed",
                &at(store::Position { slot: s, seq: n }),
                format!(
                    "entries {n} to {} of the slot are missing",
                    slots.head.get(s)
                ),
            );
        }
    }
    Ok(())
}

/// The entry an entry follows: earlier, and a change of the same task or
/// timer (where it is still kept).
fn check_prev<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
    p: store::Position,
    row: &store::FeedRow,
) -> Result<(), StoreError> {
    let Some(prev) = row.prev else {
        return Ok(());
    };
    if past_head(slots, prev) || (prev.slot == p.slot && prev.seq >= p.seq) {
        f.add(
            "feed",
            &at(p),
            format!("the entry follows {}, which is not before it", at(prev)),
        );
        return Ok(());
    }
    if !kept(slots, prev) {
        return Ok(());
    }
    let same = match (feed_row(kv, prev)?, &row.change) {
        (None, _) => false,
        (Some(earlier), Change::Task(t)) => {
            matches!(&earlier.change, Change::Task(e) if e.id == t.id && e.entry.seq < t.entry.seq)
        }
        (Some(earlier), Change::Timer(t)) => {
            matches!(&earlier.change, Change::Timer(e) if e.run == t.run && e.effect == t.effect)
        }
    };
    if !same {
        f.add(
            "feed",
            &at(p),
            format!(
                "the entry follows {}, which is no earlier change of the same task or timer",
                at(prev)
            ),
        );
    }
    Ok(())
}

/// A task's feed entry and its history entry (while kept) record one change
/// and name each other; where history is kept in the feed (`in_histories`
/// is given), a change need not have a history key of its own, and each
/// within its task's kept history is counted, to be reached from the task's
/// log.
fn check_feed_task<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    sh: Shards,
    p: store::Position,
    id: &str,
    entry: &crate::model::HistoryEntry,
    in_histories: Option<&mut u64>,
) -> Result<(), StoreError> {
    let in_feed = in_histories.is_some();
    let log = kv
        .get(schema::task_log(sh, id).as_bytes())?
        .and_then(|b| store::decode_task_log(&b).ok());
    let Some(log) = log else {
        f.add(
            "feed",
            &at(p),
            format!("a change of task {id}, which has no history"),
        );
        return Ok(());
    };
    if entry.seq > log.last {
        f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id}, whose history ends at {}",
                entry.seq, log.last
            ),
        );
        return Ok(());
    }
    if entry.seq < log.first {
        return Ok(());
    }
    if let Some(n) = in_histories {
        *n += 1;
    }
    if in_feed && entry.seq == log.last && log.position != p {
        f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id}, whose log says it is at {}",
                entry.seq,
                at(log.position)
            ),
        );
        return Ok(());
    }
    let history = kv
        .get(schema::history_entry(sh, id, entry.seq).as_bytes())?
        .and_then(|b| store::decode_history(&b).ok());
    match history {
        Some(h) if h.position == p && h.entry == *entry => {}
        Some(h) if h.position != p => f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id}, whose history entry was recorded at {}",
                entry.seq,
                at(h.position)
            ),
        ),
        Some(_) => f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id} differs from its history entry",
                entry.seq
            ),
        ),
        // Kept in the feed: the walk of the logs reaches it.
        None if in_feed => {}
        None => f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id} is missing from its history",
                entry.seq
            ),
        ),
    }
    Ok(())
}

/// Each task log belongs to a task, and names its last change where the
/// feed still holds it. Where history is kept in the feed (`reached` is
/// given), following the task's changes back from its log must step one
/// change of the task at a time, down to its first kept entry or to entries
/// kept under their own keys, each of which must be there; `reached`
/// counts the changes so found.
fn check_task_logs<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
    mut reached: Option<&mut u64>,
) -> Result<(), StoreError> {
    let chains = reached.is_some();
    let sh = slots.shards;
    let prefix = if sh.beside() {
        schema::tasks()
    } else {
        schema::task_logs()
    };
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        let mut logs = Vec::new();
        for (key, value) in chunk {
            let Ok(elems) = store::suffix(key, &prefix) else {
                continue;
            };
            let id = match (sh.beside(), task_key(&elems), elems.as_slice()) {
                (true, Some(TaskKey::Log(id)), _) => id,
                (false, _, [Elem::Str(id)]) => id.as_str(),
                _ => continue,
            };
            keys.push(schema::task(id).into_bytes());
            if let Ok(log) = store::decode_task_log(value) {
                if kept(slots, log.position) {
                    keys.push(schema::feed_entry(log.position.slot, log.position.seq).into_bytes());
                }
                if chains {
                    logs.push((id.to_owned(), log));
                }
            }
        }
        read_ahead(kv, keys)?;
        if chains {
            chains_ahead(kv, slots, &logs)?;
        }
        Ok(())
    };
    store::walk_ahead(kv, &prefix, RECORD_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "task-log", &key, &prefix) else {
            return Ok(!f.full());
        };
        let id = if sh.beside() {
            match task_key(&elems) {
                Some(TaskKey::Log(id)) => id.to_owned(),
                // Rows, histories and keys of no shape are the row walk's.
                _ => return Ok(!f.full()),
            }
        } else {
            match elems.as_slice() {
                [Elem::Str(id)] => id.clone(),
                _ => {
                    f.add("task-log", &text(&elems), "a log key has the wrong shape");
                    return Ok(!f.full());
                }
            }
        };
        let id = &id;
        let log = match store::decode_task_log(&value) {
            Ok(log) => log,
            Err(e) => {
                f.add("task-log", id, format!("the log does not decode: {e}"));
                return Ok(!f.full());
            }
        };
        if kv.get(schema::task(id).as_bytes())?.is_none() {
            f.add("task-log", id, "a log for a task with no row");
        }
        if log.first == 0 || log.first > log.last {
            f.add(
                "task-log",
                id,
                format!("the log keeps entries {} to {}", log.first, log.last),
            );
        }
        if past_head(slots, log.position) {
            f.add(
                "task-log",
                id,
                format!(
                    "the last change is at {}, past the feed's head",
                    at(log.position)
                ),
            );
        } else if kept(slots, log.position) {
            let right = matches!(
                feed_row(kv, log.position)?.map(|r| r.change),
                Some(Change::Task(t)) if t.id == *id && t.entry.seq == log.last
            );
            if !right {
                f.add(
                    "task-log",
                    id,
                    format!(
                        "the feed entry at {} is not the task's last change",
                        at(log.position)
                    ),
                );
            }
        }
        if let Some(reached) = reached.as_deref_mut()
            && log.first >= 1
            && log.first <= log.last
        {
            check_chain(kv, f, sh, id, &log, reached)?;
        }
        Ok(!f.full())
    })
}

/// How many changes back the walk of the logs reads ahead, over a shared
/// keyspace, for every task of a chunk at once: most tasks have few.
const CHAIN_AHEAD: usize = 8;

/// Keyed history entries asked for per scan below a task's changes in the
/// feed.
const KEYED_CHUNK: u32 = 64;

/// Reads ahead the first [`CHAIN_AHEAD`] steps back from each of `logs`,
/// every task's step in one batch, and the keyed entries below the last
/// step where there are a few; on an embedded store it reads nothing.
fn chains_ahead<K: Kv + ?Sized>(
    kv: &mut K,
    slots: &Slots,
    logs: &[(String, store::TaskLog)],
) -> Result<(), StoreError> {
    if !kv.concurrent_writers() {
        return Ok(());
    }
    let mut frontier: Vec<(&str, store::Position, u64, u64)> = logs
        .iter()
        .map(|(id, log)| (id.as_str(), log.position, log.last, log.first))
        .collect();
    let mut keyed = Vec::new();
    for _ in 0..CHAIN_AHEAD {
        frontier.retain(|(id, p, want, first)| {
            let go = kept(slots, *p) && *want >= (*first).max(1);
            if !go && *want >= *first && *want - *first < 4 {
                keyed.extend(
                    (*first..=*want)
                        .map(|q| schema::history_entry(slots.shards, id, q).into_bytes()),
                );
            }
            go
        });
        if frontier.is_empty() {
            break;
        }
        read_ahead(
            kv,
            frontier
                .iter()
                .map(|(_, p, _, _)| schema::feed_entry(p.slot, p.seq).into_bytes())
                .collect(),
        )?;
        let mut next = Vec::new();
        for (id, p, want, first) in frontier {
            if let Some(bytes) = kv.get(schema::feed_entry(p.slot, p.seq).as_bytes())?
                && let Ok(row) = store::decode_feed_row(&bytes)
                && let Some(prev) = row.prev
            {
                next.push((id, prev, want - 1, first));
            }
        }
        frontier = next;
    }
    read_ahead(kv, keyed)
}

/// Follows task `id`'s changes back from its `log` (see
/// [`check_task_logs`]), counting them in `reached`.
fn check_chain<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    sh: Shards,
    id: &str,
    log: &store::TaskLog,
    reached: &mut u64,
) -> Result<(), StoreError> {
    let mut n = 0u64;
    let lowest = match store::walk_chain(kv, id, log, log.first, |_| {
        n += 1;
        true
    }) {
        Ok(lowest) => lowest,
        Err(StoreError::Corrupt(d)) => {
            *reached += n;
            f.add("history", id, d);
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    *reached += n;
    // Below the changes the feed holds: entries under their own keys, every
    // one of them, which the walk of the histories reads.
    if lowest <= log.first {
        return Ok(());
    }
    let prefix = schema::history(sh, id);
    let mut start = schema::history_entry(sh, id, log.first).into_bytes();
    let end = schema::history_entry(sh, id, lowest).into_bytes();
    let mut next = log.first;
    loop {
        let entries = kv.scan(&start, Some(&end), KEYED_CHUNK, false)?;
        let done = entries.len() < KEYED_CHUNK as usize;
        for (k, _) in entries {
            let seq = match store::suffix(&k, &prefix).ok().as_deref() {
                Some([Elem::Int(q)]) if *q > 0 => *q as u64,
                // Keys of no shape are the walk of the histories' to name.
                _ => continue,
            };
            if seq > next {
                f.add(
                    "history",
                    id,
                    format!("entries {next} to {} are missing", seq - 1),
                );
            }
            next = seq + 1;
            start = k;
            start.push(0);
        }
        if done || f.full() {
            break;
        }
    }
    if next < lowest {
        f.add(
            "history",
            id,
            format!("entries {next} to {} are missing", lowest - 1),
        );
    }
    Ok(())
}

/// Each task's history holds every entry from its log's first to its last,
/// each recorded at a feed position that holds the same change or was
/// trimmed.
fn check_histories<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
    in_feed: bool,
) -> Result<(), StoreError> {
    let sh = slots.shards;
    let prefix = if sh.beside() {
        schema::tasks()
    } else {
        schema::histories()
    };
    // The task being walked, its log, and the next entry it should hold.
    let mut current: Option<(String, Option<store::TaskLog>, u64)> = None;
    let end_of = |f: &mut Findings, current: &Option<(String, Option<store::TaskLog>, u64)>| {
        if let Some((id, Some(log), next)) = current
            && *next <= log.last
            && !in_feed
        {
            f.add(
                "history",
                id,
                format!("entries {next} to {} are missing", log.last),
            );
        }
    };
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        for (key, value) in chunk {
            let Ok(elems) = store::suffix(key, &prefix) else {
                continue;
            };
            let id = match (sh.beside(), task_key(&elems), elems.as_slice()) {
                (true, Some(TaskKey::History(id, _)), _) => id,
                (false, _, [Elem::Str(id), Elem::Int(q)]) if *q > 0 => id.as_str(),
                _ => continue,
            };
            keys.push(schema::task_log(sh, id).into_bytes());
            if let Ok(row) = store::decode_history(value)
                && kept(slots, row.position)
            {
                keys.push(schema::feed_entry(row.position.slot, row.position.seq).into_bytes());
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, RECORD_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "history", &key, &prefix) else {
            return Ok(!f.full());
        };
        let (id, seq) = if sh.beside() {
            match task_key(&elems) {
                Some(TaskKey::History(id, seq)) => (id.to_owned(), seq),
                // Rows, logs and keys of no shape are the row walk's.
                _ => return Ok(!f.full()),
            }
        } else {
            match elems.as_slice() {
                [Elem::Str(id), Elem::Int(q)] if *q > 0 => (id.clone(), *q as u64),
                _ => {
                    f.add(
                        "history",
                        &text(&elems),
                        "a history key has the wrong shape",
                    );
                    return Ok(!f.full());
                }
            }
        };
        if current.as_ref().is_none_or(|(c, _, _)| *c != id) {
            end_of(f, &current);
            let log = kv
                .get(schema::task_log(sh, &id).as_bytes())?
                .and_then(|b| store::decode_task_log(&b).ok());
            if log.is_none() {
                f.add("history", &id, "a history with no log");
            }
            let first = log.map_or(seq, |l| l.first);
            current = Some((id.clone(), log, first));
        }
        let Some((_, log, next)) = current.as_mut() else {
            return Ok(!f.full());
        };
        let subject = format!("{id}/{seq}");
        if let Some(log) = log {
            if seq < log.first || seq > log.last {
                f.add(
                    "history",
                    &subject,
                    format!("an entry outside the kept {} to {}", log.first, log.last),
                );
            } else if seq > *next && !in_feed {
                f.add(
                    "history",
                    &id,
                    format!("entries {} to {} are missing", *next, seq - 1),
                );
            }
        }
        *next = seq + 1;
        let row = match store::decode_history(&value) {
            Ok(row) => row,
            Err(e) => {
                f.add(
                    "history",
                    &subject,
                    format!("the entry does not decode: {e}"),
                );
                return Ok(!f.full());
            }
        };
        if row.entry.seq != seq {
            f.add(
                "history",
                &subject,
                format!("the entry says it is {}", row.entry.seq),
            );
        }
        if past_head(slots, row.position) {
            f.add(
                "history",
                &subject,
                format!("recorded at {}, past the feed's head", at(row.position)),
            );
        } else if kept(slots, row.position) {
            let right = matches!(
                feed_row(kv, row.position)?.map(|r| r.change),
                Some(Change::Task(t)) if t.id == id && t.entry.seq == seq
            );
            if !right {
                f.add(
                    "history",
                    &subject,
                    format!("the feed holds another change at {}", at(row.position)),
                );
            }
        }
        Ok(!f.full())
    })?;
    end_of(f, &current);
    Ok(())
}

/// Each timer log names the timer's last change where the feed still holds
/// it: a retirement when the timer is gone, anything else while it is
/// armed.
fn check_timer_logs<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
) -> Result<(), StoreError> {
    let prefix = schema::timer_logs();
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        for (key, value) in chunk {
            if let Ok(elems) = store::suffix(key, &prefix)
                && let [Elem::Str(run), Elem::Str(effect)] = elems.as_slice()
            {
                keys.push(schema::timer(run, effect).into_bytes());
            }
            if let Ok(p) = store::decode_position(value)
                && kept(slots, p)
            {
                keys.push(schema::feed_entry(p.slot, p.seq).into_bytes());
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, RECORD_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "timer-log", &key, &prefix) else {
            return Ok(!f.full());
        };
        let subject = text(&elems);
        let [Elem::Str(run), Elem::Str(effect)] = elems.as_slice() else {
            f.add("timer-log", &subject, "a log key has the wrong shape");
            return Ok(!f.full());
        };
        let position = match store::decode_position(&value) {
            Ok(p) => p,
            Err(e) => {
                f.add(
                    "timer-log",
                    &subject,
                    format!("the log does not decode: {e}"),
                );
                return Ok(!f.full());
            }
        };
        if past_head(slots, position) {
            f.add(
                "timer-log",
                &subject,
                format!(
                    "the last change is at {}, past the feed's head",
                    at(position)
                ),
            );
            return Ok(!f.full());
        }
        if !kept(slots, position) {
            return Ok(!f.full());
        }
        let armed = kv.get(schema::timer(run, effect).as_bytes())?.is_some();
        match feed_row(kv, position)?.map(|r| r.change) {
            Some(Change::Timer(t)) if t.run == *run && t.effect == *effect => {
                if armed == (t.what == TimerEvent::Retired) {
                    f.add(
                        "timer-log",
                        &subject,
                        format!(
                            "the last change was {:?}, but the timer is {}",
                            t.what,
                            if armed { "armed" } else { "gone" }
                        ),
                    );
                }
            }
            _ => f.add(
                "timer-log",
                &subject,
                format!("the feed entry at {} is not this timer's", at(position)),
            ),
        }
        Ok(!f.full())
    })
}

/// Entries per scan when walking the record: its entries may be far larger
/// than index entries.
const RECORD_WALK: u32 = 32;
