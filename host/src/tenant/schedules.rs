//! The `schedules` interface: recurring schedules whose occurrences are
//! timers of one run, one method per verb. An answer is checked to be the
//! schedule asked about, a listing in id order within its limit, and
//! occurrences strictly after the instant asked from, in order.

use leasehold_guest::model::{Timer, Timestamp};
use leasehold_guest::schedules::{Schedule, ScheduleDef, SchedulePage, effect_of};

use crate::bindings::{wit, wit_schedules};
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, at_most, malformed, store};

/// A schedule answered for another id than asked is no answer.
fn same_schedule(s: wit_schedules::Schedule, id: &str) -> Result<Schedule, Error> {
    if s.spec.id != id {
        return Err(malformed(format!(
            "asked for schedule {id}, answered schedule {}",
            s.spec.id
        )));
    }
    Ok(s.into())
}

impl Tenant {
    /// Adds a schedule and arms its first occurrence at or after `now`. A
    /// bad spec, an id in use or a sealed run is `invalid`, naming the
    /// field; nothing is written then.
    pub fn add_schedule(&self, def: &ScheduleDef, now: Timestamp) -> Result<Schedule, Error> {
        let spec: wit_schedules::ScheduleSpec = def.clone().into();
        self.call(
            Verb::AddSchedule,
            |x, s| x.call(s, (&spec, now)),
            |a: StoreAnswer<wit_schedules::Schedule>| same_schedule(store(a)?, &def.id),
        )
    }

    /// Removes a schedule with its armed and waiting occurrences (one a
    /// sweeper holds stays with it); answers whether there was one.
    pub fn remove_schedule(&self, id: &str) -> Result<bool, Error> {
        self.call(
            Verb::RemoveSchedule,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<bool>| store(a),
        )
    }

    /// Pauses a schedule with a note: nothing fires until it is resumed.
    pub fn pause_schedule(&self, id: &str, note: &str) -> Result<Schedule, Error> {
        self.call(
            Verb::PauseSchedule,
            |x, s| x.call(s, (id, note)),
            |a: StoreAnswer<wit_schedules::Schedule>| {
                let s = same_schedule(store(a)?, id)?;
                if s.paused.as_deref() != Some(note) || s.next_at.is_some() {
                    return Err(malformed(format!(
                        "pause-schedule answered schedule {id} not paused with its note"
                    )));
                }
                Ok(s)
            },
        )
    }

    /// Resumes a paused schedule from `now`: what fell in the pause does
    /// not fire.
    pub fn resume_schedule(&self, id: &str, now: Timestamp) -> Result<Schedule, Error> {
        self.call(
            Verb::ResumeSchedule,
            |x, s| x.call(s, (id, now)),
            |a: StoreAnswer<wit_schedules::Schedule>| {
                let s = same_schedule(store(a)?, id)?;
                if s.paused.is_some() {
                    return Err(malformed(format!(
                        "resume-schedule answered schedule {id} still paused"
                    )));
                }
                Ok(s)
            },
        )
    }

    /// Arms an extra occurrence at `now` beside the schedule's own, and
    /// answers its timer.
    pub fn trigger_schedule(&self, id: &str, now: Timestamp) -> Result<Timer, Error> {
        self.call(
            Verb::TriggerSchedule,
            |x, s| x.call(s, (id, now)),
            |a: StoreAnswer<wit::Timer>| {
                let t = Timer::from(store(a)?);
                if t.effect != effect_of(id, now) {
                    return Err(malformed(format!(
                        "trigger-schedule of {id} at {now} answered timer {}/{}",
                        t.run, t.effect
                    )));
                }
                Ok(t)
            },
        )
    }

    /// The schedule's next `n` (1–1000) occurrences after `after`, before
    /// jitter.
    pub fn next_occurrences(
        &self,
        id: &str,
        after: Timestamp,
        n: u32,
    ) -> Result<Vec<Timestamp>, Error> {
        self.call(
            Verb::NextOccurrences,
            |x, s| x.call(s, (id, after, n)),
            |a: StoreAnswer<Vec<Timestamp>>| {
                let list = at_most(store(a)?, n, "next-occurrences")?;
                if list.first().is_some_and(|&f| f <= after)
                    || list.windows(2).any(|w| w[0] >= w[1])
                {
                    return Err(malformed(format!(
                        "next-occurrences of {id} answered instants out of order"
                    )));
                }
                Ok(list)
            },
        )
    }

    /// One schedule, if it exists.
    pub fn get_schedule(&self, id: &str) -> Result<Option<Schedule>, Error> {
        self.call(
            Verb::GetSchedule,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<Option<wit_schedules::Schedule>>| {
                store(a)?.map(|s| same_schedule(s, id)).transpose()
            },
        )
    }

    /// Schedules by id, `limit` (1–1000) at a time after the cursor
    /// `after` (a page's `next`).
    pub fn list_schedules(&self, limit: u32, after: Option<&str>) -> Result<SchedulePage, Error> {
        self.call(
            Verb::ListSchedules,
            |x, s| x.call(s, (limit, after)),
            |a: StoreAnswer<wit_schedules::SchedulePage>| {
                let p = store(a)?;
                let schedules: Vec<Schedule> = at_most(p.schedules, limit, "list-schedules")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                if schedules.windows(2).any(|w| w[0].def.id >= w[1].def.id)
                    || after
                        .is_some_and(|a| schedules.first().is_some_and(|s| s.def.id.as_str() <= a))
                {
                    return Err(malformed("list-schedules answered out of order".to_owned()));
                }
                Ok(SchedulePage {
                    schedules,
                    next: p.next,
                })
            },
        )
    }

    /// The release of the IANA time-zone database the component carries
    /// (`2025b`, say): the one every schedule's instants come from.
    pub fn tz_version(&self) -> Result<String, Error> {
        self.call(
            Verb::TzVersion,
            |x, s| x.call(s, ()),
            |v: String| {
                if v.len() != 5 || !v.starts_with("20") {
                    return Err(malformed(format!("tz-version answered {v:?}")));
                }
                Ok(v)
            },
        )
    }
}
