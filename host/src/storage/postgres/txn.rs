//! One call's transaction on one pooled connection: `BEGIN` (and the call's
//! turn on its line) sent with the first read, the batch of writes sent with
//! the `COMMIT`, and the connection given back however the call ends. It
//! owns the transaction's round trips; it must never commit a read-only
//! call's writes, never leave a transaction open on a connection it gives
//! back, and never report a commit whose answer was lost as failed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use futures_util::future::{join, join3, join4};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::storage::backend::{Entry, Mode, Txn, Write, take_within};
use crate::storage::commit::Pending;
use crate::storage::error::{BoxError, StorageError};
use crate::storage::postgres::conn::{Conn, Connection, DriveError, Statements, drive, send_only};
use crate::storage::postgres::pool::Pool;
use crate::storage::postgres::schema::point;

pub(crate) const BEGIN_WRITE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE";
pub(crate) const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE";

/// One call's transaction on one connection. `BEGIN` is sent with the first
/// request; a transaction dropped without committing is rolled back.
pub(crate) struct PgTxn {
    pub(crate) pool: Arc<Pool>,
    pub(crate) conn: Option<Conn>,
    pub(crate) tenant: String,
    pub(crate) mode: Mode,
    pub(crate) begun: bool,
    /// When every wait of this call for the server gives up.
    pub(crate) until: Instant,
    /// The call's turn on its line, if it sweeps one.
    pub(crate) turn: Option<Turn>,
}

/// A call's turn on a line: the lock's key within its class, taken (before
/// `BEGIN`, waiting at most `wait`) and given back (after `COMMIT` or
/// `ROLLBACK`) by the connection's prepared statements.
pub(crate) struct Turn {
    /// `/tenant/line`; the lock is on the hash of the schema's name and it.
    pub(crate) key: String,
    /// The server's `lock_timeout` for the wait, e.g. `5000ms`.
    pub(crate) wait: String,
    pub(crate) lock_wait: Duration,
    /// Taken and not yet given back.
    pub(crate) held: bool,
}

/// What one request needs of its transaction, borrowed apart so that the
/// request's future can borrow the client while the connection is driven.
struct Parts<'a> {
    rt: &'a tokio::runtime::Runtime,
    client: &'a Client,
    connection: &'a mut Connection,
    stmts: &'a Statements,
    broken: &'a mut bool,
    trips: &'a AtomicU64,
    tenant: &'a str,
    /// `BEGIN`, when this request is the transaction's first.
    begin: Option<&'static str>,
    /// The call's turn on its line, taken ahead of `BEGIN`.
    turn: Option<&'a mut Turn>,
    until: Instant,
}

impl PgTxn {
    fn parts(&mut self) -> Result<Parts<'_>, StorageError> {
        let begin = (!self.begun).then_some(match self.mode {
            Mode::Read => BEGIN_READ,
            Mode::Write => BEGIN_WRITE,
        });
        self.begun = true;
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| StorageError::other("the transaction's connection is gone"))?;
        let turn = match (begin, self.turn.as_mut()) {
            (Some(_), Some(turn)) if !turn.held => Some(turn),
            _ => None,
        };
        Ok(Parts {
            rt: &conn.rt,
            client: &conn.client,
            connection: &mut conn.connection,
            stmts: &conn.stmts,
            broken: &mut conn.broken,
            trips: &self.pool.trips,
            tenant: &self.tenant,
            begin,
            turn,
            until: self.until,
        })
    }
}

impl Parts<'_> {
    /// Runs one request in one round trip, `BEGIN` ahead of it if this is the
    /// transaction's first. `what` names the request in the trace event
    /// that times each round trip (for profiling; off unless a subscriber
    /// asks for `leasehold::pg` at trace level).
    fn run<T>(
        self,
        what: &'static str,
        request: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, DriveError> {
        let (rt, connection, trips, until) = (self.rt, self.connection, self.trips, self.until);
        let timed = tracing::enabled!(target: "leasehold::pg", tracing::Level::TRACE)
            .then(|| (Instant::now(), self.begin.is_some(), self.turn.is_some()));
        let out = match (self.begin, self.turn) {
            (Some(sql), Some(turn)) => {
                // Three requests, answered in order, in one round trip.
                let mut took = None;
                let out = drive(rt, connection, trips, until, async {
                    let (t, began, out) = join3(
                        self.client
                            .execute(&self.stmts.take_turn, &[&turn.key, &turn.wait]),
                        self.client.batch_execute(sql),
                        request,
                    )
                    .await;
                    took = Some(t);
                    began?;
                    out
                });
                match took {
                    Some(Ok(_)) => {
                        turn.held = true;
                        out
                    }
                    Some(Err(e)) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                        Err(DriveError::NoTurn(turn.lock_wait))
                    }
                    Some(Err(e)) => Err(DriveError::Query(e)),
                    None => out,
                }
            }
            (Some(sql), None) => drive(rt, connection, trips, until, async {
                let (began, out) = join(self.client.batch_execute(sql), request).await;
                began?;
                out
            }),
            (None, _) => drive(rt, connection, trips, until, request),
        };
        if let Some((at, first, turn)) = timed {
            tracing::trace!(
                target: "leasehold::pg",
                what,
                first,
                turn,
                micros = at.elapsed().as_micros() as u64,
                "round trip"
            );
        }
        out.inspect_err(|e| {
            if e.lost_connection() {
                *self.broken = true;
            }
        })
    }

    /// [`run`](Self::run) for a read: every failure is a plain one.
    fn read<T>(
        self,
        what: &'static str,
        request: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, StorageError> {
        self.run(what, request).map_err(|e| e.into_error(what))
    }
}

impl Txn for PgTxn {
    fn writer_slot(&self) -> u32 {
        self.conn.as_ref().map_or(0, |c| c.slot)
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        let at = point(t, key);
        let row = p.read("read a key", c.query_opt(&s.get, &[&at]))?;
        Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        let at: Vec<String> = keys.iter().map(|k| point(t, k)).collect();
        let rows = p.read("read keys", c.query(&s.get_many, &[&at]))?;
        let found: HashMap<Vec<u8>, Vec<u8>> = rows
            .into_iter()
            .map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, Vec<u8>>(1)))
            .collect();
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        if limit == 0 || end.is_some_and(|e| e <= start) {
            return Ok((Vec::new(), false));
        }
        let which = usize::from(end.is_none()) + 2 * usize::from(reverse);
        let limit = i64::from(limit);
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        let rows = p.read(
            "scan keys",
            c.query(&s.scan[which], &[&t, &start, &end, &limit]),
        )?;
        take_within(
            rows.into_iter()
                .map(|r| Ok::<_, StorageError>((r.get(0), r.get(1)))),
            max_bytes,
        )
    }

    fn commit(mut self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        if self.mode == Mode::Read {
            if !batch.is_empty() {
                return Err(StorageError::ReadOnly);
            }
            // Finished in Drop: a deferrable read-only transaction's reads
            // are valid as they are read, so its COMMIT need not be awaited.
            return Ok(Pending::done());
        }
        if !self.begun && batch.is_empty() {
            return Ok(Pending::done());
        }
        // The last write of a key is the one that counts, as if the batch were
        // applied in order; one statement may touch a row only once.
        let mut last: HashMap<&[u8], usize> = HashMap::new();
        for (i, w) in batch.iter().enumerate() {
            let (Write::Put(k, _) | Write::Delete(k)) = w;
            last.insert(k.as_slice(), i);
        }
        let (mut put_keys, mut put_values, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
        for (i, w) in batch.iter().enumerate() {
            match w {
                Write::Put(k, v) if last.get(k.as_slice()) == Some(&i) => {
                    put_keys.push(k.as_slice());
                    put_values.push(v.as_slice());
                }
                Write::Delete(k) if last.get(k.as_slice()) == Some(&i) => {
                    deletes.push(point(&self.tenant, k));
                }
                _ => {}
            }
        }
        // The turn on the line goes back behind the COMMIT, in its round trip.
        let give_back = self.turn.as_ref().map(|turn| turn.key.clone());
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        // The writes and COMMIT (and BEGIN, if no read began the
        // transaction) in one round trip. A write that fails aborts the
        // transaction, and the COMMIT behind it then rolls back.
        let deleted = async {
            if deletes.is_empty() {
                Ok(0)
            } else {
                c.execute(&s.delete, &[&deletes]).await
            }
        };
        let put = async {
            if put_keys.is_empty() {
                Ok(0)
            } else {
                c.execute(&s.upsert, &[&t, &put_keys, &put_values]).await
            }
        };
        let given_back = async {
            match &give_back {
                Some(key) => c.execute(&s.give_turn, &[key]).await.map(drop),
                None => Ok(()),
            }
        };
        let committed = p.run("commit", async {
            let (deleted, put, committed, given_back) =
                join4(deleted, put, c.batch_execute("COMMIT"), given_back).await;
            deleted?;
            put?;
            committed?;
            given_back
        });
        // Whatever the outcome, COMMIT ended the transaction on the server,
        // and the turn was given back after it (or the session is gone).
        self.begun = false;
        if let Some(turn) = self.turn.as_mut() {
            turn.held = false;
        }
        match committed {
            Ok(()) => Ok(Pending::done()),
            // The COMMIT went out with the writes; with the connection gone
            // before its answer, the server may have committed or not.
            Err(e) if e.lost_connection() => {
                let source: BoxError = match e.into_error("commit") {
                    StorageError::Unavailable(source) | StorageError::Other(source) => source,
                    other => Box::new(other),
                };
                Err(StorageError::OutcomeUnknown(source))
            }
            Err(e) => Err(e.into_error("commit")),
        }
    }
}

impl Drop for PgTxn {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.begun && !conn.broken {
            // A read-only call ends with COMMIT, a failed write call with
            // ROLLBACK; neither answer changes anything the caller was told.
            let sql = match self.mode {
                Mode::Read => "COMMIT",
                Mode::Write => "ROLLBACK",
            };
            let Conn {
                rt,
                client,
                connection,
                broken,
                ..
            } = &mut conn;
            if !send_only(rt, connection, client.batch_execute(sql)) {
                *broken = true;
            }
        }
        if let Some(turn) = self.turn.as_ref().filter(|t| t.held)
            && !conn.broken
        {
            let Conn {
                rt,
                client,
                connection,
                broken,
                stmts,
                ..
            } = &mut conn;
            if !send_only(
                rt,
                connection,
                client.execute(&stmts.give_turn, &[&turn.key]),
            ) {
                *broken = true;
            }
        }
        self.pool.give_back(conn);
    }
}
