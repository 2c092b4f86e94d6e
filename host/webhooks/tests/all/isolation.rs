//! One tenant's endpoints, one answering in 10 s and one never, beside
//! another tenant's that answers at once: the second's deliveries all
//! arrive, and the first never holds more requests than its bounds. Only facts that no timing can change are
//! asserted; `examples/isolation.rs` measures the latencies.

use std::sync::Arc;
use std::time::Duration;

use leasehold_host::Engine;
use leasehold_webhooks::{MemoryStore, Secret, TenantLimits};

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_whose_endpoint_never_answers_delays_no_other_tenant() {
    let engine = Engine::in_memory().expect("engine");
    let (slow, fast) = (
        engine.tenant("slow").expect("tenant"),
        engine.tenant("fast").expect("tenant"),
    );
    // One endpoint of the slow tenant answers in 10 s, the other never.
    let hanging = Receiver::start(Arc::new(|g: &Got, _| {
        if g.path == "/sub_1" {
            Reply::Hang
        } else {
            Reply::After(Duration::from_secs(10), 204)
        }
    }))
    .await;
    let answering = Receiver::start(always(204)).await;
    let secret = Secret::generate().expect("secret");
    let store = Arc::new(MemoryStore::new());
    for s in ["sub_1", "sub_2"] {
        store.insert(
            "slow",
            subscription(s, &hanging.url(&format!("/{s}")), &secret),
        );
    }
    store.insert(
        "fast",
        subscription("sub_1", &answering.url("/fast"), &secret),
    );
    let mut options = quick("a");
    options.endpoint_parallelism = 4;
    options.tenant = TenantLimits {
        in_flight: 6,
        ..TenantLimits::default()
    };
    // The slow tenant's requests wait (the timeout is longer than the
    // test); the fast tenant's must not wait behind them.
    let d = deliveries(
        &engine,
        &store,
        local_sender("a", Duration::from_secs(120)),
        options,
    );
    d.serve("slow");
    d.serve("fast");
    let _follow = d.follow(engine.changes());
    for i in 0..40 {
        life(&slow, &format!("s{i}"), "approve");
    }
    wait_until("the slow tenant's requests to be under way", || {
        hanging.got().len() >= 6
    })
    .await;
    for i in 0..40 {
        life(&fast, &format!("f{i}"), "approve");
    }
    let end = head(&fast);
    wait_until("the fast tenant's position to reach its head", || {
        stored(&store, "fast", "sub_1").position.as_deref() == Some(end.as_str())
    })
    .await;
    assert_eq!(answering.got().len(), 120);
    // The hanging endpoint never acknowledged anything, so its position
    // never moved, and the slow tenant never held more requests open than
    // its bound on requests in flight.
    assert!(
        hanging
            .got()
            .iter()
            .all(|g| g.path != "/sub_1" || g.status.is_none())
    );
    assert_eq!(stored(&store, "slow", "sub_1").position, None);
    assert!(
        hanging.most_open() <= 6,
        "{} open at once",
        hanging.most_open()
    );
    d.shutdown().await;
}
