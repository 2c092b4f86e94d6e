//! The calendar against an independent reference: croniter lists the wall
//! times, Python's zoneinfo maps them to instants by the stated gap and
//! repeat rules (guest/tests/fixtures/calendar/make_reference.py, which says
//! how to regenerate the fixtures). Each fixture also lists its zone's offset
//! changes as zoneinfo sees them, checked first against jiff's embedded
//! database, so a difference of tz data shows as that.

use std::path::Path;

use jiff::Timestamp;
use serde::Deserialize;

use crate::calendar::{GapPolicy, RepeatPolicy, Rule, Schedule, ScheduleSpec, tzdb_version};

#[derive(Deserialize)]
struct Fixture {
    tzdata: String,
    zone: String,
    after: i64,
    until: i64,
    /// Instant (s) and offset from then on (s) of each offset change.
    transitions: Vec<(i64, i64)>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    cron: Option<String>,
    interval: Option<(u64, i64)>,
    gap: GapPolicy,
    repeat: RepeatPolicy,
    start: Option<i64>,
    end: Option<i64>,
    jitter_ms: Option<u64>,
    /// Delta encoded: the first instant, then each one's distance from the
    /// one before.
    expected: Vec<i64>,
    id: Option<String>,
    fire: Option<Vec<i64>>,
}

fn undelta(deltas: &[i64]) -> Vec<i64> {
    deltas
        .iter()
        .scan(0i64, |sum, d| {
            *sum += d;
            Some(*sum)
        })
        .collect()
}

fn load(zone: &str) -> Fixture {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/calendar")
        .join(format!("{}.json", zone.replace('/', "_")));
    let text = std::fs::read_to_string(&path).expect("the fixture (see make_reference.py)");
    serde_json::from_str(&text).expect("a fixture")
}

/// The zone's offset changes in `(after, until]`, as jiff sees them.
fn jiff_transitions(schedule: &Schedule, after: i64, until: i64) -> Vec<(i64, i64)> {
    let zone = schedule.zone();
    let from = Timestamp::from_millisecond(after).expect("in range");
    let mut before = zone.to_offset(from).seconds();
    let mut out = Vec::new();
    for t in zone.following(from) {
        if t.timestamp().as_millisecond() > until {
            break;
        }
        if t.offset().seconds() != before {
            out.push((t.timestamp().as_second(), i64::from(t.offset().seconds())));
            before = t.offset().seconds();
        }
    }
    out
}

fn show(schedule: &Schedule, ms: i64) -> String {
    let t = Timestamp::from_millisecond(ms).expect("in range");
    let z = t.to_zoned_datetime(schedule.zone().clone());
    format!("{ms} ({}{})", z.datetime(), z.offset())
}

fn spec_of(fixture: &Fixture, case: &Case) -> ScheduleSpec {
    let rule = match (&case.cron, case.interval) {
        (Some(expr), None) => Rule::Cron { expr: expr.clone() },
        (None, Some((every_ms, anchor))) => Rule::Interval { every_ms, anchor },
        _ => panic!("{}: a cron or an interval", case.name),
    };
    let mut spec = ScheduleSpec::new(rule, fixture.zone.as_str());
    spec.gap = case.gap;
    spec.repeat = case.repeat;
    spec.start = case.start;
    spec.end = case.end;
    spec.jitter_ms = case.jitter_ms;
    spec
}

fn check_zone(zone: &str) {
    let fixture = load(zone);
    assert_eq!(fixture.zone, zone);
    let probe = Schedule::new(ScheduleSpec::new(
        Rule::Cron {
            expr: "@daily".into(),
        },
        zone,
    ))
    .expect("a valid spec");
    assert_eq!(
        jiff_transitions(&probe, fixture.after, fixture.until),
        fixture.transitions,
        "{zone}: jiff's tz data ({}) and zoneinfo's ({}) disagree over the fixture's years",
        tzdb_version(),
        fixture.tzdata,
    );
    assert!(
        fixture.cases.len() >= 10,
        "{zone}: {} cases",
        fixture.cases.len()
    );
    for case in &fixture.cases {
        let schedule = Schedule::new(spec_of(&fixture, case))
            .unwrap_or_else(|e| panic!("{zone} {}: {e}", case.name));
        let expected = undelta(&case.expected);
        let actual: Vec<i64> = schedule
            .occurrences_after(fixture.after)
            .take_while(|&o| o <= fixture.until)
            .collect();
        if actual != expected {
            let at = actual
                .iter()
                .zip(&expected)
                .take_while(|(a, e)| a == e)
                .count();
            panic!(
                "{zone} {}: occurrence {at} differs: ours {:?}, the reference's {:?} \
                 (after {:?}; {} ours, {} theirs)",
                case.name,
                actual.get(at).map(|&o| show(&schedule, o)),
                expected.get(at).map(|&o| show(&schedule, o)),
                at.checked_sub(1).map(|i| show(&schedule, expected[i])),
                actual.len(),
                expected.len(),
            );
        }
        if let (Some(id), Some(fire)) = (&case.id, &case.fire) {
            let ours: Vec<i64> = expected.iter().map(|&o| schedule.fire_at(id, o)).collect();
            assert_eq!(
                ours,
                undelta(fire),
                "{zone} {}: jittered firing instants",
                case.name
            );
            assert!(
                ours.iter().zip(&expected).any(|(f, o)| f != o),
                "{}: no jitter",
                case.name
            );
        }
    }
}

#[test]
fn calendar_reference_new_york() {
    check_zone("America/New_York");
}

#[test]
fn calendar_reference_london() {
    check_zone("Europe/London");
}

#[test]
fn calendar_reference_lord_howe() {
    check_zone("Australia/Lord_Howe");
}

#[test]
fn calendar_reference_kathmandu() {
    check_zone("Asia/Kathmandu");
}

#[test]
fn calendar_reference_apia() {
    check_zone("Pacific/Apia");
}

#[test]
fn calendar_reference_sao_paulo() {
    check_zone("America/Sao_Paulo");
}
