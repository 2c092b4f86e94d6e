//! What happens when a schedule's occurrence is claimed or disarmed: the
//! catch-up and overlap policies, and arming the next occurrence in the
//! same transaction, so no occurrence is lost or doubled whichever host
//! claims it and whenever one crashes. Called by the timer verbs on the
//! timers whose effect keys name a schedule's occurrence; never reads a
//! clock (the claim's `now` is the caller's).

#[allow(unused_imports)]
use crate::prelude::*;

use crate::calendar::Admission;
use crate::kv::Kv;
use crate::model::StoreError;
use crate::store::{self, TimerRow};

use crate::time::Timestamp;

use super::row::{self, ScheduleRow, effect_of, parse_effect};

/// An occurrence claimed within this long after its firing instant is on
/// time; one claimed later was missed, and the schedule's catch-up policy
/// decides (Quartz's misfire threshold has the same default).
pub const GRACE_MS: i64 = 60_000;

/// What claiming a timer decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claimed {
    /// `claim-due` hands the timer out (else it retires it).
    pub fire: bool,
    /// The next occurrence armed is already due: the same sweep may take it.
    pub next_due: bool,
}

/// What `claim-due` does with a timer it is claiming at `now`, `timer` as
/// it was before the claim. A timer that is not its schedule's armed occurrence
/// (a trigger's, one let out of waiting, one claimed again after its lease
/// lapsed, or no schedule's) always is. The schedule's armed occurrence
/// fires if it is on time or the catch-up policy keeps it, and the overlap
/// policy admits it; either way the next occurrence is armed now.
pub fn on_claim<K: Kv + ?Sized>(
    kv: &mut K,
    now: Timestamp,
    timer: &TimerRow,
) -> Result<Claimed, StoreError> {
    let plain = Claimed {
        fire: true,
        next_due: false,
    };
    let Some((id, nominal)) = parse_effect(&timer.timer.effect) else {
        return Ok(plain);
    };
    let Some(mut sched) = row::load(kv, id)? else {
        return Ok(plain);
    };
    if sched.def.run != timer.timer.run || sched.next != Some(nominal) {
        return Ok(plain);
    }
    let schedule = sched.schedule()?;
    let on_time = now <= timer.timer.fire_at.saturating_add(GRACE_MS);
    let (fire, next) = if on_time {
        (true, schedule.next_after(nominal))
    } else {
        // Missed: the catch-up plan from this occurrence on says which one
        // fires first, if any. It is this one, or a later one still within
        // the window, armed now (due at once) to fire on the next claim.
        let plan = schedule.catch_up(nominal - 1, now, 1);
        match plan.fire.first() {
            Some(&first) if first == nominal => (true, schedule.next_after(nominal)),
            Some(&first) => (false, Some(first)),
            None => (false, plan.next),
        }
    };
    let mut fires = false;
    if fire {
        let running = running(kv, &sched)?;
        match sched.def.spec.overlap.admit(running, sched.waiting.len()) {
            Admission::Start => {
                sched.running = Some(nominal);
                sched.last = Some(nominal);
                fires = true;
            }
            Admission::Wait => sched.waiting.push(nominal),
            Admission::Drop => {}
        }
    }
    sched.next = next;
    let mut next_due = false;
    if let Some(n) = next {
        next_due = row::arm_occurrence(kv, "claim-due", &sched, &schedule, n)?.fire_at <= now;
    }
    sched.revision += 1;
    row::save(kv, &sched)?;
    Ok(Claimed {
        fire: fires,
        next_due,
    })
}

/// After `disarm` retired `timer`: the occurrence's work is done. If it was
/// the one running, the oldest waiting occurrence is armed (due at once)
/// and runs next; if it was the armed next one, that occurrence is skipped
/// and the one after it armed.
pub fn on_disarm<K: Kv + ?Sized>(kv: &mut K, timer: &TimerRow) -> Result<(), StoreError> {
    let Some((id, nominal)) = parse_effect(&timer.timer.effect) else {
        return Ok(());
    };
    let Some(mut sched) = row::load(kv, id)? else {
        return Ok(());
    };
    if sched.def.run != timer.timer.run {
        return Ok(());
    }
    let schedule = sched.schedule()?;
    if sched.running == Some(nominal) {
        sched.running = None;
        if !sched.waiting.is_empty() {
            let w = sched.waiting.remove(0);
            let mut t = sched.occurrence(&schedule, w);
            // Let out now: it has waited past its own instant.
            t.fire_at = t.fire_at.min(kv.call_time().max(0));
            row::arm_timer(kv, "disarm", t)?;
            sched.running = Some(w);
            sched.last = Some(w);
        }
    } else if sched.next == Some(nominal) && sched.paused.is_none() {
        sched.next = schedule.next_after(nominal);
        if let Some(n) = sched.next {
            row::arm_occurrence(kv, "disarm", &sched, &schedule, n)?;
        }
    } else {
        return Ok(());
    }
    sched.revision += 1;
    row::save(kv, &sched)
}

/// After `seal` or `disarm-run` retired every timer of `timer`'s run: a
/// schedule whose armed or running occurrence that was has ended (nothing
/// of it is armed any more, and a sealed run takes no new timer), so its
/// row says so (no next occurrence, nothing waiting) rather than showing an
/// instant that will never fire.
pub fn on_run_retired<K: Kv + ?Sized>(kv: &mut K, timer: &TimerRow) -> Result<(), StoreError> {
    let Some((id, nominal)) = parse_effect(&timer.timer.effect) else {
        return Ok(());
    };
    let Some(mut sched) = row::load(kv, id)? else {
        return Ok(());
    };
    if sched.def.run != timer.timer.run
        || (sched.next != Some(nominal) && sched.running != Some(nominal))
    {
        return Ok(());
    }
    if sched.next == Some(nominal) {
        sched.next = None;
    }
    if sched.running == Some(nominal) {
        sched.running = None;
    }
    sched.waiting.clear();
    sched.revision += 1;
    row::save(kv, &sched)
}

/// Whether the occurrence that fired last is still claimed and not done:
/// its timer is still armed (whoever fires it disarms it when done).
fn running<K: Kv + ?Sized>(kv: &mut K, sched: &ScheduleRow) -> Result<bool, StoreError> {
    match sched.running {
        Some(r) => {
            Ok(store::load_timer(kv, &sched.def.run, &effect_of(&sched.def.id, r))?.is_some())
        }
        None => Ok(false),
    }
}
