//! A schedule spec (what a caller asks for and storage keeps), its
//! validation into a [`Schedule`], and a schedule's occurrences: instants in
//! milliseconds since 1970, strictly increasing, each at most once. Owns the
//! meaning of `start`, `end`, intervals and jitter; never reads a clock (the
//! instant to count from is always the caller's).

#[allow(unused_imports)]
use crate::prelude::*;

use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

use super::cron::Cron;
use super::error::{CronError, CronProblem, SpecError};
use super::jitter::{MAX_JITTER_MS, jitter_offset};
use super::policy::{CatchUp, GapPolicy, Overlap, RepeatPolicy};
use super::walk::next_cron_after;
use super::zone::lookup;
use crate::time::Timestamp;
use crate::validate::MAX_TIMESTAMP;

/// When a schedule fires, before the zone, bounds and policies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A cron expression (see [`Cron`](super::Cron)), read in the
    /// schedule's zone.
    Cron { expr: String },
    /// Every `every_ms` milliseconds from `anchor` on (the anchor is the
    /// first occurrence). Intervals count real time: the zone and its
    /// daylight saving do not move them.
    Interval {
        #[serde(rename = "every-ms")]
        every_ms: u64,
        anchor: Timestamp,
    },
}

/// A schedule as asked for and as stored. [`Schedule::new`] checks it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ScheduleSpec {
    pub rule: Rule,
    /// An IANA time zone name (`Europe/London`).
    pub zone: String,
    /// No occurrence before this instant (inclusive).
    #[serde(default)]
    pub start: Option<Timestamp>,
    /// No occurrence after this instant (inclusive).
    #[serde(default)]
    pub end: Option<Timestamp>,
    #[serde(default)]
    pub gap: GapPolicy,
    #[serde(default)]
    pub repeat: RepeatPolicy,
    /// Each occurrence fires up to this many milliseconds late, by an amount
    /// fixed by the schedule's id and the occurrence (see
    /// [`jitter_offset`](super::jitter_offset)).
    #[serde(default)]
    pub jitter_ms: Option<u64>,
    #[serde(default)]
    pub overlap: Overlap,
    #[serde(default)]
    pub catch_up: CatchUp,
}

impl ScheduleSpec {
    /// A spec with the default policies and no bounds.
    pub fn new(rule: Rule, zone: impl Into<String>) -> ScheduleSpec {
        ScheduleSpec {
            rule,
            zone: zone.into(),
            start: None,
            end: None,
            gap: GapPolicy::default(),
            repeat: RepeatPolicy::default(),
            jitter_ms: None,
            overlap: Overlap::default(),
            catch_up: CatchUp::default(),
        }
    }
}

/// A checked spec, ready to compute occurrences.
#[derive(Clone, Debug)]
pub struct Schedule {
    spec: ScheduleSpec,
    pattern: Pattern,
    zone: TimeZone,
}

#[derive(Clone, Debug)]
enum Pattern {
    Cron(Cron),
    Interval { every: i64, anchor: i64 },
}

impl Schedule {
    /// Checks a spec: a known zone (stored under its canonical name), a well
    /// formed cron expression that matches some date, an interval of at
    /// least 1 ms, instants within 1970 to 9999, an end not before the start
    /// and something to fire between them, a jitter within range, a
    /// catch-up window of at least 1 ms. The first problem found is the
    /// answer.
    pub fn new(mut spec: ScheduleSpec) -> Result<Schedule, SpecError> {
        let (canonical, zone) = lookup(&spec.zone).ok_or_else(|| SpecError::UnknownZone {
            zone: spec.zone.clone(),
        })?;
        spec.zone = canonical.to_owned();
        let pattern = match &spec.rule {
            Rule::Cron { expr } => {
                let cron = Cron::parse(expr).map_err(SpecError::Cron)?;
                // A civil search from any date covers a whole 400-year cycle
                // of the calendar, so finding nothing means never.
                if cron.next_match(0).is_none() {
                    return Err(SpecError::Cron(CronError {
                        field: None,
                        text: expr.trim().to_owned(),
                        problem: CronProblem::NeverMatches,
                    }));
                }
                Pattern::Cron(cron)
            }
            Rule::Interval { every_ms, anchor } => {
                let every = i64::try_from(*every_ms)
                    .ok()
                    .filter(|e| (1..=MAX_TIMESTAMP).contains(e))
                    .ok_or(SpecError::BadInterval {
                        every_ms: *every_ms,
                    })?;
                instant_in_range("anchor", *anchor)?;
                Pattern::Interval {
                    every,
                    anchor: *anchor,
                }
            }
        };
        if let Some(start) = spec.start {
            instant_in_range("start", start)?;
        }
        if let Some(end) = spec.end {
            instant_in_range("end", end)?;
        }
        if let (Some(start), Some(end)) = (spec.start, spec.end)
            && end < start
        {
            return Err(SpecError::EndBeforeStart { start, end });
        }
        if let Some(jitter_ms) = spec.jitter_ms {
            let max_ms = match pattern {
                // Below the interval, so jittered firings keep their order.
                Pattern::Interval { every, .. } => MAX_JITTER_MS.min(every as u64 - 1),
                Pattern::Cron(_) => MAX_JITTER_MS,
            };
            if jitter_ms == 0 || jitter_ms > max_ms {
                return Err(SpecError::JitterOutOfRange { jitter_ms, max_ms });
            }
        }
        if spec.catch_up.window_ms() == Some(0) {
            return Err(SpecError::EmptyCatchUpWindow);
        }
        let schedule = Schedule {
            spec,
            pattern,
            zone,
        };
        if let (Some(start), Some(end)) = (schedule.spec.start, schedule.spec.end)
            && schedule.next_after(start - 1).is_none()
        {
            return Err(SpecError::NoOccurrence { start, end });
        }
        Ok(schedule)
    }

    pub fn spec(&self) -> &ScheduleSpec {
        &self.spec
    }

    /// The zone, for showing occurrences in local time.
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The first occurrence strictly after `after`, or none (past the end,
    /// or beyond year 9999). Cost: see [`walk`](super::walk) for cron
    /// patterns; constant for intervals.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        // Occurrences are whole milliseconds, so "at or after start" is
        // "after start - 1".
        let after = match self.spec.start {
            Some(start) => after.max(start - 1),
            None => after,
        };
        if after >= MAX_TIMESTAMP {
            return None;
        }
        let next = match &self.pattern {
            Pattern::Cron(cron) => next_cron_after(
                cron,
                &self.zone,
                self.spec.gap,
                self.spec.repeat,
                after.max(-1),
            )?,
            Pattern::Interval { every, anchor } => next_interval_after(*every, *anchor, after)?,
        };
        let last = self.spec.end.unwrap_or(MAX_TIMESTAMP).min(MAX_TIMESTAMP);
        (next <= last).then_some(next)
    }

    /// The first `n` occurrences at or after `from`, in order. Cost: `n`
    /// times [`Schedule::next_after`].
    pub fn occurrences(&self, from: Timestamp, n: usize) -> Vec<Timestamp> {
        self.occurrences_after(from.saturating_sub(1))
            .take(n)
            .collect()
    }

    /// The occurrences strictly after `after`, in order, lazily.
    pub fn occurrences_after(&self, after: Timestamp) -> Occurrences<'_> {
        Occurrences {
            schedule: self,
            after: Some(after),
        }
    }

    /// When `occurrence` fires: late by its jitter, if the spec has one. The
    /// same on every host: a function of `schedule_id`, the occurrence and
    /// the bound only.
    pub fn fire_at(&self, schedule_id: &str, occurrence: Timestamp) -> Timestamp {
        match self.spec.jitter_ms {
            Some(bound) => {
                occurrence.saturating_add(jitter_offset(schedule_id, occurrence, bound) as i64)
            }
            None => occurrence,
        }
    }
}

/// The occurrences of a schedule after an instant, in order.
#[derive(Debug)]
pub struct Occurrences<'s> {
    schedule: &'s Schedule,
    after: Option<Timestamp>,
}

impl Iterator for Occurrences<'_> {
    type Item = Timestamp;

    fn next(&mut self) -> Option<Timestamp> {
        let next = self.schedule.next_after(self.after?);
        self.after = next;
        next
    }
}

fn instant_in_range(field: &'static str, value: Timestamp) -> Result<(), SpecError> {
    if (0..=MAX_TIMESTAMP).contains(&value) {
        Ok(())
    } else {
        Err(SpecError::InstantOutOfRange { field, value })
    }
}

/// `anchor + k * every` for the least `k >= 0` that is after `after`.
fn next_interval_after(every: i64, anchor: i64, after: i64) -> Option<i64> {
    if after < anchor {
        return Some(anchor);
    }
    let k = (after - anchor) / every + 1;
    let next = i128::from(anchor) + i128::from(k) * i128::from(every);
    i64::try_from(next).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::calendar::error::CronField;

    /// 2024-01-01T00:00:00Z.
    const T0: i64 = 1_704_067_200_000;
    const DAY: i64 = 86_400_000;

    fn cron(expr: &str) -> ScheduleSpec {
        ScheduleSpec::new(Rule::Cron { expr: expr.into() }, "UTC")
    }

    fn refusal(spec: ScheduleSpec) -> SpecError {
        Schedule::new(spec).expect_err("a refusal")
    }

    #[test]
    fn calendar_spec_refusals_name_the_field() {
        let mut spec = cron("0 0 * * *");
        spec.zone = "Europe/Atlantis".into();
        let e = refusal(spec);
        assert_eq!(
            e,
            SpecError::UnknownZone {
                zone: "Europe/Atlantis".into()
            }
        );
        assert_eq!(e.field(), "zone");

        let e = refusal(cron("0 0 30 2 *"));
        assert!(
            matches!(&e, SpecError::Cron(c) if c.problem == CronProblem::NeverMatches),
            "{e}"
        );
        assert_eq!(e.field(), "cron");
        assert_eq!(
            e.to_string(),
            "cron: `0 0 30 2 *`: matches no date of the calendar, so it would never fire"
        );
        let e = refusal(cron("0 0 * 13 *"));
        assert!(
            matches!(&e, SpecError::Cron(c) if c.field == Some(CronField::Month)),
            "{e}"
        );
        assert_eq!(e.to_string(), "cron: month field `13`: 13 is outside 1-12");

        let interval = |every_ms| {
            ScheduleSpec::new(
                Rule::Interval {
                    every_ms,
                    anchor: T0,
                },
                "UTC",
            )
        };
        assert_eq!(refusal(interval(0)), SpecError::BadInterval { every_ms: 0 });
        assert_eq!(refusal(interval(u64::MAX)).field(), "every-ms");
        let spec = ScheduleSpec::new(
            Rule::Interval {
                every_ms: 1,
                anchor: -1,
            },
            "UTC",
        );
        assert_eq!(
            refusal(spec),
            SpecError::InstantOutOfRange {
                field: "anchor",
                value: -1
            }
        );

        let mut spec = cron("0 0 * * *");
        (spec.start, spec.end) = (Some(T0), Some(T0 - 1));
        let e = refusal(spec);
        assert_eq!(
            e,
            SpecError::EndBeforeStart {
                start: T0,
                end: T0 - 1
            }
        );
        assert_eq!(e.field(), "end");
        let mut spec = cron("0 0 * * *");
        spec.start = Some(MAX_TIMESTAMP + 1);
        assert_eq!(refusal(spec).field(), "start");
        let mut spec = cron("0 0 * * *");
        (spec.start, spec.end) = (Some(T0 + 1), Some(T0 + DAY - 1));
        assert_eq!(
            refusal(spec),
            SpecError::NoOccurrence {
                start: T0 + 1,
                end: T0 + DAY - 1
            }
        );

        for (jitter_ms, max_ms) in [(0, MAX_JITTER_MS), (MAX_JITTER_MS + 1, MAX_JITTER_MS)] {
            let mut spec = cron("0 0 * * *");
            spec.jitter_ms = Some(jitter_ms);
            assert_eq!(
                refusal(spec),
                SpecError::JitterOutOfRange { jitter_ms, max_ms }
            );
        }
        let mut spec = interval(1000);
        spec.jitter_ms = Some(1000);
        assert_eq!(
            refusal(spec),
            SpecError::JitterOutOfRange {
                jitter_ms: 1000,
                max_ms: 999
            }
        );

        let mut spec = cron("0 0 * * *");
        spec.catch_up = CatchUp::Latest { window_ms: 0 };
        assert_eq!(refusal(spec).field(), "catch-up");
    }

    #[test]
    fn calendar_spec_keeps_the_canonical_zone_name() {
        let mut spec = cron("0 0 * * *");
        spec.zone = "europe/london".into();
        assert_eq!(
            Schedule::new(spec).expect("valid").spec().zone,
            "Europe/London"
        );
    }

    #[test]
    fn calendar_start_and_end_are_inclusive() {
        let mut spec = cron("0 0 * * *");
        (spec.start, spec.end) = (Some(T0), Some(T0 + 2 * DAY));
        let s = Schedule::new(spec).expect("valid");
        assert_eq!(s.occurrences(0, 10), [T0, T0 + DAY, T0 + 2 * DAY]);
        assert_eq!(s.next_after(T0 + 2 * DAY), None);
        assert_eq!(s.next_after(i64::MIN), Some(T0));
        assert_eq!(s.next_after(i64::MAX), None);
        // `occurrences` counts from its instant on; `next_after` strictly
        // after.
        assert_eq!(s.occurrences(T0 + DAY, 1), [T0 + DAY]);
        assert_eq!(s.next_after(T0 + DAY), Some(T0 + 2 * DAY));
    }

    #[test]
    fn calendar_intervals_step_from_the_anchor() {
        let every = 90 * 60_000;
        let s = Schedule::new(ScheduleSpec::new(
            Rule::Interval {
                every_ms: every as u64,
                anchor: T0,
            },
            "America/New_York",
        ))
        .expect("valid");
        assert_eq!(s.next_after(0), Some(T0));
        assert_eq!(s.next_after(T0), Some(T0 + every));
        assert_eq!(s.next_after(T0 + every - 1), Some(T0 + every));
        assert_eq!(s.occurrences(T0 + 1, 2), [T0 + every, T0 + 2 * every]);
        assert_eq!(s.next_after(MAX_TIMESTAMP), None);
    }

    #[test]
    fn calendar_fire_at_adds_the_jitter_only_when_asked() {
        let mut spec = cron("0 0 * * *");
        let plain = Schedule::new(spec.clone()).expect("valid");
        assert_eq!(plain.fire_at("s", T0), T0);
        spec.jitter_ms = Some(60_000);
        let jittered = Schedule::new(spec).expect("valid");
        let fired = jittered.fire_at("s", T0);
        assert_eq!(fired, T0 + jitter_offset("s", T0, 60_000) as i64);
        assert!((T0..=T0 + 60_000).contains(&fired));
    }
}
