//! The worker's batching, on an in-memory engine: a steady worker makes one
//! call per batch. Test-only. The integration tests (tests/all/worker.rs)
//! cover failures, renewals, stops and crashes on real storage.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::ManualClock;
use crate::engine::Engine;
use crate::testing::{ENGINE_TESTS, task};

use super::{Outcome, Worker, WorkerOptions, WorkerStats};

/// Runs one worker over `n` tasks in batches of `batch`, until all are
/// settled, and answers its counts.
fn steady(n: usize, batch: u32) -> WorkerStats {
    let clock = Arc::new(ManualClock::new(1_000));
    let engine = Engine::builder()
        .clock(clock.clone())
        .in_memory()
        .expect("in-memory engine");
    let t = engine.tenant("acme").expect("tenant");
    for i in 0..n {
        let mut x = task(&format!("t{i:04}"));
        x.created_at = i as i64;
        t.open(&x).expect("open");
    }
    // Finished tasks wait for the next fetch however slow the machine:
    // with the flush timer out of reach, every settle rides on a fetch.
    // Reclaims are off: what is counted is the fetches.
    let options = WorkerOptions::new("w", &[])
        .batch(batch)
        .flush_after(Duration::from_secs(3600))
        .reclaim_ms(0);
    let w = Worker::start(&engine, "acme", options, |_| {
        Ok::<_, String>(Outcome::completed())
    })
    .expect("starts");
    let until = Instant::now() + Duration::from_secs(120);
    while w.stats().settled < n as u64 {
        assert!(Instant::now() < until, "not all settled: {:?}", w.stats());
        std::thread::sleep(Duration::from_millis(2));
    }
    w.stop(Duration::from_secs(10))
}

#[test]
fn a_steady_worker_makes_one_call_per_batch() {
    let _one_at_a_time = ENGINE_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    for batch in [1u32, 10, 25] {
        let n = 200;
        let s = steady(n, batch);
        assert_eq!((s.claimed, s.settled, s.started), (200, 200, 200), "{s:?}");
        assert_eq!(
            (s.failed, s.released, s.lost, s.renewed),
            (0, 0, 0, 0),
            "{s:?}"
        );
        // Every fetch that claimed took a whole batch, and settled the
        // tasks finished since the last: the other calls claimed nothing
        // (the queue was empty), one of them settling the last tasks.
        assert_eq!(
            s.calls - s.empty_fetches,
            n as u64 / u64::from(batch),
            "{s:?}"
        );
    }
}
