//! A task changed after it opens: guards and revisions, `held`, `update`
//! (and its edge: excluding the holder ends the claim), `assign`,
//! `unassign`, `delegate` and `note`, each with what it records.

use super::worklist_support::claim;
use super::*;
use crate::changes;
use crate::model::{ClaimError, Guard, Lease, QueueQuery, Settlement, TaskChanges};
use crate::tasks;

fn guard(revision: u64) -> Guard {
    Guard {
        revision: Some(revision),
        job: None,
    }
}

fn last_entry(kv: &mut MemKv, id: &str) -> crate::model::HistoryEntry {
    changes::history(kv, id, None, 1000)
        .expect("history")
        .pop()
        .expect("an entry")
}

fn queue_ids(kv: &mut MemKv, roles: &[&str], actor: &str) -> Vec<String> {
    let q = QueueQuery {
        roles: names(roles),
        actor: Some(actor.to_owned()),
        limit: 100,
        after: None,
    };
    ids(&tasks::queue(kv, &q).expect("queue").tasks)
}

#[test]
fn every_recorded_change_is_one_revision_and_a_stale_guard_writes_nothing() {
    let mut kv = MemKv::new();
    let t = open(&mut kv, task("t").roles(&["clerk"]));
    assert_eq!(t.revision, 1);
    let t = tasks::claim(
        &mut kv,
        "t",
        "bob",
        &names(&["clerk"]),
        None,
        Some(&guard(1)),
    )
    .expect("claims at revision 1");
    assert_eq!(t.revision, 2);
    // The reviewer saw revision 1; the task has moved on.
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(
            kv,
            "t",
            Settlement::Completed,
            Some("bob"),
            None,
            Some(&guard(1)),
        )
    });
    assert_eq!(e, ClaimError::Stale(2));
    // An unknown id is not-found before any guard is looked at.
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::release(kv, "nope", "bob", Some(&guard(7)))
    });
    assert_eq!(e, ClaimError::NotFound("nope".into()));
    // A repeat claim that changes nothing is no revision.
    let again = claim(&mut kv, "t", "bob", &["clerk"]).expect("repeat");
    assert_eq!(again.revision, 2);
    let job = Guard {
        revision: Some(2),
        job: Some("job-7".into()),
    };
    assert_eq!(
        tasks::settle(
            &mut kv,
            "t",
            Settlement::Completed,
            Some("bob"),
            None,
            Some(&job)
        ),
        Ok(true)
    );
    let e = last_entry(&mut kv, "t");
    assert_eq!((e.revision, e.job.as_deref()), (3, Some("job-7")));
    assert_eq!(
        tasks::get(&mut kv, "t")
            .expect("answers")
            .expect("answers")
            .revision,
        3
    );
    assert_healthy(&mut kv);
}

#[test]
fn held_lists_an_actors_claims_soonest_lease_end_first_unleased_last() {
    let mut kv = MemKv::new();
    for id in ["a", "b", "c", "d", "e"] {
        open(&mut kv, task(id));
    }
    let lease = |end: i64| Lease {
        now: end - 10,
        lease_ms: 10,
    };
    tasks::claim(&mut kv, "a", "bob", &[], None, None).expect("answers");
    tasks::claim(&mut kv, "b", "bob", &[], Some(&lease(500)), None).expect("answers");
    tasks::claim(&mut kv, "c", "bob", &[], Some(&lease(100)), None).expect("answers");
    tasks::claim(&mut kv, "d", "ann", &[], Some(&lease(50)), None).expect("answers");
    let p = tasks::held(&mut kv, "bob", 2, None).expect("held");
    assert_eq!(ids(&p.tasks), ["c", "b"]);
    let p = tasks::held(&mut kv, "bob", 2, p.next.as_deref()).expect("next page");
    assert_eq!(ids(&p.tasks), ["a"]);
    assert_eq!(p.next, None);
    // A renewal moves the entry; a release and a settle take it away.
    tasks::renew(&mut kv, "c", "bob", 900, 10, None).expect("answers");
    let p = tasks::held(&mut kv, "bob", 10, None).expect("answers");
    assert_eq!(ids(&p.tasks), ["b", "c", "a"]);
    tasks::release(&mut kv, "b", "bob", None).expect("answers");
    tasks::settle(&mut kv, "a", Settlement::Completed, None, None, None).expect("answers");
    assert_eq!(
        ids(&tasks::held(&mut kv, "bob", 10, None)
            .expect("answers")
            .tasks),
        ["c"]
    );
    // A lapse reclaimed takes it away too.
    tasks::reclaim_lapsed(&mut kv, 1000, 10).expect("answers");
    assert!(
        tasks::held(&mut kv, "bob", 10, None)
            .expect("answers")
            .tasks
            .is_empty()
    );
    assert_eq!(
        ids(&tasks::held(&mut kv, "ann", 10, None)
            .expect("answers")
            .tasks),
        [] as [&str; 0]
    );
    // A cursor of another verb is refused.
    let e = tasks::held(&mut kv, "bob", 10, Some("q00")).expect_err("refused");
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    assert_healthy(&mut kv);
}

#[test]
fn update_changes_fields_by_opens_rules_and_every_index_follows() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["clerk"]).due(100));
    assert_eq!(queue_ids(&mut kv, &["clerk"], "ann"), ["t"]);
    let changes = TaskChanges {
        due_at: Some(None),
        priority: Some(Priority::Urgent),
        candidate_roles: Some(names(&["legal", "legal"])),
        ..TaskChanges::default()
    };
    let t = tasks::update(&mut kv, "t", Some("lead"), &changes, None).expect("updates");
    assert_eq!(
        (t.due_at, t.priority, &t.candidate_roles[..], t.revision),
        (None, Priority::Urgent, &names(&["legal"])[..], 2)
    );
    // Roles take effect for the next queue at once; the overdue index
    // forgot the due time.
    assert!(queue_ids(&mut kv, &["clerk"], "ann").is_empty());
    assert_eq!(queue_ids(&mut kv, &["legal"], "ann"), ["t"]);
    assert!(
        tasks::overdue(&mut kv, 1_000, 10)
            .expect("answers")
            .is_empty()
    );
    let e = last_entry(&mut kv, "t");
    assert_eq!(
        (e.verb.as_str(), e.actor.as_deref()),
        ("update", Some("lead"))
    );
    let fields: Vec<(&str, &str, &str)> = e
        .changes
        .iter()
        .map(|c| (c.field.as_str(), c.before.as_str(), c.after.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            ("due-at", "100", "null"),
            ("priority", "\"normal\"", "\"urgent\""),
            ("candidate-roles", "[\"clerk\"]", "[\"legal\"]"),
        ]
    );
    // The same change again writes nothing.
    let before = kv.map.clone();
    let same = tasks::update(&mut kv, "t", None, &changes, None).expect("no-op");
    assert_eq!(same.revision, 2);
    assert!(kv.map == before);
    assert_healthy(&mut kv);
}

#[test]
fn an_update_that_excludes_the_holder_ends_the_claim_in_the_same_change() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    let lease = Lease {
        now: 0,
        lease_ms: 1000,
    };
    tasks::claim(&mut kv, "t", "bob", &[], Some(&lease), None).expect("answers");
    let changes = TaskChanges {
        excluded_actors: Some(names(&["bob"])),
        ..TaskChanges::default()
    };
    let t = tasks::update(&mut kv, "t", None, &changes, None).expect("updates");
    assert_eq!((t.state, t.assignee.as_deref()), (TaskState::Open, None));
    assert!(
        tasks::held(&mut kv, "bob", 10, None)
            .expect("answers")
            .tasks
            .is_empty()
    );
    assert_eq!(tasks::leased_count(&mut kv), Ok(0));
    let e = last_entry(&mut kv, "t");
    assert_eq!(
        (e.before, e.after),
        (Some(TaskState::Claimed), TaskState::Open)
    );
    assert!(
        e.changes
            .iter()
            .any(|c| c.field == "assignee" && c.after == "null")
    );
    assert!(e.changes.iter().any(|c| c.field == "excluded-actors"));
    // And bob may not take it back.
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "bob", &[]));
    assert_eq!(e, ClaimError::Excluded("bob".into()));
    assert_healthy(&mut kv);
}

#[test]
fn update_refuses_bad_input_and_settled_tasks_writing_nothing() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::update(kv, "t", None, &TaskChanges::default(), None)
    });
    assert!(format!("{e:?}").contains("name no field"), "{e:?}");
    let e = fails_cleanly(&mut kv, |kv| {
        let c = TaskChanges {
            due_at: Some(Some(-5)),
            ..TaskChanges::default()
        };
        tasks::update(kv, "t", None, &c, None)
    });
    assert!(format!("{e:?}").contains("changes.due-at"), "{e:?}");
    let e = fails_cleanly(&mut kv, |kv| {
        let c = TaskChanges {
            candidate_roles: Some(names(&[""])),
            ..TaskChanges::default()
        };
        tasks::update(kv, "t", None, &c, None)
    });
    assert!(
        format!("{e:?}").contains("changes.candidate-roles"),
        "{e:?}"
    );
    let e = fails_cleanly(&mut kv, |kv| {
        let c = TaskChanges {
            outcomes: Some(vec![crate::model::OutcomeRule {
                name: "approved".into(),
                needs_reason: false,
                output_schema: Some(r#"{"pattern": "x"}"#.into()),
            }]),
            ..TaskChanges::default()
        };
        tasks::update(kv, "t", None, &c, None)
    });
    assert!(format!("{e:?}").contains("pattern"), "{e:?}");
    tasks::settle(&mut kv, "t", Settlement::Withdrawn, None, None, None).expect("answers");
    let e = fails_cleanly(&mut kv, |kv| {
        let c = TaskChanges {
            priority: Some(Priority::High),
            ..TaskChanges::default()
        };
        tasks::update(kv, "t", None, &c, None)
    });
    assert_eq!(e, ClaimError::NotPending(TaskState::Withdrawn));
}

#[test]
fn assign_takes_the_task_from_its_holder_by_the_ladder_and_records_an_override() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["clerk"]).excluding(&["mallory"]));
    claim(&mut kv, "t", "bob", &["clerk"]).expect("answers");
    // Excluded actors are refused whatever the call says.
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::assign(kv, "t", "mallory", &[], None, true, Some("lead"), None)
    });
    assert_eq!(e, ClaimError::Excluded("mallory".into()));
    // The roles rung stands unless overridden.
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::assign(
            kv,
            "t",
            "ann",
            &names(&["intern"]),
            None,
            false,
            Some("lead"),
            None,
        )
    });
    assert_eq!(e, ClaimError::WrongRole("ann".into()));
    let t = tasks::assign(
        &mut kv,
        "t",
        "ann",
        &names(&["intern"]),
        None,
        true,
        Some("lead"),
        None,
    )
    .expect("assigns with the override");
    assert_eq!(
        (t.state, t.assignee.as_deref()),
        (TaskState::Claimed, Some("ann"))
    );
    assert!(
        tasks::held(&mut kv, "bob", 10, None)
            .expect("answers")
            .tasks
            .is_empty()
    );
    assert_eq!(
        ids(&tasks::held(&mut kv, "ann", 10, None)
            .expect("answers")
            .tasks),
        ["t"]
    );
    let e = last_entry(&mut kv, "t");
    assert_eq!(
        (e.verb.as_str(), e.actor.as_deref()),
        ("assign", Some("lead"))
    );
    assert!(
        e.changes
            .iter()
            .any(|c| c.field == "override-roles" && c.after == "true"),
        "{:?}",
        e.changes
    );
    assert!(
        e.changes
            .iter()
            .any(|c| c.field == "assignee" && c.before == "\"bob\"" && c.after == "\"ann\"")
    );
    // Unassign puts it back in the queue; again, it answers as it stands.
    let t = tasks::unassign(&mut kv, "t", Some("lead"), None).expect("answers");
    assert_eq!((t.state, t.assignee.as_deref()), (TaskState::Open, None));
    let rev = t.revision;
    assert_eq!(
        tasks::unassign(&mut kv, "t", None, None)
            .expect("answers")
            .revision,
        rev
    );
    assert_healthy(&mut kv);
}

#[test]
fn delegate_is_the_holders_alone_and_keeps_the_ladder_for_the_delegate() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["clerk"]).excluding(&["mallory"]));
    claim(&mut kv, "t", "bob", &["clerk"]).expect("answers");
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::delegate(kv, "t", "ann", "cy", &names(&["clerk"]), None, None)
    });
    assert_eq!(e, ClaimError::NotHeld("ann".into()));
    // A non-holder learns nothing of what the rules say of the delegate.
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::delegate(kv, "t", "ann", "mallory", &[], None, None)
    });
    assert_eq!(e, ClaimError::NotHeld("ann".into()));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::delegate(kv, "t", "bob", "mallory", &names(&["clerk"]), None, None)
    });
    assert_eq!(e, ClaimError::Excluded("mallory".into()));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::delegate(kv, "t", "bob", "cy", &[], None, None)
    });
    assert_eq!(e, ClaimError::WrongRole("cy".into()));
    let t = tasks::delegate(&mut kv, "t", "bob", "cy", &names(&["clerk"]), None, None)
        .expect("answers");
    assert_eq!(t.assignee.as_deref(), Some("cy"));
    let e = last_entry(&mut kv, "t");
    assert_eq!(
        (e.verb.as_str(), e.actor.as_deref()),
        ("delegate", Some("bob"))
    );
    assert_healthy(&mut kv);
}

#[test]
fn a_note_is_kept_in_the_history_in_any_state_and_bounded() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    tasks::settle(&mut kv, "t", Settlement::Completed, None, None, None).expect("answers");
    let t = tasks::note(&mut kv, "t", "ann", "checked the invoice", None).expect("notes");
    assert_eq!((t.state, t.revision), (TaskState::Completed, 3));
    let e = last_entry(&mut kv, "t");
    assert_eq!(
        (e.verb.as_str(), e.actor.as_deref(), e.note.as_deref()),
        ("note", Some("ann"), Some("checked the invoice"))
    );
    assert!(e.changes.is_empty());
    let long = "x".repeat(4097);
    let e = fails_cleanly(&mut kv, |kv| tasks::note(kv, "t", "ann", &long, None));
    assert!(format!("{e:?}").contains("4096"), "{e:?}");
    let e = fails_cleanly(&mut kv, |kv| tasks::note(kv, "t", "ann", "", None));
    assert!(format!("{e:?}").contains("text is empty"), "{e:?}");
    assert_healthy(&mut kv);
}
