//! Read-only calls behind long serializable writers. A `READ ONLY
//! DEFERRABLE` snapshot waits for every serializable read-write transaction
//! on the server, in any database; a read-only call waits for one only
//! briefly, then reads at once and has its reads checked at `COMMIT`. Each
//! writer here is held open by the test until the reads have answered, so
//! no timing decides an outcome.

use std::time::Duration;

use leasehold_host::storage::postgres::PgBackend;
use leasehold_host::storage::{Backend, Mode, StorageError, Write};
use leasehold_host::{Engine, FeedRead, Limits};
use leasehold_tests::pg::{Schema, url};
use leasehold_tests::*;

use super::trips;

/// A connection to another database on the same server (`postgres`, which
/// every role may connect to unless the server says otherwise), if the
/// test role may connect there.
fn other_database() -> Option<postgres::Client> {
    let base = url()?;
    let (head, _) = base.split_once('?').unwrap_or((&base, ""));
    let (server, _) = head.rsplit_once('/')?;
    match postgres::Client::connect(&format!("{server}/postgres"), postgres::NoTls) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("another database is out of reach ({e}); holding a writer in this one only");
            None
        }
    }
}

/// A serializable read-write transaction on `c`, open (its snapshot taken
/// and a transaction id assigned) until committed.
fn hold_writer(c: &mut postgres::Client) {
    c.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT txid_current()")
        .expect("a serializable writer begins");
}

/// get, queue and the change feed answer, correctly and within their
/// deadline, while a serializable writer stays open (first in another
/// database, then in this one) past that deadline. Behind a writer each
/// makes one round trip more, to begin again reading at once, and waits
/// for its `COMMIT`: two more than with no writer around.
#[test]
fn reads_answer_while_a_long_serializable_writer_is_open() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let limits = Limits {
        deadline: Duration::from_secs(3),
        ..Limits::default()
    };
    let e = Engine::builder()
        .limits(limits)
        .postgres(&schema.url)
        .expect("the engine connects");
    let t = e.tenant("acme").expect("tenant");
    for i in 0..5 {
        t.open(&task(&format!("t{i}"), i).roles(&["r"]))
            .expect("open");
    }
    let reads = || {
        let got = t.get("t3").expect("get").expect("t3 is there");
        assert_eq!(got.id, "t3");
        let page = t.queue(&query(&["r"], None, 10, None)).expect("queue");
        assert_eq!(page.tasks.len(), 5);
        match t.feed(None, 10).expect("feed") {
            FeedRead::Page(p) => assert_eq!(p.entries.len(), 5),
            FeedRead::Gone(head) => panic!("nothing was trimmed (head {head})"),
        }
    };
    let cost = || -> [u64; 3] {
        [
            trips(&e, || {
                t.get("t3").expect("get");
            }),
            trips(&e, || {
                t.queue(&query(&["r"], None, 10, None)).expect("queue");
            }),
            trips(&e, || {
                t.feed(None, 10).expect("feed");
            }),
        ]
    };
    reads();
    let alone = cost();
    // A get is one round trip: BEGIN and the read together, COMMIT unawaited.
    assert_eq!(alone[0], 1, "a get with no writer around");

    let mut holders = Vec::new();
    holders.extend(other_database());
    let mut here = schema.client();
    here.batch_execute("CREATE TABLE held (x int)")
        .expect("a table for the writer");
    holders.push(here);
    let last = holders.len() - 1;
    for (i, holder) in holders.iter_mut().enumerate() {
        hold_writer(holder);
        if i == last {
            holder
                .batch_execute("INSERT INTO held VALUES (1)")
                .expect("the writer writes");
        }
        reads();
        let behind = cost();
        assert_eq!(
            behind,
            alone.map(|n| n + 2),
            "behind a writer (holder {i}), with none: {alone:?}"
        );
        // Everything above answered with the writer still open.
        holder.batch_execute("COMMIT").expect("the writer commits");
    }
    assert_eq!(cost(), alone, "with the writers gone");
    assert_eq!(e.conflict_retries(), 0);
    assert_consistent(&t);
}

/// The read-only anomaly, with a read-only transaction that could not have
/// a safe snapshot: writer W reads key `c` and writes key `r`; writer X
/// overwrites `c` and commits; the reader begins (W still open, so it reads
/// at once) and reads X's `c`; W commits; the reader then reads `r`
/// without W's write. No serial order explains that, and the read answers
/// Conflict, so the engine runs the call again (as it runs any call that
/// answers Conflict).
#[test]
fn a_read_that_could_not_wait_for_a_safe_snapshot_answers_conflict_on_an_anomaly() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let pg = PgBackend::connect(&schema.url, 2, false).expect("connects");
    let put = |key: &[u8], value: &[u8]| {
        let txn = pg
            .begin("acme", Mode::Write, Duration::from_secs(5))
            .expect("begin");
        txn.commit(vec![Write::Put(key.to_vec(), value.to_vec())])
            .expect("commit")
            .wait()
            .expect("durable");
    };
    put(b"c", b"0");
    let mut w = schema.client();
    w.batch_execute("SET enable_seqscan = off").expect("set");
    w.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        .expect("W begins");
    let seen: Vec<u8> = w
        .query_one(
            "SELECT value FROM leasehold_kv WHERE tenant = 'acme' AND key = 'c'::bytea",
            &[],
        )
        .expect("W reads c")
        .get(0);
    assert_eq!(seen, b"0");
    w.batch_execute("INSERT INTO leasehold_kv (tenant, key, value) VALUES ('acme', 'r', '1')")
        .expect("W writes r");
    put(b"c", b"1");

    let mut reader = pg
        .begin("acme", Mode::Read, Duration::from_secs(5))
        .expect("begin");
    assert_eq!(
        reader.get(b"c").expect("the reader reads c"),
        Some(b"1".to_vec())
    );
    w.batch_execute("COMMIT").expect("W commits");
    match reader.get(b"r") {
        Err(StorageError::Conflict(_)) => {}
        other => panic!("the reader read r as {other:?} after X's c"),
    }
    drop(reader);

    // Run again, the reader sees both writes.
    let mut again = pg
        .begin("acme", Mode::Read, Duration::from_secs(5))
        .expect("begin");
    assert_eq!(again.get(b"c").expect("c"), Some(b"1".to_vec()));
    assert_eq!(again.get(b"r").expect("r"), Some(b"1".to_vec()));
    again
        .commit(Vec::new())
        .expect("commit")
        .wait()
        .expect("done");
}
