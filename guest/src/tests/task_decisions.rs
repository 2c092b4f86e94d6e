//! Decisions: what `settle` keeps and records with one, checked against the
//! task's own outcomes or its kind's (`kinds`), and the kinds' definitions
//! themselves.

use super::worklist_support::claim;
use super::*;
use crate::kinds;
use crate::model::{ClaimError, Decision, KindDefinition, OutcomeRule, Settlement, TaskChanges};
use crate::{changes, tasks};

fn rule(name: &str, needs_reason: bool, schema: Option<&str>) -> OutcomeRule {
    OutcomeRule {
        name: name.into(),
        needs_reason,
        output_schema: schema.map(Into::into),
    }
}

fn decision(outcome: &str, reason: Option<&str>, output: Option<&str>) -> Decision {
    Decision {
        outcome: outcome.into(),
        reason: reason.map(Into::into),
        output: output.map(Into::into),
    }
}

const PAYMENT: &str = r#"{"type":"object","required":["amount"],
    "properties":{"amount":{"type":"number","maximum":1000}}}"#;

fn with_outcomes(mut t: Task) -> Task {
    t.outcomes = vec![
        rule("approved", false, Some(PAYMENT)),
        rule("rejected", true, None),
    ];
    t
}

#[test]
fn a_decision_is_kept_with_who_decided_and_recorded_with_the_settle() {
    let mut kv = MemKv::new();
    kv.now = 77;
    open(&mut kv, with_outcomes(task("t")));
    claim(&mut kv, "t", "bob", &[]).expect("answers");
    let d = decision("rejected", Some("duplicate invoice"), None);
    assert_eq!(
        tasks::settle(
            &mut kv,
            "t",
            Settlement::Completed,
            Some("bob"),
            Some(&d),
            None
        ),
        Ok(true)
    );
    let t = tasks::get(&mut kv, "t").expect("answers").expect("answers");
    let kept = t.decision.expect("kept");
    assert_eq!(
        (
            kept.outcome.as_str(),
            kept.reason.as_deref(),
            kept.by.as_deref(),
            kept.at
        ),
        ("rejected", Some("duplicate invoice"), Some("bob"), 77)
    );
    let e = changes::history(&mut kv, "t", None, 10)
        .expect("answers")
        .pop()
        .expect("answers");
    assert_eq!(e.decision.as_ref(), Some(&kept));
    // A settled task's answer is false, its decision unchecked and unkept.
    let other = decision("nonsense", None, None);
    assert_eq!(
        tasks::settle(
            &mut kv,
            "t",
            Settlement::Completed,
            None,
            Some(&other),
            None
        ),
        Ok(false)
    );
    assert_eq!(
        tasks::get(&mut kv, "t")
            .expect("answers")
            .expect("answers")
            .decision,
        Some(kept)
    );
    assert_healthy(&mut kv);
}

#[test]
fn a_decision_the_outcomes_refuse_names_the_field_and_writes_nothing() {
    let mut kv = MemKv::new();
    open(&mut kv, with_outcomes(task("t")));
    let settle = |kv: &mut MemKv, d: Decision| {
        tasks::settle(kv, "t", Settlement::Completed, None, Some(&d), None)
    };
    let why = |e: ClaimError| match e {
        ClaimError::Store(StoreError::Invalid(w)) => w,
        other => panic!("expected invalid, got {other:?}"),
    };
    let e = why(fails_cleanly(&mut kv, |kv| {
        settle(kv, decision("returned", None, None))
    }));
    assert!(
        e.starts_with("decision.outcome:") && e.contains("approved, rejected"),
        "{e}"
    );
    let e = why(fails_cleanly(&mut kv, |kv| {
        settle(kv, decision("rejected", Some("  "), None))
    }));
    assert_eq!(
        e,
        "decision.reason: the outcome \"rejected\" needs a reason"
    );
    let e = why(fails_cleanly(&mut kv, |kv| {
        settle(kv, decision("approved", None, Some(r#"{"amount": 1500}"#)))
    }));
    assert!(e.starts_with("decision.output: /amount: maximum"), "{e}");
    // No output is JSON null, which the schema refuses at the root.
    let e = why(fails_cleanly(&mut kv, |kv| {
        settle(kv, decision("approved", None, None))
    }));
    assert!(e.starts_with("decision.output: (root): type"), "{e}");
    let e = why(fails_cleanly(&mut kv, |kv| {
        settle(kv, decision("approved", None, Some("{not json")))
    }));
    assert!(
        e.starts_with("decision.output is not a JSON document"),
        "{e}"
    );
    let e = why(fails_cleanly(&mut kv, |kv| {
        settle(kv, decision("rejected", Some(&"r".repeat(4097)), None))
    }));
    assert!(e.starts_with("decision.reason is 4097 bytes"), "{e}");
    let e = why(fails_cleanly(&mut kv, |kv| {
        settle(kv, decision(&"o".repeat(65), None, None))
    }));
    assert!(e.starts_with("decision.outcome is 65 characters"), "{e}");
    // What the rules accept settles.
    assert_eq!(
        settle(
            &mut kv,
            decision("approved", None, Some(r#"{"amount": 999.5}"#))
        ),
        Ok(true)
    );
}

#[test]
fn a_kinds_outcomes_apply_where_the_task_declares_none() {
    let mut kv = MemKv::new();
    open(&mut kv, task("plain"));
    open(&mut kv, with_outcomes(task("own")));
    // Without a definition anywhere, any outcome is allowed.
    let free = decision("whatever", None, None);
    assert_eq!(
        tasks::settle(
            &mut kv,
            "plain",
            Settlement::Completed,
            None,
            Some(&free),
            None
        ),
        Ok(true)
    );
    let def = KindDefinition {
        kind: "approve".into(),
        outcomes: vec![rule("ok", false, None), rule("no", true, None)],
        revision: 0,
    };
    let stored = kinds::define(&mut kv, &def, Some(0)).expect("defines");
    assert_eq!(stored.revision, 1);
    // A second define from a stale view is refused.
    let e = fails_cleanly(&mut kv, |kv| kinds::define(kv, &def, Some(0)));
    assert_eq!(e, StoreError::Stale(1));
    open(&mut kv, task("kinded"));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "kinded", Settlement::Completed, None, Some(&free), None)
    });
    assert!(format!("{e:?}").contains("(ok, no)"), "{e:?}");
    // The task's own outcomes win over its kind's.
    let d = decision("rejected", Some("no budget"), None);
    assert_eq!(
        tasks::settle(&mut kv, "own", Settlement::Completed, None, Some(&d), None),
        Ok(true)
    );
    assert_eq!(
        kinds::list(&mut kv, 10, None).expect("answers"),
        vec![stored.clone()]
    );
    assert_eq!(
        kinds::get(&mut kv, "approve").expect("answers"),
        Some(stored)
    );
    assert_eq!(kinds::remove(&mut kv, "approve"), Ok(true));
    assert_eq!(kinds::remove(&mut kv, "approve"), Ok(false));
    assert_eq!(
        tasks::settle(
            &mut kv,
            "kinded",
            Settlement::Completed,
            None,
            Some(&free),
            None
        ),
        Ok(true)
    );
    assert_healthy(&mut kv);
}

#[test]
fn outcome_rules_are_checked_when_declared_never_when_first_used() {
    let mut kv = MemKv::new();
    let bad = |rules: Vec<OutcomeRule>| Task {
        outcomes: rules,
        ..task("t")
    };
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::open(kv, &bad(vec![rule("a", false, Some(r##"{"$ref": "#"}"##))]))
    });
    assert!(
        format!("{e:?}").contains("outcomes[0].output-schema (a)"),
        "{e:?}"
    );
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::open(
            kv,
            &bad(vec![rule("a", false, None), rule("a", true, None)]),
        )
    });
    assert!(format!("{e:?}").contains("listed twice"), "{e:?}");
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::open(kv, &bad(vec![rule("a", false, Some("[1"))]))
    });
    assert!(format!("{e:?}").contains("not JSON"), "{e:?}");
    let def = KindDefinition {
        kind: "approve".into(),
        outcomes: vec![rule("a", false, Some(r#"{"type": "strin"}"#))],
        revision: 0,
    };
    let e = fails_cleanly(&mut kv, |kv| kinds::define(kv, &def, None));
    assert!(
        format!("{e:?}").contains("outcomes[0].output-schema"),
        "{e:?}"
    );
    // A new task carries no decision.
    let e = fails_cleanly(&mut kv, |kv| {
        let mut t = task("t");
        t.decision = Some(crate::model::DecisionRecord {
            outcome: "x".into(),
            reason: None,
            output: None,
            by: None,
            at: 0,
        });
        tasks::open(kv, &t)
    });
    assert!(format!("{e:?}").contains("decision is set"), "{e:?}");
    // Update is held to the same rules.
    open(&mut kv, task("u"));
    let e = fails_cleanly(&mut kv, |kv| {
        let c = TaskChanges {
            outcomes: Some(vec![rule("", false, None)]),
            ..TaskChanges::default()
        };
        tasks::update(kv, "u", None, &c, None)
    });
    assert!(
        format!("{e:?}").contains("changes.outcomes[0].name"),
        "{e:?}"
    );
}

#[test]
fn a_kind_definition_moves_the_layout_mark_and_is_checked_as_damage() {
    let mut kv = MemKv::new();
    let def = KindDefinition {
        kind: "approve".into(),
        outcomes: vec![rule("ok", false, None)],
        revision: 0,
    };
    kinds::define(&mut kv, &def, None).expect("answers");
    let mark = kv.map[crate::schema::layout().as_bytes()].clone();
    assert!(
        mark.starts_with(b"10/"),
        "{:?}",
        String::from_utf8_lossy(&mark)
    );
    kv.map.insert(
        crate::schema::kind("approve").into_bytes(),
        vec![0xff, 0xff],
    );
    let e = kinds::get(&mut kv, "approve").expect_err("refused");
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
}
