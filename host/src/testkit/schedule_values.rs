//! Schedules as the scenarios spell them (the WIT's `schedule-spec` and
//! `schedule` in JSON, kebab-case, each variant `{CASE: PAYLOAD}`), to and
//! from the host's types. A spec argument needs `id`, `run`, `recurrence`
//! and `zone`; the scenario README lists the defaults of the rest.

use serde_json::{Value, json};

use leasehold_guest::calendar::{CatchUp, GapPolicy, Overlap, RepeatPolicy, Rule, ScheduleSpec};
use leasehold_guest::model::Phase;
use leasehold_guest::schedules::{Schedule, ScheduleDef};

/// One year: the default catch-up window.
const YEAR_MS: u64 = 365 * 86_400_000;

fn field<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    v.get(name).filter(|x| !x.is_null())
}

fn text(v: &Value, name: &str) -> String {
    field(v, name)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a schedule spec needs the string {name}: {v}"))
        .to_owned()
}

fn word<'v>(v: &'v Value, name: &str, default: &'v str) -> &'v str {
    field(v, name).and_then(Value::as_str).unwrap_or(default)
}

/// A `{CASE: PAYLOAD}` variant's case and payload.
fn variant(v: &Value) -> (&str, &Value) {
    let o = v.as_object().expect("a variant is an object");
    assert_eq!(o.len(), 1, "a variant has one case: {v}");
    let (k, p) = o.iter().next().expect("one case");
    (k.as_str(), p)
}

fn ms(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("milliseconds, not {v}"))
}

/// A `schedule-spec` argument.
pub(super) fn spec_arg(v: &Value) -> ScheduleDef {
    let rule = match variant(field(v, "recurrence").expect("a recurrence")) {
        ("cron", e) => Rule::Cron {
            expr: e.as_str().expect("a cron expression").to_owned(),
        },
        ("every", i) => Rule::Interval {
            every_ms: ms(&i["every-ms"]),
            anchor: i["anchor"].as_i64().expect("an anchor"),
        },
        (other, _) => panic!("no recurrence {other}"),
    };
    let catch_up = match field(v, "catch-up").map(variant) {
        None => CatchUp::AllWithinWindow { window_ms: YEAR_MS },
        Some(("all-within", w)) => CatchUp::AllWithinWindow { window_ms: ms(w) },
        Some(("latest-within", w)) => CatchUp::Latest { window_ms: ms(w) },
        Some(("none", _)) => CatchUp::None,
        Some((other, _)) => panic!("no catch-up {other}"),
    };
    let jitter = field(v, "jitter-ms").map_or(0, ms);
    ScheduleDef {
        id: text(v, "id"),
        run: text(v, "run"),
        case: field(v, "case").and_then(Value::as_str).map(str::to_owned),
        step: field(v, "step").map_or(0, |s| u32::try_from(ms(s)).expect("a step fits in u32")),
        phase: match word(v, "phase", "forward") {
            "forward" => Phase::Forward,
            "compensating" => Phase::Compensating,
            other => panic!("no phase {other}"),
        },
        spec: ScheduleSpec {
            rule,
            zone: text(v, "zone"),
            start: field(v, "start").and_then(Value::as_i64),
            end: field(v, "end").and_then(Value::as_i64),
            gap: match word(v, "gap", "shift-forward") {
                "shift-forward" => GapPolicy::ShiftForward,
                "skip" => GapPolicy::Skip,
                other => panic!("no gap policy {other}"),
            },
            repeat: match word(v, "repeat", "first") {
                "first" => RepeatPolicy::First,
                "both" => RepeatPolicy::Both,
                other => panic!("no repeat policy {other}"),
            },
            jitter_ms: (jitter > 0).then_some(jitter),
            overlap: match word(v, "overlap", "skip") {
                "skip" => Overlap::Skip,
                "buffer-one" => Overlap::BufferOne,
                "buffer-all" => Overlap::BufferAll,
                other => panic!("no overlap policy {other}"),
            },
            catch_up,
        },
    }
}

/// A `schedule` answer, as the WIT spells it.
pub(super) fn schedule_value(s: &Schedule) -> Value {
    let d = &s.def;
    let p = &d.spec;
    json!({
        "spec": {
            "id": d.id,
            "run": d.run,
            "case": d.case,
            "step": d.step,
            "phase": match d.phase {
                Phase::Forward => "forward",
                Phase::Compensating => "compensating",
            },
            "recurrence": match &p.rule {
                Rule::Cron { expr } => json!({ "cron": expr }),
                Rule::Interval { every_ms, anchor } => {
                    json!({"every": {"every-ms": every_ms, "anchor": anchor}})
                }
            },
            "zone": p.zone,
            "start": p.start,
            "end": p.end,
            "gap": match p.gap {
                GapPolicy::ShiftForward => "shift-forward",
                GapPolicy::Skip => "skip",
            },
            "repeat": match p.repeat {
                RepeatPolicy::First => "first",
                RepeatPolicy::Both => "both",
            },
            "overlap": match p.overlap {
                Overlap::Skip => "skip",
                Overlap::BufferOne => "buffer-one",
                Overlap::BufferAll => "buffer-all",
            },
            "catch-up": match p.catch_up {
                CatchUp::AllWithinWindow { window_ms } => json!({ "all-within": window_ms }),
                CatchUp::Latest { window_ms } => json!({ "latest-within": window_ms }),
                CatchUp::None => json!({ "none": null }),
            },
            "jitter-ms": p.jitter_ms.unwrap_or(0),
        },
        "paused": s.paused,
        "next-at": s.next_at,
        "last-at": s.last_at,
        "waiting": s.waiting,
        "revision": s.revision,
    })
}
