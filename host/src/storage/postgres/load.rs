//! Whole tenants written in one `SERIALIZABLE` transaction on one pooled
//! connection (see `Backend::begin_load`): `BEGIN` sent with the first
//! request, each batch of entries sent as it comes (so a tenant of any
//! size streams through, nothing held here), `COMMIT` at the end, and
//! `ROLLBACK` if it ends any other way. Reading a tenant's range in it
//! takes the server's predicate lock on that range, so a writer that
//! commits into the range afterwards makes this transaction or itself fail
//! with a serialization failure; nothing interleaves. It owns this
//! transaction's round trips; it must never leave a transaction open on a
//! connection it gives back, and never report a commit whose answer was
//! lost as failed.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use futures_util::future::join;
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use crate::storage::backend::{Entry, Load, take_within};
use crate::storage::error::{BoxError, StorageError};
use crate::storage::postgres::conn::{Conn, DriveError, drive, send_only};
use crate::storage::postgres::pool::Pool;
use crate::storage::postgres::txn::BEGIN_WRITE;
use crate::storage::tenant_name::check_tenant;

/// One load's transaction on one connection.
pub(crate) struct PgLoad {
    pub(crate) pool: Arc<Pool>,
    pub(crate) conn: Option<Conn>,
    /// `BEGIN` was sent.
    pub(crate) begun: bool,
    /// When every wait for the server gives up.
    pub(crate) until: Instant,
}

impl PgLoad {
    /// The connection and what a request on it needs; whether `BEGIN` must
    /// go ahead of this request (it is the first).
    fn parts(&mut self) -> Result<(bool, &mut Conn, &AtomicU64, Instant), StorageError> {
        let PgLoad {
            pool,
            conn,
            begun,
            until,
        } = self;
        let first = !*begun;
        *begun = true;
        let conn = conn
            .as_mut()
            .ok_or_else(|| StorageError::other("the load's connection is gone"))?;
        Ok((first, conn, &pool.trips, *until))
    }
}

/// `request`, behind `BEGIN` in the same round trip when it is the
/// transaction's first.
async fn behind_begin<T>(
    first: bool,
    client: &Client,
    request: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, tokio_postgres::Error> {
    if !first {
        return request.await;
    }
    let (began, out) = join(client.batch_execute(BEGIN_WRITE), request).await;
    began?;
    out
}

/// A connection whose request failed with it is never handed out again.
fn mark<T>(broken: &mut bool, out: &Result<T, DriveError>) {
    if out.as_ref().is_err_and(DriveError::lost_connection) {
        *broken = true;
    }
}

impl Load for PgLoad {
    fn scan(
        &mut self,
        tenant: &str,
        start: &[u8],
        limit: u32,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        check_tenant(tenant).map_err(|e| StorageError::Other(Box::new(e)))?;
        if limit == 0 {
            return Ok((Vec::new(), false));
        }
        let (limit, end) = (i64::from(limit), None::<&[u8]>);
        let (first, conn, trips, until) = self.parts()?;
        let Conn {
            rt,
            client,
            connection,
            stmts,
            broken,
            ..
        } = conn;
        let params: [&(dyn ToSql + Sync); 4] = [&tenant, &start, &end, &limit];
        let request = client.query(&stmts.scan[1], &params);
        let out = drive(
            rt,
            connection,
            trips,
            until,
            behind_begin(first, client, request),
        );
        mark(broken, &out);
        let rows = out.map_err(|e| e.into_error("scan keys"))?;
        take_within(
            rows.into_iter()
                .map(|r| Ok::<_, StorageError>((r.get(0), r.get(1)))),
            max_bytes,
        )
    }

    fn put(&mut self, tenant: &str, entries: &[Entry]) -> Result<(), StorageError> {
        check_tenant(tenant).map_err(|e| StorageError::Other(Box::new(e)))?;
        if entries.is_empty() {
            return Ok(());
        }
        let keys: Vec<&[u8]> = entries.iter().map(|(k, _)| k.as_slice()).collect();
        let values: Vec<&[u8]> = entries.iter().map(|(_, v)| v.as_slice()).collect();
        let (first, conn, trips, until) = self.parts()?;
        let Conn {
            rt,
            client,
            connection,
            stmts,
            broken,
            ..
        } = conn;
        let params: [&(dyn ToSql + Sync); 3] = [&tenant, &keys, &values];
        let request = client.execute(&stmts.upsert, &params);
        let out = drive(
            rt,
            connection,
            trips,
            until,
            behind_begin(first, client, request),
        );
        mark(broken, &out);
        out.map(drop).map_err(|e| e.into_error("write keys"))
    }

    fn commit(mut self: Box<Self>) -> Result<(), StorageError> {
        if !self.begun {
            return Ok(());
        }
        let (_, conn, trips, until) = self.parts()?;
        let Conn {
            rt,
            client,
            connection,
            broken,
            ..
        } = conn;
        let committed = drive(rt, connection, trips, until, client.batch_execute("COMMIT"));
        mark(broken, &committed);
        // Whatever the outcome, COMMIT ended the transaction on the server.
        self.begun = false;
        match committed {
            Ok(()) => Ok(()),
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

impl Drop for PgLoad {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.begun && !conn.broken {
            let Conn {
                rt,
                client,
                connection,
                broken,
                ..
            } = &mut conn;
            if !send_only(rt, connection, client.batch_execute("ROLLBACK")) {
                *broken = true;
            }
        }
        self.pool.give_back(conn);
    }
}
