//! The connections of one engine: opened when a call needs one and none is
//! idle, kept while they work, dropped once they fail. It owns how many
//! connections exist and who waits for one; it must never wait past the
//! caller's bound, and never hand out a connection marked broken.

use std::sync::atomic::AtomicU64;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::storage::error::StorageError;
use crate::storage::postgres::conn::Conn;
use crate::storage::postgres::settings::Settings;
use crate::storage::postgres::tls::MakeRustls;

#[derive(Default)]
pub(crate) struct PoolState {
    idle: Vec<Conn>,
    open: usize,
}

/// The connections of one engine: made when needed, kept while they work.
pub(crate) struct Pool {
    pub(crate) settings: Settings,
    pub(crate) tls: MakeRustls,
    pub(crate) state: Mutex<PoolState>,
    pub(crate) freed: Condvar,
    pub(crate) max: usize,
    pub(crate) trips: AtomicU64,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection, waiting at most `wait` for one to be free.
    pub(crate) fn take(&self, wait: Duration) -> Result<Conn, StorageError> {
        let deadline = Instant::now() + wait;
        let mut s = self.lock();
        loop {
            if let Some(conn) = s.idle.pop() {
                if conn.client.is_closed() {
                    s.open -= 1;
                    continue;
                }
                return Ok(conn);
            }
            if s.open < self.max {
                s.open += 1;
                drop(s);
                return Conn::open(&self.settings, &self.tls, &self.trips).inspect_err(|_| {
                    self.lock().open -= 1;
                    self.freed.notify_one();
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StorageError::Busy(wait));
            }
            s = self
                .freed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    pub(crate) fn give_back(&self, conn: Conn) {
        let mut s = self.lock();
        if conn.broken || conn.client.is_closed() {
            s.open -= 1;
        } else {
            s.idle.push(conn);
        }
        drop(s);
        self.freed.notify_one();
    }
}
