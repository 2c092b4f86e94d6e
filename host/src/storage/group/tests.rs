//! The group's failure paths, each forced on purpose on a transaction that
//! fails on command: a batch that fails to apply, a commit that fails or
//! hangs, a member that panics, a closer that panics or is dropped. Turns
//! are taken by threads but committed by the test, so which calls share a
//! group is decided by the test, not by the scheduler.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

use super::*;

const LONG: Duration = Duration::from_secs(30);

/// A store with one write transaction at a time, as redb has, whose
/// commits can be made to fail, panic or hang.
#[derive(Default)]
struct Store {
    committed: Mutex<Vec<u32>>,
    live: Mutex<bool>,
    free: Condvar,
    fail_commit: AtomicBool,
    panic_commit: AtomicBool,
    /// A commit waits while this is set.
    hang: Mutex<bool>,
    unhung: Condvar,
}

struct Scripted {
    store: Arc<Store>,
    staged: Mutex<Vec<u32>>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        *self.store.live.lock().expect("live") = false;
        self.store.free.notify_all();
    }
}

impl GroupTxn for Scripted {
    fn commit(self) -> Result<(), BoxError> {
        let mut hung = self.store.hang.lock().expect("hang");
        while *hung {
            hung = self.store.unhung.wait(hung).expect("hang");
        }
        drop(hung);
        if self.store.panic_commit.load(Ordering::SeqCst) {
            panic!("the commit panics, as the test asked");
        }
        if self.store.fail_commit.load(Ordering::SeqCst) {
            return Err("the disk refused the commit, as the test asked".into());
        }
        let staged = std::mem::take(&mut *self.staged.lock().expect("staged"));
        self.store
            .committed
            .lock()
            .expect("committed")
            .extend(staged);
        Ok(())
    }

    fn abort(self) {}
}

fn begin(store: &Arc<Store>) -> impl FnOnce() -> Result<Scripted, StorageError> + '_ {
    move || {
        let mut live = store.live.lock().expect("live");
        while *live {
            live = store.free.wait(live).expect("live");
        }
        *live = true;
        Ok(Scripted {
            store: store.clone(),
            staged: Mutex::new(Vec::new()),
        })
    }
}

fn bounds() -> Bounds {
    Bounds {
        calls: 1000,
        age: LONG,
        outcome_wait: LONG,
    }
}

fn put(v: u32) -> impl FnOnce(&Scripted) -> Result<(), BoxError> {
    move |t| {
        t.staged.lock().expect("staged").push(v);
        Ok(())
    }
}

fn committed(store: &Store) -> Vec<u32> {
    let mut v = store.committed.lock().expect("committed").clone();
    v.sort_unstable();
    v
}

impl<T> Writer<T> {
    fn waiting(&self) -> usize {
        self.state.lock().expect("state").waiting
    }
}

/// Takes a turn on another thread, and hands it back once it has it. The
/// test first waits until that thread is queued, so that the call finishing
/// before it sees it waiting and keeps the group open.
fn queue_for_turn(
    writer: &Arc<Writer<Scripted>>,
    store: &Arc<Store>,
) -> mpsc::Receiver<Turn<Scripted>> {
    let before = writer.waiting();
    let (tx, rx) = mpsc::channel();
    let (w, s) = (writer.clone(), store.clone());
    thread::spawn(move || {
        let turn = Writer::enter(&w, LONG, begin(&s)).expect("a turn");
        let _ = tx.send(turn);
    });
    while writer.waiting() == before {
        thread::yield_now();
    }
    rx
}

fn group_failure(r: Result<(), StorageError>) -> GroupFailure {
    match r {
        Err(StorageError::GroupFailed(f)) => f,
        other => panic!("expected the group's failure, got {other:?}"),
    }
}

#[test]
fn a_writer_waits_for_the_turn_a_bounded_time() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let held = Writer::enter(&writer, Duration::ZERO, begin(&store)).expect("free");
    let started = Instant::now();
    let again = Writer::enter(&writer, Duration::from_millis(30), begin(&store));
    assert!(matches!(again, Err(StorageError::Busy(_))));
    assert!(started.elapsed() >= Duration::from_millis(30));
    drop(held);
    assert!(Writer::enter(&writer, Duration::ZERO, begin(&store)).is_ok());
}

/// Calls that fail without applying anything (a trap, a limit) and come
/// straight back kept the old writer's group open for as long as they kept
/// coming: it closed only when a call finished with nobody waiting, and the
/// member that wrote waited with no bound. A group now closes at its cap.
#[test]
fn calls_that_keep_failing_cannot_hold_a_group_open_past_its_cap_of_calls() {
    for bounds in [
        Bounds {
            calls: 8,
            ..bounds()
        },
        Bounds {
            age: Duration::from_millis(20),
            ..bounds()
        },
    ] {
        let store = Arc::new(Store::default());
        let writer = Writer::new(true, bounds);
        let member = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
        // Queued before the member finishes, so the group stays open.
        let first = queue_for_turn(&writer, &store);
        let pending = member.commit(put(1), true);
        let done = Arc::new(AtomicBool::new(false));
        let cycles = Arc::new(AtomicUsize::new(0));
        let failers: Vec<_> = (0..4)
            .map(|_| {
                let (w, s, done, cycles) =
                    (writer.clone(), store.clone(), done.clone(), cycles.clone());
                thread::spawn(move || {
                    let started = Instant::now();
                    while !done.load(Ordering::SeqCst) && started.elapsed() < LONG {
                        if let Ok(turn) = Writer::enter(&w, LONG, begin(&s)) {
                            drop(turn);
                            cycles.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        drop(first.recv().expect("the queued call's turn"));
        let outcome = pending.wait();
        done.store(true, Ordering::SeqCst);
        let gave_up_at = Instant::now();
        for f in failers {
            f.join().expect("failer");
        }
        assert!(outcome.is_ok(), "{bounds:?}: {outcome:?}");
        assert_eq!(committed(&store), [1], "{bounds:?}");
        assert!(
            gave_up_at.elapsed() < LONG,
            "{bounds:?}: the failing calls ran out before the group closed"
        );
        if bounds.calls == 8 {
            assert!(writer.stats().largest <= 8, "{:?}", writer.stats());
        }
    }
}

/// Six calls queue behind one another, which would all share one group;
/// with a cap of four, the fourth closes the group although two still wait,
/// and they form the next.
#[test]
fn a_group_takes_at_most_its_cap_of_calls() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(
        true,
        Bounds {
            calls: 4,
            ..bounds()
        },
    );
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let queued: Vec<_> = (0..5).map(|_| queue_for_turn(&writer, &store)).collect();
    // Each answer is waited for on a thread of its own, as its caller would:
    // the next group cannot begin until the closer has committed.
    let wait = |p: Pending| thread::spawn(move || p.wait());
    let mut waits = vec![wait(first.commit(put(1), true))];
    // Each queued call commits as soon as it has the turn, in whatever
    // order the threads got it.
    let mut turns = queued;
    let mut v = 2;
    while !turns.is_empty() {
        let mut got = None;
        for (i, rx) in turns.iter().enumerate() {
            if let Ok(turn) = rx.try_recv() {
                got = Some((i, turn));
                break;
            }
        }
        match got {
            Some((i, turn)) => {
                turns.remove(i);
                waits.push(wait(turn.commit(put(v), true)));
                v += 1;
            }
            None => thread::yield_now(),
        }
    }
    for w in waits {
        w.join().expect("waiter").expect("commits");
    }
    let stats = writer.stats();
    assert_eq!(
        (stats.largest, stats.commits, stats.calls),
        (4, 2, 6),
        "{stats:?}"
    );
    assert_eq!(committed(&store), [1, 2, 3, 4, 5, 6]);
}

/// Member 1 wrote; call 2's batch fails halfway; call 3 was queued behind
/// them. The group is aborted at once: 1 and 2 get the same failure, 3 runs
/// on a transaction of its own, and nothing of 1 or 2 is committed.
#[test]
fn a_batch_that_fails_to_apply_aborts_its_group_and_takes_no_further_call() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let second = queue_for_turn(&writer, &store);
    let one = first.commit(put(1), true);
    let second = second.recv().expect("turn");
    let third = queue_for_turn(&writer, &store);
    let two = second.commit(
        |t| {
            t.staged.lock().expect("staged").push(2);
            Err("the batch does not fit, as the test asked".into())
        },
        true,
    );
    assert!(matches!(group_failure(two.wait()), GroupFailure::Apply(_)));
    assert!(matches!(group_failure(one.wait()), GroupFailure::Apply(_)));
    let third = third.recv().expect("turn");
    assert!(
        third.txn().staged.lock().expect("staged").is_empty(),
        "the aborted group's transaction was handed on"
    );
    third
        .commit(put(3), true)
        .wait()
        .expect("the next group commits");
    assert_eq!(committed(&store), [3]);
    assert_eq!(writer.stats().failed, 1);
}

#[test]
fn a_commit_that_fails_fails_every_member_and_the_next_group_commits() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let second = queue_for_turn(&writer, &store);
    let one = first.commit(put(1), true);
    store.fail_commit.store(true, Ordering::SeqCst);
    let two = second.recv().expect("turn").commit(put(2), true);
    assert!(matches!(group_failure(two.wait()), GroupFailure::Commit(_)));
    assert!(matches!(group_failure(one.wait()), GroupFailure::Commit(_)));
    store.fail_commit.store(false, Ordering::SeqCst);
    let next = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    next.commit(put(3), true).wait().expect("commits");
    assert_eq!(committed(&store), [3]);
}

/// A call that answers an error after reading a member's writes (say
/// `already-claimed(bob)` after bob's claim) waits for the group like a
/// member, and gets the group's failure when the writes it read never
/// became true.
#[test]
fn an_error_answer_waits_for_the_writes_it_read_and_takes_the_groups_failure() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let second = queue_for_turn(&writer, &store);
    let one = first.commit(put(1), true);
    let second = second.recv().expect("turn");
    let third = queue_for_turn(&writer, &store);
    // The refusal: nothing to apply, but it read write 1.
    let refused = second.commit(put(99), false);
    store.fail_commit.store(true, Ordering::SeqCst);
    let three = third.recv().expect("turn").commit(put(3), true);
    for pending in [three, refused, one] {
        assert!(matches!(
            group_failure(pending.wait()),
            GroupFailure::Commit(_)
        ));
    }
    assert!(committed(&store).is_empty());
}

/// An error answer in a group that holds no writes rests only on committed
/// state, and is answered at once.
#[test]
fn an_error_answer_in_a_clean_group_does_not_wait() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let second = queue_for_turn(&writer, &store);
    let refused = first.commit(put(99), false);
    assert!(
        refused.is_done(),
        "a refusal on clean state waits for nothing"
    );
    second
        .recv()
        .expect("turn")
        .commit(put(2), true)
        .wait()
        .expect("commits");
    assert_eq!(committed(&store), [2]);
}

/// A call whose thread panics while it holds the turn (between its reads
/// and its commit) hands the group on; the member before it commits.
#[test]
fn a_member_that_panics_leaves_the_group_whole() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let (w, s) = (writer.clone(), store.clone());
    let (queued, turn) = (Arc::new(AtomicBool::new(false)), mpsc::channel::<()>());
    let q = queued.clone();
    let panicker = thread::spawn(move || {
        q.store(true, Ordering::SeqCst);
        let _turn = Writer::enter(&w, LONG, begin(&s)).expect("a turn");
        let _ = turn.0.send(());
        panic!("the call panics while it holds the turn, as the test asked");
    });
    while writer.waiting() == 0 {
        thread::yield_now();
    }
    let one = first.commit(put(1), true);
    turn.1.recv().expect("the panicking call had the turn");
    assert!(panicker.join().is_err());
    one.wait().expect("the member's group commits");
    assert_eq!(committed(&store), [1]);
    Writer::enter(&writer, LONG, begin(&store))
        .expect("the turn is free")
        .commit(put(2), true)
        .wait()
        .expect("commits");
    assert_eq!(committed(&store), [1, 2]);
}

/// A call that panics halfway through applying its batch leaves part of it
/// in the transaction: the group is aborted, never handed on or committed.
#[test]
fn a_member_that_panics_while_applying_aborts_its_group() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let second = queue_for_turn(&writer, &store);
    let one = first.commit(put(1), true);
    let second = second.recv().expect("turn");
    let third = queue_for_turn(&writer, &store);
    let panicked = thread::spawn(move || {
        let _ = second.commit(
            |t| {
                t.staged.lock().expect("staged").push(2);
                panic!("the call panics halfway through its batch, as the test asked");
            },
            true,
        );
    })
    .join();
    assert!(panicked.is_err());
    assert!(matches!(group_failure(one.wait()), GroupFailure::Abandoned));
    let third = third.recv().expect("turn");
    third.commit(put(3), true).wait().expect("commits");
    assert_eq!(committed(&store), [3]);
}

/// The call that must commit the group is dropped before it does (its
/// thread unwound between giving up its instance and waiting): the group is
/// aborted and its members told so, not left waiting for ever.
#[test]
fn a_closer_dropped_before_it_commits_fails_its_members() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let second = queue_for_turn(&writer, &store);
    let one = first.commit(put(1), true);
    let closer = second.recv().expect("turn").commit(put(2), true);
    drop(closer);
    assert!(matches!(group_failure(one.wait()), GroupFailure::Abandoned));
    Writer::enter(&writer, LONG, begin(&store))
        .expect("a turn")
        .commit(put(3), true)
        .wait()
        .expect("commits");
    assert_eq!(committed(&store), [3]);
}

#[test]
fn a_closer_whose_commit_panics_fails_its_members() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(true, bounds());
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let second = queue_for_turn(&writer, &store);
    let one = first.commit(put(1), true);
    let closer = second.recv().expect("turn").commit(put(2), true);
    store.panic_commit.store(true, Ordering::SeqCst);
    assert!(thread::spawn(move || closer.wait()).join().is_err());
    assert!(matches!(group_failure(one.wait()), GroupFailure::Abandoned));
    store.panic_commit.store(false, Ordering::SeqCst);
    Writer::enter(&writer, LONG, begin(&store))
        .expect("a turn")
        .commit(put(3), true)
        .wait()
        .expect("commits");
    assert_eq!(committed(&store), [3]);
}

/// A commit that hangs in the file system is the one wait nothing else
/// bounds: a member gives up after `outcome_wait` and says the outcome is
/// unknown, never `ok` and never a plain failure.
#[test]
fn a_member_of_a_commit_that_hangs_is_told_the_outcome_is_unknown() {
    let store = Arc::new(Store::default());
    let writer = Writer::new(
        true,
        Bounds {
            outcome_wait: Duration::from_millis(50),
            ..bounds()
        },
    );
    let first = Writer::enter(&writer, LONG, begin(&store)).expect("a turn");
    let second = queue_for_turn(&writer, &store);
    let one = first.commit(put(1), true);
    *store.hang.lock().expect("hang") = true;
    let closer = second.recv().expect("turn").commit(put(2), true);
    let closing = thread::spawn(move || closer.wait());
    let r = one.wait();
    assert!(matches!(r, Err(StorageError::OutcomeUnknown(_))), "{r:?}");
    *store.hang.lock().expect("hang") = false;
    store.unhung.notify_all();
    closing
        .join()
        .expect("closer")
        .expect("the commit went through");
    assert_eq!(committed(&store), [1, 2]);
}
