//! Kept instances (the default; `EngineBuilder::reuse_instances` for other
//! bounds, `fresh_instances` for none), tested as an attacker would: a kept
//! instance serves only its own tenant's calls, never a call after one that
//! failed in any way or grew its memory, and within its bounds of calls,
//! age, idle time and memory; and no byte a tenant's call leaves in linear
//! memory is there for another tenant's call to find. The hostile fixture keeps state in its memory on
//! purpose (`remember-X`, then `recall`), so whatever an instance carries
//! from call to call is visible; every test runs it through the real host
//! on a real store.

use std::sync::Arc;
use std::time::Duration;

use leasehold_host::{Durability, Engine, Error, Limits, ManualClock, QueueQuery, Reuse, Tenant};
use leasehold_tests::*;

/// An engine on the hostile fixture, keeping instances within `reuse`'s
/// bounds, or with a fresh instance per call for `None`.
fn engine(db: &TestDb, limits: Limits, reuse: Option<Reuse>) -> Engine {
    let builder = Engine::builder()
        .component(HOSTILE_COMPONENT)
        .limits(limits);
    let builder = match reuse {
        Some(r) => builder.reuse_instances(r),
        None => builder.fresh_instances(),
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
fn instances_are_kept_by_default_and_never_when_fresh_ones_are_asked_for() {
    let db = TestDb::new();
    // The control, so that no test below passes because nothing is kept:
    // an engine built with no word about instances keeps them.
    let on = db
        .open_as_built(Engine::builder().component(HOSTILE_COMPONENT))
        .expect("engine");
    let a = on.tenant("a").expect("tenant");
    remember(&a, "x");
    assert_eq!(recall(&a), ("x".to_owned(), 2));
    assert_eq!(recall(&a), ("x".to_owned(), 3));
    let stats = on.instance_stats();
    assert_eq!((stats.fresh, stats.reused, stats.idle), (1, 2, 1));
    assert!(stats.idle_bytes > 0, "{stats:?}");
    assert_eq!(on.reuse(), Some(Reuse::default()));
    drop((a, on));

    // Fresh instances, asked for: every call runs on a fresh instance.
    let off = engine(&db, Limits::default(), None);
    let a = off.tenant("a").expect("tenant");
    remember(&a, "x");
    assert_eq!(recall(&a), fresh());
    let stats = off.instance_stats();
    assert_eq!(
        (stats.fresh, stats.reused, stats.idle, stats.idle_bytes),
        (2, 0, 0, 0)
    );
    assert_eq!(off.reuse(), None);
}

/// The bytes `secret` spells, as `scrape-` takes them.
fn hex(secret: &str) -> String {
    secret.bytes().map(|b| format!("{b:02x}")).collect()
}

/// How many copies of `secret` the instance serving this call of `t` holds
/// anywhere in its linear memory, from earlier calls.
fn scrape(t: &Tenant, secret: &str) -> usize {
    let id = format!("scrape-{}", hex(secret));
    t.get(&id)
        .expect("scrape answers")
        .expect("scrape answers a task")
        .justification
        .parse()
        .expect("a count")
}

/// The whole linear memory of the instance that serves a tenant's call,
/// read by the guest itself, byte by byte: it holds what the same tenant's
/// earlier calls left there (the control), and never a byte of another
/// tenant's calls, whatever order the calls come in.
#[test]
fn no_call_finds_another_tenants_bytes_anywhere_in_its_memory() {
    let db = TestDb::new();
    let engine = engine(&db, Limits::default(), Some(Reuse::default()));
    let (a, b) = (
        engine.tenant("a").expect("tenant"),
        engine.tenant("b").expect("tenant"),
    );
    let (secret_a, secret_b) = ("a's secret 7f3c91", "b's secret 0d52e8");
    // Each secret reaches its instance's memory twice over: the argument
    // the host lowered into it, and what the guest keeps on purpose.
    remember(&a, secret_a);
    assert!(
        scrape(&a, secret_a) >= 1,
        "the control: a's instance was kept with a's bytes in it"
    );
    assert_eq!(scrape(&b, secret_a), 0, "b's first call");
    remember(&b, secret_b);
    for _ in 0..3 {
        assert_eq!(scrape(&b, secret_a), 0);
        assert_eq!(scrape(&a, secret_b), 0);
        assert!(scrape(&a, secret_a) >= 1);
        assert!(scrape(&b, secret_b) >= 1);
    }
    // After a failed call of a, its next call runs on a fresh instance,
    // which holds none of a's earlier bytes either.
    assert!(a.get("wrong-id").is_err());
    assert_eq!(scrape(&a, secret_a), 0, "after a failed call");
    assert!(
        engine.instance_stats().reused >= 12,
        "{:?}",
        engine.instance_stats()
    );
}

/// The bytes of linear memory one idle instance of the fixture holds.
fn one_instance_bytes(db: &TestDb) -> usize {
    let engine = engine(db, Limits::default(), Some(Reuse::default()));
    remember(&engine.tenant("probe").expect("tenant"), "x");
    let stats = engine.instance_stats();
    assert_eq!(stats.idle, 1, "{stats:?}");
    stats.idle_bytes
}

#[test]
fn idle_instances_together_hold_no_more_memory_than_their_bound() {
    let db = TestDb::new();
    let one = one_instance_bytes(&db);
    // Room for two instances, not three.
    let engine = engine(
        &db,
        Limits::default(),
        Some(Reuse {
            idle_bytes: 2 * one + one / 2,
            ..Reuse::default()
        }),
    );
    let tenants: Vec<Tenant> = ["a", "b", "c"]
        .iter()
        .map(|n| engine.tenant(n).expect("tenant"))
        .collect();
    for (t, what) in tenants.iter().zip(["a", "b", "c"]) {
        remember(t, what);
    }
    let stats = engine.instance_stats();
    assert_eq!((stats.idle, stats.idle_bytes), (2, 2 * one), "{stats:?}");
    // The least recently used went: a's.
    assert_eq!(recall(&tenants[2]), ("c".to_owned(), 2));
    assert_eq!(recall(&tenants[1]), ("b".to_owned(), 2));
    assert_eq!(recall(&tenants[0]), fresh());
    drop((tenants, engine));

    // A bound below one instance keeps none.
    let none = engine_with_bytes(&db, one - 1);
    let t = none.tenant("a").expect("tenant");
    remember(&t, "x");
    assert_eq!(recall(&t), fresh());
    assert_eq!(none.instance_stats().idle, 0);
}

fn engine_with_bytes(db: &TestDb, idle_bytes: usize) -> Engine {
    engine(
        db,
        Limits::default(),
        Some(Reuse {
            idle_bytes,
            ..Reuse::default()
        }),
    )
}

#[test]
fn an_instance_idle_too_long_by_the_engines_clock_is_let_go_at_the_next_call() {
    let db = TestDb::new();
    let clock = std::sync::Arc::new(ManualClock::new(1_000_000));
    let engine = db
        .open_as_built(
            Engine::builder()
                .component(HOSTILE_COMPONENT)
                .clock(clock.clone())
                .reuse_instances(Reuse {
                    idle_for: Duration::from_secs(10),
                    ..Reuse::default()
                }),
        )
        .expect("engine");
    let (a, b) = (
        engine.tenant("a").expect("tenant"),
        engine.tenant("b").expect("tenant"),
    );
    remember(&a, "x");
    clock.advance(9_999);
    remember(&b, "y");
    assert_eq!(engine.instance_stats().idle, 2);
    // Ten seconds after a's last call began, b's call lets a's instance go
    // (b's, idle one millisecond, serves b).
    clock.advance(1);
    assert_eq!(recall(&b), ("y".to_owned(), 2));
    assert_eq!(engine.instance_stats().idle, 1);
    assert_eq!(recall(&a), fresh());
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

/// The same calls of two tenants taking turns, on kept instances and on a
/// fresh instance each: every answer alike, so nothing one call of the
/// rules leaves in an instance changes the next call of its tenant, and no
/// tenant's answers depend on what the other's calls did (their tasks
/// differ, so a crossing would show in a queue or a count).
#[test]
fn the_rules_answer_alike_on_kept_instances_and_on_fresh_ones() {
    let (kept_db, fresh_db) = (TestDb::new(), TestDb::new());
    let open = |db: &TestDb, reuse: Option<Reuse>| {
        let b = Engine::builder().durability(Durability::None);
        let b = match reuse {
            Some(r) => b.reuse_instances(r),
            None => b.fresh_instances(),
        };
        db.open_as_built(b).expect("engine")
    };
    let kept = open(&kept_db, Some(Reuse::default()));
    let fresh = open(&fresh_db, None);
    let step = |t: &Tenant, i: i64, answers: &mut Vec<String>| {
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
    };
    let run = |engine: &Engine| -> Vec<String> {
        let (acme, globex) = (
            engine.tenant("acme").expect("tenant"),
            engine.tenant("globex").expect("tenant"),
        );
        let mut answers = Vec::new();
        for i in 0..150i64 {
            step(&acme, i, &mut answers);
            // globex makes every third of acme's tasks, under other ids.
            if i % 3 == 1 {
                step(&globex, 1000 + i, &mut answers);
            }
        }
        answers.push(format!("{:?}", acme.check()));
        answers.push(format!("{:?}", globex.check()));
        answers
    };
    let on_kept = run(&kept);
    let on_fresh = run(&fresh);
    assert_eq!(on_kept.len(), on_fresh.len());
    for (k, f) in on_kept.iter().zip(&on_fresh) {
        assert_eq!(k, f);
    }
    let stats = kept.instance_stats();
    // Refusals (bob's claims) throw their instance away; every other call
    // ran on a kept one.
    assert!(stats.reused > 500, "{stats:?}");
    assert_eq!(fresh.instance_stats().reused, 0);
}
