//! What the `schedule` commands answer, each rendered two ways side by
//! side: under `--json` a schedule as the HTTP API spells it (a trigger the
//! timer it armed), for a person its instants in UTC and in the schedule's
//! zone, read from the calendar's embedded time-zone database as the rules
//! read it. It renders only; the calls are `super::schedules`'.

use std::fmt::Write as _;

use jiff::tz::TimeZone;
use leasehold_guest::calendar::{self, DEFAULT_CATCH_UP_WINDOW_MS};
use leasehold_host::{
    CatchUp, GapPolicy, Overlap, Phase, RepeatPolicy, Rule, Schedule, SchedulePage, ScheduleSpec,
    Timer, Timestamp,
};
use leasehold_serve::ScheduleJson;
use serde_json::json;

use crate::answer::Answer;
use crate::render::{count, table, when};
use crate::values::{self, format_time};

/// The zone a schedule's instants are read in, as the calendar reads its
/// spec (the same embedded database the rules use); none for a spec the
/// calendar no longer takes, whose instants are then shown in UTC only.
fn zone_of(spec: &ScheduleSpec) -> Option<TimeZone> {
    calendar::Schedule::new(spec.clone())
        .ok()
        .map(|s| s.zone().clone())
}

/// An instant as a person reads it beside its schedule: in UTC, and the
/// wall time in the schedule's zone.
fn both_times(ms: Timestamp, zone: Option<&TimeZone>) -> (String, String) {
    let local = zone
        .and_then(|tz| {
            let at = jiff::Timestamp::from_millisecond(ms).ok()?;
            Some(
                at.to_zoned_datetime(tz.clone())
                    .strftime("%Y-%m-%d %H:%M:%S %Z")
                    .to_string(),
            )
        })
        .unwrap_or_else(|| "-".to_owned());
    (format_time(ms), local)
}

fn recurrence(spec: &ScheduleSpec) -> String {
    match &spec.rule {
        Rule::Cron { expr } => format!("cron `{expr}`"),
        Rule::Interval { every_ms, anchor } => {
            format!("every {every_ms} ms from {}", format_time(*anchor))
        }
    }
}

fn catch_up(c: CatchUp) -> String {
    match c {
        CatchUp::AllWithinWindow { window_ms } if window_ms == DEFAULT_CATCH_UP_WINDOW_MS => {
            "all within a year".to_owned()
        }
        CatchUp::AllWithinWindow { window_ms } => format!("all within {window_ms} ms"),
        CatchUp::Latest { window_ms } => format!("the latest within {window_ms} ms"),
        CatchUp::None => "none".to_owned(),
    }
}

/// One schedule (add, pause, resume, get): the API's object under --json.
pub struct One(pub Schedule);

impl Answer for One {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&ScheduleJson::from(self.0.clone()))
    }

    fn human(&self) -> String {
        let s = &self.0;
        let (d, spec) = (&s.def, &s.def.spec);
        let zone = zone_of(spec);
        let mut out = format!(
            "Schedule {} (revision {}): {} in {}\n",
            d.id,
            s.revision,
            recurrence(spec),
            spec.zone
        );
        let phase = match d.phase {
            Phase::Forward => "forward",
            Phase::Compensating => "compensating",
        };
        let case = d
            .case
            .as_deref()
            .map_or(String::new(), |c| format!(", case {c}"));
        let _ = writeln!(
            out,
            "  Occurrences: timers of run {}{case}, step {}, {phase}",
            d.run, d.step
        );
        match (&s.paused, s.next_at) {
            (Some(note), _) => {
                let _ = writeln!(out, "  Paused: {note}");
            }
            (None, Some(next)) => {
                let (_, local) = both_times(next, zone.as_ref());
                let _ = writeln!(out, "  Next: {}; {local} there", when(next, values::now()));
            }
            (None, None) => {
                let _ = writeln!(out, "  Next: none (it has ended)");
            }
        }
        if let Some(last) = s.last_at {
            let _ = writeln!(out, "  Last fired: {}", format_time(last));
        }
        if !s.waiting.is_empty() {
            let _ = writeln!(
                out,
                "  Waiting: {}",
                count(s.waiting.len() as u64, "occurrence", "occurrences")
            );
        }
        let bound = |t: Option<Timestamp>| t.map_or_else(|| "-".to_owned(), format_time);
        let _ = writeln!(
            out,
            "  Between: {} and {}; gap {}, repeat {}, overlap {}, catch-up {}, jitter {}",
            bound(spec.start),
            bound(spec.end),
            match spec.gap {
                GapPolicy::ShiftForward => "shift-forward",
                GapPolicy::Skip => "skip",
            },
            match spec.repeat {
                RepeatPolicy::First => "first",
                RepeatPolicy::Both => "both",
            },
            match spec.overlap {
                Overlap::Skip => "skip",
                Overlap::BufferOne => "buffer-one",
                Overlap::BufferAll => "buffer-all",
            },
            catch_up(spec.catch_up),
            spec.jitter_ms
                .map_or_else(|| "none".to_owned(), |j| format!("up to {j} ms")),
        );
        out
    }
}

pub struct Listed(pub SchedulePage);

impl Answer for Listed {
    fn json(&self) -> serde_json::Result<String> {
        let schedules: Vec<ScheduleJson> = self
            .0
            .schedules
            .iter()
            .cloned()
            .map(ScheduleJson::from)
            .collect();
        serde_json::to_string(&json!({"schedules": schedules, "next": self.0.next}))
    }

    fn human(&self) -> String {
        if self.0.schedules.is_empty() {
            return "No schedules.\n".to_owned();
        }
        let rows = self
            .0
            .schedules
            .iter()
            .map(|s| {
                let spec = &s.def.spec;
                let (next, local) = match (&s.paused, s.next_at) {
                    (Some(_), _) => ("paused".to_owned(), "-".to_owned()),
                    (None, Some(n)) => both_times(n, zone_of(spec).as_ref()),
                    (None, None) => ("ended".to_owned(), "-".to_owned()),
                };
                vec![
                    s.def.id.clone(),
                    recurrence(spec),
                    spec.zone.clone(),
                    next,
                    local,
                    s.paused.clone().unwrap_or_else(|| "-".to_owned()),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "ID",
                "RECURRENCE",
                "ZONE",
                "NEXT (UTC)",
                "NEXT (ZONE)",
                "PAUSED",
            ],
            rows,
        );
        if let Some(next) = &self.0.next {
            let _ = writeln!(out, "More follow: --after {next}");
        }
        out
    }
}

pub struct Removed<'a> {
    pub id: &'a str,
    pub removed: bool,
}

impl Answer for Removed<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"id": self.id, "removed": self.removed}))
    }

    fn human(&self) -> String {
        if self.removed {
            format!("Removed schedule {} and what it had armed.\n", self.id)
        } else {
            format!("No schedule {}; nothing was removed.\n", self.id)
        }
    }
}

pub struct Triggered<'a> {
    pub id: &'a str,
    pub timer: Timer,
}

impl Answer for Triggered<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.timer)
    }

    fn human(&self) -> String {
        let t = &self.timer;
        format!(
            "Triggered schedule {}: timer {}/{} is due at {}.\n",
            self.id,
            t.run,
            t.effect,
            format_time(t.fire_at)
        )
    }
}

pub struct Upcoming<'a> {
    pub id: &'a str,
    /// The schedule's spec, read for its zone.
    pub zone: Option<ScheduleSpec>,
    pub occurrences: Vec<Timestamp>,
}

impl Answer for Upcoming<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"id": self.id, "occurrences": self.occurrences}))
    }

    fn human(&self) -> String {
        if self.occurrences.is_empty() {
            return format!("Schedule {} has no occurrence after that.\n", self.id);
        }
        let tz = self.zone.as_ref().and_then(zone_of);
        let rows = self
            .occurrences
            .iter()
            .map(|&o| {
                let (utc, local) = both_times(o, tz.as_ref());
                vec![utc, local]
            })
            .collect();
        let name = self.zone.as_ref().map_or("its zone", |s| s.zone.as_str());
        let local = format!("IN {name}");
        table(&["UTC", local.as_str()], rows)
    }
}

pub struct TzVersion(pub String);

impl Answer for TzVersion {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"tz_version": self.0}))
    }

    fn human(&self) -> String {
        format!("Time-zone database {}.\n", self.0)
    }
}
