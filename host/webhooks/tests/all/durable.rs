//! Deliveries over subscriptions kept where a deployment keeps them: rows
//! of the tenant's keyspace through the component ([`ComponentStore`]), on
//! a redb file and on PostgreSQL shared by two servers. A crash, a restart
//! and a takeover lose nothing; an operator's change stops a stale worker;
//! and trimming keeps what a subscription that cannot deliver is owed.

use std::sync::Arc;
use std::time::Duration;

use leasehold_guest::subscriptions::{SubFilter, SubState};
use leasehold_host::{Engine, Tenant};
use leasehold_webhooks::{ComponentStore, Deliveries, Parts, Secret};

use crate::harness::*;

/// An engine on a fresh store, and how to open another on the same one (a
/// second server), when the store can be shared.
struct Store {
    engine: Engine,
    second: Option<Box<dyn Fn() -> Engine>>,
    _keep: Box<dyn std::any::Any>,
}

fn redb() -> Store {
    let dir = tempfile::tempdir().expect("dir");
    let engine = Engine::open(dir.path().join("hooks.redb")).expect("engine");
    Store {
        engine,
        second: None,
        _keep: Box::new(dir),
    }
}

fn postgres() -> Option<Store> {
    let schema = leasehold_tests::pg::Schema::fresh()?;
    let url = schema.url.clone();
    let engine = Engine::builder().postgres(&url).expect("engine");
    Some(Store {
        engine,
        second: Some(Box::new(move || {
            Engine::builder().postgres(&url).expect("a second engine")
        })),
        _keep: Box::new(schema),
    })
}

fn stores() -> Vec<(&'static str, Store)> {
    let mut all = vec![("redb", redb())];
    if let Some(pg) = postgres() {
        all.push(("postgres", pg));
    }
    all
}

fn everything() -> SubFilter {
    SubFilter {
        tasks: true,
        timers: true,
        verbs: vec![],
        kinds: vec![],
        runs: vec![],
        settling_only: false,
    }
}

/// A server's deliveries of `tenant`, over the component's rows.
fn server(engine: &Engine, holder: &str, rt: &tokio::runtime::Runtime) -> Deliveries {
    rt.block_on(async {
        let mut options = quick(holder);
        options.checkpoint = Duration::from_millis(100);
        let d = Deliveries::new(
            Parts::new(
                Arc::new(ComponentStore::new(engine.clone())),
                Arc::new(engine.clone()),
                local_sender(holder, Duration::from_millis(400)),
            ),
            options,
        );
        d.serve("acme");
        d.follow(engine.changes());
        d
    })
}

/// Waits until `cond` holds, on this thread, outside any runtime: the
/// conditions read the store, and a PostgreSQL engine's calls block.
fn wait_sync(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < BOUND, "waited {BOUND:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn position(t: &Tenant, id: &str) -> Option<String> {
    t.get_subscription(id)
        .expect("get")
        .expect("the subscription")
        .position
}

/// A receiver failing a third of its requests and sometimes hanging, while
/// the first server dies and a second (another engine on the same
/// database, or a restart on the same file) takes over: every task's
/// changes arrive, in order, each duplicate with its id, and the position
/// in the component's row reaches the head.
#[test]
fn on_the_components_rows_a_crash_and_a_takeover_lose_nothing() {
    for (name, store) in stores() {
        let acme = store.engine.tenant("acme").expect("tenant");
        let secret = Secret::generate().expect("secret");
        let receiving = tokio::runtime::Runtime::new().expect("runtime");
        let r = receiving.block_on(Receiver::start(Arc::new(|g: &Got, nth| {
            let h = g.id.bytes().fold(nth as u64, |a, b| {
                a.wrapping_mul(31).wrapping_add(u64::from(b))
            });
            match h % 30 {
                0..=9 => Reply::Status(500),
                10 => Reply::Hang,
                _ => Reply::Status(204),
            }
        })));
        acme.add_subscription(
            "sub_d",
            &r.url("/d"),
            &everything(),
            secret.as_bytes(),
            None,
            1_000,
        )
        .expect("add");
        let writer = {
            let acme = acme.clone();
            std::thread::spawn(move || {
                for i in 0..60 {
                    life(&acme, &format!("t{i}"), "approve");
                }
            })
        };
        let first_rt = tokio::runtime::Runtime::new().expect("runtime");
        let first = server(&store.engine, "one", &first_rt);
        wait_sync("the first server to deliver some", || {
            r.got().iter().filter(|g| g.status == Some(204)).count() >= 30
        });
        // Dies at once: its lease stays until it lapses.
        drop(first_rt);
        drop(first);
        let second_engine = store.second.as_ref().map(|open| open());
        let engine = second_engine.as_ref().unwrap_or(&store.engine);
        let second_rt = tokio::runtime::Runtime::new().expect("runtime");
        let _second = server(engine, "two", &second_rt);
        writer.join().expect("writer");
        let end = head(&acme);
        wait_sync("the position to reach the head", || {
            position(&acme, "sub_d").as_deref() == Some(end.as_str())
        });
        let got = r.got();
        let mut firsts: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
        let mut seen = std::collections::BTreeSet::new();
        for g in got.iter().filter(|g| g.status == Some(204)) {
            let Some((task, seq)) = g.task_seq() else {
                continue;
            };
            if seen.insert((task.clone(), seq)) {
                firsts.entry(task).or_default().push(seq);
            }
        }
        assert_eq!(firsts.len(), 60, "{name}: every task's changes arrived");
        for (task, seqs) in &firsts {
            assert_eq!(seqs, &[1, 2, 3], "{name}: {task}");
        }
        // A duplicate is the same entry under the same id.
        let mut ids: std::collections::BTreeMap<String, (String, u64)> = Default::default();
        for g in &got {
            if let Some(place) = g.task_seq() {
                let before = ids.insert(g.id.clone(), place.clone());
                assert!(before.is_none_or(|b| b == place), "{name}: {}", g.id);
            }
        }
        assert!(got.iter().any(|g| g.user_agent == "one"), "{name}");
        assert!(got.iter().any(|g| g.user_agent == "two"), "{name}");
        let found = acme.check().expect("check");
        assert!(found.is_empty(), "{name}: {found:#?}");
        drop(second_rt);
    }
}

/// An operator's pause stops the worker that started before it; a resume
/// goes on from the position; deleting stops deliveries at once.
#[test]
fn an_operators_change_stops_the_worker_and_a_delete_stops_deliveries() {
    for (name, store) in stores() {
        let acme = store.engine.tenant("acme").expect("tenant");
        let secret = Secret::generate().expect("secret");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let r = rt.block_on(Receiver::start(always(204)));
        acme.add_subscription(
            "sub_p",
            &r.url("/p"),
            &everything(),
            secret.as_bytes(),
            None,
            1,
        )
        .expect("add");
        let d = server(&store.engine, "one", &rt);
        life(&acme, "a", "approve");
        let end = head(&acme);
        wait_sync("the first task's changes", || {
            position(&acme, "sub_p").as_deref() == Some(end.as_str())
        });
        let paused = acme
            .set_subscription_state("sub_p", SubState::Paused, Some("maintenance"), None)
            .expect("pause");
        assert_eq!(paused.revision, 2);
        d.changed("acme");
        wait_sync("the worker to stop", || {
            let status = rt.block_on(d.status("acme")).expect("status");
            status.iter().all(|s| s.running.is_none())
        });
        let heard = r.got().len();
        life(&acme, "b", "approve");
        d.wake("acme");
        // No worker runs, so none can send; the wait only gives a wrong
        // one the time to show itself.
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
        assert_eq!(r.got().len(), heard, "{name}: delivered while paused");
        acme.set_subscription_state("sub_p", SubState::Active, None, None)
            .expect("resume");
        d.changed("acme");
        let end = head(&acme);
        wait_sync("b's changes after the resume", || {
            position(&acme, "sub_p").as_deref() == Some(end.as_str())
        });
        assert_eq!(r.got().len(), heard + 3, "{name}");
        assert!(acme.remove_subscription("sub_p").expect("remove"));
        d.changed("acme");
        wait_sync("the worker to stop", || d.metrics().is_empty());
        let heard = r.got().len();
        life(&acme, "c", "approve");
        d.wake("acme");
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
        assert_eq!(r.got().len(), heard, "{name}: delivered after the delete");
        rt.block_on(d.shutdown());
    }
}

/// While a subscription cannot deliver, trimming keeps what it is owed;
/// once its endpoint answers, every entry arrives.
#[test]
fn trimming_keeps_what_an_undelivered_subscription_is_owed() {
    for (name, store) in stores() {
        let acme = store.engine.tenant("acme").expect("tenant");
        let secret = Secret::generate().expect("secret");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let r = rt.block_on(Receiver::start(always(503)));
        acme.add_subscription(
            "sub_t",
            &r.url("/t"),
            &everything(),
            secret.as_bytes(),
            None,
            1,
        )
        .expect("add");
        let _d = server(&store.engine, "one", &rt);
        for i in 0..5 {
            life(&acme, &format!("t{i}"), "approve");
        }
        wait_sync("a failed attempt", || !r.got().is_empty());
        let out = acme.trim(None, Some(0), 1000).expect("trim");
        assert_eq!(out.feed_removed, 0, "{name}: all 15 are owed");
        r.answer_with(always(204));
        let end = head(&acme);
        wait_sync("everything delivered", || {
            position(&acme, "sub_t").as_deref() == Some(end.as_str())
        });
        let mut delivered: Vec<(String, u64)> = r
            .got()
            .iter()
            .filter(|g| g.status == Some(204))
            .filter_map(Got::task_seq)
            .collect();
        delivered.sort();
        delivered.dedup();
        assert_eq!(delivered.len(), 15, "{name}");
        let out = acme.trim(None, Some(0), 1000).expect("trim");
        assert_eq!(out.feed_removed, 15, "{name}: delivered, so trimmed");
        let found = acme.check().expect("check");
        assert!(found.is_empty(), "{name}: {found:#?}");
    }
}
