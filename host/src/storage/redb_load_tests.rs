//! The redb load (`Backend::begin_load`): what it puts is seen by no one
//! until it commits, and nothing at all if it is dropped; a writer that
//! asks for the file's turn while a load holds it waits, and goes on only
//! once the load committed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;

/// Bounds a hang only: nothing here waits this long when all is well.
const HANG: Duration = Duration::from_secs(180);

fn backend() -> RedbBackend {
    let group = GroupCommit::new(true, &Limits::default());
    RedbBackend::in_memory(Durability::None, group).expect("in memory")
}

fn load(b: &RedbBackend) -> Box<dyn Load> {
    b.begin_load(HANG, HANG)
        .expect("begin")
        .expect("redb loads")
}

/// `tenant`'s entries as a reader sees them.
fn entries(b: &RedbBackend, tenant: &str) -> Vec<Entry> {
    let mut txn = b.begin(tenant, Mode::Read, HANG).expect("read");
    txn.scan(b"", None, 100, false, 1 << 20).expect("scan").0
}

fn entry(k: &str, v: &str) -> Entry {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
fn a_load_dropped_writes_nothing_and_one_committed_writes_all_at_once() {
    let b = backend();
    let mut l = load(&b);
    l.put("a", &[entry("k1", "v1"), entry("k2", "v2")])
        .expect("put");
    l.put("b", &[entry("k1", "w1")]).expect("put");
    // The load reads its own puts; a reader does not, before the commit.
    assert_eq!(l.scan("a", b"", 10, 1 << 20).expect("scan").0.len(), 2);
    assert_eq!(entries(&b, "a"), Vec::<Entry>::new());
    drop(l);
    assert_eq!(entries(&b, "a"), Vec::<Entry>::new());
    assert_eq!(entries(&b, "b"), Vec::<Entry>::new());
    let mut l = load(&b);
    l.put("a", &[entry("k1", "v1")]).expect("put");
    l.put("b", &[entry("k1", "w1")]).expect("put");
    l.commit().expect("commit");
    assert_eq!(entries(&b, "a"), vec![entry("k1", "v1")]);
    assert_eq!(entries(&b, "b"), vec![entry("k1", "w1")]);
}

/// A writer asking for the turn while a load holds it is seen waiting
/// (the writer's queue counts it) and still waiting when the load commits;
/// it then sees what the load wrote.
#[test]
fn a_writer_started_while_a_load_holds_the_file_goes_on_only_after_it_commits() {
    let b = Arc::new(backend());
    let mut l = load(&b);
    l.put("a", &[entry("mark", "load")]).expect("put");
    let writer = {
        let b = b.clone();
        std::thread::spawn(move || {
            let mut txn = b.begin("a", Mode::Write, HANG).expect("the writer's turn");
            let saw = txn.get(b"mark").expect("get");
            let put = vec![Write::Put(b"writer".to_vec(), b"w".to_vec())];
            txn.commit(put).expect("commit").wait().expect("durable");
            saw
        })
    };
    let until = Instant::now() + HANG;
    while b.writer.stats().waiting == 0 {
        assert!(
            !writer.is_finished(),
            "the writer went on while the load held the file"
        );
        assert!(
            Instant::now() < until,
            "the writer never asked for the turn"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!writer.is_finished());
    l.commit().expect("commit");
    let saw = writer.join().expect("the writer");
    assert_eq!(
        saw,
        Some(b"load".to_vec()),
        "the writer went on after the load"
    );
    assert_eq!(
        entries(&b, "a"),
        vec![entry("mark", "load"), entry("writer", "w")]
    );
}
