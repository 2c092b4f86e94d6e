//! Settling: `settle` is a compare-and-set from any pending state that keeps
//! the assignee, so the loser of a race never overwrites the winner, and
//! `withdraw-run` settles as withdrawn exactly the run's pending awaited
//! tasks.

use super::worklist_support::{claim, open_count};
use super::*;
use crate::model::{ClaimError, Settlement};
use crate::tasks;

// ---- settle -------------------------------------------------------------

#[test]
fn settle_is_compare_and_set_from_pending() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    assert_eq!(
        tasks::settle(&mut kv, "t", Settlement::Completed, None, None, None),
        Ok(true)
    );
    assert_eq!(stored(&mut kv, "t").state, TaskState::Completed);
    // The loser of the race never overwrites the winner.
    for s in [
        Settlement::Expired,
        Settlement::Withdrawn,
        Settlement::Completed,
    ] {
        assert!(!writes_nothing(&mut kv, |kv| tasks::settle(
            kv, "t", s, None, None, None
        )));
        assert_eq!(stored(&mut kv, "t").state, TaskState::Completed);
    }
    assert_eq!(open_count(&mut kv), 0);
    assert_healthy(&mut kv);
}

#[test]
fn settle_moves_every_pending_state() {
    let mut kv = MemKv::new();
    open(&mut kv, task("open"));
    open(&mut kv, task("claimed"));
    open(&mut kv, task("escalated"));
    claim(&mut kv, "claimed", "bob", &[]).expect("claims");
    tasks::escalate(&mut kv, "escalated", None).expect("escalates");
    assert_eq!(open_count(&mut kv), 3);
    assert_eq!(
        tasks::settle(&mut kv, "open", Settlement::Expired, None, None, None),
        Ok(true)
    );
    assert_eq!(
        tasks::settle(&mut kv, "claimed", Settlement::Completed, None, None, None),
        Ok(true)
    );
    assert_eq!(
        tasks::settle(
            &mut kv,
            "escalated",
            Settlement::Withdrawn,
            None,
            None,
            None
        ),
        Ok(true)
    );
    assert_eq!(stored(&mut kv, "open").state, TaskState::Expired);
    assert_eq!(stored(&mut kv, "claimed").state, TaskState::Completed);
    assert_eq!(stored(&mut kv, "escalated").state, TaskState::Withdrawn);
    assert_eq!(open_count(&mut kv), 0);
    assert_healthy(&mut kv);
}

#[test]
fn settle_keeps_the_assignee() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    claim(&mut kv, "t", "bob", &[]).expect("claims");
    assert_eq!(
        tasks::settle(&mut kv, "t", Settlement::Completed, None, None, None),
        Ok(true)
    );
    let t = stored(&mut kv, "t");
    assert_eq!(t.state, TaskState::Completed);
    assert_eq!(t.assignee.as_deref(), Some("bob"));
}

#[test]
fn settling_an_unknown_task_is_not_found() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "t", Settlement::Completed, None, None, None)
    });
    assert_eq!(e, ClaimError::NotFound("t".into()));
    open(&mut kv, task("u"));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "t", Settlement::Expired, None, None, None)
    });
    assert_eq!(e, ClaimError::NotFound("t".into()));
}

// ---- withdraw-run -------------------------------------------------------

#[test]
fn withdraw_run_moves_only_that_runs_pending_awaited_tasks() {
    let mut kv = MemKv::new();
    for id in ["open", "claimed", "escalated", "completed", "not-awaited"] {
        open(&mut kv, task(id).of_run("r"));
    }
    open(&mut kv, task("other-run").of_run("r2"));
    claim(&mut kv, "claimed", "bob", &[]).expect("claims");
    tasks::escalate(&mut kv, "escalated", None).expect("escalates");
    tasks::settle(
        &mut kv,
        "completed",
        Settlement::Completed,
        None,
        None,
        None,
    )
    .expect("settles");
    let awaited = names(&[
        "open",
        "claimed",
        "escalated",
        "completed",
        "other-run",
        "unknown",
        "open",
    ]);
    assert_eq!(tasks::withdraw_run(&mut kv, "r", &awaited), Ok(3));
    for id in ["open", "claimed", "escalated"] {
        assert_eq!(stored(&mut kv, id).state, TaskState::Withdrawn, "{id}");
    }
    assert_eq!(stored(&mut kv, "claimed").assignee.as_deref(), Some("bob"));
    assert_eq!(stored(&mut kv, "completed").state, TaskState::Completed);
    assert_eq!(stored(&mut kv, "not-awaited").state, TaskState::Open);
    assert_eq!(stored(&mut kv, "other-run").state, TaskState::Open);
    assert_eq!(tasks::get(&mut kv, "unknown"), Ok(None));
    assert_eq!(open_count(&mut kv), 2);
    // Again: nothing left to move.
    assert_eq!(
        writes_nothing(&mut kv, |kv| tasks::withdraw_run(kv, "r", &awaited)),
        0
    );
    assert_healthy(&mut kv);
}

#[test]
fn withdraw_run_with_nothing_awaited_moves_nothing() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").of_run("r"));
    assert_eq!(tasks::withdraw_run(&mut kv, "r", &[]), Ok(0));
    assert_eq!(stored(&mut kv, "t").state, TaskState::Open);
}
