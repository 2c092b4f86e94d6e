//! What only a redb file does: the tests here run on redb whatever the run's
//! backend, and `tests/run` skips them in its PostgreSQL run. Everything
//! else about a store runs on both (see `TestDb`); the redb writer killed
//! mid-call is in `crash`.

use std::time::{Duration, Instant};

use leasehold_host::{Engine, Error, Limits};
use leasehold_tests::*;

/// A redb file admits one writer at a time, and a read never waits for it:
/// while a write call holds the turn past the next writer's lock wait, reads
/// still answer at once. (PostgreSQL has no single writer; there every call,
/// reads too, takes one of the pool's connections.)
#[test]
fn reads_never_wait_for_the_writer_that_holds_the_file() {
    let db = TestDb::redb();
    let engine = db.open(
        Engine::builder()
            .component(HOSTILE_COMPONENT)
            .limits(Limits {
                deadline: Duration::from_millis(1500),
                lock_wait: Duration::from_millis(200),
                ..Limits::default()
            }),
    );
    std::thread::scope(|s| {
        let holder = s.spawn(|| {
            engine
                .tenant("a")
                .expect("tenant")
                .open(&task("write-then-loop", 0))
        });
        std::thread::sleep(Duration::from_millis(100));
        // The writer's turn is taken: another writer is told so.
        let r = engine
            .tenant("b")
            .expect("tenant")
            .open(&task("write-ok", 0));
        assert!(matches!(r, Err(Error::LockTimeout(_))), "{r:?}");
        let started = Instant::now();
        for _ in 0..20 {
            assert_eq!(
                engine
                    .tenant("b")
                    .expect("tenant")
                    .get("plain")
                    .expect("read"),
                None
            );
        }
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "reads waited for the writer: {:?}",
            started.elapsed()
        );
        holder
            .join()
            .expect("thread")
            .expect_err("the holder loops");
    });
}
