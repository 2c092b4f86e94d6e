//! How a move ends, for each tenant: the target's digest beside the
//! source's, and `check` run through the engine on the target, a few
//! tenants at a time; and the report of it, as JSON or a few lines. It
//! must never call a verb but `check`, which reads.

use leasehold_host::{Discrepancy, Engine};
use serde::Serialize;

use crate::keys::copy::{Copied, Outcome};
use crate::keys::error::MoveError;
use crate::keys::progress::Progress;
use crate::keys::store::{self, Store, VERIFY_AT_ONCE};

/// One tenant's copy (or import), as answered.
#[derive(Debug, Serialize)]
pub struct TenantReport {
    tenant: String,
    outcome: Outcome,
    /// Keys the target already held: all of the source's, or none.
    kept_keys: u64,
    /// Keys this run wrote.
    written_keys: u64,
    keys: u64,
    bytes: u64,
    source_sha256: String,
    target_sha256: String,
    digests_match: bool,
    discrepancies: Vec<Discrepancy>,
}

impl TenantReport {
    pub fn ok(&self) -> bool {
        self.digests_match && self.discrepancies.is_empty()
    }

    pub fn human(&self) -> String {
        let what = match self.outcome {
            Outcome::Copied => format!("copied {} keys ({} bytes)", self.keys, self.bytes),
            Outcome::AlreadyCopied => format!(
                "already copied ({} keys, {} bytes); nothing written",
                self.keys, self.bytes
            ),
            Outcome::Empty => "the source holds no key of it; nothing written".to_owned(),
        };
        let digests = if self.digests_match {
            "the digests match"
        } else {
            "THE DIGESTS DIFFER"
        };
        let check = if self.discrepancies.is_empty() {
            "check is clean".to_owned()
        } else {
            format!(
                "CHECK FOUND {} discrepancies: {}",
                self.discrepancies.len(),
                serde_json::to_string(&self.discrepancies).unwrap_or_default()
            )
        };
        format!(
            "{}: {what}.\n  source sha256 {}\n  target sha256 {}\n  {digests}; {check}.\n",
            self.tenant, self.source_sha256, self.target_sha256
        )
    }
}

/// After a tenant's keys are in: the target's digest, compared with the
/// source's, and `check` run through the engine on the target.
pub fn verify(
    copied: Copied,
    target: &Store,
    engine: &Engine,
    tenant: &str,
) -> Result<TenantReport, MoveError> {
    let there = store::digest(target.as_ref(), tenant)?;
    let check = |source| MoveError::Check {
        tenant: tenant.to_owned(),
        source: Box::new(source),
    };
    let discrepancies = engine
        .tenant(tenant)
        .map_err(check)?
        .check()
        .map_err(check)?;
    let (source_sha256, target_sha256) = (copied.source.hex(), there.hex());
    Ok(TenantReport {
        tenant: tenant.to_owned(),
        outcome: copied.outcome,
        kept_keys: copied.kept,
        written_keys: copied.written,
        keys: there.keys(),
        bytes: there.bytes(),
        digests_match: source_sha256 == target_sha256 && copied.source.keys() == there.keys(),
        source_sha256,
        target_sha256,
        discrepancies,
    })
}

/// [`verify`] of every tenant copied, [`VERIFY_AT_ONCE`] at a
/// time; the reports in the tenants' order, or the error of the first
/// tenant (in that order) that failed. Once one fails no other starts.
pub fn verify_all(
    copied: Vec<Copied>,
    tenants: &[String],
    target: &Store,
    engine: &Engine,
    progress: &mut Progress,
) -> Result<Vec<TenantReport>, MoveError> {
    use std::sync::Mutex;
    let count = tenants.len();
    let jobs = Mutex::new(
        tenants
            .iter()
            .zip(copied)
            .enumerate()
            .collect::<std::collections::VecDeque<_>>(),
    );
    let results: Mutex<Vec<Option<Result<TenantReport, MoveError>>>> =
        Mutex::new((0..count).map(|_| None).collect());
    let at_once = VERIFY_AT_ONCE.min(count);
    if count > 0 {
        progress.checking(count, at_once);
    }
    let progress = Mutex::new(progress);
    std::thread::scope(|s| {
        for _ in 0..at_once {
            s.spawn(|| {
                loop {
                    let Some((i, (tenant, copied))) = lock(&jobs).pop_front() else {
                        return;
                    };
                    let report = verify(copied, target, engine, tenant);
                    if report.is_err() {
                        lock(&jobs).clear();
                    }
                    let mut results = lock(&results);
                    results[i] = Some(report);
                    let done = results.iter().filter(|r| r.is_some()).count();
                    drop(results);
                    let mut progress = lock(&progress);
                    progress.tenant(done, count);
                    progress.line("checked", tenant, None, None);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    // Tenants are started in order, so one never started comes after the
    // one whose failure stopped the rest.
    results.into_iter().flatten().collect()
}

/// A lock poisoned by a panicking worker still holds sound data: the panic
/// is raised again when the scope joins.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
