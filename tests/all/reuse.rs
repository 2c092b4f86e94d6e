//! Instance reuse (`EngineBuilder::reuse_instances`), tested as an attacker
//! would: a kept instance serves only its own tenant's calls, never a call
//! after one that failed in any way or grew its memory, and within its
//! bounds of calls and age. The hostile fixture keeps state in its memory on
//! purpose (`remember-X`, then `recall`), so whatever an instance carries
//! from call to call is visible; every test runs it through the real host
//! on a real store.

use std::sync::Arc;
use std::time::Duration;

use leasehold_host::{Durability, Engine, Error, InstanceStats, Limits, QueueQuery, Reuse, Tenant};
use leasehold_tests::*;

fn engine(db: &TestDb, limits: Limits, reuse: Option<Reuse>) -> Engine {
    let builder = Engine::builder()
        .component(HOSTILE_COMPONENT)
        .limits(limits);
    let builder = match reuse {
        Some(r) => builder.reuse_instances(r),
        None => builder,
    };
    db.open_as_built(builder)
        .expect("the hostile fixture implements the world")
}

/// A deadline the looping call reaches soon, and that the other calls, a
/// few milliseconds each, stay far inside on a busy machine.
fn quick() -> Limits {
    Limits {
        deadline: Duration::from_secs(1),
        ..Limits::default()
    }
}

/// What the instance that served this call keeps, and how many `get`
/// calls it has served, this one included.
fn recall(t: &Tenant) -> (String, u32) {
    let task = t
        .get("recall")
        .expect("recall answers")
        .expect("recall answers a task");
    let (kept, gets) = task
        .justification
        .rsplit_once('|')
        .expect("recall answers X|N");
    (kept.to_owned(), gets.parse().expect("a count"))
}

fn remember(t: &Tenant, what: &str) {
    assert_eq!(t.get(&format!("remember-{what}")).expect("remember"), None);
}

/// A fresh instance keeps nothing and has served only the recall.
const FRESH: (&str, u32) = ("", 1);

fn fresh() -> (String, u32) {
    (FRESH.0.to_owned(), FRESH.1)
}

#[test]
fn a_kept_instance_serves_its_tenants_next_call_and_only_when_asked() {
    let db = TestDb::new();
    // The control, so that no test below passes because nothing is kept.
    let on = engine(&db, Limits::default(), Some(Reuse::default()));
    let a = on.tenant("a").expect("tenant");
    remember(&a, "x");
    assert_eq!(recall(&a), ("x".to_owned(), 2));
    assert_eq!(recall(&a), ("x".to_owned(), 3));
    assert_eq!(
        on.instance_stats(),
        InstanceStats {
            fresh: 1,
            reused: 2
        }
    );
    assert_eq!(on.reuse(), Some(Reuse::default()));
    drop((a, on));

    // Off, the default: every call runs on a fresh instance.
    let off = engine(&db, Limits::default(), None);
    let a = off.tenant("a").expect("tenant");
    remember(&a, "x");
    assert_eq!(recall(&a), fresh());
    assert_eq!(
        off.instance_stats(),
        InstanceStats {
            fresh: 2,
            reused: 0
        }
    );
    assert_eq!(off.reuse(), None);
}

#[test]
fn nothing_an_instance_keeps_reaches_another_tenant_in_any_order_of_calls() {
    let db = TestDb::new();
    let engine = engine(&db, Limits::default(), Some(Reuse::default()));
    // Names that share prefixes, as keys joined to names would collide.
    let names = ["a", "ab", "b", "a-b", "A"];
    let tenants: Vec<Tenant> = names
        .iter()
        .map(|n| engine.tenant(n).expect("tenant"))
        .collect();
    for round in 0..12 {
        // Every order of taking turns: forwards, backwards, and one tenant
        // many times between the others.
        let order: Vec<usize> = match round % 3 {
            0 => (0..names.len()).collect(),
            1 => (0..names.len()).rev().collect(),
            _ => vec![0, 0, 1, 0, 2, 0, 3, 0, 4],
        };
        for &i in &order {
            let t = &tenants[i];
            let (kept, _) = recall(t);
            assert!(
                kept.is_empty() || kept.rsplit_once('.').map(|(n, _)| n) == Some(names[i]),
                "tenant {} saw {kept:?}",
                names[i]
            );
            remember(t, &format!("{}.{round}", names[i]));
        }
    }
    assert!(
        engine.instance_stats().reused > 0,
        "{:?}",
        engine.instance_stats()
    );
}

#[test]
fn nothing_crosses_tenants_when_their_calls_run_side_by_side() {
    let db = TestDb::new();
    let engine = Arc::new(engine(&db, Limits::default(), Some(Reuse::default())));
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                // Two threads per tenant, so a tenant's kept instances are
                // taken back by either.
                let name = format!("t{}", n % 2);
                let t = engine.tenant(&name).expect("tenant");
                for i in 0..150 {
                    let (kept, _) = recall(&t);
                    assert!(
                        kept.is_empty() || kept.split('.').next() == Some(name.as_str()),
                        "tenant {name} saw {kept:?}"
                    );
                    remember(&t, &format!("{name}.{n}.{i}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no thread saw another tenant's state");
    }
    assert!(
        engine.instance_stats().reused > 0,
        "{:?}",
        engine.instance_stats()
    );
}

#[test]
fn an_instance_whose_call_failed_in_any_way_is_never_used_again() {
    let db = TestDb::new();
    let engine = engine(&db, quick(), Some(Reuse::default()));
    let t = engine.tenant("a").expect("tenant");
    type Failing = fn(&Tenant) -> Result<(), Error>;
    let failing: [(&str, Failing); 8] = [
        ("a trap", |t| t.open(&task("write-then-trap", 0)).map(drop)),
        ("the deadline", |t| t.get("loop").map(drop)),
        ("an error answer", |t| {
            t.open(&task("write-then-error", 0)).map(drop)
        }),
        ("a key over its cap", |t| t.get("huge-key").map(drop)),
        ("a scan over its cap", |t| t.get("long-scan").map(drop)),
        ("an answer the contract rules out", |t| {
            t.get("wrong-id").map(drop)
        }),
        ("the memory cap", |t| t.get("alloc").map(drop)),
        ("a second batch", |t| {
            t.open(&task("stage-twice", 0)).map(drop)
        }),
    ];
    for (what, call) in failing {
        remember(&t, "before");
        assert_eq!(recall(&t).0, "before", "the instance is kept before {what}");
        assert!(call(&t).is_err(), "{what} fails the call");
        assert_eq!(recall(&t), fresh(), "after {what}");
    }
    // A refusal by the rules is an error answer too.
    remember(&t, "before");
    assert!(matches!(t.get("nope"), Err(Error::Store(_))));
    assert_eq!(recall(&t), fresh(), "after a refusal");
}

#[test]
fn an_instance_that_grew_its_memory_is_not_kept() {
    let db = TestDb::new();
    let engine = engine(&db, Limits::default(), Some(Reuse::default()));
    let t = engine.tenant("a").expect("tenant");
    remember(&t, "x");
    assert_eq!(t.get("grow").expect("grow"), None);
    assert_eq!(recall(&t), fresh());
}

#[test]
fn an_instance_is_retired_after_its_calls_and_past_its_age() {
    let db = TestDb::new();
    let three = engine(
        &db,
        Limits::default(),
        Some(Reuse {
            calls: 3,
            ..Reuse::default()
        }),
    );
    let t = three.tenant("a").expect("tenant");
    remember(&t, "x");
    assert_eq!(recall(&t), ("x".to_owned(), 2));
    assert_eq!(recall(&t), ("x".to_owned(), 3));
    assert_eq!(
        recall(&t),
        fresh(),
        "the fourth call runs on a fresh instance"
    );
    drop((t, three));

    let ageless = engine(
        &db,
        Limits::default(),
        Some(Reuse {
            age: Duration::ZERO,
            ..Reuse::default()
        }),
    );
    let t = ageless.tenant("a").expect("tenant");
    remember(&t, "x");
    assert_eq!(recall(&t), fresh(), "an instance past its age is not used");
}

#[test]
fn kept_instances_give_their_slots_to_calls_that_need_them() {
    let db = TestDb::new();
    // Two slots: one kept instance at most, beside one running call.
    let limits = Limits {
        concurrent_calls: 2,
        ..Limits::default()
    };
    let engine = Arc::new(engine(&db, limits, Some(Reuse::default())));
    let a = engine.tenant("a").expect("tenant");
    remember(&a, "x");
    let b = engine.tenant("b").expect("tenant");
    remember(&b, "y");
    // Only one is kept: b's, the most recent.
    assert_eq!(recall(&a), fresh());
    // a's instance is kept now; a long call of c takes the other slot.
    let before = engine.instance_stats().fresh;
    let long = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let c = engine.tenant("c").expect("tenant");
            c.open(&task("work-2000", 0)).map(drop)
        })
    };
    while engine.instance_stats().fresh == before && !long.is_finished() {
        std::thread::yield_now();
    }
    // Both slots are taken, one by an idle instance: b's call is served,
    // never refused as busy.
    let b_saw = recall(&b);
    if !long.is_finished() {
        assert_eq!(b_saw, fresh(), "b ran on a fresh instance");
        assert_eq!(recall(&a), fresh(), "a's idle instance gave up its slot");
    }
    long.join()
        .expect("the long call's thread")
        .expect("the long call answers ok");
}

/// The same calls on one kept instance and on a fresh instance each: every
/// answer alike, so nothing one call of the rules leaves in the instance
/// changes the next.
#[test]
fn the_rules_answer_alike_on_one_kept_instance_and_on_fresh_ones() {
    let (kept_db, fresh_db) = (TestDb::new(), TestDb::new());
    let open = |db: &TestDb, reuse: Option<Reuse>| {
        let b = Engine::builder().durability(Durability::None);
        let b = match reuse {
            Some(r) => b.reuse_instances(r),
            None => b,
        };
        db.open_as_built(b).expect("engine")
    };
    let kept = open(&kept_db, Some(Reuse::default()));
    let fresh = open(&fresh_db, None);
    let run = |t: &Tenant| -> Vec<String> {
        let mut answers = Vec::new();
        for i in 0..150i64 {
            let id = format!("t-{i:03}");
            let mut new = task(&id, i);
            new.candidate_roles = vec!["reviewer".into()];
            answers.push(format!("{:?}", t.open(&new)));
            let q = QueueQuery {
                roles: vec!["reviewer".into()],
                actor: Some("alice".into()),
                limit: 20,
                after: None,
            };
            answers.push(format!("{:?}", t.queue(&q)));
            if i % 3 == 0 {
                answers.push(format!("{:?}", t.claim(&id, "alice", &["reviewer"], None)));
            }
            if i % 5 == 0 {
                answers.push(format!("{:?}", t.claim(&id, "bob", &["auditor"], None)));
            }
            answers.push(format!("{:?}", t.open_count()));
        }
        answers.push(format!("{:?}", t.check()));
        answers
    };
    let on_kept = run(&kept.tenant("acme").expect("tenant"));
    let on_fresh = run(&fresh.tenant("acme").expect("tenant"));
    assert_eq!(on_kept.len(), on_fresh.len());
    for (k, f) in on_kept.iter().zip(&on_fresh) {
        assert_eq!(k, f);
    }
    let stats = kept.instance_stats();
    // Refusals (bob's claims) throw their instance away; every other call
    // ran on a kept one.
    assert!(stats.reused > 400, "{stats:?}");
    assert_eq!(fresh.instance_stats().reused, 0);
}
