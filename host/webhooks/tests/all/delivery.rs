//! The engine over the real feed: what arrives, in what order, with which
//! ids and signatures, and where the position stands after acknowledgements,
//! refusals, exhausted schedules, trimming, replays and restarts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use leasehold_host::Engine;
use leasehold_webhooks::{
    Filter, MemoryStore, Options, RetryPolicy, Secret, SubState, TenantLimits,
};

use crate::harness::*;

/// Each task's history numbers, in the order first acknowledged.
fn first_acks(got: &[Got]) -> BTreeMap<String, Vec<u64>> {
    let mut seen = BTreeSet::new();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for g in got
        .iter()
        .filter(|g| g.status.is_some_and(|s| (200..300).contains(&s)))
    {
        if let Some((task, seq)) = g.task_seq()
            && seen.insert((task.clone(), seq))
        {
            out.entry(task).or_default().push(seq);
        }
    }
    out
}

/// Every request verifies under `secret`, and one entry always has one id.
fn signed_and_stable(got: &[Got], secret: &Secret) {
    let mut ids: HashMap<(String, u64), BTreeSet<String>> = HashMap::new();
    for g in got {
        assert!(
            secret.verify(&g.signature, &g.id, g.timestamp, &g.body),
            "a request did not verify: {g:?}"
        );
        if let Some(k) = g.task_seq() {
            ids.entry(k).or_default().insert(g.id.clone());
        }
    }
    for (k, v) in ids {
        assert_eq!(v.len(), 1, "{k:?} was sent under several ids: {v:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_matching_entry_arrives_signed_in_order_and_the_position_reaches_the_head() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    for i in 0..10 {
        life(&acme, &format!("t{i}"), "approve");
    }
    let r = Receiver::start(always(204)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    let mut sub = subscription("sub_1", &r.url("/hooks"), &secret);
    sub.filter = Filter {
        timers: false,
        ..Filter::default()
    };
    store.insert("acme", sub);
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        quick("a"),
    );
    d.serve("acme");
    let _follow = d.follow(engine.changes());
    // More changes while it delivers, and a timer the filter leaves out.
    for i in 10..20 {
        life(&acme, &format!("t{i}"), "approve");
    }
    acme.arm(&leasehold_host::Timer {
        run: "run-1".into(),
        case: None,
        effect: "wake".into(),
        step: 0,
        phase: leasehold_host::Phase::Forward,
        fire_at: 1,
    })
    .expect("arm");
    let end = head(&acme);
    wait_until("the position to reach the head", || {
        stored(&store, "acme", "sub_1").position.as_deref() == Some(end.as_str())
    })
    .await;
    let got = r.got();
    signed_and_stable(&got, &secret);
    let acks = first_acks(&got);
    assert_eq!(acks.len(), 20);
    for (task, seqs) in &acks {
        assert_eq!(seqs, &[1, 2, 3], "{task}");
    }
    assert!(got.iter().all(|g| g.path == "/hooks"));
    assert!(got.iter().all(|g| g.json()["type"] != "timer.arm"));
    assert!(got.iter().all(|g| g.json()["subscription"] == "sub_1"));
    let m = d.metrics();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].delivered, 60);
    let status = d.status("acme").await.expect("status");
    assert_eq!(status[0].state, SubState::Active);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_only_and_a_kind_filter_send_only_what_they_name() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    for i in 0..6 {
        life(
            &acme,
            &format!("t{i}"),
            if i % 2 == 0 { "review" } else { "approve" },
        );
    }
    let r = Receiver::start(always(200)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    let mut sub = subscription("sub_k", &r.url("/k"), &secret);
    sub.filter = Filter {
        settling_only: true,
        kinds: vec!["review".into()],
        ..Filter::default()
    };
    store.insert("acme", sub);
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        quick("a"),
    );
    d.serve("acme");
    let end = head(&acme);
    wait_until("the position to reach the head", || {
        stored(&store, "acme", "sub_k").position.as_deref() == Some(end.as_str())
    })
    .await;
    let got: BTreeSet<(String, u64)> = r.got().iter().filter_map(Got::task_seq).collect();
    let want: BTreeSet<(String, u64)> = [("t0", 3), ("t2", 3), ("t4", 3)]
        .into_iter()
        .map(|(t, s)| (t.to_owned(), s))
        .collect();
    assert_eq!(got, want);
    d.shutdown().await;
}

/// A receiver that fails a third of its requests and sometimes hangs past
/// the timeout, while the server delivering is killed and another takes
/// over when its lease lapses: every entry is acknowledged at least once,
/// each task's first acknowledgements come in feed order, and a duplicate
/// always carries the id it had.
#[test]
fn failures_a_crash_and_a_takeover_lose_nothing_and_keep_each_tasks_order() {
    let engine = Engine::in_memory().expect("engine");
    let store = Arc::new(MemoryStore::new());
    let secret = Secret::generate().expect("secret");
    let receiving = tokio::runtime::Runtime::new().expect("runtime");
    let r = receiving.block_on(Receiver::start(Arc::new(|g: &Got, nth| {
        // Fixed by the request's place and id, so the run is repeatable.
        let h = g.id.bytes().fold(nth as u64, |a, b| {
            a.wrapping_mul(31).wrapping_add(u64::from(b))
        });
        match h % 30 {
            0..=9 => Reply::Status(500),
            10 => Reply::Hang,
            _ => Reply::Status(204),
        }
    })));
    store.insert("acme", subscription("sub_c", &r.url("/c"), &secret));
    let acme = engine.tenant("acme").expect("tenant");
    let writer = {
        let acme = acme.clone();
        std::thread::spawn(move || {
            for i in 0..120 {
                life(&acme, &format!("t{i}"), "approve");
            }
        })
    };
    let server = |holder: &'static str| {
        let (engine, store) = (engine.clone(), store.clone());
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let d = rt.block_on(async {
            let mut options = quick(holder);
            options.checkpoint = Duration::from_millis(100);
            let d = deliveries(
                &engine,
                &store,
                local_sender(holder, Duration::from_millis(400)),
                options,
            );
            d.serve("acme");
            d.follow(engine.changes());
            d
        });
        (rt, d)
    };
    let (first, _d1) = server("one");
    receiving.block_on(wait_until("the first server to deliver some", || {
        r.got().iter().filter(|g| g.status == Some(204)).count() >= 60
    }));
    // The first server dies at once: its tasks stop wherever they are, its
    // lease stays until it lapses.
    drop(first);
    let (_second, _d2) = server("two");
    writer.join().expect("writer");
    let end = head(&acme);
    receiving.block_on(wait_until("the position to reach the head", || {
        stored(&store, "acme", "sub_c").position.as_deref() == Some(end.as_str())
    }));
    let got = r.got();
    signed_and_stable(&got, &secret);
    let acks = first_acks(&got);
    assert_eq!(acks.len(), 120, "every task's changes arrived");
    for (task, seqs) in &acks {
        assert_eq!(seqs, &[1, 2, 3], "{task}");
    }
    assert!(got.iter().any(|g| g.user_agent == "one"));
    assert!(got.iter().any(|g| g.user_agent == "two"));
    assert!(got.iter().any(|g| g.status.is_none()), "some requests hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_pauses_the_subscription_before_the_entry_and_a_resume_sends_it_again() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    life(&acme, "t0", "approve");
    let r = Receiver::start(Arc::new(|_, nth| {
        if nth == 1 {
            Reply::Status(410)
        } else {
            Reply::Status(204)
        }
    }))
    .await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_g", &r.url("/g"), &secret));
    let mut options = quick("a");
    options.endpoint_parallelism = 1;
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        options,
    );
    d.serve("acme");
    wait_until("the subscription to pause", || {
        stored(&store, "acme", "sub_g").state == SubState::Paused
    })
    .await;
    let paused = stored(&store, "acme", "sub_g");
    assert!(
        paused.note.as_deref().is_some_and(|n| n.contains("410")),
        "{paused:?}"
    );
    let got = r.got();
    assert_eq!(got.len(), 2, "nothing after the 410: {got:?}");
    let refused_id = got[1].id.clone();
    // The position stands after the first entry, before the refused one.
    let position = paused.position.clone().expect("a position");
    let after_first = match acme.feed(Some("f"), 1).expect("feed") {
        leasehold_host::FeedRead::Page(p) => p.next,
        other => panic!("{other:?}"),
    };
    assert_eq!(position, after_first);
    // Resuming (a replay from where it stopped) sends the refused entry
    // again, with its id, and the rest.
    d.replay("acme", "sub_g", Some(&position))
        .await
        .expect("replay");
    let end = head(&acme);
    wait_until("the position to reach the head", || {
        stored(&store, "acme", "sub_g").position.as_deref() == Some(end.as_str())
    })
    .await;
    let got = r.got();
    assert_eq!(got[2].id, refused_id);
    assert_eq!(got.len(), 4);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_schedule_marks_the_subscription_failing_and_drops_nothing() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    for i in 0..3 {
        life(&acme, &format!("t{i}"), "approve");
    }
    let r = Receiver::start(always(503)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_f", &r.url("/f"), &secret));
    let mut options = quick("a");
    options.retry = RetryPolicy {
        first: Duration::from_millis(5),
        cap: Duration::from_millis(20),
        window: Duration::from_millis(300),
        retry_after_cap: Duration::from_millis(20),
    };
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        options,
    );
    d.serve("acme");
    wait_until("the subscription to fail", || {
        stored(&store, "acme", "sub_f").state == SubState::Failing
    })
    .await;
    let failing = stored(&store, "acme", "sub_f");
    assert_eq!(
        failing.position, None,
        "the position passed an entry never acknowledged"
    );
    assert!(
        failing
            .note
            .as_deref()
            .is_some_and(|n| n.contains("retry schedule"))
    );
    assert!(!failing.attempts.is_empty(), "failed attempts are recorded");
    assert!(
        failing
            .attempts
            .iter()
            .all(|a| a.outcome == leasehold_webhooks::Outcome::Status(503))
    );
    // Nothing more is sent while it fails.
    let sent = r.got().len();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(r.got().len(), sent);
    // The endpoint recovers; the operator resumes from where it stopped.
    r.answer_with(always(204));
    d.replay("acme", "sub_f", failing.position.as_deref())
        .await
        .expect("resume");
    let end = head(&acme);
    wait_until("every entry to be delivered", || {
        stored(&store, "acme", "sub_f").position.as_deref() == Some(end.as_str())
    })
    .await;
    assert_eq!(first_acks(&r.got()).len(), 3);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_trimmed_past_the_position_marks_the_subscription_gone_with_where() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    for i in 0..3 {
        life(&acme, &format!("t{i}"), "approve");
    }
    acme.trim(None, Some(2), 100).expect("trim");
    let r = Receiver::start(always(204)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_t", &r.url("/t"), &secret));
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        quick("a"),
    );
    d.serve("acme");
    wait_until("the subscription to be gone", || {
        stored(&store, "acme", "sub_t").state == SubState::Gone
    })
    .await;
    let gone = stored(&store, "acme", "sub_t");
    assert!(
        gone.note.as_deref().is_some_and(|n| n.contains("after f ")),
        "{gone:?}"
    );
    assert!(r.got().is_empty());
    // A replay from a trimmed position is refused and changes nothing.
    let refused = d.replay("acme", "sub_t", Some("f")).await;
    assert!(matches!(
        refused,
        Err(leasehold_webhooks::ReplayError::Gone { .. })
    ));
    assert_eq!(stored(&store, "acme", "sub_t").revision, gone.revision);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_sends_again_with_the_same_ids() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    for i in 0..4 {
        life(&acme, &format!("t{i}"), "approve");
    }
    let r = Receiver::start(always(204)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_r", &r.url("/r"), &secret));
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        quick("a"),
    );
    d.serve("acme");
    let end = head(&acme);
    wait_until("the first pass", || {
        stored(&store, "acme", "sub_r").position.as_deref() == Some(end.as_str())
    })
    .await;
    let first: BTreeSet<String> = r.got().iter().map(|g| g.id.clone()).collect();
    assert_eq!(first.len(), 12);
    let replayed = d.replay("acme", "sub_r", None).await.expect("replay");
    assert_eq!(replayed.position, None);
    wait_until("the replay", || r.got().len() >= 24).await;
    wait_until("the position to reach the head again", || {
        stored(&store, "acme", "sub_r").position.as_deref() == Some(end.as_str())
    })
    .await;
    let again: BTreeSet<String> = r.got()[12..].iter().map(|g| g.id.clone()).collect();
    assert_eq!(first, again);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_rotation_both_keys_sign_and_each_verifies() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    life(&acme, "t0", "approve");
    let r = Receiver::start(always(204)).await;
    let old = Secret::generate().expect("secret");
    let new = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_k", &r.url("/k"), &old));
    store
        .rotate("acme", "sub_k", new.clone(), i64::MAX)
        .expect("rotate");
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        quick("a"),
    );
    d.serve("acme");
    wait_until("three deliveries", || r.got().len() >= 3).await;
    for g in r.got() {
        assert_eq!(g.signature.split(' ').count(), 2);
        assert!(old.verify(&g.signature, &g.id, g.timestamp, &g.body));
        assert!(new.verify(&g.signature, &g.id, g.timestamp, &g.body));
    }
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_never_deliver_one_subscription_at_once() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    let r = Receiver::start(always(204)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_1", &r.url("/1"), &secret));
    store.insert("acme", subscription("sub_2", &r.url("/2"), &secret));
    // Leases far longer than the test, so a slow machine's late renewal
    // cannot hand a subscription over mid-test.
    let long = |holder| Options {
        lease: Duration::from_secs(120),
        ..quick(holder)
    };
    let a = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        long("a"),
    );
    let b = deliveries(
        &engine,
        &store,
        local_sender("b", Duration::from_secs(5)),
        long("b"),
    );
    a.serve("acme");
    b.serve("acme");
    for i in 0..20 {
        life(&acme, &format!("t{i}"), "approve");
    }
    let end = head(&acme);
    wait_until("both positions to reach the head", || {
        ["sub_1", "sub_2"]
            .iter()
            .all(|s| stored(&store, "acme", s).position.as_deref() == Some(end.as_str()))
    })
    .await;
    for path in ["/1", "/2"] {
        let senders: BTreeSet<String> = r
            .got()
            .iter()
            .filter(|g| g.path == path)
            .map(|g| g.user_agent.clone())
            .collect();
        assert_eq!(senders.len(), 1, "{path} was delivered by {senders:?}");
    }
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_bound_on_subscriptions_leaves_the_rest_undelivered_and_says_so() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    life(&acme, "t0", "approve");
    let r = Receiver::start(always(204)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    for s in ["sub_a", "sub_b", "sub_c"] {
        store.insert("acme", subscription(s, &r.url(&format!("/{s}")), &secret));
    }
    let mut options = quick("a");
    options.tenant = TenantLimits {
        subscriptions: 2,
        ..TenantLimits::default()
    };
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        options,
    );
    d.serve("acme");
    let end = head(&acme);
    wait_until("the first two to deliver", || {
        ["sub_a", "sub_b"]
            .iter()
            .all(|s| stored(&store, "acme", s).position.as_deref() == Some(end.as_str()))
    })
    .await;
    let status = d.status("acme").await.expect("status");
    let over: Vec<&str> = status
        .iter()
        .filter(|s| s.over_bound)
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(over, ["sub_c"]);
    assert!(r.got().iter().all(|g| g.path != "/sub_c"));
    assert_eq!(stored(&store, "acme", "sub_c").position, None);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_subscription_stops_its_deliveries() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    life(&acme, "t0", "approve");
    let r = Receiver::start(Arc::new(|_, _| Reply::Hang)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_d", &r.url("/d"), &secret));
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(30)),
        quick("a"),
    );
    d.serve("acme");
    wait_until("a delivery to be under way", || !r.got().is_empty()).await;
    assert!(store.remove("acme", "sub_d"));
    d.changed("acme");
    wait_until("the worker to stop", || d.metrics().is_empty()).await;
    // No new attempt starts once it is gone.
    let sent = r.got().len();
    life(&acme, "t1", "approve");
    d.wake("acme");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.got().len(), sent);
    d.shutdown().await;
}

/// After a change made through the store's API, `reload` answers only once
/// this server's worker has stopped and the supervisor has listed the
/// store again: a pause answered sends nothing more, a resume answered
/// has its worker running, whatever the poll; `states` shows each one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_answers_once_the_change_is_taken_in_here() {
    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    let r = Receiver::start(always(200)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_r", &r.url("/r"), &secret));
    // A poll far longer than the test: only `reload` makes a pass.
    let options = Options {
        poll: Duration::from_secs(600),
        ..quick("a")
    };
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(5)),
        options,
    );
    d.serve("acme");
    let _follow = d.follow(engine.changes());
    life(&acme, "t0", "approve");
    wait_until("t0's changes", || r.got().len() >= 3).await;
    store.change("acme", "sub_r", |s| s.state = SubState::Paused);
    d.reload("acme", "sub_r", Duration::from_secs(30)).await;
    let status = d.status("acme").await.expect("status");
    assert!(
        status[0].running.is_none(),
        "stopped before reload answered"
    );
    assert_eq!(
        d.states(),
        [("acme".to_owned(), "sub_r".to_owned(), SubState::Paused)]
    );
    assert_eq!(store.lease_of("acme", "sub_r"), None, "the lease given up");
    let sent = r.got().len();
    life(&acme, "t1", "approve");
    for _ in 0..10 {
        assert_eq!(r.got().len(), sent, "a paused subscription delivered");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    store.change("acme", "sub_r", |s| s.state = SubState::Active);
    d.reload("acme", "sub_r", Duration::from_secs(30)).await;
    let status = d.status("acme").await.expect("status");
    assert!(status[0].running.is_some(), "running when reload answered");
    assert_eq!(d.states()[0].2, SubState::Active);
    wait_until("t1's changes", || {
        r.got()
            .iter()
            .filter_map(Got::task_seq)
            .filter(|(t, _)| t == "t1")
            .count()
            >= 3
    })
    .await;
    // A tenant not served here answers at once.
    d.reload("globex", "sub_x", Duration::from_secs(30)).await;
    d.shutdown().await;
}
