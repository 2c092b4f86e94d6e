//! Durable timers under leases.
//!
//! The due index holds one entry per armed timer at the instant it becomes
//! claimable: its `fire-at`, or its lease expiry while a sweeper holds it.
//! Claiming moves the entry to the lease expiry, so everything in the index at
//! or before `now` is claimable: a sweep reads O(limit) entries however many
//! timers are held, a held timer can never hide a due one, and a dead
//! sweeper's timers come back by themselves when the lease lapses.
//! Moving a timer and listing timers are [`moves`] and [`listings`].

#[allow(unused_imports)]
use crate::prelude::*;
use alloc::collections::BTreeMap;

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{ArmOutcome, StoreError, Timer, TimerEvent, Timestamp};
use crate::schedules;
use crate::schema;
use crate::store::{self, TimerRow};
use crate::validate;

mod due_index;
mod listings;
mod moves;

use due_index::{due_entry, indexed_row};

pub use listings::{due_between, timers_of};
pub use moves::reschedule;

pub fn arm<K: Kv + ?Sized>(kv: &mut K, timer: &Timer) -> Result<ArmOutcome, StoreError> {
    validate::timer(timer)?;
    let shards = store::expected_shards(kv);
    let shard = store::timer_counter_key(kv, &timer.run, &timer.effect, shards);
    let head = schema::feed_head(shards, store::feed_slot_of(kv, shards)).into_bytes();
    kv.prefetch(&[
        schema::layout().into_bytes(),
        schema::sealed(&timer.run).into_bytes(),
        schema::timer(&timer.run, &timer.effect).into_bytes(),
        shard,
        schema::timer_log(&timer.run, &timer.effect).into_bytes(),
        head,
    ])?;
    store::check_layout(kv, true)?;
    if store::is_sealed(kv, &timer.run)? {
        return Ok(ArmOutcome::RunSealed);
    }
    // First arming wins: re-arming must not move a timer somebody may already
    // hold.
    if store::load_timer(kv, &timer.run, &timer.effect)?.is_some() {
        return Ok(ArmOutcome::AlreadyArmed);
    }
    let row = TimerRow {
        timer: timer.clone(),
        lease_until: None,
    };
    store::write_timer(kv, "arm", TimerEvent::Armed, None, &row)?;
    Ok(ArmOutcome::Armed)
}

pub fn claim_due<K: Kv + ?Sized>(
    kv: &mut K,
    now: Timestamp,
    limit: u32,
    lease_ms: u32,
) -> Result<Vec<Timer>, StoreError> {
    validate::timestamp("now", now)?;
    validate::limit("limit", limit)?;
    validate::lease(lease_ms)?;
    store::check_layout(kv, true)?;
    let shards = store::shards(kv)?;
    // Never clamped: a lease is as long as it was asked to be, even when it
    // ends past the last instant a caller can name (s64 has room).
    let lease_until = now + i64::from(lease_ms);
    let prefix = schema::due();
    let end = prefix.clone().int(now).prefix_end();
    let mut start = prefix.as_bytes().to_vec();
    let mut sealed: BTreeMap<String, bool> = BTreeMap::new();
    let mut out = Vec::new();
    let mut more_due = false;
    // Each pass claims what it reads, with one batched read of the timers'
    // rows and one of their runs' seals; only timers of sealed runs (retired,
    // not returned) make another pass necessary.
    while out.len() < limit as usize {
        let want = limit - out.len() as u32;
        let entries = kv.scan(&start, Some(&end), want, false)?;
        let exhausted = entries.len() < want as usize;
        let listed = entries
            .iter()
            .map(|(k, _)| due_entry(k, &prefix))
            .collect::<Result<Vec<_>, _>>()?;
        let mut runs: Vec<&String> = listed
            .iter()
            .map(|(_, run, _)| run)
            .filter(|run| !sealed.contains_key(*run))
            .collect();
        runs.sort();
        runs.dedup();
        let marks: Vec<Vec<u8>> = runs
            .iter()
            .map(|r| schema::sealed(r).into_bytes())
            .collect();
        let known: Vec<String> = runs.into_iter().cloned().collect();
        if !marks.is_empty() {
            for (run, mark) in known.into_iter().zip(kv.get_many(&marks)?) {
                sealed.insert(run, mark.is_some());
            }
        }
        // The counter shards of timers about to be retired, and the logs of
        // those and of schedules' occurrences (recorded one at a time), are
        // read ahead; the rows come in one batched read, and the claims'
        // logs in another when they are recorded, neither kept, since each
        // is read once.
        let mut ahead: Vec<Vec<u8>> = Vec::new();
        let mut shard_keys: Vec<Vec<u8>> = Vec::new();
        for (_, r, e) in &listed {
            let retired = sealed.get(r).copied().unwrap_or(false);
            if retired {
                shard_keys.push(store::timer_counter_key(kv, r, e, shards));
            }
            if retired || e.starts_with("schedule/") {
                ahead.push(schema::timer_log(r, e).into_bytes());
            }
        }
        shard_keys.sort_unstable();
        shard_keys.dedup();
        ahead.extend(shard_keys);
        kv.prefetch(&ahead)?;
        let rows = store::load_timers(kv, listed.iter().map(|(_, r, e)| (r.as_str(), e.as_str())))?;
        // The claims of a pass are recorded together, in order, before any
        // other change this call records (a retirement, a schedule's next
        // occurrence), so the feed holds what one record per claim would.
        let mut claimed: Vec<TimerRow> = Vec::new();
        for ((at, run, effect), row) in listed.iter().zip(rows) {
            let row = indexed_row(row, *at, run, effect)?;
            // A sealed run can record no wake-up: retired here, or it would
            // be claimed and fail once per lease period for ever.
            if sealed.get(run).copied().unwrap_or(false) {
                record_claims(kv, &mut claimed, &mut out)?;
                store::retire_timer(kv, "claim-due", &row)?;
                continue;
            }
            // A schedule's occurrence: its policies may hold it back, and
            // the next one is armed in this transaction either way.
            if row.timer.effect.starts_with("schedule/") {
                record_claims(kv, &mut claimed, &mut out)?;
                let fired = schedules::firing::on_claim(kv, now, &row)?;
                more_due |= fired.next_due;
                if !fired.fire {
                    store::retire_timer(kv, "claim-due", &row)?;
                    continue;
                }
            }
            let old_due = row.due_key();
            let mut next = row;
            next.lease_until = Some(lease_until);
            store::rewrite_timer_row(kv, old_due, &next)?;
            claimed.push(next);
        }
        record_claims(kv, &mut claimed, &mut out)?;
        match entries.last() {
            // A schedule's next occurrence armed due at once lies after
            // the entries read: read on for it even past their end.
            Some((k, _)) if !exhausted || core::mem::take(&mut more_due) => {
                start = k.clone();
                start.push(0);
            }
            _ => break,
        }
    }
    Ok(out)
}

/// Records the claims written since the last record, in order, and hands
/// their timers to the answer.
fn record_claims<K: Kv + ?Sized>(
    kv: &mut K,
    claimed: &mut Vec<TimerRow>,
    out: &mut Vec<Timer>,
) -> Result<(), StoreError> {
    store::record_timers(kv, "claim-due", TimerEvent::Claimed, claimed)?;
    out.extend(claimed.drain(..).map(|r| r.timer));
    Ok(())
}

pub fn disarm<K: Kv + ?Sized>(kv: &mut K, run: &str, effect: &str) -> Result<bool, StoreError> {
    validate::name("run", run)?;
    validate::name("effect", effect)?;
    let shards = store::expected_shards(kv);
    let shard = store::timer_counter_key(kv, run, effect, shards);
    let head = schema::feed_head(shards, store::feed_slot_of(kv, shards)).into_bytes();
    kv.prefetch(&[
        schema::layout().into_bytes(),
        schema::timer(run, effect).into_bytes(),
        shard,
        schema::timer_log(run, effect).into_bytes(),
        head,
    ])?;
    store::check_layout(kv, true)?;
    match store::load_timer(kv, run, effect)? {
        Some(row) => {
            store::retire_timer(kv, "disarm", &row)?;
            if row.timer.effect.starts_with("schedule/") {
                schedules::firing::on_disarm(kv, &row)?;
            }
            Ok(true)
        }
        None => Ok(false),
    }
}

pub fn disarm_run<K: Kv + ?Sized>(kv: &mut K, run: &str) -> Result<u32, StoreError> {
    validate::name("run", run)?;
    store::check_layout(kv, true)?;
    retire_run(kv, "disarm-run", run)
}

/// Retires every timer of `run`, as `verb` does, reading only that run's
/// range. The run's timers count in many shards, learnt only as the walk
/// meets them, so the counts are gathered and the shards moved with one
/// batched read at the end; their logs are read a walk's chunk at a time.
pub(crate) fn retire_run<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    run: &str,
) -> Result<u32, StoreError> {
    let mut retired = 0u32;
    let shards = store::shards(kv)?;
    let mut by_shard = [0i64; schema::MAX_SHARDS as usize];
    let mut rows = Vec::new();
    store::walk(kv, &schema::timers_of(run), |_, _, value| {
        let row = store::decode_timer(&value)
            .map_err(|e| StoreError::Corrupt(format!("a timer of run {run}: {e}")))?;
        rows.push(row);
        Ok(true)
    })?;
    for chunk in rows.chunks(store::SCAN_CHUNK as usize) {
        let logs: Vec<Vec<u8>> = chunk
            .iter()
            .map(|r| schema::timer_log(&r.timer.run, &r.timer.effect).into_bytes())
            .collect();
        kv.prefetch(&logs)?;
        for row in chunk {
            store::remove_timer(kv, verb, row)?;
            if row.timer.effect.starts_with("schedule/") {
                schedules::firing::on_run_retired(kv, row)?;
            }
            by_shard[usize::from(store::timer_shard(
                kv,
                shards,
                &row.timer.run,
                &row.timer.effect,
            ))] -= 1;
            retired += 1;
        }
    }
    store::add_to_shards(kv, schema::ARMED_TIMERS, shards, &by_shard)?;
    Ok(retired)
}

/// Checks the layout too: the mark rides in the batch of shards.
pub fn pending_count<K: Kv + ?Sized>(kv: &mut K) -> Result<u64, StoreError> {
    store::read_counter(kv, schema::ARMED_TIMERS)
}

pub fn next_due<K: Kv + ?Sized>(kv: &mut K) -> Result<Option<Timestamp>, StoreError> {
    store::check_layout(kv, false)?;
    let prefix = schema::due();
    let first = kv.scan(prefix.as_bytes(), Some(&prefix.prefix_end()), 1, false)?;
    match first.first() {
        None => Ok(None),
        Some((k, _)) => match store::suffix(k, &prefix)?.first() {
            Some(Elem::Int(at)) => Ok(Some(*at)),
            _ => Err(StoreError::Corrupt(
                "an entry of the due index has the wrong shape".into(),
            )),
        },
    }
}
