//! Recurring schedules (WIT `schedules`): a [`calendar`](crate::calendar)
//! spec bound to a run, whose occurrences are armed one at a time as
//! ordinary timers `(run, "schedule/<id>/<instant>")`. Claiming the armed
//! occurrence arms the next in the same transaction ([`firing`]), so the
//! schedule never has two armed occurrences of its own, never skips one a
//! crash interrupted, and every host computes the same instants.
//!
//! This module owns the schedule verbs and the row; the instants are the
//! calendar's, and claiming and leases stay the timer verbs'. It never
//! reads a clock: every `now` is the caller's.

#[allow(unused_imports)]
use crate::prelude::*;

pub mod firing;
mod row;

use row::ScheduleRow;
pub use row::{MAX_ID_CHARS, ScheduleDef, effect_of, parse_effect};

use crate::calendar;
use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{StoreError, Timer};
use crate::schema;
use crate::store;
use crate::time::Timestamp;
use crate::validate::{self, invalid};

/// A schedule as the verbs answer it (WIT `schedule`): the row without
/// what only the rules read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Schedule {
    pub def: ScheduleDef,
    /// The note it was paused with; none while it runs.
    pub paused: Option<String>,
    /// The occurrence armed next, before jitter; none while paused or once
    /// the schedule has ended.
    pub next_at: Option<Timestamp>,
    /// The last occurrence that fired.
    pub last_at: Option<Timestamp>,
    /// Occurrences the overlap policy keeps waiting, oldest first.
    pub waiting: Vec<Timestamp>,
    pub revision: u64,
}

impl From<ScheduleRow> for Schedule {
    fn from(r: ScheduleRow) -> Schedule {
        Schedule {
            def: r.def,
            paused: r.paused,
            next_at: r.next,
            last_at: r.last,
            waiting: r.waiting,
            revision: r.revision,
        }
    }
}

/// What the consistency check finds wrong with schedule `id`'s stored row
/// `bytes`: it decodes under its own id; its spec still checks; a paused
/// one has nothing armed next; and the occurrence it names as armed next
/// has its timer (every verb arms it in the call that names it, and `seal`
/// and `disarm-run` end the schedule in the call that retires it). Empty:
/// sound.
pub fn findings<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    bytes: &[u8],
) -> Result<Vec<String>, StoreError> {
    let row = match row::decode_listed(id, bytes) {
        Ok(row) => row,
        Err(StoreError::Corrupt(d)) => return Ok(vec![d]),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    if let Err(StoreError::Corrupt(d)) = row.schedule() {
        out.push(d);
    }
    if let Some(n) = row.next {
        if row.paused.is_some() {
            out.push(format!("paused, yet occurrence {n} is named as armed next"));
        }
        let effect = effect_of(id, n);
        if store::load_timer(kv, &row.def.run, &effect)?.is_none() {
            out.push(format!(
                "the occurrence armed next ({n}) has no timer (run {}, effect {effect})",
                row.def.run
            ));
        }
    }
    Ok(out)
}

/// One page of schedules, and the cursor for the next (none at the end).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SchedulePage {
    pub schedules: Vec<Schedule>,
    pub next: Option<String>,
}

/// The most occurrences `next-occurrences` computes in one call.
pub const MAX_OCCURRENCES: u32 = 1000;
/// The longest pause note, in characters.
pub const MAX_NOTE_CHARS: usize = 1024;

fn check_id(id: &str) -> Result<(), StoreError> {
    validate::name("id", id)?;
    let chars = id.chars().count();
    if chars > MAX_ID_CHARS {
        return Err(invalid(format!(
            "id is {chars} characters, more than {MAX_ID_CHARS} (a schedule's id goes into its occurrences' effect keys)"
        )));
    }
    Ok(())
}

fn existing<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<ScheduleRow, StoreError> {
    row::load(kv, id)?.ok_or_else(|| StoreError::NotFound(id.to_owned()))
}

/// `add-schedule`: checks the spec, stores the schedule and arms its first
/// occurrence at or after `now`.
pub fn add<K: Kv + ?Sized>(
    kv: &mut K,
    def: &ScheduleDef,
    now: Timestamp,
) -> Result<Schedule, StoreError> {
    check_id(&def.id)?;
    validate::name("run", &def.run)?;
    if let Some(case) = &def.case {
        validate::name("case", case)?;
    }
    validate::timestamp("now", now)?;
    let schedule = calendar::Schedule::new(def.spec.clone()).map_err(|e| invalid(e.to_string()))?;
    store::check_layout(kv, true)?;
    if row::load(kv, &def.id)?.is_some() {
        return Err(invalid(format!("id: schedule {} exists", def.id)));
    }
    if store::is_sealed(kv, &def.run)? {
        return Err(invalid(format!(
            "run: run {} is sealed and takes no wake-up",
            def.run
        )));
    }
    // A row only a layout-10 build reads: the mark moves with it.
    store::claim_layout(kv)?;
    let row = ScheduleRow {
        def: ScheduleDef {
            spec: schedule.spec().clone(),
            ..def.clone()
        },
        paused: None,
        next: schedule.next_after(now - 1),
        last: None,
        running: None,
        waiting: Vec::new(),
        revision: 1,
    };
    if let Some(n) = row.next {
        row::arm_occurrence(kv, "add-schedule", &row, &schedule, n)?;
    }
    row::save(kv, &row)?;
    Ok(row.into())
}

/// `remove-schedule`: the row, its armed occurrence unless a sweeper holds
/// it, and what waits.
pub fn remove<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<bool, StoreError> {
    check_id(id)?;
    store::check_layout(kv, true)?;
    let Some(sched) = row::load(kv, id)? else {
        return Ok(false);
    };
    if let Some(n) = sched.next {
        row::retire_unclaimed(kv, "remove-schedule", &sched, n)?;
    }
    kv.delete(schema::schedule(id).as_bytes())?;
    Ok(true)
}

/// `pause-schedule`: retires the armed occurrence (unless held) and what
/// waits; nothing fires until `resume-schedule`.
pub fn pause<K: Kv + ?Sized>(kv: &mut K, id: &str, note: &str) -> Result<Schedule, StoreError> {
    check_id(id)?;
    let chars = note.chars().count();
    if chars == 0 || chars > MAX_NOTE_CHARS {
        return Err(invalid(format!(
            "note is {chars} characters; it must be 1-{MAX_NOTE_CHARS}"
        )));
    }
    validate::text("note", note)?;
    store::check_layout(kv, true)?;
    let mut sched = existing(kv, id)?;
    if sched.paused.as_deref() == Some(note) {
        return Ok(sched.into());
    }
    if let Some(n) = sched.next.take() {
        row::retire_unclaimed(kv, "pause-schedule", &sched, n)?;
    }
    sched.waiting.clear();
    sched.paused = Some(note.to_owned());
    sched.revision += 1;
    row::save(kv, &sched)?;
    Ok(sched.into())
}

/// `resume-schedule`: arms the next occurrence at or after `now`; what
/// fell in the pause does not fire.
pub fn resume<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    now: Timestamp,
) -> Result<Schedule, StoreError> {
    check_id(id)?;
    validate::timestamp("now", now)?;
    store::check_layout(kv, true)?;
    let mut sched = existing(kv, id)?;
    if sched.paused.is_none() {
        return Ok(sched.into());
    }
    let schedule = sched.schedule()?;
    sched.paused = None;
    sched.next = schedule.next_after(now - 1);
    if let Some(n) = sched.next {
        row::arm_occurrence(kv, "resume-schedule", &sched, &schedule, n)?;
    }
    sched.revision += 1;
    row::save(kv, &sched)?;
    Ok(sched.into())
}

/// `trigger-schedule`: an extra occurrence at `now`, beside the
/// schedule's own; the schedule's row does not change.
pub fn trigger<K: Kv + ?Sized>(kv: &mut K, id: &str, now: Timestamp) -> Result<Timer, StoreError> {
    check_id(id)?;
    validate::timestamp("now", now)?;
    store::check_layout(kv, true)?;
    let sched = existing(kv, id)?;
    if store::is_sealed(kv, &sched.def.run)? {
        return Err(invalid(format!(
            "run: run {} is sealed and takes no wake-up",
            sched.def.run
        )));
    }
    let mut timer = sched.occurrence(&sched.schedule()?, now);
    // Now, not jittered: a trigger asks for it now.
    timer.fire_at = now;
    row::arm_timer(kv, "trigger-schedule", timer)
}

/// `next-occurrences`: up to `n` instants after `after`, before jitter.
pub fn next_occurrences<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    after: Timestamp,
    n: u32,
) -> Result<Vec<Timestamp>, StoreError> {
    check_id(id)?;
    validate::timestamp("after", after)?;
    if n == 0 || n > MAX_OCCURRENCES {
        return Err(invalid(format!("n is {n}; it must be 1-{MAX_OCCURRENCES}")));
    }
    store::check_layout(kv, false)?;
    let schedule = existing(kv, id)?.schedule()?;
    Ok(schedule.occurrences_after(after).take(n as usize).collect())
}

pub fn get<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<Schedule>, StoreError> {
    check_id(id)?;
    store::check_layout(kv, false)?;
    Ok(row::load(kv, id)?.map(Into::into))
}

/// `list-schedules`: by id, after the cursor (the last id of the page
/// before); the cursor of the next page when another follows.
pub fn list<K: Kv + ?Sized>(
    kv: &mut K,
    limit: u32,
    after: Option<&str>,
) -> Result<SchedulePage, StoreError> {
    validate::limit("limit", limit)?;
    if let Some(a) = after {
        validate::name("after", a)?;
    }
    store::check_layout(kv, false)?;
    let prefix = schema::schedules();
    let start = match after {
        Some(a) => schema::schedule(a).successor(),
        None => prefix.as_bytes().to_vec(),
    };
    // One entry past the page says whether another page follows.
    let entries = kv.scan(&start, Some(&prefix.prefix_end()), limit + 1, false)?;
    let more = entries.len() > limit as usize;
    let mut out: Vec<Schedule> = Vec::with_capacity(entries.len().min(limit as usize));
    for (k, v) in entries.into_iter().take(limit as usize) {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Str(id)] => out.push(row::decode_listed(id, &v)?.into()),
            _ => return Err(store::bad_entry("schedule")),
        }
    }
    let next = if more {
        out.last().map(|r| r.def.id.clone())
    } else {
        None
    };
    Ok(SchedulePage {
        schedules: out,
        next,
    })
}

/// `tz-version`: the IANA database the component carries.
pub fn tz_version() -> &'static str {
    calendar::tzdb_version()
}
