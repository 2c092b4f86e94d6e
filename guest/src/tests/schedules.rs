//! Schedules through the timer verbs: each occurrence is an ordinary timer
//! claimed with `claim-due`, the next armed in the same call; catch-up and
//! overlap decide what fires after downtime and while one still runs;
//! pause, resume, trigger and remove; refusals name their field and write
//! nothing.

use super::*;
use crate::calendar::{CatchUp, GapPolicy, Overlap, Rule, ScheduleSpec};
use crate::schedules::{self, ScheduleDef, effect_of};
use crate::timers;

const MINUTE: i64 = 60_000;
/// 2024-01-01T00:00:00Z.
const T0: i64 = 1_704_067_200_000;
/// Longer than the tests' steps: a claim lapses only where a test says.
const LEASE: u32 = 600_000;

fn def(id: &str, expr: &str, zone: &str) -> ScheduleDef {
    ScheduleDef {
        id: id.into(),
        run: "r".into(),
        case: None,
        step: 1,
        phase: Phase::Forward,
        spec: ScheduleSpec::new(Rule::Cron { expr: expr.into() }, zone),
    }
}

fn every_minute(id: &str) -> ScheduleDef {
    def(id, "* * * * *", "UTC")
}

/// Claims what is due at `now`, answering the occurrences' instants.
fn claim(kv: &mut MemKv, now: i64) -> Vec<i64> {
    timers::claim_due(kv, now, 100, LEASE)
        .expect("claim-due")
        .into_iter()
        .map(|t| {
            schedules::parse_effect(&t.effect)
                .map(|(_, at)| at)
                .expect("an occurrence")
        })
        .collect()
}

/// Claims at `now` again and again until nothing more is due.
fn drain(kv: &mut MemKv, now: i64) -> Vec<i64> {
    let mut all = Vec::new();
    loop {
        let got = claim(kv, now);
        if got.is_empty() {
            return all;
        }
        all.extend(got);
    }
}

fn done(kv: &mut MemKv, id: &str, at: i64) {
    assert!(timers::disarm(kv, "r", &effect_of(id, at)).expect("disarm"));
}

#[test]
fn each_occurrence_fires_once_and_claiming_it_arms_the_next() {
    let mut kv = MemKv::new();
    let s = schedules::add(&mut kv, &every_minute("m"), T0 + 30_000).expect("add");
    assert_eq!(s.next_at, Some(T0 + MINUTE));
    assert_eq!(s.revision, 1);
    assert_eq!(timers::pending_count(&mut kv), Ok(1));
    assert!(claim(&mut kv, T0 + 59_999).is_empty());
    assert_eq!(claim(&mut kv, T0 + MINUTE), [T0 + MINUTE]);
    // Claimed and armed: this occurrence under its lease, the next waiting.
    assert_eq!(timers::pending_count(&mut kv), Ok(2));
    let s = schedules::get(&mut kv, "m").expect("get").expect("there");
    assert_eq!(
        (s.next_at, s.last_at),
        (Some(T0 + 2 * MINUTE), Some(T0 + MINUTE))
    );
    done(&mut kv, "m", T0 + MINUTE);
    assert_eq!(claim(&mut kv, T0 + 2 * MINUTE + 5), [T0 + 2 * MINUTE]);
    // The lease lapses before the work is done: the same occurrence comes
    // back, and nothing more is armed for it.
    let again = T0 + 2 * MINUTE + 5 + i64::from(LEASE);
    assert_eq!(claim(&mut kv, again), [T0 + 2 * MINUTE]);
    assert_eq!(timers::pending_count(&mut kv), Ok(2));
}

#[test]
fn after_downtime_all_within_the_window_fire_once_each_oldest_first() {
    let mut kv = MemKv::new();
    let mut d = every_minute("m");
    d.spec.catch_up = CatchUp::AllWithinWindow {
        window_ms: 10 * MINUTE as u64,
    };
    d.spec.overlap = Overlap::BufferAll;
    schedules::add(&mut kv, &d, T0).expect("add");
    assert_eq!(claim(&mut kv, T0), [T0]);
    done(&mut kv, "m", T0);
    // Down for half an hour: minutes 21 to 30 are within the window.
    let now = T0 + 30 * MINUTE + 30_000;
    let mut fired = Vec::new();
    loop {
        let got = claim(&mut kv, now);
        if got.is_empty() {
            break;
        }
        for at in got {
            done(&mut kv, "m", at);
            fired.push(at);
        }
    }
    assert_eq!(
        fired,
        (21..=30).map(|m| T0 + m * MINUTE).collect::<Vec<_>>()
    );
    let s = schedules::get(&mut kv, "m").expect("get").expect("there");
    assert_eq!(s.next_at, Some(T0 + 31 * MINUTE));
}

#[test]
fn after_downtime_latest_fires_only_the_latest_and_none_fires_nothing() {
    for (policy, want) in [
        (
            CatchUp::Latest {
                window_ms: 10 * MINUTE as u64,
            },
            vec![T0 + 30 * MINUTE],
        ),
        (CatchUp::None, vec![]),
        // The latest fell out of a 10 s window.
        (CatchUp::Latest { window_ms: 10_000 }, vec![]),
    ] {
        let mut kv = MemKv::new();
        let mut d = every_minute("m");
        d.spec.catch_up = policy;
        schedules::add(&mut kv, &d, T0).expect("add");
        let now = T0 + 30 * MINUTE + 30_000;
        assert_eq!(drain(&mut kv, now), want, "{policy:?}");
        // From then on, on time again.
        let s = schedules::get(&mut kv, "m").expect("get").expect("there");
        assert_eq!(s.next_at, Some(T0 + 31 * MINUTE), "{policy:?}");
        for at in want {
            done(&mut kv, "m", at);
        }
        assert_eq!(claim(&mut kv, T0 + 31 * MINUTE), [T0 + 31 * MINUTE]);
    }
}

#[test]
fn a_late_claim_within_the_grace_is_on_time_whatever_the_policy() {
    let mut kv = MemKv::new();
    let mut d = every_minute("m");
    d.spec.catch_up = CatchUp::None;
    schedules::add(&mut kv, &d, T0).expect("add");
    let grace = schedules::firing::GRACE_MS;
    assert_eq!(claim(&mut kv, T0 + grace), [T0]);
}

#[test]
fn overlap_skip_drops_what_falls_due_while_one_runs() {
    let mut kv = MemKv::new();
    schedules::add(&mut kv, &every_minute("m"), T0).expect("add");
    assert_eq!(claim(&mut kv, T0), [T0]);
    // Still running (not disarmed): minute 1 is dropped, minute 2 is armed.
    assert!(claim(&mut kv, T0 + MINUTE).is_empty());
    done(&mut kv, "m", T0);
    assert_eq!(claim(&mut kv, T0 + 2 * MINUTE), [T0 + 2 * MINUTE]);
}

#[test]
fn overlap_buffer_one_keeps_one_waiting_and_lets_it_out_when_the_running_one_is_done() {
    let mut kv = MemKv::new();
    let mut d = every_minute("m");
    d.spec.overlap = Overlap::BufferOne;
    schedules::add(&mut kv, &d, T0).expect("add");
    assert_eq!(claim(&mut kv, T0), [T0]);
    assert!(claim(&mut kv, T0 + MINUTE).is_empty());
    assert!(claim(&mut kv, T0 + 2 * MINUTE).is_empty());
    let s = schedules::get(&mut kv, "m").expect("get").expect("there");
    assert_eq!(s.waiting, [T0 + MINUTE]);
    // Done at 2:10: minute 1 is let out at once, minute 2 stayed dropped.
    kv.now = T0 + 2 * MINUTE + 10_000;
    done(&mut kv, "m", T0);
    assert_eq!(claim(&mut kv, T0 + 2 * MINUTE + 10_000), [T0 + MINUTE]);
    let s = schedules::get(&mut kv, "m").expect("get").expect("there");
    assert!(s.waiting.is_empty());
    assert_eq!(s.last_at, Some(T0 + MINUTE));
}

#[test]
fn overlap_buffer_all_keeps_every_one_waiting_in_order() {
    let mut kv = MemKv::new();
    let mut d = every_minute("m");
    d.spec.overlap = Overlap::BufferAll;
    schedules::add(&mut kv, &d, T0).expect("add");
    assert_eq!(claim(&mut kv, T0), [T0]);
    for m in 1..=3 {
        assert!(claim(&mut kv, T0 + m * MINUTE).is_empty());
    }
    let mut order = Vec::new();
    let mut running = T0;
    kv.now = T0 + 3 * MINUTE + 1;
    for _ in 0..3 {
        done(&mut kv, "m", running);
        let got = claim(&mut kv, T0 + 3 * MINUTE + 1);
        assert_eq!(got.len(), 1);
        running = got[0];
        order.push(running);
    }
    assert_eq!(order, [T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE]);
}

#[test]
fn a_pause_fires_nothing_and_a_resume_starts_from_now() {
    let mut kv = MemKv::new();
    schedules::add(&mut kv, &every_minute("m"), T0).expect("add");
    let s = schedules::pause(&mut kv, "m", "maintenance").expect("pause");
    assert_eq!(
        (s.paused.as_deref(), s.next_at),
        (Some("maintenance"), None)
    );
    assert_eq!(timers::pending_count(&mut kv), Ok(0));
    assert!(claim(&mut kv, T0 + 10 * MINUTE).is_empty());
    let s = schedules::resume(&mut kv, "m", T0 + 10 * MINUTE + 1).expect("resume");
    assert_eq!((s.paused, s.next_at), (None, Some(T0 + 11 * MINUTE)));
    assert_eq!(s.revision, 3);
    // Resuming a running schedule changes nothing.
    let again = schedules::resume(&mut kv, "m", T0 + 10 * MINUTE + 1).expect("resume");
    assert_eq!(again.revision, 3);
    assert_eq!(claim(&mut kv, T0 + 11 * MINUTE), [T0 + 11 * MINUTE]);
}

#[test]
fn a_trigger_arms_one_extra_occurrence_now_and_the_schedule_goes_on() {
    let mut kv = MemKv::new();
    schedules::add(&mut kv, &every_minute("m"), T0).expect("add");
    let t = schedules::trigger(&mut kv, "m", T0 + 5).expect("trigger");
    assert_eq!(
        (t.effect.as_str(), t.fire_at),
        ("schedule/m/1704067200005", T0 + 5)
    );
    schedules::trigger(&mut kv, "m", T0 + 5).expect("trigger again");
    assert_eq!(timers::pending_count(&mut kv), Ok(2));
    assert_eq!(claim(&mut kv, T0 + 5), [T0, T0 + 5]);
    let s = schedules::get(&mut kv, "m").expect("get").expect("there");
    assert_eq!(s.next_at, Some(T0 + MINUTE));
}

#[test]
fn disarming_the_armed_occurrence_skips_it_and_remove_retires_the_schedule() {
    let mut kv = MemKv::new();
    schedules::add(&mut kv, &every_minute("m"), T0).expect("add");
    done(&mut kv, "m", T0);
    let s = schedules::get(&mut kv, "m").expect("get").expect("there");
    assert_eq!(s.next_at, Some(T0 + MINUTE));
    assert!(schedules::remove(&mut kv, "m").expect("remove"));
    assert!(!schedules::remove(&mut kv, "m").expect("remove again"));
    assert_eq!(timers::pending_count(&mut kv), Ok(0));
    assert!(claim(&mut kv, T0 + 10 * MINUTE).is_empty());
}

#[test]
fn a_wall_time_in_a_gap_fires_after_it_or_not_at_all() {
    // 02:30 does not exist in New York on 2024-03-10.
    let mut kv = MemKv::new();
    let shift = def("shift", "30 2 * * *", "America/New_York");
    let mut skip = def("skip", "30 2 * * *", "America/New_York");
    skip.spec.gap = GapPolicy::Skip;
    schedules::add(&mut kv, &shift, T0).expect("add");
    schedules::add(&mut kv, &skip, T0).expect("add");
    // 2024-03-09T00:00Z.
    let from = 1_709_942_400_000;
    let s = schedules::next_occurrences(&mut kv, "shift", from, 3).expect("next");
    let k = schedules::next_occurrences(&mut kv, "skip", from, 2).expect("next");
    // 03-09 02:30 EST (07:30Z); 03-10 03:00 EDT (07:00Z); 03-11 02:30 EDT.
    assert_eq!(s, [1_709_969_400_000, 1_710_054_000_000, 1_710_138_600_000]);
    assert_eq!(k, [1_709_969_400_000, 1_710_138_600_000]);
}

#[test]
fn a_bad_spec_is_refused_naming_its_field_and_nothing_is_written() {
    let mut kv = MemKv::new();
    schedules::add(&mut kv, &every_minute("taken"), T0).expect("add");
    crate::runs::seal(&mut kv, "sealed", &[]).expect("seal");
    let mut interval = every_minute("i");
    interval.spec.rule = Rule::Interval {
        every_ms: 0,
        anchor: T0,
    };
    let mut ends = every_minute("e");
    ends.spec.start = Some(T0);
    ends.spec.end = Some(T0 - 1);
    let mut sealed = every_minute("s");
    sealed.run = "sealed".into();
    let long = every_minute(&"x".repeat(201));
    for (d, field) in [
        (def("z", "* * * * *", "Mars/Olympus_Mons"), "zone:"),
        (def("c", "* 25 * * *", "UTC"), "hour"),
        (def("f", "0 0 30 2 *", "UTC"), "cron:"),
        (interval, "every-ms:"),
        (ends, "end:"),
        (every_minute("taken"), "id:"),
        (sealed, "run:"),
        (long, "id is 201"),
    ] {
        let err = fails_cleanly(&mut kv, |kv| schedules::add(kv, &d, T0));
        match err {
            StoreError::Invalid(why) => assert!(why.contains(field), "{why} names {field}"),
            other => panic!("{other:?}"),
        }
    }
    for n in [0, 1001] {
        fails_cleanly(&mut kv, |kv| {
            schedules::next_occurrences(kv, "taken", T0, n)
        });
    }
    fails_cleanly(&mut kv, |kv| schedules::pause(kv, "taken", ""));
    assert_eq!(
        fails_cleanly(&mut kv, |kv| schedules::pause(kv, "nope", "n")),
        StoreError::NotFound("nope".into())
    );
    fails_cleanly(&mut kv, |kv| schedules::trigger(kv, "nope", T0));
}

#[test]
fn schedules_list_by_id_in_pages() {
    let mut kv = MemKv::new();
    for id in ["c", "a", "b", "d"] {
        schedules::add(&mut kv, &every_minute(id), T0).expect("add");
    }
    let page = schedules::list(&mut kv, 2, None).expect("list");
    let ids: Vec<_> = page.schedules.iter().map(|r| r.def.id.as_str()).collect();
    assert_eq!((ids, page.next.as_deref()), (vec!["a", "b"], Some("b")));
    // The last page is full, and says no more follow.
    let page = schedules::list(&mut kv, 2, Some("b")).expect("list");
    let ids: Vec<_> = page.schedules.iter().map(|r| r.def.id.as_str()).collect();
    assert_eq!((ids, page.next), (vec!["c", "d"], None));
}

#[test]
fn sealing_or_disarming_the_run_ends_its_schedules_and_the_check_agrees() {
    for sealed in [true, false] {
        let mut kv = MemKv::new();
        let mut buffered = every_minute("m");
        buffered.spec.overlap = Overlap::BufferAll;
        schedules::add(&mut kv, &buffered, T0).expect("add");
        schedules::add(&mut kv, &every_minute("n"), T0).expect("add");
        assert_eq!(claim(&mut kv, T0), [T0, T0]);
        // "n" drops minute 1 (overlap skip), "m" keeps it waiting.
        assert!(claim(&mut kv, T0 + MINUTE).is_empty());
        let m = schedules::get(&mut kv, "m").expect("get").expect("there");
        assert_eq!(m.waiting, [T0 + MINUTE]);
        if sealed {
            crate::runs::seal(&mut kv, "r", &[]).expect("seal");
        } else {
            timers::disarm_run(&mut kv, "r").expect("disarm-run");
        }
        for id in ["m", "n"] {
            let s = schedules::get(&mut kv, id).expect("get").expect("there");
            assert_eq!(s.next_at, None, "{id} ended (sealed: {sealed})");
            assert!(s.waiting.is_empty(), "{id}");
        }
        assert_eq!(timers::pending_count(&mut kv), Ok(0));
        assert!(claim(&mut kv, T0 + 10 * MINUTE).is_empty());
        assert_eq!(check::check(&mut kv), Ok(vec![]), "sealed: {sealed}");
    }
}

#[test]
fn the_check_finds_a_schedule_whose_next_occurrence_has_no_timer() {
    let mut kv = MemKv::new();
    schedules::add(&mut kv, &every_minute("m"), T0).expect("add");
    assert_eq!(check::check(&mut kv), Ok(vec![]));
    // Retired behind the rules' back, as damage would.
    let row = crate::store::load_timer(&mut kv, "r", &effect_of("m", T0))
        .expect("read")
        .expect("armed");
    crate::store::retire_timer(&mut kv, "damage", &row).expect("retire");
    let found = check::check(&mut kv).expect("the check runs");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].structure, "schedule");
    assert_eq!(found[0].subject, "m");
    assert!(found[0].detail.contains("has no timer"), "{found:?}");
}
