//! The bounds on online backups (`GET /backup`): who may run one at once,
//! and how long one may hold its snapshots. Each tenant's operators run one
//! backup of their tenant at a time, within a server-wide bound on tenants'
//! backups that one tenant can hold at most one place of; the admin
//! tenant's operators have a place of their own outside that bound, so an
//! admin's backup never waits on a tenant's. A running backup is ended (its
//! snapshot and its place given back) once its reader falls behind the
//! minimum rate after the grace, once it outlives its longest lifetime,
//! once the credential it was begun with is revoked or expires, or once the
//! server stops. It owns these bounds and the watch that enforces them; it
//! must never read the storage or write the stream itself.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::auth::HeldCredential;
use crate::problem::ApiError;

/// The bounds on backups (see docs/service.md, "Backup").
#[derive(Clone, Copy, Debug)]
pub struct BackupLimits {
    /// Most backups of ordinary tenants running at once, over the server.
    /// A tenant runs one at a time, so it holds at most one of these; the
    /// admin tenant's operators have one more place outside the bound.
    pub max_running: usize,
    /// How long a backup's reader has before the minimum rate applies.
    pub grace: Duration,
    /// The least bytes a second a backup's reader must take, on average
    /// since the grace ended: by `grace + n / min_rate` after it began, a
    /// backup has handed its reader at least `n` bytes, or it is ended. A
    /// backup of `s` bytes so lives at most `grace + s / min_rate`. Zero:
    /// no rate is asked (only `max_lifetime` holds).
    pub min_rate: u64,
    /// The longest a backup may run, however fast its reader: also the
    /// deadline each tenant's snapshot is begun with.
    pub max_lifetime: Duration,
}

impl Default for BackupLimits {
    fn default() -> Self {
        BackupLimits {
            max_running: 4,
            grace: Duration::from_secs(30),
            min_rate: 256 * 1024,
            max_lifetime: Duration::from_secs(24 * 3600),
        }
    }
}

/// Why a backup stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Every tenant was written, and the end line.
    Finished,
    /// The writer failed: the storage, the output, or the format refused.
    Failed,
    /// Its reader fell behind the minimum rate.
    TooSlow,
    /// It outlived its longest lifetime.
    Lifetime,
    /// The credential it was begun with was revoked or expired.
    Revoked,
    /// The server is shutting down.
    Stopping,
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            End::Finished => "the backup finished",
            End::Failed => "the backup failed",
            End::TooSlow => "the reader took the backup more slowly than the server's minimum rate",
            End::Lifetime => "the backup outlived the longest a backup may run",
            End::Revoked => "the credential the backup was begun with was revoked or expired",
            End::Stopping => "the server is shutting down",
        })
    }
}

/// The places backups run in.
pub struct BackupPermits {
    admin: Arc<Semaphore>,
    tenants: Arc<Semaphore>,
    /// The tenants with a backup of their own running.
    running: Mutex<HashSet<String>>,
}

/// A running backup's place, given back when dropped.
pub struct BackupPermit {
    _place: OwnedSemaphorePermit,
    tenant: Option<String>,
    permits: Arc<BackupPermits>,
}

impl Drop for BackupPermit {
    fn drop(&mut self) {
        if let Some(t) = self.tenant.take() {
            self.permits
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&t);
        }
    }
}

impl BackupPermits {
    /// Places for `limits`.
    pub fn new(limits: &BackupLimits) -> Arc<BackupPermits> {
        Arc::new(BackupPermits {
            admin: Arc::new(Semaphore::new(1)),
            tenants: Arc::new(Semaphore::new(limits.max_running.max(1))),
            running: Mutex::new(HashSet::new()),
        })
    }

    /// A place for a backup by the admin's operators (`admin`), or by an
    /// operator of `tenant`: taken at once, or refused, 503 `busy` while
    /// the same caller's backup runs, `overloaded` at the server's bound.
    pub fn take(self: &Arc<Self>, admin: bool, tenant: &str) -> Result<BackupPermit, ApiError> {
        let busy = |detail: String| ApiError::Unavailable {
            kind: "busy",
            detail,
        };
        if admin {
            let place = self.admin.clone().try_acquire_owned().map_err(|_| {
                busy("an admin's backup is running already; one runs at a time".to_owned())
            })?;
            return Ok(BackupPermit {
                _place: place,
                tenant: None,
                permits: self.clone(),
            });
        }
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.contains(tenant) {
            return Err(busy(format!(
                "a backup of tenant {tenant} is running already; one runs at a time"
            )));
        }
        // The refusal names no bound: it must not tell a tenant how many
        // other tenants are backing up.
        let place =
            self.tenants
                .clone()
                .try_acquire_owned()
                .map_err(|_| ApiError::Unavailable {
                    kind: "overloaded",
                    detail: "the server cannot take another backup now; retry later".to_owned(),
                })?;
        running.insert(tenant.to_owned());
        Ok(BackupPermit {
            _place: place,
            tenant: Some(tenant.to_owned()),
            permits: self.clone(),
        })
    }
}

/// One running backup's progress and end, shared by its writer, its
/// stream and its watch.
pub struct Pace {
    began: Instant,
    taken: AtomicU64,
    end: watch::Sender<Option<End>>,
}

impl Pace {
    /// A backup beginning now.
    pub fn new() -> Arc<Pace> {
        Arc::new(Pace {
            began: Instant::now(),
            taken: AtomicU64::new(0),
            end: watch::Sender::new(None),
        })
    }

    /// The reader took `bytes` more.
    pub fn took(&self, bytes: usize) {
        self.taken.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Ends the backup for `why`, unless it ended already; answers how it
    /// ended.
    pub fn end(&self, why: End) -> End {
        self.end.send_if_modified(|e| {
            if e.is_none() {
                *e = Some(why);
                true
            } else {
                false
            }
        });
        self.ended().unwrap_or(why)
    }

    /// How the backup ended, once it has.
    pub fn ended(&self) -> Option<End> {
        *self.end.borrow()
    }

    /// Returns once the backup has ended, with how.
    pub async fn until_ended(&self) -> End {
        let mut rx = self.end.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(e) => e.unwrap_or(End::Failed),
            // The sender lives in `self`: this cannot happen.
            Err(_) => End::Failed,
        }
    }

    /// Whether the reader is behind: past the grace, it has taken fewer
    /// bytes than `min_rate` a second since then.
    fn behind(&self, limits: &BackupLimits, now: Instant) -> bool {
        let Some(since) = now
            .checked_duration_since(self.began + limits.grace)
            .filter(|_| limits.min_rate > 0)
        else {
            return false;
        };
        let owed = since.as_secs_f64() * limits.min_rate as f64;
        (self.taken.load(Ordering::Relaxed) as f64) < owed
    }

    /// When the reader falls behind if it takes nothing more.
    fn due(&self, limits: &BackupLimits) -> Instant {
        let last = self.began + limits.max_lifetime;
        if limits.min_rate == 0 {
            return last;
        }
        let taken = self.taken.load(Ordering::Relaxed) as f64;
        let covered = Duration::try_from_secs_f64(taken / limits.min_rate as f64)
            .unwrap_or(limits.max_lifetime);
        // A few milliseconds past the exact moment, so a reader exactly on
        // the bound is not cut by rounding.
        (self.began + limits.grace + covered + Duration::from_millis(5)).min(last)
    }
}

/// Watches one backup until it ends, ending it past its bounds: its reader
/// behind the minimum rate, its lifetime over, its credential revoked, or
/// the server stopping.
pub async fn watch_backup(
    pace: Arc<Pace>,
    limits: BackupLimits,
    mut credential: HeldCredential,
    mut stopping: watch::Receiver<bool>,
) -> End {
    let last = pace.began + limits.max_lifetime;
    loop {
        let due = pace.due(&limits);
        tokio::select! {
            ended = pace.until_ended() => return ended,
            () = credential.lapsed() => return pace.end(End::Revoked),
            _ = stopping.wait_for(|s| *s) => return pace.end(End::Stopping),
            () = tokio::time::sleep_until(due.into()) => {
                let now = Instant::now();
                if now >= last {
                    return pace.end(End::Lifetime);
                }
                if pace.behind(&limits, now) {
                    return pace.end(End::TooSlow);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> BackupLimits {
        BackupLimits {
            max_running: 2,
            grace: Duration::from_secs(10),
            min_rate: 1000,
            max_lifetime: Duration::from_secs(3600),
        }
    }

    #[test]
    fn a_tenant_holds_one_place_and_the_admin_one_of_its_own() {
        let permits = BackupPermits::new(&limits());
        let a = permits.take(false, "a").expect("a's place");
        let again = permits.take(false, "a").err().expect("a twice");
        assert!(matches!(again, ApiError::Unavailable { kind: "busy", .. }));
        let b = permits.take(false, "b").expect("b's place");
        let c = permits.take(false, "c").err().expect("past the bound");
        assert!(matches!(
            c,
            ApiError::Unavailable {
                kind: "overloaded",
                ..
            }
        ));
        // The admin's place is outside the tenants' bound.
        let admin = permits.take(true, "a").expect("the admin's place");
        assert!(permits.take(true, "b").is_err(), "one admin's at a time");
        drop((a, admin));
        permits.take(false, "a").expect("a's place is back");
        permits.take(true, "a").expect("the admin's place is back");
        drop(b);
    }

    #[test]
    fn a_reader_is_behind_only_past_the_grace_and_below_the_rate() {
        let l = limits();
        let pace = Pace::new();
        let at = |secs: u64| pace.began + Duration::from_secs(secs);
        assert!(!pace.behind(&l, at(9)), "within the grace");
        assert!(pace.behind(&l, at(11)), "took nothing past the grace");
        pace.took(5000);
        assert!(!pace.behind(&l, at(14)));
        assert!(pace.behind(&l, at(16)));
        // Its due moment is where it would fall behind.
        let due = pace.due(&l);
        assert!(due > at(15) && due < at(16), "{:?}", due - pace.began);
        let none = BackupLimits { min_rate: 0, ..l };
        assert!(!pace.behind(&none, at(3000)));
        assert_eq!(pace.due(&none), at(3600));
    }

    #[test]
    fn the_first_end_is_the_one_kept() {
        let pace = Pace::new();
        assert_eq!(pace.ended(), None);
        assert_eq!(pace.end(End::TooSlow), End::TooSlow);
        assert_eq!(pace.end(End::Finished), End::TooSlow);
        assert_eq!(pace.ended(), Some(End::TooSlow));
    }
}
