//! A schedule's stored row under `("schedule", id)`, the timers its
//! occurrences are armed as, and the names those timers carry. Owns the
//! row's shape and its checks on load; what fires when is the verbs' and
//! [`firing`](super::firing)'s.

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::calendar::{Schedule, ScheduleSpec};
use crate::kv::Kv;
use crate::model::{Phase, StoreError, Timer, TimerEvent};
use crate::schema;
use crate::store::{self, TimerRow};
use crate::time::Timestamp;

/// The longest schedule id: its occurrences' effect keys
/// (`schedule/<id>/<instant>`) must stay names (at most 256 characters).
pub const MAX_ID_CHARS: usize = 200;

/// What a schedule is: where its occurrences go and when they fall.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleDef {
    pub id: String,
    pub run: String,
    pub case: Option<String>,
    pub step: u32,
    pub phase: Phase,
    pub spec: ScheduleSpec,
}

/// A schedule as stored: its definition and where it stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRow {
    pub def: ScheduleDef,
    /// The note it was paused with.
    pub paused: Option<String>,
    /// The occurrence armed next (its instant before jitter).
    pub next: Option<Timestamp>,
    /// The last occurrence that fired.
    pub last: Option<Timestamp>,
    /// The occurrence fired most recently whose timer may still be
    /// claimed and not done: `overlap` asks whether its timer still exists.
    pub running: Option<Timestamp>,
    /// Occurrences `overlap` keeps waiting, oldest first.
    pub waiting: Vec<Timestamp>,
    pub revision: u64,
}

impl ScheduleRow {
    /// The checked spec. A stored spec was checked when added, so one that
    /// no longer checks is damage (or a component whose rules changed).
    pub fn schedule(&self) -> Result<Schedule, StoreError> {
        Schedule::new(self.def.spec.clone()).map_err(|e| {
            StoreError::Corrupt(format!(
                "schedule {}: the stored spec no longer checks ({e})",
                self.def.id
            ))
        })
    }

    /// The timer of occurrence `nominal`, at its jittered instant.
    pub fn occurrence(&self, schedule: &Schedule, nominal: Timestamp) -> Timer {
        Timer {
            run: self.def.run.clone(),
            case: self.def.case.clone(),
            effect: effect_of(&self.def.id, nominal),
            step: self.def.step,
            phase: self.def.phase,
            fire_at: schedule.fire_at(&self.def.id, nominal),
        }
    }
}

/// The effect key of a schedule's occurrence.
pub fn effect_of(id: &str, nominal: Timestamp) -> String {
    format!("schedule/{id}/{nominal}")
}

/// The schedule and occurrence an effect key names, if it is one's.
pub fn parse_effect(effect: &str) -> Option<(&str, Timestamp)> {
    let rest = effect.strip_prefix("schedule/")?;
    let (id, nominal) = rest.rsplit_once('/')?;
    let nominal: Timestamp = nominal.parse().ok()?;
    // Only the spelling `effect_of` writes: no sign, no leading zero.
    (!id.is_empty() && effect_of(id, nominal) == effect).then_some((id, nominal))
}

fn decode(id: &str, bytes: &[u8]) -> Result<ScheduleRow, StoreError> {
    let row: ScheduleRow = match postcard::take_from_bytes(bytes) {
        Ok((row, [])) => row,
        Ok((_, left)) => {
            return Err(StoreError::Corrupt(format!(
                "schedule {id}: {} bytes left over after the row",
                left.len()
            )));
        }
        Err(e) => return Err(StoreError::Corrupt(format!("schedule {id}: {e}"))),
    };
    if row.def.id != id {
        return Err(StoreError::Corrupt(format!(
            "schedule {id}: the row is stored under another id ({})",
            row.def.id
        )));
    }
    Ok(row)
}

pub fn load<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<ScheduleRow>, StoreError> {
    kv.get(schema::schedule(id).as_bytes())?
        .map(|b| decode(id, &b))
        .transpose()
}

/// A row read by a scan of the schedules' range.
pub fn decode_listed(id: &str, bytes: &[u8]) -> Result<ScheduleRow, StoreError> {
    decode(id, bytes)
}

pub fn save<K: Kv + ?Sized>(kv: &mut K, row: &ScheduleRow) -> Result<(), StoreError> {
    kv.set(
        schema::schedule(&row.def.id).as_bytes(),
        &store::encode_row(row)?,
    )?;
    Ok(())
}

/// Arms occurrence `nominal` as `verb`, at its jittered instant.
pub fn arm_occurrence<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    row: &ScheduleRow,
    schedule: &Schedule,
    nominal: Timestamp,
) -> Result<Timer, StoreError> {
    arm_timer(kv, verb, row.occurrence(schedule, nominal))
}

/// Arms an occurrence's timer as `verb`. One already armed under its key
/// (a trigger at that instant) is kept as it is: first arming wins, as for
/// any timer.
pub fn arm_timer<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    timer: Timer,
) -> Result<Timer, StoreError> {
    if let Some(existing) = store::load_timer(kv, &timer.run, &timer.effect)? {
        return Ok(existing.timer);
    }
    let new = TimerRow {
        timer,
        lease_until: None,
    };
    store::write_timer(kv, verb, TimerEvent::Armed, None, &new)?;
    Ok(new.timer)
}

/// Retires occurrence `nominal`'s timer if it is armed and no sweeper
/// holds it (a held one stays with its holder).
pub fn retire_unclaimed<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    row: &ScheduleRow,
    nominal: Timestamp,
) -> Result<(), StoreError> {
    let effect = effect_of(&row.def.id, nominal);
    if let Some(timer) = store::load_timer(kv, &row.def.run, &effect)?
        && timer.lease_until.is_none()
    {
        store::retire_timer(kv, verb, &timer)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_occurrences_effect_names_its_schedule_and_instant() {
        assert_eq!(effect_of("nightly", 1_000), "schedule/nightly/1000");
        assert_eq!(
            parse_effect("schedule/nightly/1000"),
            Some(("nightly", 1_000))
        );
        assert_eq!(parse_effect("schedule/a/b/7"), Some(("a/b", 7)));
        for other in [
            "nightly/1000",
            "schedule//5",
            "schedule/x/",
            "schedule/x/+5",
            "schedule/x/05",
            "schedule/x/1e3",
            "schedule/x",
        ] {
            assert_eq!(parse_effect(other), None, "{other}");
        }
    }
}
