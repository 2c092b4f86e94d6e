//! A worker's batches, natively: `claim-batch` claims the queue's heads in
//! `queue`'s order with its exclusions, each with its own lease and record;
//! `settle-and-claim` answers each finished task on its own (settled,
//! already, not held, not found, refused) and then claims; bad input is
//! refused whole and writes nothing.

use super::worklist_support::claim;
use super::*;
use crate::changes;
use crate::kv::{Kv, Write, buffered};
use crate::model::{Decision, Finished, Lease, OutcomeRule, QueueQuery, SettleAnswer, Settlement};
use crate::tasks;

fn query(actor: &str) -> QueueQuery {
    QueueQuery {
        roles: names(&["a"]),
        actor: Some(actor.to_owned()),
        limit: 1,
        after: None,
    }
}

fn lease(now: i64, lease_ms: u32) -> Option<Lease> {
    Some(Lease { now, lease_ms })
}

fn done(id: &str) -> Finished {
    Finished {
        id: id.into(),
        settlement: Settlement::Completed,
        decision: None,
    }
}

/// Five tasks of role `a` in a known queue order, one of them barring ann,
/// and one of another role.
fn backlog(kv: &mut MemKv) {
    for (i, id) in ["t1", "t2", "t3", "t4", "t5"].iter().enumerate() {
        open(kv, task(id).roles(&["a"]).created(10 + i as i64));
    }
    open(
        kv,
        task("urgent")
            .roles(&["a"])
            .priority(Priority::Urgent)
            .created(50),
    );
    open(
        kv,
        task("barred")
            .roles(&["a"])
            .priority(Priority::Urgent)
            .created(0)
            .excluding(&["ann"]),
    );
    open(kv, task("other").roles(&["b"]).created(0));
}

#[test]
fn claim_batch_claims_the_heads_in_queue_order_each_leased_and_recorded() {
    let mut kv = MemKv::new();
    backlog(&mut kv);
    let page = tasks::queue(
        &mut kv,
        &QueueQuery {
            limit: 3,
            ..query("ann")
        },
    )
    .expect("a page");
    let claimed =
        tasks::claim_batch(&mut kv, &query("ann"), lease(100, 50).as_ref(), 3).expect("claims");
    assert_eq!(
        ids(&claimed),
        ids(&page.tasks),
        "queue order, exclusions kept"
    );
    assert_eq!(ids(&claimed), ["urgent", "t1", "t2"]);
    for t in &claimed {
        assert_eq!(t.state, TaskState::Claimed);
        assert_eq!(t.assignee.as_deref(), Some("ann"));
        assert_eq!(t.lease_until, Some(150));
        let h = changes::history(&mut kv, &t.id, None, 10).expect("history");
        let last = h.last().expect("an entry");
        assert_eq!(
            (last.verb.as_str(), last.actor.as_deref()),
            ("claim-batch", Some("ann"))
        );
    }
    // The rest: fewer than asked for, never the barred task or another role's.
    let rest = tasks::claim_batch(&mut kv, &query("ann"), None, 100).expect("claims");
    assert_eq!(ids(&rest), ["t3", "t4", "t5"]);
    let none = writes_nothing(&mut kv, |kv| tasks::claim_batch(kv, &query("ann"), None, 5));
    assert!(none.is_empty());
    assert_eq!(
        tasks::leased_count(&mut kv).expect("a count"),
        3,
        "the three leased claims"
    );
    assert_healthy(&mut kv);
}

#[test]
fn claim_batch_refuses_a_count_outside_one_to_a_hundred_and_needs_an_actor() {
    let mut kv = MemKv::new();
    backlog(&mut kv);
    for count in [0, 101, u32::MAX] {
        let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
            tasks::claim_batch(kv, &query("ann"), None, count)
        }));
        assert!(why.contains("count"), "{why}");
    }
    let no_actor = QueueQuery {
        actor: None,
        ..query("ann")
    };
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
        tasks::claim_batch(kv, &no_actor, None, 2)
    }));
    assert!(why.contains("actor"), "{why}");
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
        tasks::claim_batch(kv, &query("ann"), lease(0, 0).as_ref(), 2)
    }));
    assert!(why.contains("lease-ms"), "{why}");
}

#[test]
fn settle_and_claim_answers_each_finished_task_on_its_own_then_claims() {
    let mut kv = MemKv::new();
    backlog(&mut kv);
    let mine = tasks::claim_batch(&mut kv, &query("ann"), None, 2).expect("claims");
    assert_eq!(ids(&mine), ["urgent", "t1"]);
    claim(&mut kv, "t2", "bob", &["a"]).expect("bob claims");
    tasks::settle(&mut kv, "t1", Settlement::Withdrawn, None, None, None).expect("withdrawn");
    let answer = tasks::settle_and_claim(
        &mut kv,
        &[
            done("urgent"),
            done("t1"),
            done("t2"),
            done("t3"),
            done("ghost"),
            done("bad\nid"),
            done("urgent"),
        ],
        &query("ann"),
        lease(5, 10).as_ref(),
        2,
    )
    .expect("answers");
    assert_eq!(
        answer.settled,
        [
            SettleAnswer::Settled,
            SettleAnswer::Already(TaskState::Withdrawn),
            SettleAnswer::NotHeld(Some("bob".into())),
            SettleAnswer::NotHeld(None),
            SettleAnswer::NotFound,
            SettleAnswer::Refused(answer_text(&answer.settled[5])),
            SettleAnswer::Already(TaskState::Completed),
        ]
    );
    assert!(
        answer_text(&answer.settled[5]).contains("id"),
        "{:?}",
        answer.settled[5]
    );
    assert_eq!(ids(&answer.claimed), ["t3", "t4"]);
    assert!(answer.claimed.iter().all(|t| t.lease_until == Some(15)));
    let urgent = stored(&mut kv, "urgent").state;
    assert_eq!(urgent, TaskState::Completed);
    let h = changes::history(&mut kv, "urgent", None, 10).expect("history");
    let last = h.last().expect("an entry");
    assert_eq!(
        (last.verb.as_str(), last.actor.as_deref()),
        ("settle-and-claim", Some("ann"))
    );
    assert_healthy(&mut kv);
}

#[test]
fn a_decision_is_checked_per_task_and_a_refused_one_leaves_its_task_held() {
    let mut kv = MemKv::new();
    kv.now = 42;
    let mut t = task("t1").roles(&["a"]);
    t.outcomes = vec![OutcomeRule {
        name: "rejected".into(),
        needs_reason: true,
        output_schema: None,
    }];
    open(&mut kv, t.clone());
    t.id = "t2".into();
    open(&mut kv, t);
    tasks::claim_batch(&mut kv, &query("ann"), None, 2).expect("claims");
    let decided = |id: &str, reason: Option<&str>| Finished {
        id: id.into(),
        settlement: Settlement::Completed,
        decision: Some(Decision {
            outcome: "rejected".into(),
            reason: reason.map(Into::into),
            output: None,
        }),
    };
    let answer = tasks::settle_and_claim(
        &mut kv,
        &[decided("t1", None), decided("t2", Some("duplicate"))],
        &query("ann"),
        None,
        0,
    )
    .expect("answers");
    assert!(
        matches!(&answer.settled[0], SettleAnswer::Refused(why) if why.contains("reason")),
        "{:?}",
        answer.settled[0]
    );
    assert_eq!(answer.settled[1], SettleAnswer::Settled);
    assert!(answer.claimed.is_empty(), "a count of 0 claims nothing");
    assert_eq!(stored(&mut kv, "t1").state, TaskState::Claimed);
    let t2 = tasks::get(&mut kv, "t2").expect("reads").expect("exists");
    let kept = t2.decision.expect("kept");
    assert_eq!((kept.by.as_deref(), kept.at), (Some("ann"), 42));
    assert_healthy(&mut kv);
}

#[test]
fn settle_and_claim_refuses_bad_input_whole_and_writes_nothing() {
    let mut kv = MemKv::new();
    backlog(&mut kv);
    tasks::claim_batch(&mut kv, &query("ann"), None, 1).expect("claims");
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
        tasks::settle_and_claim(kv, &[done("urgent")], &query("ann"), None, 101)
    }));
    assert!(why.contains("count"), "{why}");
    let many: Vec<Finished> = (0..101).map(|i| done(&format!("x{i}"))).collect();
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
        tasks::settle_and_claim(kv, &many, &query("ann"), None, 1)
    }));
    assert!(why.contains("done"), "{why}");
    let no_actor = QueueQuery {
        actor: None,
        ..query("ann")
    };
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
        tasks::settle_and_claim(kv, &[done("urgent")], &no_actor, None, 1)
    }));
    assert!(why.contains("actor"), "{why}");
    assert_eq!(stored(&mut kv, "urgent").state, TaskState::Claimed);
}

/// Through the write buffer, as every host runs a call: a steady worker's
/// batch writes each counter shard once, and a shard the batch moved up
/// and down back to where it was is not written at all.
#[test]
fn a_batch_writes_each_key_once_and_a_counter_back_where_it_was_not_at_all() {
    let mut kv = MemKv::new();
    for i in 0..20 {
        open(&mut kv, task(&format!("t{i:02}")).roles(&["a"]).created(i));
    }
    let first = run_buffered(&mut kv, |b| {
        tasks::claim_batch(b, &query("ann"), lease(0, 100).as_ref(), 10)
    });
    assert_eq!(first.len(), 10);
    let done: Vec<Finished> = first.iter().map(|t| done(&t.id)).collect();
    let before = kv.map.clone();
    let (answer, batch) = buffered(&mut kv, |b| {
        tasks::settle_and_claim(b, &done, &query("ann"), lease(0, 100).as_ref(), 10)
    });
    let answer = answer.expect("answers");
    assert!(answer.settled.iter().all(|a| *a == SettleAnswer::Settled));
    assert_eq!(answer.claimed.len(), 10);
    let key = |w: &Write| match w {
        Write::Put(k, _) | Write::Delete(k) => k.clone(),
    };
    let mut keys: Vec<Vec<u8>> = batch.iter().map(key).collect();
    let n = keys.len();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), n, "a key written twice in one batch");
    // Ten leased claims ended and ten began: the leased counter is where it
    // was, so no write of it may be in the batch.
    for w in &batch {
        if let Write::Put(k, v) = w
            && before.get(k) == Some(v)
        {
            panic!("the batch rewrites {k:?} with the value it had");
        }
    }
    kv.apply(batch);
    assert_healthy(&mut kv);
}

fn run_buffered<T>(kv: &mut MemKv, f: impl FnOnce(&mut dyn Kv) -> Result<T, StoreError>) -> T {
    let (answer, writes) = buffered(&mut *kv, |b| f(b));
    let answer = answer.expect("answers");
    kv.apply(writes);
    answer
}

fn answer_text(a: &SettleAnswer) -> String {
    match a {
        SettleAnswer::Refused(why) => why.clone(),
        other => format!("{other:?}"),
    }
}
