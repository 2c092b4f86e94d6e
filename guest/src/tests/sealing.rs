//! Sealing runs: the mark, the timers retired and the awaited tasks withdrawn
//! in one call, and what a repeat answers.

use super::*;
use crate::model::{ArmOutcome, SealOutcome, Settlement};
use crate::runs;
use crate::tasks;
use crate::timers;

#[test]
fn seal_marks_the_run_retires_its_timers_and_withdraws_its_awaited_tasks() {
    let mut kv = MemKv::new();
    for e in ["a", "b", "c"] {
        arm(&mut kv, timer("r", e, 10));
    }
    arm(&mut kv, timer("other", "a", 10));
    // One of the run's timers is held by a sweeper: sealing retires it too.
    assert_eq!(
        timers::claim_due(&mut kv, 10, 1, 1_000)
            .expect("claim-due")
            .len(),
        1
    );
    open(&mut kv, task("open").of_run("r"));
    open(&mut kv, task("claimed").of_run("r"));
    open(&mut kv, task("escalated").of_run("r"));
    open(&mut kv, task("done").of_run("r"));
    open(&mut kv, task("not-awaited").of_run("r"));
    open(&mut kv, task("other-run").of_run("other"));
    tasks::claim(&mut kv, "claimed", "bob", &[], None, None).expect("claims");
    tasks::escalate(&mut kv, "escalated", None).expect("escalates");
    tasks::settle(&mut kv, "done", Settlement::Completed, None, None, None).expect("settles");

    let awaited = names(&[
        "open",
        "claimed",
        "escalated",
        "done",
        "other-run",
        "unknown",
        "claimed",
    ]);
    assert_eq!(runs::is_sealed(&mut kv, "r"), Ok(false));
    let outcome = runs::seal(&mut kv, "r", &awaited).expect("seals");
    assert_eq!(
        outcome,
        SealOutcome {
            timers_disarmed: 3,
            tasks_withdrawn: 3,
        }
    );
    assert_eq!(runs::is_sealed(&mut kv, "r"), Ok(true));
    assert_eq!(runs::is_sealed(&mut kv, "other"), Ok(false));
    for id in ["open", "claimed", "escalated"] {
        assert_eq!(stored(&mut kv, id).state, TaskState::Withdrawn, "{id}");
    }
    assert_eq!(stored(&mut kv, "done").state, TaskState::Completed);
    assert_eq!(stored(&mut kv, "not-awaited").state, TaskState::Open);
    assert_eq!(stored(&mut kv, "other-run").state, TaskState::Open);
    assert_eq!(timers::pending_count(&mut kv), Ok(1));
    assert_eq!(tasks::open_count(&mut kv), Ok(2));
    assert_eq!(
        timers::arm(&mut kv, &timer("r", "new", 10)),
        Ok(ArmOutcome::RunSealed)
    );
    assert_healthy(&mut kv);
}

#[test]
fn sealing_again_keeps_the_run_sealed_and_answers_zeros() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "a", 10));
    open(&mut kv, task("t").of_run("r"));
    let awaited = names(&["t"]);
    assert_eq!(
        runs::seal(&mut kv, "r", &awaited),
        Ok(SealOutcome {
            timers_disarmed: 1,
            tasks_withdrawn: 1,
        })
    );
    let again = writes_nothing(&mut kv, |kv| runs::seal(kv, "r", &awaited));
    assert_eq!(again, SealOutcome::default());
    assert_eq!(runs::is_sealed(&mut kv, "r"), Ok(true));
    assert_healthy(&mut kv);
}

#[test]
fn sealing_again_withdraws_awaited_tasks_opened_since() {
    // Opening a task does not consult the seal; a repeat seal applies the
    // same retirement to what it names.
    let mut kv = MemKv::new();
    runs::seal(&mut kv, "r", &[]).expect("seals");
    open(&mut kv, task("late").of_run("r"));
    assert_eq!(
        runs::seal(&mut kv, "r", &names(&["late"])),
        Ok(SealOutcome {
            timers_disarmed: 0,
            tasks_withdrawn: 1,
        })
    );
    assert_eq!(stored(&mut kv, "late").state, TaskState::Withdrawn);
    assert_healthy(&mut kv);
}

#[test]
fn sealing_a_run_nobody_knows_marks_it() {
    let mut kv = MemKv::new();
    assert_eq!(
        runs::seal(&mut kv, "ghost", &[]),
        Ok(SealOutcome::default())
    );
    assert_eq!(runs::is_sealed(&mut kv, "ghost"), Ok(true));
    assert_eq!(runs::is_sealed(&mut kv, "ghost2"), Ok(false));
    assert_eq!(runs::is_sealed(&mut kv, "ghos"), Ok(false));
    assert_healthy(&mut kv);
}

#[test]
fn is_sealed_on_an_empty_store_is_false_and_writes_nothing() {
    let mut kv = MemKv::new();
    assert!(!writes_nothing(&mut kv, |kv| runs::is_sealed(kv, "r")));
    assert!(kv.map.is_empty());
}
