//! "Nothing is written by a call that returns an error": every verb's invalid
//! inputs and every refusal, on a populated store and on an empty one, with
//! the whole map compared before and after.

use std::fmt::Debug;

use super::*;
use crate::model::{QueueQuery, Settlement};
use crate::validate::{MAX_JUSTIFICATION_BYTES, MAX_LEASE_MS, MAX_TIMESTAMP};
use crate::{runs, tasks, timers};

type Call = Box<dyn Fn(&mut MemKv) -> Result<String, String>>;

/// A failing call and a fragment its error's `Debug` form must contain.
struct Case {
    what: String,
    expect: &'static str,
    call: Call,
}

fn case<T: Debug, E: Debug>(
    what: impl Into<String>,
    expect: &'static str,
    f: impl Fn(&mut MemKv) -> Result<T, E> + 'static,
) -> Case {
    Case {
        what: what.into(),
        expect,
        call: Box::new(move |kv| {
            f(kv)
                .map(|v| format!("{v:?}"))
                .map_err(|e| format!("{e:?}"))
        }),
    }
}

fn run_cases(kv: &mut MemKv, cases: &[Case]) {
    for c in cases {
        let before = kv.map.clone();
        let calls = kv.calls;
        match (c.call)(kv) {
            Ok(v) => panic!("{}: expected an error, got {v}", c.what),
            Err(e) => assert!(
                e.contains(c.expect),
                "{}: expected {}, got {e}",
                c.what,
                c.expect
            ),
        }
        assert_eq!(kv.calls.sets, calls.sets, "{}: set keys", c.what);
        assert_eq!(kv.calls.deletes, calls.deletes, "{}: deleted keys", c.what);
        assert!(kv.map == before, "{}: changed the store", c.what);
    }
}

/// Tasks in every state, an armed and a held timer, a sealed run.
fn populated() -> MemKv {
    let mut kv = MemKv::new();
    let base = || {
        task("x")
            .roles(&["approver"])
            .excluding(&["mallory"])
            .escalating_to(&["lead"])
            .of_run("r1")
            .in_case("c")
            .due(50)
    };
    for id in ["open", "held", "escalated", "settled"] {
        open(
            &mut kv,
            Task {
                id: id.into(),
                ..base()
            },
        );
    }
    let approver = names(&["approver"]);
    tasks::claim(&mut kv, "held", "bob", &approver, None, None).expect("claims");
    tasks::escalate(&mut kv, "escalated", None).expect("escalates");
    tasks::claim(&mut kv, "settled", "bob", &approver, None, None).expect("claims");
    tasks::settle(&mut kv, "settled", Settlement::Completed, None, None, None).expect("settles");
    arm(&mut kv, timer("r1", "a", 10));
    arm(&mut kv, timer("r1", "b", 100));
    assert_eq!(
        timers::claim_due(&mut kv, 10, 1, 1_000).map(|v| v.len()),
        Ok(1)
    );
    runs::seal(&mut kv, "sealed", &[]).expect("seals");
    assert_healthy(&mut kv);
    kv
}

fn invalid_input_cases() -> Vec<Case> {
    const INV: &str = "Invalid";
    let long = "x".repeat(257);
    let many = vec!["r".to_owned(); 257];
    let bad_tasks: Vec<(&str, Task)> = vec![
        (
            "empty id",
            Task {
                id: String::new(),
                ..task("n")
            },
        ),
        (
            "control id",
            Task {
                id: "a\nb".into(),
                ..task("n")
            },
        ),
        (
            "long id",
            Task {
                id: long.clone(),
                ..task("n")
            },
        ),
        ("empty run", task("n").of_run("")),
        ("empty case", task("n").in_case("")),
        ("control case", task("n").in_case("c\u{9f}")),
        (
            "empty kind",
            Task {
                kind: String::new(),
                ..task("n")
            },
        ),
        (
            "control kind",
            Task {
                kind: "k\u{1b}".into(),
                ..task("n")
            },
        ),
        (
            "not json",
            Task {
                justification: "{".into(),
                ..task("n")
            },
        ),
        (
            "empty justification",
            Task {
                justification: String::new(),
                ..task("n")
            },
        ),
        (
            "huge justification",
            Task {
                justification: format!("\"{}\"", "j".repeat(MAX_JUSTIFICATION_BYTES)),
                ..task("n")
            },
        ),
        (
            "257 roles",
            Task {
                candidate_roles: many.clone(),
                ..task("n")
            },
        ),
        ("empty role", task("n").roles(&["a", ""])),
        ("control escalate-to", task("n").escalating_to(&["\u{0}"])),
        (
            "257 excluded",
            Task {
                excluded_actors: many.clone(),
                ..task("n")
            },
        ),
        (
            "long excluded actor",
            Task {
                excluded_actors: vec![long.clone()],
                ..task("n")
            },
        ),
        ("negative created-at", task("n").created(-1)),
        (
            "created-at after 9999",
            task("n").created(MAX_TIMESTAMP + 1),
        ),
        ("negative due-at", task("n").due(-1)),
        ("due-at after 9999", task("n").due(MAX_TIMESTAMP + 1)),
        (
            "claimed state",
            Task {
                state: TaskState::Claimed,
                ..task("n")
            },
        ),
        (
            "completed state",
            Task {
                state: TaskState::Completed,
                ..task("n")
            },
        ),
        (
            "assignee",
            Task {
                assignee: Some("bob".into()),
                ..task("n")
            },
        ),
        // Inputs before existence: the id exists, the input is still wrong.
        (
            "existing id, not json",
            Task {
                justification: "[".into(),
                ..task("open")
            },
        ),
    ];
    let mut cases: Vec<Case> = bad_tasks
        .into_iter()
        .map(|(what, t)| case(format!("open: {what}"), INV, move |kv| tasks::open(kv, &t)))
        .collect();

    let q = |roles: Vec<String>, actor: Option<&str>, limit: u32, after: Option<&str>| QueueQuery {
        roles,
        actor: actor.map(str::to_owned),
        limit,
        after: after.map(str::to_owned),
    };
    let queries = vec![
        ("empty role", q(names(&["a", ""]), None, 10, None)),
        ("257 roles", q(many.clone(), None, 10, None)),
        ("empty actor", q(vec![], Some(""), 10, None)),
        ("control actor", q(vec![], Some("a\u{7f}"), 10, None)),
        ("limit 0", q(vec![], None, 0, None)),
        ("limit 1001", q(vec![], None, 1001, None)),
        ("garbage cursor", q(vec![], None, 10, Some("zz"))),
        ("empty cursor", q(vec![], None, 10, Some(""))),
    ];
    for (what, query) in queries {
        cases.push(case(format!("queue: {what}"), INV, move |kv| {
            tasks::queue(kv, &query)
        }));
    }

    let m = many.clone();
    let l = long.clone();
    cases.extend([
        case("get: empty id", INV, |kv| tasks::get(kv, "")),
        case("get: long id", INV, move |kv| tasks::get(kv, &l)),
        case("claim: empty id", INV, |kv| {
            tasks::claim(kv, "", "bob", &[], None, None)
        }),
        case("claim: empty actor", INV, |kv| {
            tasks::claim(kv, "open", "", &[], None, None)
        }),
        case("claim: control role", INV, |kv| {
            tasks::claim(kv, "open", "bob", &names(&["approver", "\t"]), None, None)
        }),
        case("claim: 257 roles", INV, move |kv| {
            tasks::claim(kv, "open", "bob", &m, None, None)
        }),
        case("take-over: empty from", INV, |kv| {
            tasks::take_over(kv, "held", "", "dave", &names(&["approver"]), None, None)
        }),
        case("take-over: empty actor", INV, |kv| {
            tasks::take_over(kv, "held", "bob", "", &names(&["approver"]), None, None)
        }),
        case("take-over: empty id", INV, |kv| {
            tasks::take_over(kv, "", "bob", "dave", &names(&["approver"]), None, None)
        }),
        case("take-over: empty role", INV, |kv| {
            tasks::take_over(kv, "held", "bob", "dave", &names(&[""]), None, None)
        }),
        case("release: empty id", INV, |kv| {
            tasks::release(kv, "", "bob", None)
        }),
        case("release: control actor", INV, |kv| {
            tasks::release(kv, "held", "b\u{7f}ob", None)
        }),
        case("settle: empty id", INV, |kv| {
            tasks::settle(kv, "", Settlement::Completed, None, None, None)
        }),
        case("withdraw-run: empty run", INV, |kv| {
            tasks::withdraw_run(kv, "", &names(&["open"]))
        }),
        case("withdraw-run: empty awaited id", INV, |kv| {
            tasks::withdraw_run(kv, "r1", &names(&["open", ""]))
        }),
        case("escalate: empty id", INV, |kv| {
            tasks::escalate(kv, "", None)
        }),
        case("for-case: empty case", INV, |kv| {
            tasks::for_case(kv, "", 10, None)
        }),
        case("for-case: limit 0", INV, |kv| {
            tasks::for_case(kv, "c", 0, None)
        }),
        case("for-case: limit 1001", INV, |kv| {
            tasks::for_case(kv, "c", 1001, None)
        }),
        case("for-case: garbage cursor", INV, |kv| {
            tasks::for_case(kv, "c", 10, Some("c0"))
        }),
        case("overdue: negative now", INV, |kv| {
            tasks::overdue(kv, -1, 10)
        }),
        case("overdue: now after 9999", INV, |kv| {
            tasks::overdue(kv, MAX_TIMESTAMP + 1, 10)
        }),
        case("overdue: limit 0", INV, |kv| tasks::overdue(kv, 100, 0)),
        case("overdue: limit 1001", INV, |kv| {
            tasks::overdue(kv, 100, 1001)
        }),
        case("arm: empty run", INV, |kv| {
            timers::arm(kv, &timer("", "e", 1))
        }),
        case("arm: empty effect", INV, |kv| {
            timers::arm(kv, &timer("r1", "", 1))
        }),
        case("arm: empty case", INV, |kv| {
            timers::arm(
                kv,
                &Timer {
                    case: Some(String::new()),
                    ..timer("r1", "e", 1)
                },
            )
        }),
        case("arm: negative fire-at", INV, |kv| {
            timers::arm(kv, &timer("r1", "e", -1))
        }),
        case("arm: fire-at after 9999", INV, |kv| {
            timers::arm(kv, &timer("r1", "e", MAX_TIMESTAMP + 1))
        }),
        case("arm: sealed run, bad effect", INV, |kv| {
            timers::arm(kv, &timer("sealed", "\u{1}", 1))
        }),
        case("claim-due: negative now", INV, |kv| {
            timers::claim_due(kv, -1, 10, 10)
        }),
        case("claim-due: limit 0", INV, |kv| {
            timers::claim_due(kv, 100, 0, 10)
        }),
        case("claim-due: limit 1001", INV, |kv| {
            timers::claim_due(kv, 100, 1001, 10)
        }),
        case("claim-due: lease 0", INV, |kv| {
            timers::claim_due(kv, 100, 10, 0)
        }),
        case("claim-due: lease over 7 days", INV, |kv| {
            timers::claim_due(kv, 100, 10, MAX_LEASE_MS + 1)
        }),
        case("disarm: empty run", INV, |kv| timers::disarm(kv, "", "a")),
        case("disarm: empty effect", INV, |kv| {
            timers::disarm(kv, "r1", "")
        }),
        case("disarm-run: empty run", INV, |kv| {
            timers::disarm_run(kv, "")
        }),
        case("seal: empty run", INV, |kv| runs::seal(kv, "", &[])),
        case("seal: bad awaited id", INV, |kv| {
            runs::seal(kv, "r1", &names(&["open", "\n"]))
        }),
        case("seal: 257 awaited", INV, move |kv| {
            runs::seal(kv, "r1", &many)
        }),
        case("is-sealed: empty run", INV, |kv| runs::is_sealed(kv, "")),
    ]);
    cases
}

fn refusal_cases() -> Vec<Case> {
    let approver = || names(&["approver"]);
    let clerk = || names(&["clerk"]);
    vec![
        case("claim: not found", "NotFound", move |kv| {
            tasks::claim(kv, "nope", "bob", &approver(), None, None)
        }),
        case("claim: excluded", "Excluded", move |kv| {
            tasks::claim(kv, "held", "mallory", &clerk(), None, None)
        }),
        case("claim: wrong role", "WrongRole", move |kv| {
            tasks::claim(kv, "settled", "carol", &clerk(), None, None)
        }),
        case("claim: not pending", "NotPending", move |kv| {
            tasks::claim(kv, "settled", "bob", &approver(), None, None)
        }),
        case("claim: already claimed", "AlreadyClaimed", move |kv| {
            tasks::claim(kv, "held", "dave", &approver(), None, None)
        }),
        case("take-over: not found", "NotFound", move |kv| {
            tasks::take_over(kv, "nope", "bob", "dave", &approver(), None, None)
        }),
        case("take-over: excluded", "Excluded", move |kv| {
            tasks::take_over(kv, "held", "bob", "mallory", &approver(), None, None)
        }),
        case("take-over: wrong role", "WrongRole", move |kv| {
            tasks::take_over(kv, "held", "bob", "carol", &clerk(), None, None)
        }),
        case("take-over: not pending", "NotPending", move |kv| {
            tasks::take_over(kv, "settled", "bob", "dave", &approver(), None, None)
        }),
        case("take-over: held by another", "NotHeld", move |kv| {
            tasks::take_over(kv, "held", "carol", "dave", &approver(), None, None)
        }),
        case("take-over: unheld", "NotHeld", move |kv| {
            tasks::take_over(kv, "open", "bob", "dave", &approver(), None, None)
        }),
        case("take-over: escalated, unheld", "NotHeld", move |kv| {
            tasks::take_over(kv, "escalated", "bob", "bob", &names(&["lead"]), None, None)
        }),
        case("release: not found", "NotFound", |kv| {
            tasks::release(kv, "nope", "bob", None)
        }),
        case("release: not the holder", "NotHeld", |kv| {
            tasks::release(kv, "held", "dave", None)
        }),
        case("release: open", "NotHeld", |kv| {
            tasks::release(kv, "open", "bob", None)
        }),
        case("release: settled", "NotHeld", |kv| {
            tasks::release(kv, "settled", "bob", None)
        }),
        case("settle: not found", "NotFound", |kv| {
            tasks::settle(kv, "nope", Settlement::Withdrawn, None, None, None)
        }),
        case("escalate: not found", "NotFound", |kv| {
            tasks::escalate(kv, "nope", None)
        }),
    ]
}

#[test]
fn invalid_inputs_to_every_verb_write_nothing() {
    let mut kv = populated();
    run_cases(&mut kv, &invalid_input_cases());
    assert_healthy(&mut kv);
}

#[test]
fn invalid_inputs_to_every_verb_write_nothing_on_an_empty_store() {
    let mut kv = MemKv::new();
    run_cases(&mut kv, &invalid_input_cases());
    assert!(kv.map.is_empty());
}

#[test]
fn every_refusal_writes_nothing() {
    let mut kv = populated();
    run_cases(&mut kv, &refusal_cases());
    assert_healthy(&mut kv);
}

#[test]
fn refusals_on_an_empty_store_write_nothing_not_even_the_layout_mark() {
    let mut kv = MemKv::new();
    let not_found: Vec<Case> = refusal_cases()
        .into_iter()
        .filter(|c| c.expect == "NotFound")
        .collect();
    assert_eq!(not_found.len(), 5);
    run_cases(&mut kv, &not_found);
    assert!(kv.map.is_empty(), "left behind: {:?}", kv.map);
}
