//! Sealing runs: the mark, the timers it retires and the tasks it withdraws,
//! all in one call.

use leasehold_host::{ArmOutcome, SealOutcome, Settlement, TaskState};
use leasehold_tests::*;

#[test]
fn seal_withdraws_exactly_the_awaited_pending_tasks_and_retires_the_runs_timers() {
    let (t, _db) = temp_tenant();
    t.open(&task("open", 1).in_run("r")).expect("open");
    t.open(&task("claimed", 2).in_run("r")).expect("open");
    t.claim("claimed", "alice", &[], None).expect("claim");
    t.open(&task("esc", 3).in_run("r")).expect("open");
    t.escalate("esc").expect("escalate");
    t.open(&task("done", 4).in_run("r")).expect("open");
    t.settle("done", Settlement::Completed, None)
        .expect("settle");
    t.open(&task("unawaited", 5).in_run("r")).expect("open");
    t.open(&task("foreign", 6).in_run("r2")).expect("open");
    t.arm(&timer("r", "a", 10)).expect("arm");
    t.arm(&timer("r", "b", 20)).expect("arm");
    t.arm(&timer("r2", "a", 10)).expect("arm");
    t.claim_due(10, 1, 60_000).expect("hold r/a");

    assert!(!t.is_sealed("r").expect("is-sealed"));
    let out = t
        .seal("r", &["open", "claimed", "esc", "done", "foreign", "ghost"])
        .expect("seal");
    assert_eq!(
        out,
        SealOutcome {
            timers_disarmed: 2,
            tasks_withdrawn: 3,
        }
    );
    assert!(t.is_sealed("r").expect("is-sealed"));
    assert!(!t.is_sealed("r2").expect("is-sealed"));
    for id in ["open", "claimed", "esc"] {
        assert_eq!(state_of(&t, id), TaskState::Withdrawn, "{id}");
    }
    assert_eq!(state_of(&t, "done"), TaskState::Completed);
    assert_eq!(state_of(&t, "unawaited"), TaskState::Open);
    assert_eq!(state_of(&t, "foreign"), TaskState::Open);
    assert_eq!(t.open_count().expect("count"), 2);
    assert_eq!(t.pending_count().expect("count"), 1);
    let left = t.claim_due(1_000_000, 10, 1).expect("sweep");
    assert_eq!(identities(&left), [("r2".to_owned(), "a".to_owned())]);
    assert_consistent(&t);
}

#[test]
fn sealing_again_keeps_the_run_sealed_and_answers_zeros() {
    let (t, _db) = temp_tenant();
    t.open(&task("t1", 1).in_run("r")).expect("open");
    t.arm(&timer("r", "a", 10)).expect("arm");
    let first = t.seal("r", &["t1"]).expect("seal");
    assert_eq!(
        first,
        SealOutcome {
            timers_disarmed: 1,
            tasks_withdrawn: 1,
        }
    );
    let second = t.seal("r", &["t1"]).expect("seal again");
    assert_eq!(second, SealOutcome::default(), "a repeat moves nothing");
    assert!(t.is_sealed("r").expect("is-sealed"));
    assert_eq!(state_of(&t, "t1"), TaskState::Withdrawn);
    assert_consistent(&t);
}

#[test]
fn sealing_again_withdraws_what_it_names_that_is_still_pending() {
    let (t, _db) = temp_tenant();
    t.seal("r", &[]).expect("seal");
    // A task opened for a run after it was sealed is still withdrawn by a
    // later seal that names it.
    t.open(&task("late", 1).in_run("r")).expect("open");
    assert_eq!(
        t.arm(&timer("r", "a", 10)).expect("arm"),
        ArmOutcome::RunSealed
    );
    let out = t.seal("r", &["late"]).expect("seal again");
    assert_eq!(
        out,
        SealOutcome {
            timers_disarmed: 0,
            tasks_withdrawn: 1,
        }
    );
    assert_eq!(state_of(&t, "late"), TaskState::Withdrawn);
    assert_eq!(t.open_count().expect("count"), 0);
    assert_consistent(&t);
}

#[test]
fn a_run_is_not_sealed_until_sealed_and_sealing_touches_no_other_run() {
    let (t, _db) = temp_tenant();
    assert!(!t.is_sealed("r").expect("is-sealed"));
    t.open(&task("t1", 1).in_run("r-other")).expect("open");
    t.arm(&timer("r-other", "a", 10)).expect("arm");
    let out = t.seal("r", &["t1"]).expect("seal");
    assert_eq!(out, SealOutcome::default());
    assert!(t.is_sealed("r").expect("is-sealed"));
    assert!(!t.is_sealed("r-other").expect("is-sealed"));
    assert_eq!(state_of(&t, "t1"), TaskState::Open);
    assert_eq!(t.pending_count().expect("count"), 1);
    assert_consistent(&t);
}
