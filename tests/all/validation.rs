//! The contract's input rules, through the real component: every oversized,
//! empty, control-character or out-of-range input to every verb is
//! `invalid(reason)` naming the field, and changes nothing in the store.

use leasehold_host::{Error, Lease, QueueQuery, Settlement, StoreError, Task, Tenant};
use leasehold_tests::*;

type Call = Box<dyn Fn(&Tenant) -> Result<(), Error>>;

fn long() -> String {
    "x".repeat(257)
}

fn many() -> Vec<&'static str> {
    vec!["r"; 257]
}

fn query(f: impl FnOnce(&mut QueueQuery)) -> QueueQuery {
    let mut q = QueueQuery {
        roles: vec!["reviewer".into()],
        actor: None,
        limit: 10,
        after: None,
    };
    f(&mut q);
    q
}

fn lease(now: i64, lease_ms: u32) -> Option<Lease> {
    Some(Lease { now, lease_ms })
}

/// A query `claim-next` accepts, changed by `f`.
fn next_query(f: impl FnOnce(&mut QueueQuery)) -> QueueQuery {
    query(|q| {
        q.actor = Some("alice".into());
        q.limit = 1;
        f(q);
    })
}

fn opening(f: impl Fn(&mut Task) + 'static) -> Call {
    Box::new(move |t| {
        let mut task = task("fresh", 1);
        f(&mut task);
        t.open(&task).map(drop)
    })
}

/// `(verb, field the reason must name, the call)`.
fn bad_calls() -> Vec<(&'static str, &'static str, Call)> {
    vec![
        ("open", "id", opening(|t| t.id = String::new())),
        ("open", "id", opening(|t| t.id = long())),
        ("open", "id", opening(|t| t.id = "a\u{0}b".into())),
        ("open", "run", opening(|t| t.run = "\u{1b}[31m".into())),
        ("open", "case", opening(|t| t.case = Some(String::new()))),
        ("open", "kind", opening(|t| t.kind = "tab\there".into())),
        (
            "open",
            "justification",
            opening(|t| t.justification = "{not json".into()),
        ),
        (
            "open",
            "justification",
            opening(|t| t.justification = format!("\"{}\"", "j".repeat(256 * 1024))),
        ),
        (
            "open",
            "candidate-roles",
            opening(|t| t.candidate_roles = vec!["r".into(); 257]),
        ),
        (
            "open",
            "candidate-roles[1]",
            opening(|t| t.candidate_roles = vec!["ok".into(), String::new()]),
        ),
        (
            "open",
            "escalate-to[0]",
            opening(|t| t.escalate_to = vec!["\u{7f}".into()]),
        ),
        (
            "open",
            "excluded-actors[0]",
            opening(|t| t.excluded_actors = vec![long()]),
        ),
        ("open", "created-at", opening(|t| t.created_at = -1)),
        (
            "open",
            "due-at",
            opening(|t| t.due_at = Some(253_402_300_800_000)),
        ),
        (
            "open",
            "state",
            opening(|t| t.state = leasehold_host::TaskState::Claimed),
        ),
        (
            "open",
            "assignee",
            opening(|t| t.assignee = Some("alice".into())),
        ),
        ("open", "lease-until", opening(|t| t.lease_until = Some(5))),
        ("get", "id", Box::new(|t| t.get("").map(drop))),
        ("get", "id", Box::new(|t| t.get(&long()).map(drop))),
        (
            "claim",
            "id",
            Box::new(|t| t.claim("\n", "alice", &["r"], None).map(drop)),
        ),
        (
            "claim",
            "actor",
            Box::new(|t| t.claim("t1", "", &["r"], None).map(drop)),
        ),
        (
            "claim",
            "roles[0]",
            Box::new(|t| t.claim("t1", "alice", &[""], None).map(drop)),
        ),
        (
            "claim",
            "roles",
            Box::new(|t| t.claim("t1", "alice", &many(), None).map(drop)),
        ),
        (
            "claim",
            "now",
            Box::new(|t| t.claim("t1", "alice", &["r"], lease(-1, 10)).map(drop)),
        ),
        (
            "claim",
            "now",
            Box::new(|t| {
                t.claim("t1", "alice", &["r"], lease(253_402_300_800_000, 10))
                    .map(drop)
            }),
        ),
        (
            "claim",
            "lease-ms",
            Box::new(|t| t.claim("t1", "alice", &["r"], lease(0, 0)).map(drop)),
        ),
        (
            "claim",
            "lease-ms",
            Box::new(|t| {
                t.claim("t1", "alice", &["r"], lease(0, 604_800_001))
                    .map(drop)
            }),
        ),
        ("release", "id", Box::new(|t| t.release("", "alice"))),
        ("release", "actor", Box::new(|t| t.release("t1", &long()))),
        (
            "take-over",
            "id",
            Box::new(|t| t.take_over("", "bob", "alice", &["r"], None).map(drop)),
        ),
        (
            "take-over",
            "from",
            Box::new(|t| t.take_over("t1", "", "alice", &["r"], None).map(drop)),
        ),
        (
            "take-over",
            "actor",
            Box::new(|t| t.take_over("t1", "bob", "\u{85}", &["r"], None).map(drop)),
        ),
        (
            "take-over",
            "roles",
            Box::new(|t| t.take_over("t1", "bob", "alice", &many(), None).map(drop)),
        ),
        (
            "take-over",
            "lease-ms",
            Box::new(|t| {
                t.take_over("t2", "bob", "alice", &[], lease(0, 0))
                    .map(drop)
            }),
        ),
        (
            "take-over",
            "now",
            Box::new(|t| {
                t.take_over("t2", "bob", "alice", &[], lease(-1, 5))
                    .map(drop)
            }),
        ),
        (
            "renew",
            "id",
            Box::new(|t| t.renew("", "carol", 0, 10).map(drop)),
        ),
        (
            "renew",
            "actor",
            Box::new(|t| t.renew("t3", &long(), 0, 10).map(drop)),
        ),
        (
            "renew",
            "now",
            Box::new(|t| t.renew("t3", "carol", -1, 10).map(drop)),
        ),
        (
            "renew",
            "lease-ms",
            Box::new(|t| t.renew("t3", "carol", 0, 0).map(drop)),
        ),
        (
            "renew",
            "lease-ms",
            Box::new(|t| t.renew("t3", "carol", 0, 604_800_001).map(drop)),
        ),
        (
            "reclaim-lapsed",
            "now",
            Box::new(|t| t.reclaim_lapsed(-1, 10).map(drop)),
        ),
        (
            "reclaim-lapsed",
            "now",
            Box::new(|t| t.reclaim_lapsed(i64::MAX, 10).map(drop)),
        ),
        (
            "reclaim-lapsed",
            "limit",
            Box::new(|t| t.reclaim_lapsed(10_000, 0).map(drop)),
        ),
        (
            "reclaim-lapsed",
            "limit",
            Box::new(|t| t.reclaim_lapsed(10_000, 1001).map(drop)),
        ),
        (
            "claim-next",
            "actor",
            Box::new(|t| {
                t.claim_next(&next_query(|q| q.actor = None), None)
                    .map(drop)
            }),
        ),
        (
            "claim-next",
            "actor",
            Box::new(|t| {
                t.claim_next(&next_query(|q| q.actor = Some("\n".into())), None)
                    .map(drop)
            }),
        ),
        (
            "claim-next",
            "roles[0]",
            Box::new(|t| {
                t.claim_next(&next_query(|q| q.roles = vec![String::new()]), None)
                    .map(drop)
            }),
        ),
        (
            "claim-next",
            "limit",
            Box::new(|t| t.claim_next(&next_query(|q| q.limit = 0), None).map(drop)),
        ),
        (
            "claim-next",
            "after",
            Box::new(|t| {
                t.claim_next(&next_query(|q| q.after = Some("zz".into())), None)
                    .map(drop)
            }),
        ),
        (
            "claim-next",
            "lease-ms",
            Box::new(|t| t.claim_next(&next_query(|_| {}), lease(0, 0)).map(drop)),
        ),
        (
            "claim-next",
            "now",
            Box::new(|t| t.claim_next(&next_query(|_| {}), lease(-7, 10)).map(drop)),
        ),
        (
            "settle",
            "id",
            Box::new(|t| t.settle("", Settlement::Completed, None).map(drop)),
        ),
        (
            "settle",
            "holder",
            Box::new(|t| t.settle("t3", Settlement::Completed, Some("")).map(drop)),
        ),
        (
            "withdraw-run",
            "run",
            Box::new(|t| t.withdraw_run("", &["t1"]).map(drop)),
        ),
        (
            "withdraw-run",
            "awaited[0]",
            Box::new(|t| t.withdraw_run("run-1", &[""]).map(drop)),
        ),
        (
            "withdraw-run",
            "awaited",
            Box::new(|t| t.withdraw_run("run-1", &many()).map(drop)),
        ),
        (
            "escalate",
            "id",
            Box::new(|t| t.escalate(&long()).map(drop)),
        ),
        (
            "queue",
            "roles[0]",
            Box::new(|t| t.queue(&query(|q| q.roles = vec![String::new()])).map(drop)),
        ),
        (
            "queue",
            "roles",
            Box::new(|t| {
                t.queue(&query(|q| q.roles = vec!["r".into(); 257]))
                    .map(drop)
            }),
        ),
        (
            "queue",
            "actor",
            Box::new(|t| t.queue(&query(|q| q.actor = Some(String::new()))).map(drop)),
        ),
        (
            "queue",
            "limit",
            Box::new(|t| t.queue(&query(|q| q.limit = 0)).map(drop)),
        ),
        (
            "queue",
            "limit",
            Box::new(|t| t.queue(&query(|q| q.limit = 1001)).map(drop)),
        ),
        (
            "queue",
            "after",
            Box::new(|t| t.queue(&query(|q| q.after = Some("zz".into()))).map(drop)),
        ),
        (
            "queue",
            "after",
            Box::new(|t| t.queue(&query(|q| q.after = Some("q00".into()))).map(drop)),
        ),
        (
            "for-case",
            "case",
            Box::new(|t| t.for_case("", 10, None).map(drop)),
        ),
        (
            "for-case",
            "limit",
            Box::new(|t| t.for_case("c", 0, None).map(drop)),
        ),
        (
            "for-case",
            "limit",
            Box::new(|t| t.for_case("c", 1001, None).map(drop)),
        ),
        (
            "for-case",
            "after",
            Box::new(|t| t.for_case("c", 10, Some("not a cursor")).map(drop)),
        ),
        ("overdue", "now", Box::new(|t| t.overdue(-5, 10).map(drop))),
        (
            "overdue",
            "now",
            Box::new(|t| t.overdue(i64::MAX, 10).map(drop)),
        ),
        ("overdue", "limit", Box::new(|t| t.overdue(0, 0).map(drop))),
        (
            "arm",
            "run",
            Box::new(|t| t.arm(&timer("", "e", 1)).map(drop)),
        ),
        (
            "arm",
            "effect",
            Box::new(|t| t.arm(&timer("r", &long(), 1)).map(drop)),
        ),
        (
            "arm",
            "case",
            Box::new(|t| {
                let mut tm = timer("r", "e", 1);
                tm.case = Some("\u{0}".into());
                t.arm(&tm).map(drop)
            }),
        ),
        (
            "arm",
            "fire-at",
            Box::new(|t| t.arm(&timer("r", "e", -1)).map(drop)),
        ),
        (
            "claim-due",
            "now",
            Box::new(|t| t.claim_due(-1, 10, 1000).map(drop)),
        ),
        (
            "claim-due",
            "limit",
            Box::new(|t| t.claim_due(0, 0, 1000).map(drop)),
        ),
        (
            "claim-due",
            "limit",
            Box::new(|t| t.claim_due(0, 5000, 1000).map(drop)),
        ),
        (
            "claim-due",
            "lease-ms",
            Box::new(|t| t.claim_due(0, 10, 0).map(drop)),
        ),
        (
            "claim-due",
            "lease-ms",
            Box::new(|t| t.claim_due(0, 10, 604_800_001).map(drop)),
        ),
        ("disarm", "run", Box::new(|t| t.disarm("", "e").map(drop))),
        (
            "disarm",
            "effect",
            Box::new(|t| t.disarm("r", "").map(drop)),
        ),
        (
            "disarm-run",
            "run",
            Box::new(|t| t.disarm_run(&long()).map(drop)),
        ),
        ("seal", "run", Box::new(|t| t.seal("", &[]).map(drop))),
        (
            "seal",
            "awaited",
            Box::new(|t| t.seal("r", &many()).map(drop)),
        ),
        (
            "is-sealed",
            "run",
            Box::new(|t| t.is_sealed("\u{9f}").map(drop)),
        ),
    ]
}

/// Something in every structure, so "changes nothing" has something to
/// change.
fn seed(t: &Tenant) {
    t.open(&task("t1", 1).roles(&["r"]).in_case("c").due(10))
        .expect("open");
    t.open(&task("t2", 2)).expect("open");
    t.claim("t2", "bob", &[], None).expect("claim");
    t.open(&task("t3", 3).roles(&["r"])).expect("open");
    t.claim("t3", "carol", &["r"], lease(0, 100))
        .expect("claim");
    t.arm(&timer("run-1", "wake", 5)).expect("arm");
    t.arm(&timer("run-2", "wake", 50)).expect("arm");
    t.claim_due(5, 1, 1000).expect("sweep");
}

#[test]
fn every_bad_input_to_every_verb_is_invalid_by_name_and_changes_nothing() {
    let db = TestDb::new();
    seed(&db.engine().tenant("acme").expect("tenant"));
    let before = db.raw_all();
    let engine = db.engine();
    let t = engine.tenant("acme").expect("tenant");
    let calls = bad_calls();
    let verbs: std::collections::BTreeSet<_> = calls.iter().map(|(v, _, _)| *v).collect();
    assert_eq!(
        verbs.len(),
        20,
        "every verb of the contract has a bad input here"
    );
    for (verb, field, call) in &calls {
        match call(&t) {
            Err(Error::Store(StoreError::Invalid(reason))) => assert!(
                reason.starts_with(field) || reason.contains(&format!("{field} ")),
                "{verb}: the reason {reason:?} does not name {field}"
            ),
            other => panic!("{verb} with a bad {field}: expected invalid, got {other:?}"),
        }
    }
    drop((t, engine));
    assert_eq!(db.raw_all(), before, "a refused call changed the database");
}

#[test]
fn a_list_counts_each_entry_once_and_keeps_the_first_occurrence() {
    let (t, _db) = temp_tenant();
    let stored = t
        .open(
            &task("t1", 1)
                .roles(&["b", "a", "b", "c", "a"])
                .excluding(&["x", "x"]),
        )
        .expect("open");
    assert_eq!(stored.candidate_roles, ["b", "a", "c"]);
    assert_eq!(stored.excluded_actors, ["x"]);
    // The limit applies to the list as given, before duplicates fold.
    let r = t.claim("t1", "alice", &["b"; 257], None);
    assert!(
        matches!(r, Err(Error::Store(StoreError::Invalid(_)))),
        "{r:?}"
    );
}

#[test]
fn names_are_stored_and_compared_verbatim() {
    let (t, _db) = temp_tenant();
    t.open(&task(" t1 ", 1).roles(&["Reviewer"])).expect("open");
    assert!(t.get("t1").expect("get").is_none(), "ids are not trimmed");
    let r = t.claim(" t1 ", "alice", &["reviewer"], None);
    assert!(
        matches!(r, Err(Error::Refused(_))),
        "roles are not case-folded: {r:?}"
    );
    t.claim(" t1 ", "alice", &["Reviewer"], None)
        .expect("exact role");
}

#[test]
fn tenant_names_are_checked_with_a_clear_error() {
    let (engine, _db) = temp_engine();
    for bad in ["", "two words", "a/b", "ümlaut", &"t".repeat(65)] {
        match engine.tenant(bad) {
            Err(e @ Error::Tenant { .. }) => {
                assert!(e.is_invalid_input());
                assert!(e.to_string().contains("tenant"), "{e}");
            }
            other => panic!("tenant {bad:?} accepted: {other:?}"),
        }
    }
    engine.tenant("acme-eu.prod_1").expect("a valid name");
}
