//! The small steps every kv check takes: a tenant name of its own, a
//! transaction begun, a batch committed and waited for, a tenant read whole,
//! and a storage error turned into the check's failure. It owns how a check
//! talks to a backend for the ordinary steps; it must never decide whether
//! a promise holds (each check does), and never wait on a backend without a
//! bound where another transaction could be holding it up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::storage::backend::{Backend, Entry, Mode, Txn, Write};
use crate::storage::error::StorageError;
use crate::testkit::report::Failure;

/// Long enough for any healthy store: the lock wait a check's transactions
/// begin with, and the bound on every wait for something a conforming
/// backend does at once. A check never waits on it to pass.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// A tenant name no other check, run or process uses: `kit`, the process,
/// a counter and the clock's nanoseconds, then `suffix`. At most 30 bytes
/// before the suffix, so a check can grow one to the 64-byte limit.
pub(crate) fn tenant(suffix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "kit{}-{}-{nanos}{suffix}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A failure of `check` unless `holds`.
pub(crate) fn ensure(
    check: &'static str,
    holds: bool,
    what: impl FnOnce() -> String,
) -> Result<(), Failure> {
    if holds {
        Ok(())
    } else {
        Err(Failure::new(check, what()))
    }
}

/// A storage error where none was expected.
pub(crate) fn failed(check: &'static str, doing: &str) -> impl FnOnce(StorageError) -> Failure {
    let doing = doing.to_owned();
    move |e| Failure::new(check, format!("{doing} failed: {e}"))
}

pub(crate) fn begin<B: Backend + ?Sized>(
    check: &'static str,
    b: &B,
    tenant: &str,
    mode: Mode,
) -> Result<Box<dyn Txn>, Failure> {
    begin_at(check, Door::Begin, b, tenant, mode)
}

/// A way into a transaction: each entry point of [`Backend`] the engine
/// calls. A backend may override any of them, so a promise checked through
/// one is not checked through the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Door {
    /// [`Backend::begin`].
    Begin,
    /// [`Backend::begin_with_deadline`], as every call without a line
    /// begins.
    WithDeadline,
    /// [`Backend::begin_in_line`] on a line, as a call that sweeps an
    /// index's head begins.
    InLine(&'static str),
}

/// Every entry point, once each, with the line the engine's claiming calls
/// use.
pub(crate) const DOORS: [Door; 3] = [Door::Begin, Door::WithDeadline, Door::InLine(LINES[0])];

/// Lines the engine's sweeping calls take turns on (`Verb::line`); two of
/// them are enough to race calls of one line and of two.
pub(crate) const LINES: [&str; 2] = ["tasks", "timers"];

impl Door {
    /// Begins a transaction through this entry point, waiting `lock_wait`
    /// for a turn. The deadline is the kit's own bound, so that a backend
    /// that gives up past its deadline does not fail a check for being
    /// slow on a busy machine.
    pub(crate) fn open<B: Backend + ?Sized>(
        self,
        b: &B,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        match self {
            Door::Begin => b.begin(tenant, mode, lock_wait),
            Door::WithDeadline => b.begin_with_deadline(tenant, mode, lock_wait, 2 * WAIT),
            Door::InLine(line) => b.begin_in_line(tenant, mode, lock_wait, 2 * WAIT, line),
        }
    }
}

impl std::fmt::Display for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Door::Begin => f.write_str("begin"),
            Door::WithDeadline => f.write_str("begin_with_deadline"),
            Door::InLine(line) => write!(f, "begin_in_line({line})"),
        }
    }
}

/// [`begin`] through `door`.
pub(crate) fn begin_at<B: Backend + ?Sized>(
    check: &'static str,
    door: Door,
    b: &B,
    tenant: &str,
    mode: Mode,
) -> Result<Box<dyn Txn>, Failure> {
    door.open(b, tenant, mode, WAIT).map_err(failed(
        check,
        &format!("beginning a {mode:?} transaction through {door}"),
    ))
}

/// Commits `batch` in a write transaction of its own and waits for it.
pub(crate) fn write<B: Backend + ?Sized>(
    check: &'static str,
    b: &B,
    tenant: &str,
    batch: Vec<Write>,
) -> Result<(), Failure> {
    write_at(check, Door::Begin, b, tenant, batch)
}

/// [`write`] in a transaction begun through `door`.
pub(crate) fn write_at<B: Backend + ?Sized>(
    check: &'static str,
    door: Door,
    b: &B,
    tenant: &str,
    batch: Vec<Write>,
) -> Result<(), Failure> {
    let txn = begin_at(check, door, b, tenant, Mode::Write)?;
    txn.commit(batch).and_then(|p| p.wait()).map_err(failed(
        check,
        &format!("committing a batch begun through {door}"),
    ))
}

pub(crate) fn put(key: &[u8], value: &[u8]) -> Write {
    Write::Put(key.to_vec(), value.to_vec())
}

/// Every entry of `tenant`, read in one snapshot, in scan order.
pub(crate) fn everything<B: Backend + ?Sized>(
    check: &'static str,
    b: &B,
    tenant: &str,
    reverse: bool,
) -> Result<Vec<Entry>, Failure> {
    let mut txn = begin(check, b, tenant, Mode::Read)?;
    scan_all(check, txn.as_mut(), reverse)
}

/// Every entry the transaction sees, in one scan of at most 4096 entries
/// (more than any check but the long-scan one writes).
pub(crate) fn scan_all(
    check: &'static str,
    txn: &mut dyn Txn,
    reverse: bool,
) -> Result<Vec<Entry>, Failure> {
    let (entries, over) = txn
        .scan(&[], None, 4096, reverse, usize::MAX)
        .map_err(failed(check, "scanning"))?;
    ensure(check, !over, || {
        "a scan with no byte cap stopped early".into()
    })?;
    Ok(entries)
}

pub(crate) fn keys(entries: &[Entry]) -> Vec<Vec<u8>> {
    entries.iter().map(|(k, _)| k.clone()).collect()
}

/// A key for a message: printable ASCII as text, anything else in hex.
pub(crate) fn show(key: &[u8]) -> String {
    if key.iter().all(|b| b.is_ascii_graphic()) {
        format!("{:?}", String::from_utf8_lossy(key))
    } else {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}")
    }
}
