//! Rows, counters and the layout mark: reading and writing them so that a row
//! and everything derived from it change together, in the caller's call.
//!
//! A row that does not decode is `corrupt`, never a default. Index entries are
//! derived from the parsed row by one function per row kind and written as the
//! difference between the old and new derivations, so no verb can forget one.

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::keys::{self, Elem, Key};
use crate::kv::Kv;
use crate::model::{StoreError, Task, TaskState, Timer, Timestamp};
use crate::schema::{self, Shards};

/// How many entries a verb asks for per scan while it walks a range.
pub const SCAN_CHUNK: u32 = 256;

/// A stored task: the task plus what the contract needs but the caller never
/// sets. Stored in the compact binary form of [`encode_row`]: the fields in
/// declaration order, so the field list lives only in the struct.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRow {
    pub task: Task,
    /// Escalation has fired once: the task never returns to the overdue scan,
    /// and a release puts it back as `escalated`, audience still widened.
    pub ever_escalated: bool,
}

impl TaskRow {
    /// Still owed to the expiry sweep.
    pub fn awaits_expiry(&self) -> bool {
        matches!(self.task.state, TaskState::Open | TaskState::Claimed) && !self.ever_escalated
    }

    /// Held under a lease: in the lease index, and counted as leased.
    pub fn is_leased(&self) -> bool {
        self.task.state == TaskState::Claimed && self.task.lease_until.is_some()
    }

    /// Every index key this row implies.
    pub fn index_keys(&self) -> Vec<Vec<u8>> {
        let t = &self.task;
        let mut out = Vec::new();
        if t.state.is_queued() {
            let pos = schema::queue_position(t.priority.rank(), t.created_at, &t.id);
            if t.candidate_roles.is_empty() {
                out.push(schema::queue_any().raw(pos.as_bytes()).into_bytes());
            }
            for role in &t.candidate_roles {
                out.push(schema::queue_role(role).raw(pos.as_bytes()).into_bytes());
            }
        }
        if let Some(due) = t.due_at.filter(|_| self.awaits_expiry()) {
            out.push(schema::overdue_entry(due, &t.id).into_bytes());
        }
        if let Some(until) = t.lease_until.filter(|_| self.is_leased()) {
            out.push(schema::lease_entry(until, &t.id).into_bytes());
        }
        if let Some(case) = &t.case {
            out.push(
                schema::case(case)
                    .raw(schema::case_position(t.created_at, &t.id).as_bytes())
                    .into_bytes(),
            );
        }
        out
    }
}

/// A stored timer and its lease, stored like [`TaskRow`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerRow {
    pub timer: Timer,
    /// Held by a sweeper until this instant.
    pub lease_until: Option<Timestamp>,
}

impl TimerRow {
    /// The instant from which a sweep may claim this timer.
    pub fn claimable_at(&self) -> Timestamp {
        self.lease_until.unwrap_or(self.timer.fire_at)
    }

    pub fn due_key(&self) -> Key {
        schema::due_entry(self.claimable_at(), &self.timer.run, &self.timer.effect)
    }
}

fn corrupt(what: impl core::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

/// Refuses a keyspace written in a layout this component does not read, and
/// marks a fresh one when `writing`, with the shards its host asks for. The
/// mark stays in the call's buffer, where [`shards`] finds it again.
pub fn check_layout<K: Kv + ?Sized>(kv: &mut K, writing: bool) -> Result<(), StoreError> {
    let key = schema::layout().into_bytes();
    kv.prefetch(core::slice::from_ref(&key))?;
    let mark = kv.get(&key)?;
    known_layout(mark.as_deref())?;
    if mark.is_none() && writing {
        let shards = expected_shards(kv);
        kv.set(&key, schema::layout_mark(shards).as_bytes())?;
    }
    Ok(())
}

/// The shards of the keyspace's counters: what its mark says or, for a
/// keyspace not laid out yet, what its host asks for. A writing verb has read
/// or written the mark before it writes, so the buffer answers this.
pub fn shards<K: Kv + ?Sized>(kv: &mut K) -> Result<Shards, StoreError> {
    let mark = kv.get(schema::layout().as_bytes())?;
    layout_shards(kv, mark.as_deref())
}

/// [`shards`], given the mark as read in a batch.
fn layout_shards<K: Kv + ?Sized>(kv: &mut K, mark: Option<&[u8]>) -> Result<Shards, StoreError> {
    Ok(match known_layout(mark)? {
        Some(shards) => shards,
        None => expected_shards(kv),
    })
}

/// The shards a verb reads ahead for before it has read the mark: those of
/// every keyspace its host laid out. Where the mark says otherwise, the verb
/// follows the mark and reads what it then needs.
pub fn expected_shards<K: Kv + ?Sized>(kv: &mut K) -> Shards {
    Shards::for_host(kv.concurrent_writers())
}

/// The shards the stored layout mark records, if it is one this component
/// reads, or `None` for a fresh keyspace. Split from [`check_layout`] so the
/// mark can ride in a batch a verb reads anyway.
pub fn known_layout(mark: Option<&[u8]>) -> Result<Option<Shards>, StoreError> {
    let Some(v) = mark else {
        return Ok(None);
    };
    if v == b"3" {
        return Ok(Some(
            Shards::by_row(schema::MAX_SHARDS).expect("64 is a shard count"),
        ));
    }
    let counted = match v {
        [b'4', b'/', n @ ..] => Some((n, Shards::by_row as fn(u8) -> Option<Shards>)),
        [b'5', b'/', n @ ..] => Some((n, Shards::new as fn(u8) -> Option<Shards>)),
        _ => None,
    };
    if let Some((n, shards)) = counted {
        // Only the canonical spelling of a count is read as it: no sign, no
        // leading zero, nothing after it.
        let shards = core::str::from_utf8(n)
            .ok()
            .filter(|n| !n.starts_with(['0', '+']))
            .and_then(|n| n.parse::<u8>().ok())
            .and_then(shards);
        return shards.map(Some).ok_or_else(|| {
            corrupt(format!(
                "the layout mark {:?} does not name a shard count from 1 to {}",
                String::from_utf8_lossy(v),
                schema::MAX_SHARDS
            ))
        });
    }
    Err(match v {
        b"1" => corrupt(format!(
            "the keyspace has layout 1 (JSON rows, written by Leasehold 0.1); this component \
             reads only layouts 3 to {}: export the data with the 0.1 component and open it \
             again",
            schema::LAYOUT_VERSION
        )),
        b"2" => corrupt(format!(
            "the keyspace has layout 2 (single-key counters, written by an earlier Leasehold \
             0.2 build); this component reads only layouts 3 to {} (sharded counters): export \
             the data with that build and open it again",
            schema::LAYOUT_VERSION
        )),
        _ => corrupt(format!(
            "the keyspace has layout {:?}; this component knows layouts 3 to {}",
            String::from_utf8_lossy(v),
            schema::LAYOUT_VERSION
        )),
    })
}

/// One batched read answering exactly one value per key, since values are
/// matched to their keys by position.
fn get_each<K: Kv + ?Sized>(
    kv: &mut K,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    checked_len(keys, kv.get_many(keys)?)
}

/// [`get_each`] for values the call reads again (the rows its writes replace,
/// the shards they move): kept by the store for the reads that follow.
fn get_kept<K: Kv + ?Sized>(
    kv: &mut K,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    checked_len(keys, kv.get_many_kept(keys)?)
}

fn checked_len(
    keys: &[Vec<u8>],
    values: Vec<Option<Vec<u8>>>,
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    if values.len() != keys.len() {
        return Err(StoreError::Storage(
            "get-many answered another number of values than keys".to_owned(),
        ));
    }
    Ok(values)
}

/// A stored shard: absent is zero, anything but eight bytes is damage, and
/// so is a shard below zero where shards are spread by row (there every
/// shard counts rows of its own).
fn shard_value(
    name: &str,
    shard: u8,
    value: Option<&[u8]>,
    shards: Shards,
) -> Result<i64, StoreError> {
    let Some(v) = value else {
        return Ok(0);
    };
    let raw: [u8; 8] = v.try_into().map_err(|_| {
        corrupt(format!(
            "counter {name}, shard {shard}, holds {} bytes, not 8",
            v.len()
        ))
    })?;
    let n = i64::from_be_bytes(raw);
    if n < 0 && !shards.by_writer() {
        return Err(corrupt(format!(
            "counter {name}, shard {shard}, is {n}, in a layout whose shards never go below zero"
        )));
    }
    Ok(n)
}

/// The value of counter `name`: the sum of its shards. The layout mark and
/// the shards the host's keyspaces have come in one batched read, and the
/// mark is checked before any shard is decoded; a keyspace whose mark names
/// more shards has the rest read after it.
pub fn read_counter<K: Kv + ?Sized>(kv: &mut K, name: &str) -> Result<u64, StoreError> {
    let expected = expected_shards(kv);
    let mut keys = Vec::with_capacity(usize::from(expected.count()) + 1);
    keys.push(schema::layout().into_bytes());
    keys.extend(expected.keys(name));
    let values = get_each(kv, &keys)?;
    let mut values = values.into_iter();
    let shards = layout_shards(kv, values.next().flatten().as_deref())?;
    let mut found: Vec<Option<Vec<u8>>> = values.take(usize::from(shards.count())).collect();
    if shards.count() > expected.count() {
        let rest = &shards.keys(name)[usize::from(expected.count())..];
        found.extend(get_each(kv, rest)?);
    }
    let mut total = 0i64;
    for (shard, v) in (0..shards.count()).zip(found) {
        total = total
            .checked_add(shard_value(name, shard, v.as_deref(), shards)?)
            .ok_or_else(|| corrupt(format!("counter {name}: its shards overflow when summed")))?;
    }
    u64::try_from(total).map_err(|_| {
        corrupt(format!(
            "counter {name}: its shards sum to {total}, below zero"
        ))
    })
}

/// One shard of counter `name`, among `shards`.
pub fn read_shard<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    shard: u8,
    shards: Shards,
) -> Result<i64, StoreError> {
    let v = kv.get(schema::counter_shard(name, shard).as_bytes())?;
    shard_value(name, shard, v.as_deref(), shards)
}

/// Moves one shard of counter `name`, among `shards`, by `delta`. Where
/// shards are spread by row a shard may never go below zero, so one that
/// would is damage.
pub fn add_to_counter<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    shard: u8,
    shards: Shards,
    delta: i64,
) -> Result<(), StoreError> {
    if delta == 0 {
        return Ok(());
    }
    let now = read_shard(kv, name, shard, shards)?;
    set_shard(kv, name, shard, shards, now, delta)
}

fn set_shard<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    shard: u8,
    shards: Shards,
    now: i64,
    delta: i64,
) -> Result<(), StoreError> {
    let next = now
        .checked_add(delta)
        .filter(|&n| n >= 0 || shards.by_writer())
        .ok_or_else(|| {
            corrupt(format!(
                "counter {name}, shard {shard}, is {now} and cannot move by {delta}"
            ))
        })?;
    Ok(kv.set(
        schema::counter_shard(name, shard).as_bytes(),
        &next.to_be_bytes(),
    )?)
}

/// Moves many shards of counter `name` at once, `deltas[s]` for shard `s`,
/// reading the shards that move in one batch: for a verb that moves rows of
/// many shards and learns which only as it walks them.
pub fn add_to_shards<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    shards: Shards,
    deltas: &[i64; schema::MAX_SHARDS as usize],
) -> Result<(), StoreError> {
    let moving: Vec<(u8, i64)> = (0..schema::MAX_SHARDS)
        .zip(deltas.iter().copied())
        .filter(|&(_, d)| d != 0)
        .collect();
    if moving.is_empty() {
        return Ok(());
    }
    let keys: Vec<Vec<u8>> = moving
        .iter()
        .map(|&(s, _)| schema::counter_shard(name, s).into_bytes())
        .collect();
    let values = get_each(kv, &keys)?;
    for (&(shard, delta), v) in moving.iter().zip(values) {
        let now = shard_value(name, shard, v.as_deref(), shards)?;
        set_shard(kv, name, shard, shards, now, delta)?;
    }
    Ok(())
}

/// The writer slot this call's contributions go by, among `shards`: a
/// keyspace of one shard needs no crossing to ask.
fn writer_slot<K: Kv + ?Sized>(kv: &mut K, shards: Shards) -> u32 {
    if shards.count() == 1 {
        0
    } else {
        kv.writer_slot()
    }
}

/// The shard this call moves for task `id`, among `shards`.
pub fn task_shard<K: Kv + ?Sized>(kv: &mut K, shards: Shards, id: &str) -> u8 {
    if shards.by_writer() {
        shards.writer(writer_slot(kv, shards))
    } else {
        shards.task(id)
    }
}

/// The shard this call moves for timer `(run, effect)`, among `shards`.
pub fn timer_shard<K: Kv + ?Sized>(kv: &mut K, shards: Shards, run: &str, effect: &str) -> u8 {
    if shards.by_writer() {
        shards.writer(writer_slot(kv, shards))
    } else {
        shards.timer(run, effect)
    }
}

/// The counter shards [`write_task`] may move for task `id`, among `shards`.
pub fn task_counter_keys<K: Kv + ?Sized>(kv: &mut K, id: &str, shards: Shards) -> [Vec<u8>; 2] {
    let shard = task_shard(kv, shards, id);
    [
        schema::counter_shard(schema::OPEN_TASKS, shard).into_bytes(),
        schema::counter_shard(schema::LEASED_CLAIMS, shard).into_bytes(),
    ]
}

/// The counter shard that arming or retiring timer `(run, effect)` moves,
/// among `shards`.
pub fn timer_counter_key<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    effect: &str,
    shards: Shards,
) -> Vec<u8> {
    schema::counter_shard(schema::ARMED_TIMERS, timer_shard(kv, shards, run, effect)).into_bytes()
}

/// Reads ahead, in one round trip, what a verb on one task may need: the
/// layout mark, the task's row and the counter shards [`write_task`] may
/// move (this writer's, so calls the host runs side by side never share a
/// key).
pub fn prefetch_task<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<(), StoreError> {
    let shards = expected_shards(kv);
    let [open, leased] = task_counter_keys(kv, id, shards);
    Ok(kv.prefetch(&[
        schema::layout().into_bytes(),
        schema::task(id).into_bytes(),
        open,
        leased,
    ])?)
}

pub fn load_task<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<TaskRow>, StoreError> {
    match kv.get(schema::task(id).as_bytes())? {
        Some(bytes) => task_from(id, &bytes).map(Some),
        None => Ok(None),
    }
}

/// Decodes the row stored under `id`, which must be that task's.
fn task_from(id: &str, bytes: &[u8]) -> Result<TaskRow, StoreError> {
    let row = decode_task(bytes).map_err(|e| corrupt(format!("task {id}: {e}")))?;
    if row.task.id != id {
        return Err(corrupt(format!(
            "task {id}: the row is stored under another id ({})",
            row.task.id
        )));
    }
    Ok(row)
}

pub fn decode_task(bytes: &[u8]) -> Result<TaskRow, RowError> {
    decode_row(bytes)
}

/// Loads, in one batched read, the tasks an index lists; a missing row is
/// damage.
pub fn indexed_tasks<K: Kv + ?Sized>(
    kv: &mut K,
    ids: &[String],
    index: &str,
) -> Result<Vec<Task>, StoreError> {
    Ok(indexed_rows(kv, ids, index, Along::default())?
        .into_iter()
        .map(|r| r.task)
        .collect())
}

/// What [`indexed_rows`] reads in the same batch as the rows, so that a verb
/// pays for them no round trip of their own.
#[derive(Clone, Copy, Debug, Default)]
pub struct Along {
    /// The layout mark, checked before any row is decoded (with no row to
    /// read, it is read alone).
    pub layout: bool,
    /// Each task's leased-claims shard, for a verb about to take or end a
    /// claim (which leaves the open count as it is). Such a verb writes the
    /// rows it reads, so the store keeps them and the shards for its writes.
    pub leased_shards: bool,
}

/// [`indexed_tasks`], answering the whole rows, with what `along` asks for.
pub fn indexed_rows<K: Kv + ?Sized>(
    kv: &mut K,
    ids: &[String],
    index: &str,
    along: Along,
) -> Result<Vec<TaskRow>, StoreError> {
    if ids.is_empty() {
        if along.layout {
            check_layout(kv, false)?;
        }
        return Ok(Vec::new());
    }
    let mut keys: Vec<Vec<u8>> = Vec::new();
    if along.layout {
        keys.push(schema::layout().into_bytes());
    }
    keys.extend(ids.iter().map(|id| schema::task(id).into_bytes()));
    if along.leased_shards {
        // Tasks share shards; each shard is asked for once.
        let expected = expected_shards(kv);
        let mut shards: Vec<u8> = ids.iter().map(|id| task_shard(kv, expected, id)).collect();
        shards.sort_unstable();
        shards.dedup();
        keys.extend(
            shards
                .into_iter()
                .map(|s| schema::counter_shard(schema::LEASED_CLAIMS, s).into_bytes()),
        );
    }
    let values = if along.leased_shards {
        get_kept(kv, &keys)?
    } else {
        get_each(kv, &keys)?
    };
    let mut values = values.into_iter();
    if along.layout {
        known_layout(values.next().flatten().as_deref())?;
    }
    // The counter shards, last in the batch, are left for the writes to read.
    ids.iter()
        .zip(values)
        .map(|(id, v)| match v {
            Some(bytes) => task_from(id, &bytes),
            None => Err(corrupt(format!(
                "{index} lists task {id}, which has no row"
            ))),
        })
        .collect()
}

/// Why a stored row does not decode.
#[derive(Debug)]
pub struct RowError(String);

impl core::fmt::Display for RowError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Rows are postcard: each field in declaration order, integers as varints,
/// strings and lists length-prefixed, enums by variant index. So a field is
/// only ever added at the end of a row, a variant only after the others, and
/// either means a new layout version.
pub fn encode_row(row: &impl Serialize) -> Result<Vec<u8>, StoreError> {
    postcard::to_allocvec(row).map_err(|e| StoreError::Storage(format!("cannot encode a row: {e}")))
}

/// Decodes a whole row: bytes left over mean the row is not what it seems.
fn decode_row<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, RowError> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((row, [])) => Ok(row),
        Ok((_, rest)) => Err(RowError(format!(
            "{} bytes left over after the row",
            rest.len()
        ))),
        Err(e) => Err(RowError(e.to_string())),
    }
}

/// Writes a task row and moves its index entries and counters from what
/// `old` implied to what `new` implies.
pub fn write_task<K: Kv + ?Sized>(
    kv: &mut K,
    old: Option<&TaskRow>,
    new: &TaskRow,
) -> Result<(), StoreError> {
    kv.set(schema::task(&new.task.id).as_bytes(), &encode_row(new)?)?;
    let before = old.map(TaskRow::index_keys).unwrap_or_default();
    let after = new.index_keys();
    for k in before.iter().filter(|k| !after.contains(k)) {
        kv.delete(k)?;
    }
    for k in after.iter().filter(|k| !before.contains(k)) {
        kv.set(k, &[])?;
    }
    // Spread by row, a row keeps its id, so old and new count in one shard.
    let shards = shards(kv)?;
    let shard = task_shard(kv, shards, &new.task.id);
    let was = old.is_some_and(|r| r.task.state.is_pending());
    let is = new.task.state.is_pending();
    add_to_counter(
        kv,
        schema::OPEN_TASKS,
        shard,
        shards,
        i64::from(is) - i64::from(was),
    )?;
    let was = old.is_some_and(TaskRow::is_leased);
    add_to_counter(
        kv,
        schema::LEASED_CLAIMS,
        shard,
        shards,
        i64::from(new.is_leased()) - i64::from(was),
    )
}

pub fn load_timer<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    effect: &str,
) -> Result<Option<TimerRow>, StoreError> {
    kv.get(schema::timer(run, effect).as_bytes())?
        .map(|bytes| timer_from(run, effect, &bytes))
        .transpose()
}

/// Loads, in one batched read, the timers `(run, effect)` names, each
/// checked to be stored under its own identity.
pub fn load_timers<'a, K: Kv + ?Sized>(
    kv: &mut K,
    ids: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> Result<Vec<Option<TimerRow>>, StoreError> {
    let keys: Vec<Vec<u8>> = ids
        .clone()
        .map(|(run, effect)| schema::timer(run, effect).into_bytes())
        .collect();
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let values = kv.get_many(&keys)?;
    ids.zip(values)
        .map(|((run, effect), v)| v.map(|bytes| timer_from(run, effect, &bytes)).transpose())
        .collect()
}

fn timer_from(run: &str, effect: &str, bytes: &[u8]) -> Result<TimerRow, StoreError> {
    let row = decode_timer(bytes).map_err(|e| corrupt(format!("timer {run}/{effect}: {e}")))?;
    if row.timer.run != run || row.timer.effect != effect {
        return Err(corrupt(format!(
            "timer {run}/{effect}: the row is stored under another identity"
        )));
    }
    Ok(row)
}

pub fn decode_timer(bytes: &[u8]) -> Result<TimerRow, RowError> {
    decode_row(bytes)
}

/// Writes a timer row, moving its due entry; `old` is what was stored.
pub fn write_timer<K: Kv + ?Sized>(
    kv: &mut K,
    old: Option<&TimerRow>,
    new: &TimerRow,
) -> Result<(), StoreError> {
    let t = &new.timer;
    kv.set(
        schema::timer(&t.run, &t.effect).as_bytes(),
        &encode_row(new)?,
    )?;
    let due = new.due_key();
    match old {
        Some(o) if o.due_key() == due => {}
        Some(o) => {
            kv.delete(o.due_key().as_bytes())?;
            kv.set(due.as_bytes(), &[])?;
        }
        None => {
            kv.set(due.as_bytes(), &[])?;
            let shards = shards(kv)?;
            let shard = timer_shard(kv, shards, &t.run, &t.effect);
            add_to_counter(kv, schema::ARMED_TIMERS, shard, shards, 1)?;
        }
    }
    Ok(())
}

/// Removes a timer with its due entry and its count.
pub fn retire_timer<K: Kv + ?Sized>(kv: &mut K, row: &TimerRow) -> Result<(), StoreError> {
    remove_timer(kv, row)?;
    let t = &row.timer;
    let shards = shards(kv)?;
    let shard = timer_shard(kv, shards, &t.run, &t.effect);
    add_to_counter(kv, schema::ARMED_TIMERS, shard, shards, -1)
}

/// Removes a timer with its due entry, leaving its count to the caller, who
/// moves many timers' shards at once with [`add_to_shards`].
pub fn remove_timer<K: Kv + ?Sized>(kv: &mut K, row: &TimerRow) -> Result<(), StoreError> {
    let t = &row.timer;
    kv.delete(schema::timer(&t.run, &t.effect).as_bytes())?;
    kv.delete(row.due_key().as_bytes())?;
    Ok(())
}

pub fn is_sealed<K: Kv + ?Sized>(kv: &mut K, run: &str) -> Result<bool, StoreError> {
    Ok(kv.get(schema::sealed(run).as_bytes())?.is_some())
}

/// Decodes the tuple that follows `prefix` in `key`.
pub fn suffix(key: &[u8], prefix: &Key) -> Result<Vec<Elem>, StoreError> {
    let rest = key
        .strip_prefix(prefix.as_bytes())
        .ok_or_else(|| corrupt("an index entry lies outside its range"))?;
    keys::decode(rest).map_err(|e| corrupt(format!("an index key does not decode: {e}")))
}

/// Walks every key of `prefix` in order, in chunks, calling `f` with each
/// entry; `f` answers whether to go on.
pub fn walk<K: Kv + ?Sized>(
    kv: &mut K,
    prefix: &Key,
    mut f: impl FnMut(&mut K, Vec<u8>, Vec<u8>) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let end = prefix.prefix_end();
    let mut start = prefix.as_bytes().to_vec();
    loop {
        let chunk = kv.scan(&start, Some(&end), SCAN_CHUNK, false)?;
        let full = chunk.len() == SCAN_CHUNK as usize;
        let Some(last) = chunk.last().map(|(k, _)| k.clone()) else {
            return Ok(());
        };
        for (k, v) in chunk {
            if !f(kv, k, v)? {
                return Ok(());
            }
        }
        if !full {
            return Ok(());
        }
        start = last;
        start.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemKv;
    use crate::model::{OnExpiry, Phase, Priority};

    fn full_task() -> Task {
        Task {
            id: "t-1".into(),
            run: "r".into(),
            case: Some("c é".into()),
            kind: "approve".into(),
            justification: r#"{"why":[1]}"#.into(),
            candidate_roles: vec!["reviewer".into()],
            assignee: Some("alice".into()),
            lease_until: Some(253_402_300_799_999 + 604_800_000),
            priority: Priority::Urgent,
            state: TaskState::Claimed,
            on_expiry: OnExpiry::Escalate,
            escalate_to: vec!["lead".into()],
            excluded_actors: vec!["mallory".into()],
            created_at: 5,
            due_at: Some(253_402_300_799_999),
        }
    }

    #[test]
    fn rows_round_trip_and_leftover_bytes_are_refused() {
        let row = TaskRow {
            task: full_task(),
            ever_escalated: true,
        };
        let mut bytes = encode_row(&row).expect("encodes");
        assert_eq!(decode_task(&bytes).expect("decodes"), row);
        bytes.push(0);
        assert!(decode_task(&bytes).is_err(), "a row with bytes left over");
        let timer = TimerRow {
            timer: Timer {
                run: "r".into(),
                case: None,
                effect: "e".into(),
                step: 3,
                phase: Phase::Compensating,
                fire_at: 42,
            },
            lease_until: Some(253_402_300_799_999 + 604_800_000),
        };
        let bytes = encode_row(&timer).expect("encodes");
        assert_eq!(decode_timer(&bytes).expect("decodes"), timer);
        assert!(decode_timer(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_task(b"").is_err());
    }

    /// The stored form of rows, unchanged since layout 2, is part of the
    /// layout: a change to it must be a new layout, so these bytes are pinned.
    #[test]
    fn the_layout_2_row_bytes_are_pinned() {
        let row = TaskRow {
            task: Task {
                id: "t".into(),
                run: "r".into(),
                case: None,
                kind: "k".into(),
                justification: "{}".into(),
                candidate_roles: vec!["a".into()],
                assignee: None,
                lease_until: None,
                priority: Priority::High,
                state: TaskState::Escalated,
                on_expiry: OnExpiry::Proceed,
                escalate_to: vec![],
                excluded_actors: vec![],
                created_at: 300,
                due_at: Some(-1),
            },
            ever_escalated: true,
        };
        assert_eq!(
            encode_row(&row).expect("encodes"),
            [
                1, b't', 1, b'r', 0, 1, b'k', 2, b'{', b'}', 1, 1, b'a', 0, 0, 2, 2, 2, 0, 0, 0xD8,
                0x04, 1, 1, 1
            ]
        );
        // A leased claim: the holder, then the lease end as a zigzag varint.
        let mut leased = row;
        leased.task.state = TaskState::Claimed;
        leased.task.assignee = Some("b".into());
        leased.task.lease_until = Some(5);
        assert_eq!(
            encode_row(&leased).expect("encodes"),
            [
                1, b't', 1, b'r', 0, 1, b'k', 2, b'{', b'}', 1, 1, b'a', 1, 1, b'b', 1, 10, 2, 1,
                2, 0, 0, 0xD8, 0x04, 1, 1, 1
            ]
        );
    }

    #[test]
    fn a_keyspace_in_the_0_1_layout_is_refused_by_name_never_misread() {
        let mut kv = MemKv::new();
        kv.map.insert(schema::layout().into_bytes(), b"1".to_vec());
        match check_layout(&mut kv, true) {
            Err(StoreError::Corrupt(d)) => {
                assert!(d.contains("layout 1") && d.contains("0.1"), "{d}");
            }
            other => panic!("expected corrupt, got {other:?}"),
        }
        assert_eq!(kv.map.len(), 1, "the refusal wrote");
    }

    /// Layout 2 kept each counter in one key, which layout 3 would read as
    /// zero: it must be refused, by name, before any counter is read.
    #[test]
    fn a_keyspace_in_the_layout_2_single_key_counters_is_refused_by_name() {
        let mut kv = MemKv::new();
        kv.map.insert(schema::layout().into_bytes(), b"2".to_vec());
        kv.map.insert(
            Key::new().str("count").str(schema::OPEN_TASKS).into_bytes(),
            5u64.to_be_bytes().to_vec(),
        );
        let before = kv.map.clone();
        for answer in [
            check_layout(&mut kv, true),
            read_counter(&mut kv, schema::OPEN_TASKS).map(drop),
            indexed_rows(
                &mut kv,
                &[],
                "an index",
                Along {
                    layout: true,
                    leased_shards: false,
                },
            )
            .map(drop),
        ] {
            match answer {
                Err(StoreError::Corrupt(d)) => {
                    assert!(
                        d.contains("layout 2") && d.contains("single-key counters"),
                        "{d}"
                    );
                    assert!(d.contains("only layouts 3 to 5"), "{d}");
                }
                other => panic!("expected corrupt, got {other:?}"),
            }
        }
        assert!(kv.map == before, "the refusal wrote");
    }

    #[test]
    fn a_counter_is_the_sum_of_its_shards_read_with_the_layout_in_one_batch() {
        let mut kv = MemKv::new();
        check_layout(&mut kv, true).expect("a fresh keyspace");
        let sh = Shards::SHARED;
        add_to_counter(&mut kv, schema::OPEN_TASKS, 0, sh, 3).expect("adds");
        add_to_counter(&mut kv, schema::OPEN_TASKS, 17, sh, 2).expect("adds");
        add_to_counter(&mut kv, schema::OPEN_TASKS, 63, sh, 1).expect("adds");
        add_to_counter(&mut kv, schema::OPEN_TASKS, 17, sh, -1).expect("subtracts");
        // Spread by writer, a shard may go below zero.
        add_to_counter(&mut kv, schema::OPEN_TASKS, 40, sh, -2).expect("subtracts");
        // Another counter's shards are not this one's.
        add_to_counter(&mut kv, schema::LEASED_CLAIMS, 5, sh, 9).expect("adds");
        kv.calls = Default::default();
        assert_eq!(read_counter(&mut kv, schema::OPEN_TASKS), Ok(3));
        assert_eq!(kv.calls.get_manys, 1, "{:?}", kv.calls);
        assert_eq!(kv.calls.round_trips(), 1, "{:?}", kv.calls);
        assert_eq!(kv.calls.batched_keys, 65, "{:?}", kv.calls);
        assert_eq!(read_shard(&mut kv, schema::OPEN_TASKS, 17, sh), Ok(1));
        assert_eq!(read_shard(&mut kv, schema::OPEN_TASKS, 40, sh), Ok(-2));
        assert_eq!(read_counter(&mut kv, schema::LEASED_CLAIMS), Ok(9));
        assert_eq!(read_counter(&mut kv, schema::ARMED_TIMERS), Ok(0));
    }

    #[test]
    fn a_counter_whose_shards_sum_below_zero_is_corrupt() {
        let mut kv = MemKv::new();
        check_layout(&mut kv, true).expect("a fresh keyspace");
        add_to_counter(&mut kv, schema::OPEN_TASKS, 3, Shards::SHARED, 1).expect("adds");
        add_to_counter(&mut kv, schema::OPEN_TASKS, 4, Shards::SHARED, -2).expect("moves");
        match read_counter(&mut kv, schema::OPEN_TASKS) {
            Err(StoreError::Corrupt(d)) => assert!(d.contains("sum to -1"), "{d}"),
            other => panic!("expected corrupt, got {other:?}"),
        }
    }

    #[test]
    fn spread_by_row_a_shard_never_goes_below_zero_even_when_the_sum_could() {
        let mut kv = MemKv::new();
        kv.map
            .insert(schema::layout().into_bytes(), b"4/64".to_vec());
        let sh = Shards::by_row(64).expect("64 shards");
        add_to_counter(&mut kv, schema::OPEN_TASKS, 1, sh, 4).expect("adds");
        let before = kv.map.clone();
        match add_to_counter(&mut kv, schema::OPEN_TASKS, 2, sh, -1) {
            Err(StoreError::Corrupt(d)) => assert!(d.contains("shard 2"), "{d}"),
            other => panic!("expected corrupt, got {other:?}"),
        }
        let mut deltas = [0i64; schema::MAX_SHARDS as usize];
        deltas[1] = -1;
        deltas[2] = -1;
        assert!(matches!(
            add_to_shards(&mut kv, schema::OPEN_TASKS, sh, &deltas),
            Err(StoreError::Corrupt(_))
        ));
        kv.map = before;
        deltas[2] = 0;
        add_to_shards(&mut kv, schema::OPEN_TASKS, sh, &deltas).expect("moves");
        assert_eq!(read_counter(&mut kv, schema::OPEN_TASKS), Ok(3));
        // A negative shard where shards are spread by row is damage.
        kv.map.insert(
            schema::counter_shard(schema::OPEN_TASKS, 9).into_bytes(),
            (-1i64).to_be_bytes().to_vec(),
        );
        match read_counter(&mut kv, schema::OPEN_TASKS) {
            Err(StoreError::Corrupt(d)) => assert!(d.contains("shard 9"), "{d}"),
            other => panic!("expected corrupt, got {other:?}"),
        }
    }

    #[test]
    fn a_shard_of_the_wrong_width_is_corrupt_never_zero() {
        for width in [0, 1, 7, 9] {
            let mut kv = MemKv::new();
            kv.map.insert(
                schema::counter_shard(schema::ARMED_TIMERS, 40).into_bytes(),
                vec![0; width],
            );
            for answer in [
                read_counter(&mut kv, schema::ARMED_TIMERS).map(drop),
                read_shard(&mut kv, schema::ARMED_TIMERS, 40, Shards::SHARED).map(drop),
            ] {
                match answer {
                    Err(StoreError::Corrupt(d)) => {
                        assert!(d.contains("armed-timers") && d.contains("shard 40"), "{d}");
                    }
                    other => panic!("width {width}: expected corrupt, got {other:?}"),
                }
            }
            assert!(add_to_counter(&mut kv, schema::ARMED_TIMERS, 40, Shards::SHARED, 1).is_err());
        }
    }
}
