//! `reschedule`: an armed timer moved to a new instant in one call, keeping
//! its identity and its feed history. It owns when a move is refused (a
//! sealed run, a sweeper's unexpired lease without `take-back`); storing
//! the row and its due entry is the store's.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{TimerError, TimerEvent, TimerInfo, Timestamp};
use crate::schema;
use crate::store::{self, TimerRow};
use crate::validate;

pub fn reschedule<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    effect: &str,
    fire_at: Timestamp,
    take_back: bool,
) -> Result<TimerInfo, TimerError> {
    validate::name("run", run)?;
    validate::name("effect", effect)?;
    validate::timestamp("fire-at", fire_at)?;
    let shards = store::expected_shards(kv);
    let head = schema::feed_head(shards, store::feed_slot_of(kv, shards)).into_bytes();
    kv.prefetch(&[
        schema::layout().into_bytes(),
        schema::sealed(run).into_bytes(),
        schema::timer(run, effect).into_bytes(),
        schema::timer_log(run, effect).into_bytes(),
        head,
    ])?;
    // Read-only until the move is allowed: a refusal writes nothing (not
    // even a fresh keyspace's mark; a timer's row implies one).
    store::check_layout(kv, false)?;
    if store::is_sealed(kv, run)? {
        return Err(TimerError::RunSealed);
    }
    let row = store::load_timer(kv, run, effect)?.ok_or(TimerError::NotFound)?;
    // A lease that has ended holds nothing: the timer is claimable again,
    // and moving it is as safe as moving one never claimed.
    let now = kv.call_time();
    if let Some(until) = row.lease_until
        && until > now
        && !take_back
    {
        return Err(TimerError::Held(until));
    }
    if row.lease_until.is_none() && row.timer.fire_at == fire_at {
        return Ok(info(row));
    }
    let mut next = TimerRow {
        timer: row.timer.clone(),
        lease_until: None,
    };
    next.timer.fire_at = fire_at;
    store::write_timer(kv, "reschedule", TimerEvent::Rescheduled, Some(&row), &next)?;
    Ok(info(next))
}

pub(super) fn info(row: TimerRow) -> TimerInfo {
    TimerInfo {
        timer: row.timer,
        lease_until: row.lease_until,
    }
}
