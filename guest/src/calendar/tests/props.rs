//! Properties of occurrences over random cron expressions, zones with odd
//! rules, policies and instants: strictly increasing, none skipped, none in
//! a gap, and equal, around daylight-saving transitions, to a brute-force
//! walk over every wall minute with its own matcher and jiff's
//! disambiguation.

use std::collections::BTreeSet;

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};
use proptest::prelude::*;

use crate::calendar::{CatchUp, Cron, GapPolicy, RepeatPolicy, Rule, Schedule, ScheduleSpec};

const ZONES: [&str; 10] = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "Pacific/Apia",
    "America/Sao_Paulo",
    "Pacific/Chatham",
    "Antarctica/Troll",
    "America/St_Johns",
    "UTC",
];

/// 1971 to 2090, in milliseconds.
const EARLY: i64 = 31_536_000_000;
const LATE: i64 = 3_786_825_600_000;

fn list(lo: u32, hi: u32) -> impl Strategy<Value = String> {
    prop::collection::btree_set(lo..=hi, 1..4)
        .prop_map(|s| s.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
}

fn field(lo: u32, hi: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_owned()),
        (1..=hi / 2).prop_map(|k| format!("*/{k}")),
        (lo..=hi, 0..=hi, 1..=4u32)
            .prop_map(move |(a, span, k)| { format!("{a}-{}/{k}", (a + span).min(hi)) }),
        list(lo, hi),
    ]
}

fn day_of_month() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just("*".to_owned()),
        1 => Just("L".to_owned()),
        1 => (1..=4u32).prop_map(|k| format!("*/{k}")),
        2 => list(1, 31),
        1 => (1..=31u32, 0..10u32).prop_map(|(a, span)| format!("{a}-{}", (a + span).min(31))),
    ]
}

fn month() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just("*".to_owned()),
        1 => Just("MAR,APR,SEP,OCT,NOV".to_owned()),
        1 => Just("jan-dec/3".to_owned()),
        1 => list(1, 12),
    ]
}

fn day_of_week() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just("*".to_owned()),
        1 => (0..=7u32, 1..=5u32).prop_map(|(d, n)| format!("{d}#{n}")),
        1 => (0..=7u32).prop_map(|d| format!("{d}L")),
        1 => Just("SAT,SUN".to_owned()),
        1 => list(0, 7),
        1 => Just("mon-fri".to_owned()),
    ]
}

/// Five fields, or six with seconds; hours lean to the small hours, where
/// daylight saving happens.
fn cron() -> impl Strategy<Value = String> {
    (
        prop_oneof![3 => Just(None), 1 => field(0, 59).prop_map(Some)],
        field(0, 59),
        prop_oneof![2 => field(0, 4), 1 => field(0, 23)],
        day_of_month(),
        month(),
        day_of_week(),
    )
        .prop_map(|(s, mi, h, dom, mo, dow)| match s {
            Some(s) => format!("{s} {mi} {h} {dom} {mo} {dow}"),
            None => format!("{mi} {h} {dom} {mo} {dow}"),
        })
}

fn policies() -> impl Strategy<Value = (GapPolicy, RepeatPolicy)> {
    (
        prop_oneof![Just(GapPolicy::ShiftForward), Just(GapPolicy::Skip)],
        prop_oneof![Just(RepeatPolicy::First), Just(RepeatPolicy::Both)],
    )
}

/// A schedule, or none when the random expression never matches.
fn schedule(expr: &str, zone: &str, (gap, repeat): (GapPolicy, RepeatPolicy)) -> Option<Schedule> {
    let mut spec = ScheduleSpec::new(
        Rule::Cron {
            expr: expr.to_owned(),
        },
        zone,
    );
    spec.gap = gap;
    spec.repeat = repeat;
    Schedule::new(spec).ok()
}

/// Whether `cron` matches `wall`, read straight from the fields (not through
/// the civil search).
fn matches(cron: &Cron, wall: DateTime) -> bool {
    matches_minute(cron, wall) && cron.seconds & (1 << wall.second()) != 0
}

/// Whether `cron` matches the minute of `wall`, whatever its second.
fn matches_minute(cron: &Cron, wall: DateTime) -> bool {
    let bit = |mask: u64, v: i8| mask & (1 << v) != 0;
    let day = wall.day();
    let len = wall.days_in_month();
    let weekday = wall.weekday().to_sunday_zero_offset();
    let by_date = bit(cron.days.into(), day) || (cron.last_day && day == len);
    let by_weekday = bit(cron.weekdays.into(), weekday)
        || bit(cron.nth[weekday as usize].into(), (day - 1) / 7 + 1)
        || (bit(cron.last_weekdays.into(), weekday) && day + 7 > len);
    let day_ok = if cron.days_star || cron.weekdays_star {
        by_date && by_weekday
    } else {
        by_date || by_weekday
    };
    day_ok
        && bit(cron.months.into(), wall.month())
        && bit(cron.hours.into(), wall.hour())
        && bit(cron.minutes, wall.minute())
}

/// Every occurrence in `(from, to)` (ms) by brute force: each wall second
/// the pattern allows, in every minute of the span, mapped by jiff's
/// disambiguation and the policies.
fn brute_force(
    cron: &Cron,
    zone: &TimeZone,
    policy: (GapPolicy, RepeatPolicy),
    from: i64,
    to: i64,
) -> Vec<i64> {
    // Offsets are within a day of UTC: these walls cover every instant.
    let day = 86_400;
    let start =
        Offset::UTC.to_datetime(Timestamp::from_second(from / 1000 - day).expect("in range"));
    let mut out = BTreeSet::new();
    let mut wall = start.with().second(0).build().expect("a datetime");
    let last = Offset::UTC.to_datetime(Timestamp::from_second(to / 1000 + day).expect("in range"));
    while wall <= last {
        if !matches_minute(cron, wall) {
            wall = wall
                .checked_add(jiff::SignedDuration::from_mins(1))
                .expect("in range");
            continue;
        }
        for s in (0..60).filter(|s| cron.seconds & (1 << s) != 0) {
            let w = wall.with().second(s).build().expect("a datetime");
            let instants = match zone.to_ambiguous_timestamp(w).offset() {
                AmbiguousOffset::Unambiguous { offset } => vec![offset.to_timestamp(w)],
                AmbiguousOffset::Gap { after, .. } => match policy.0 {
                    GapPolicy::Skip => vec![],
                    GapPolicy::ShiftForward => {
                        let early = after.to_timestamp(w).expect("in range");
                        vec![Ok(zone
                            .following(early)
                            .next()
                            .expect("the jump")
                            .timestamp())]
                    }
                },
                AmbiguousOffset::Fold { before, after } => match policy.1 {
                    RepeatPolicy::First => vec![before.to_timestamp(w)],
                    RepeatPolicy::Both => vec![before.to_timestamp(w), after.to_timestamp(w)],
                },
            };
            out.extend(
                instants
                    .into_iter()
                    .map(|t| t.expect("in range").as_millisecond()),
            );
        }
        wall = wall
            .checked_add(jiff::SignedDuration::from_mins(1))
            .expect("in range");
    }
    out.into_iter().filter(|&o| from < o && o < to).collect()
}

/// A transition of `zone` near `t` (or `t` itself in a zone without one).
fn transition_near(zone: &TimeZone, t: i64) -> i64 {
    let at = Timestamp::from_millisecond(t).expect("in range");
    zone.following(at)
        .next()
        .map_or(t, |tr| tr.timestamp().as_millisecond())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Around a transition, the walk finds exactly what a brute-force pass
    /// over every wall minute finds.
    #[test]
    fn calendar_props_agree_with_brute_force_around_transitions(
        expr in cron(), zone in prop::sample::select(&ZONES[..]), policy in policies(),
        t in EARLY..LATE,
    ) {
        let Some(s) = schedule(&expr, zone, policy) else { return Ok(()) };
        let cron = Cron::parse(&expr).expect("parsed once already");
        let mid = transition_near(s.zone(), t);
        let (from, to) = (mid - 86_400_000, mid + 86_400_000);
        let ours: Vec<i64> = s.occurrences_after(from).take_while(|&o| o < to).collect();
        prop_assert_eq!(ours, brute_force(&cron, s.zone(), policy, from, to), "{} in {}", expr, zone);
    }

    /// Strictly increasing, each the next after the instant before it, none
    /// between, and each either a matching wall time or (shifting forward)
    /// the instant a clock jumped.
    #[test]
    fn calendar_props_occurrences_are_ordered_and_complete(
        expr in cron(), zone in prop::sample::select(&ZONES[..]), policy in policies(),
        t in EARLY..LATE, between in 0.0f64..1.0,
    ) {
        let Some(s) = schedule(&expr, zone, policy) else { return Ok(()) };
        let cron = Cron::parse(&expr).expect("parsed once already");
        let mut before = t;
        for o in s.occurrences_after(t).take(12) {
            prop_assert!(o > before);
            prop_assert_eq!(s.next_after(o - 1), Some(o));
            let u = before + ((o - before) as f64 * between) as i64;
            if u < o {
                prop_assert_eq!(s.next_after(u), Some(o));
            }
            let at = Timestamp::from_millisecond(o).expect("in range");
            let wall = s.zone().to_datetime(at);
            let jumped = s.zone().preceding(at.checked_add(jiff::SignedDuration::from_nanos(1)).expect("in range"))
                .next()
                .is_some_and(|tr| tr.timestamp() == at);
            prop_assert!(
                matches(&cron, wall) || (policy.0 == GapPolicy::ShiftForward && jumped),
                "{} in {}: {} ({}) matches nothing", expr, zone, o, wall
            );
            if policy.1 == RepeatPolicy::First
                && let AmbiguousOffset::Fold { before: first, .. } = s.zone().to_ambiguous_timestamp(wall).offset()
            {
                prop_assert_eq!(first.to_timestamp(wall).expect("in range"), at, "{} fired a repeat", expr);
            }
            before = o;
        }
    }

    /// An interval fires at anchor + k * every, whatever the zone.
    #[test]
    fn calendar_props_intervals_count_real_time(
        every in 1u64..10_000_000_000, anchor in EARLY..LATE, t in EARLY..LATE,
        zone in prop::sample::select(&ZONES[..]),
    ) {
        let s = Schedule::new(ScheduleSpec::new(Rule::Interval { every_ms: every, anchor }, zone))
            .expect("a valid interval");
        let o = s.next_after(t).expect("before year 9999");
        prop_assert!(o > t && o >= anchor);
        prop_assert_eq!((o - anchor) % every as i64, 0);
        prop_assert!(o - every as i64 <= t || o == anchor);
    }

    /// Catching up only the latest gives the last of catching up all.
    #[test]
    fn calendar_props_catch_up_latest_is_last_of_all(
        expr in cron(), zone in prop::sample::select(&ZONES[..]),
        last in EARLY..LATE, down in 0i64..(8 * 3_600_000), window in 1u64..(2 * 3_600_000),
    ) {
        let Some(mut all) = schedule(&expr, zone, (GapPolicy::ShiftForward, RepeatPolicy::First)) else {
            return Ok(());
        };
        let mut spec = all.spec().clone();
        spec.catch_up = CatchUp::AllWithinWindow { window_ms: window };
        all = Schedule::new(spec.clone()).expect("valid");
        spec.catch_up = CatchUp::Latest { window_ms: window };
        let latest = Schedule::new(spec).expect("valid");
        let now = last + down;
        let every = all.catch_up(last, now, 100_000);
        let one = latest.catch_up(last, now, 100_000);
        prop_assert!(!every.more);
        prop_assert_eq!(one.fire.last(), every.fire.last());
        prop_assert!(every.fire.iter().all(|&o| o > last && o <= now && o >= now - window as i64));
        prop_assert_eq!(every.next, all.next_after(now));
    }
}
