//! Tenants' keyspaces as bare bytes, for moving them between databases: it
//! owns opening a database as a storage backend (no engine, no component),
//! walking one tenant's keys in key order, their digest, the export file's
//! lines, and copying one tenant's keys onto another backend in batches that
//! can be resumed, with the progress lines those batches print. It must
//! never read meaning into a key or a value (that is the component's;
//! whether a copy is sound is for `check` to say through the engine), and
//! never write a tenant that holds anything but a part of what it copies
//! (`delete_tenant` aside, which only deletes).
//!
//! The digest of a keyspace is SHA-256 over every entry in key order, each
//! as the key's length (4 bytes, big-endian), the key, the value's length
//! and the value: equal digests mean the same keys holding the same values.

use std::collections::VecDeque;
use std::io::{BufRead, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_host::storage::file::Access;
use leasehold_host::storage::postgres::PgBackend;
use leasehold_host::storage::redb::{GroupCommit, RedbBackend};
use leasehold_host::storage::{Backend, Entry, Mode, StorageError, Txn, Write};
use leasehold_host::{Durability, Limits};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// A database opened as a bare backend.
pub type Store = Arc<dyn Backend>;

/// The export file's `format` and `version`: a reader refuses any other.
/// A backup's tenants are in the same format, written by the server.
pub const EXPORT_FORMAT: &str = leasehold_serve::backup::TENANT_KEYS_FORMAT;
pub const EXPORT_VERSION: u32 = leasehold_serve::backup::TENANT_KEYS_VERSION;

/// The test-only hook: a copy (or import) that has committed this many
/// batches stops there and exits non-zero, as a killed one would, so that a
/// test can resume it. Never set it in production.
pub const STOP_AFTER_ENV: &str = "LEASEHOLD_COPY_STOP_AFTER_BATCHES";

/// How long one walk's read transaction may last: a walk reads a whole
/// tenant in one snapshot, however large, so it is not held to a call's
/// deadline.
const WALK_DEADLINE: Duration = Duration::from_secs(24 * 3600);
/// How long one batch's write transaction may last.
const WRITE_DEADLINE: Duration = Duration::from_secs(120);
/// How many tenants are verified (digest, then `check`) at once: a check
/// is a long chain of reads, each waiting on the target (a round trip to
/// PostgreSQL), so a few at once overlap their waits.
pub const VERIFY_AT_ONCE: usize = 4;
/// How many times a batch that lost a race or found the store busy is tried.
const WRITE_TRIES: u32 = 8;

/// Why a move of keys did not happen, or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// The database could not be opened.
    #[error("cannot open {db}")]
    Open {
        db: String,
        #[source]
        source: Box<leasehold_host::Error>,
    },
    /// A read or a write of the keys failed.
    #[error("cannot {what} tenant {tenant}")]
    Storage {
        what: &'static str,
        tenant: String,
        #[source]
        source: StorageError,
    },
    /// The target tenant holds keys, and they are not the first keys of the
    /// source (an unfinished copy of it), so writing would mix two tenants.
    #[error(
        "the target's tenant {tenant} is not empty and is not an unfinished copy of the source ({why}); \
         nothing was written to it (`leasehold tenant delete` empties it)"
    )]
    NotEmpty { tenant: String, why: String },
    /// The source cannot list its tenants and none were named.
    #[error("{db} cannot list its tenants; name them with --tenant")]
    Unlisted { db: String },
    /// What the caller asked makes no sense.
    #[error("{0}")]
    Usage(String),
    /// An export file that is not one, or is damaged or cut short.
    #[error("{path}, line {line}: {why}")]
    BadFile {
        path: String,
        line: u64,
        why: String,
    },
    /// Reading or writing a file failed.
    #[error("cannot {what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The server refused the backup, or failed before streaming it.
    #[error("the server answered {status}: {detail}")]
    Server { status: u16, detail: String },
    /// The test-only hook stopped the copy.
    #[error("stopped after {0} batches, as {STOP_AFTER_ENV} asked (a test's hook)")]
    Stopped(u64),
    /// The engine, run over the target for its `check`, failed.
    #[error("cannot check tenant {tenant}")]
    Check {
        tenant: String,
        #[source]
        source: Box<leasehold_host::Error>,
    },
}

impl MoveError {
    /// The exit code: 1 refused, 2 bad usage or input, 3 failed, 4 busy.
    pub fn exit_code(&self) -> u8 {
        use super::error::{BAD_INPUT, BUSY, FAILED, REFUSED};
        match self {
            MoveError::NotEmpty { .. } => REFUSED,
            MoveError::Server { status, .. } => match status {
                401 | 403 => REFUSED,
                400..=499 => BAD_INPUT,
                503 => BUSY,
                _ => FAILED,
            },
            MoveError::Unlisted { .. } | MoveError::Usage(_) | MoveError::BadFile { .. } => {
                BAD_INPUT
            }
            MoveError::Storage { source, .. } if source.is_retryable() => BUSY,
            MoveError::Open { source, .. } => match source.as_ref() {
                leasehold_host::Error::Open(leasehold_host::OpenError::Missing { .. }) => BAD_INPUT,
                leasehold_host::Error::Open(leasehold_host::OpenError::Busy { .. }) => BUSY,
                _ => FAILED,
            },
            _ => FAILED,
        }
    }

    /// A stable name for `--json`, and what it is about.
    pub fn kind(&self) -> (&'static str, Option<&str>) {
        match self {
            MoveError::Open { db, .. } => ("cannot_open", Some(db)),
            MoveError::Storage { tenant, .. } => ("storage", Some(tenant)),
            MoveError::NotEmpty { tenant, .. } => ("not_empty", Some(tenant)),
            MoveError::Unlisted { db } => ("cannot_list", Some(db)),
            MoveError::Usage(_) => ("usage", None),
            MoveError::BadFile { path, .. } => ("bad_file", Some(path)),
            MoveError::Io { .. } => ("io", None),
            MoveError::Stopped(_) => ("stopped", None),
            MoveError::Server { .. } => ("server", None),
            MoveError::Check { tenant, .. } => ("check", Some(tenant)),
        }
    }
}

fn storage(what: &'static str, tenant: &str) -> impl FnOnce(StorageError) -> MoveError {
    move |source| MoveError::Storage {
        what,
        tenant: tenant.to_owned(),
        source,
    }
}

/// Opens `db` (a redb file or a PostgreSQL URL) as a bare backend. A
/// read-only one is never created or written.
pub fn open(db: &str, read_only: bool, wait: Duration) -> Result<Store, MoveError> {
    let opened: Result<Store, leasehold_host::Error> = if leasehold_host::is_url(db) {
        // A walk and a batch, or a digest's walk and a check in each of
        // the tenants verified at once, at most.
        PgBackend::connect(db, 2 * VERIFY_AT_ONCE, read_only)
            .map(|pg| Arc::new(pg) as Store)
            .map_err(leasehold_host::Error::from)
    } else {
        let access = if read_only {
            Access::ReadOnly
        } else {
            Access::Write
        };
        // No group commit: one writer, one batch at a time.
        RedbBackend::open(
            Path::new(db),
            Durability::Immediate,
            access,
            wait,
            GroupCommit::new(false, &Limits::default()),
        )
        .map(|redb| Arc::new(redb) as Store)
        .map_err(leasehold_host::Error::Open)
    };
    opened.map_err(|source| MoveError::Open {
        db: db.to_owned(),
        source: Box::new(source),
    })
}

/// The most entries, and bytes of keys and values, one batch holds: the
/// engine's budgets for one call, so a batch is never a larger transaction
/// than a call may make.
fn batch_bounds() -> (u32, usize) {
    let limits = Limits::default();
    (
        limits.scan_entries,
        limits.call_write_bytes.min(limits.scan_bytes),
    )
}

/// Where a tenant's entries come from, a batch at a time in key order; an
/// empty batch means there are no more.
pub trait Entries {
    fn batch(&mut self) -> Result<Vec<Entry>, MoveError>;
}

/// One tenant's entries in key order, read in one snapshot.
pub struct Walk {
    txn: Box<dyn Txn>,
    tenant: String,
    /// Where the next batch starts; `None` once the end was reached.
    next: Option<Vec<u8>>,
}

impl Walk {
    pub fn new(store: &dyn Backend, tenant: &str) -> Result<Walk, MoveError> {
        let txn = store
            .begin_with_deadline(
                tenant,
                Mode::Read,
                Limits::default().lock_wait,
                WALK_DEADLINE,
            )
            .map_err(storage("read", tenant))?;
        Ok(Walk {
            txn,
            tenant: tenant.to_owned(),
            next: Some(Vec::new()),
        })
    }
}

impl Entries for Walk {
    fn batch(&mut self) -> Result<Vec<Entry>, MoveError> {
        let Some(start) = self.next.take() else {
            return Ok(Vec::new());
        };
        let (limit, max_bytes) = batch_bounds();
        let (entries, more) = self
            .txn
            .scan(&start, None, limit, false, max_bytes)
            .map_err(storage("read", &self.tenant))?;
        match entries.last() {
            Some((last, _)) => {
                // The key right after the last one, bytewise.
                let mut after = last.clone();
                after.push(0);
                self.next = Some(after);
            }
            // One entry larger than a whole batch: the engine never writes
            // one (its key and value limits are far below a batch).
            None if more => {
                return Err(MoveError::Usage(format!(
                    "tenant {} holds an entry larger than a batch ({max_bytes} bytes)",
                    self.tenant
                )));
            }
            None => {}
        }
        Ok(entries)
    }
}

/// A running digest of a keyspace (see the module's docs).
#[derive(Clone, Default)]
pub struct Digest {
    sha: Sha256,
    pub keys: u64,
    pub bytes: u64,
}

impl Digest {
    pub fn add(&mut self, (key, value): &Entry) {
        for part in [key, value] {
            // Keys and values are within the engine's limits, far below 4 GiB.
            self.sha.update((part.len() as u32).to_be_bytes());
            self.sha.update(part);
        }
        self.keys += 1;
        self.bytes += (key.len() + value.len()) as u64;
    }

    pub fn hex(&self) -> String {
        hex(&self.sha.clone().finalize())
    }
}

/// The digest of a tenant's whole keyspace, in one snapshot.
pub fn digest(store: &dyn Backend, tenant: &str) -> Result<Digest, MoveError> {
    let mut walk = Walk::new(store, tenant)?;
    let mut digest = Digest::default();
    loop {
        let batch = walk.batch()?;
        if batch.is_empty() {
            return Ok(digest);
        }
        batch.iter().for_each(|e| digest.add(e));
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A batch that loses every try is split in two, each half a transaction
/// of its own, down to halves of this many writes: a smaller transaction
/// meets fewer others (on PostgreSQL, fewer of the hash index's buckets).
const SMALLEST_HALF: usize = 64;

/// Commits one batch of writes on `tenant`, trying again while it loses
/// races or finds the store busy (nothing was written then), and in two
/// halves, the first first, if it still loses: a copy's target then still
/// holds exactly the source's first keys wherever it stops.
pub fn commit(store: &dyn Backend, tenant: &str, batch: Vec<Write>) -> Result<(), MoveError> {
    match commit_tried(store, tenant, &batch) {
        Ok(()) => Ok(()),
        Err(e) if e.is_retryable() && batch.len() >= 2 * SMALLEST_HALF => {
            let mut first = batch;
            let second = first.split_off(first.len() / 2);
            commit(store, tenant, first)?;
            commit(store, tenant, second)
        }
        Err(e) => Err(storage("write", tenant)(e)),
    }
}

/// One batch, tried up to [`WRITE_TRIES`] times.
fn commit_tried(store: &dyn Backend, tenant: &str, batch: &[Write]) -> Result<(), StorageError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let attempt = store
            .begin_with_deadline(
                tenant,
                Mode::Write,
                Limits::default().lock_wait,
                WRITE_DEADLINE,
            )
            .and_then(|txn| txn.commit(batch.to_vec()))
            .and_then(|pending| pending.wait());
        match attempt {
            Ok(()) => {
                // Other hosts sharing the store hear of it, as of a call.
                store.announce(tenant);
                return Ok(());
            }
            Err(e) if e.is_retryable() && tries < WRITE_TRIES => {
                std::thread::sleep(Duration::from_millis(20 * u64::from(tries)));
            }
            Err(e) => return Err(e),
        }
    }
}

/// How a tenant's copy went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Copied from its first key.
    Copied,
    /// An unfinished copy was found and finished.
    Resumed,
    /// The target already held the whole of it.
    AlreadyCopied,
    /// The source holds no key of the tenant.
    Empty,
}

/// What copying one tenant did.
pub struct Copied {
    pub outcome: Outcome,
    /// Keys the target held already, as the start of the source's.
    pub kept: u64,
    /// Keys written by this copy.
    pub written: u64,
    /// The source's digest, over every key it gave.
    pub source: Digest,
}

/// How progress lines are shown, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    Never,
    /// A sentence a line.
    Text,
    /// A JSON object a line, for `--json`.
    Json,
}

/// The least time between two progress lines: a few a second at most, so
/// that a terminal or a log is not flooded.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Counts batches across a whole run, prints progress lines (on stderr, at
/// most every [`PROGRESS_EVERY`]) and runs the test-only hook.
pub struct Progress {
    show: Show,
    /// The command, as the lines name it: "copy", "import", "delete".
    verb: &'static str,
    pub batches: u64,
    pub stop_after: Option<u64>,
    last: Instant,
    /// Which tenant of how many is being worked on, counted from 1.
    place: (usize, usize),
}

impl Progress {
    pub fn new(verb: &'static str, show: Show) -> Result<Progress, MoveError> {
        let stop_after = match std::env::var(STOP_AFTER_ENV) {
            Ok(n) => Some(n.trim().parse().map_err(|_| {
                MoveError::Usage(format!("{STOP_AFTER_ENV}={n:?} is not a whole number"))
            })?),
            Err(_) => None,
        };
        Ok(Progress {
            show,
            verb,
            batches: 0,
            stop_after,
            last: Instant::now(),
            place: (1, 1),
        })
    }

    /// The run moves on to tenant `number` (from 1) of `of`.
    pub fn tenant(&mut self, number: usize, of: usize) {
        self.place = (number, of);
    }

    /// One line, unless one was printed too recently. `phase` is what is
    /// being done: "copy" and "delete" with `keys` (and `bytes`) how much of
    /// the tenant so far; "checked" once a tenant's digest and check are
    /// done, with the place the number of tenants done so far.
    pub fn line(&mut self, phase: &str, tenant: &str, keys: Option<u64>, bytes: Option<u64>) {
        if self.show == Show::Never || self.last.elapsed() < PROGRESS_EVERY {
            return;
        }
        self.last = Instant::now();
        let (number, of) = self.place;
        let text = match self.show {
            Show::Json if phase == "checked" => serde_json::json!({
                "progress": phase,
                "tenant": tenant,
                "tenants_checked": number,
                "tenants": of,
            })
            .to_string(),
            Show::Json => serde_json::json!({
                "progress": phase,
                "tenant": tenant,
                "tenant_number": number,
                "tenants": of,
                "keys": keys,
                "bytes": bytes,
            })
            .to_string(),
            _ => match phase {
                "checked" => format!(
                    "leasehold {}: {tenant} checked ({number} of {of} tenants checked)",
                    self.verb
                ),
                "delete" => format!(
                    "leasehold {}: {tenant}: {} keys deleted",
                    self.verb,
                    keys.unwrap_or(0)
                ),
                _ => format!(
                    "leasehold {}: {tenant} (tenant {number} of {of}): {} keys ({} bytes) written",
                    self.verb,
                    keys.unwrap_or(0),
                    bytes.unwrap_or(0)
                ),
            },
        };
        // A progress line that cannot be written is not worth failing for.
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    }

    /// Says, whenever lines are shown, that the keys are in and `tenants`
    /// are being verified, `at_once` at a time: checks are slow and say
    /// nothing until each tenant's is done.
    pub fn checking(&mut self, tenants: usize, at_once: usize) {
        let text = match self.show {
            Show::Never => return,
            Show::Json => serde_json::json!({
                "progress": "check",
                "tenants": tenants,
                "at_once": at_once,
            })
            .to_string(),
            Show::Text => format!(
                "leasehold {}: the keys are in; digests and check of {tenants} tenants, {at_once} at a time",
                self.verb
            ),
        };
        self.last = Instant::now();
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    }

    /// One batch committed: a progress line (if due), then the test hook.
    fn batch_done(
        &mut self,
        phase: &str,
        tenant: &str,
        keys: u64,
        bytes: Option<u64>,
    ) -> Result<(), MoveError> {
        self.batches += 1;
        self.line(phase, tenant, Some(keys), bytes);
        if self.stop_after.is_some_and(|n| self.batches >= n) {
            return Err(MoveError::Stopped(self.batches));
        }
        Ok(())
    }
}

/// What the target already holds of a tenant, matched against the
/// source's first entries.
struct Start {
    /// The source's digest over the entries the target holds.
    digest: Digest,
    kept: u64,
    /// Source entries read past the target's last key, not yet written.
    pending: VecDeque<Entry>,
    source_done: bool,
}

/// Reads the target's entries of `tenant` alongside the source's: they must
/// be exactly the source's first ones (none at all, or what a copy that
/// stopped part way left), or the tenant is refused.
fn match_start(
    source: &mut dyn Entries,
    target: &dyn Backend,
    tenant: &str,
) -> Result<Start, MoveError> {
    let mut start = Start {
        digest: Digest::default(),
        kept: 0,
        pending: VecDeque::new(),
        source_done: false,
    };
    let refuse = |why: String| MoveError::NotEmpty {
        tenant: tenant.to_owned(),
        why,
    };
    let mut there = Walk::new(target, tenant)?;
    loop {
        let batch = there.batch()?;
        if batch.is_empty() {
            return Ok(start);
        }
        for entry in batch {
            if start.pending.is_empty() && !start.source_done {
                start.pending.extend(source.batch()?);
                start.source_done = start.pending.is_empty();
            }
            match start.pending.pop_front() {
                Some(ours) if ours == entry => {
                    start.digest.add(&ours);
                    start.kept += 1;
                }
                Some(ours) if ours.0 == entry.0 => {
                    return Err(refuse(format!("key {} holds another value", hex(&entry.0))));
                }
                Some(_) => {
                    return Err(refuse(format!(
                        "it holds key {}, which the source does not",
                        hex(&entry.0)
                    )));
                }
                None => {
                    return Err(refuse(format!(
                        "it holds key {} past the source's last",
                        hex(&entry.0)
                    )));
                }
            }
        }
    }
}

/// Whether `tenant` may be copied onto `target`: refused as
/// [`copy_tenant`] would refuse it, before anything is written, so that a
/// copy of many tenants refuses before it writes any.
pub fn may_copy(
    source: &mut dyn Entries,
    target: &dyn Backend,
    tenant: &str,
) -> Result<(), MoveError> {
    match_start(source, target, tenant).map(|_| ())
}

/// Copies `tenant`'s entries from `source` onto `target`'s tenant of the
/// same name, a batch per transaction. A target that already holds keys is
/// written only if they are exactly the source's first keys (a copy that
/// stopped part way): then it goes on after the last of them. Keys go in
/// order, so the target's last key is where a stopped copy got to, and no
/// marker is needed.
pub fn copy_tenant(
    source: &mut dyn Entries,
    target: &dyn Backend,
    tenant: &str,
    progress: &mut Progress,
) -> Result<Copied, MoveError> {
    let Start {
        mut digest,
        kept,
        mut pending,
        source_done,
    } = match_start(source, target, tenant)?;
    let mut written = 0u64;
    let mut written_bytes = 0u64;
    loop {
        let batch: Vec<Entry> = if pending.is_empty() {
            if source_done {
                break;
            }
            source.batch()?
        } else {
            pending.drain(..).collect()
        };
        if batch.is_empty() {
            break;
        }
        let mut writes = Vec::with_capacity(batch.len());
        for entry in batch {
            digest.add(&entry);
            written += 1;
            written_bytes += (entry.0.len() + entry.1.len()) as u64;
            writes.push(Write::Put(entry.0, entry.1));
        }
        commit(target, tenant, writes)?;
        progress.batch_done("copy", tenant, written, Some(written_bytes))?;
    }
    let outcome = match (kept, written) {
        (0, 0) => Outcome::Empty,
        (0, _) => Outcome::Copied,
        (_, 0) => Outcome::AlreadyCopied,
        _ => Outcome::Resumed,
    };
    Ok(Copied {
        outcome,
        kept,
        written,
        source: digest,
    })
}

/// Deletes every key of `tenant`, a batch per transaction; answers how
/// many went.
pub fn delete_tenant(
    store: &dyn Backend,
    tenant: &str,
    progress: &mut Progress,
) -> Result<u64, MoveError> {
    let mut deleted = 0u64;
    loop {
        // Each batch reads its keys afresh: the ones before were deleted.
        let mut walk = Walk::new(store, tenant)?;
        let batch = walk.batch()?;
        drop(walk);
        if batch.is_empty() {
            return Ok(deleted);
        }
        let n = batch.len() as u64;
        commit(
            store,
            tenant,
            batch.into_iter().map(|(k, _)| Write::Delete(k)).collect(),
        )?;
        deleted += n;
        progress.batch_done("delete", tenant, deleted, None)?;
    }
}

/// The export file's first line.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    tenant: String,
}

/// One entry: key and value in hex.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    key: String,
    value: String,
}

/// The export file's last line: what came before it, so that a file cut
/// short or changed is refused.
#[derive(Debug, Serialize, Deserialize)]
struct Trailer {
    end: Summary,
}

#[derive(Debug, Serialize, Deserialize)]
struct Summary {
    keys: u64,
    bytes: u64,
    sha256: String,
}

/// Writes `tenant`'s keyspace to `out` as export lines, in one snapshot;
/// answers its digest.
pub fn export(
    store: &dyn Backend,
    tenant: &str,
    out: &mut dyn std::io::Write,
) -> Result<Digest, MoveError> {
    let io = |source| MoveError::Io {
        what: "write the export".into(),
        source,
    };
    let json = |e: serde_json::Error| MoveError::Io {
        what: "write the export".into(),
        source: e.into(),
    };
    let header = Header {
        format: EXPORT_FORMAT.into(),
        version: EXPORT_VERSION,
        tenant: tenant.into(),
    };
    writeln!(out, "{}", serde_json::to_string(&header).map_err(json)?).map_err(io)?;
    let mut walk = Walk::new(store, tenant)?;
    let mut digest = Digest::default();
    loop {
        let batch = walk.batch()?;
        if batch.is_empty() {
            break;
        }
        for entry in &batch {
            digest.add(entry);
            let line = Line {
                key: hex(&entry.0),
                value: hex(&entry.1),
            };
            writeln!(out, "{}", serde_json::to_string(&line).map_err(json)?).map_err(io)?;
        }
    }
    let trailer = Trailer {
        end: Summary {
            keys: digest.keys,
            bytes: digest.bytes,
            sha256: digest.hex(),
        },
    };
    writeln!(out, "{}", serde_json::to_string(&trailer).map_err(json)?).map_err(io)?;
    out.flush().map_err(io)?;
    Ok(digest)
}

/// An export file read back, a batch at a time, each line checked: keys in
/// strictly rising order, and the last line's count and digest matching
/// what came before it (checked when the last line is reached).
pub struct ExportReader {
    lines: std::io::Lines<Box<dyn BufRead>>,
    path: String,
    line: u64,
    /// The tenant the file says it holds.
    pub tenant: String,
    digest: Digest,
    last_key: Option<Vec<u8>>,
    ended: bool,
    /// One tenant's part of a backup: more lines follow its last line.
    section: bool,
}

/// A file's lines, and the number of the last one read.
pub type Lines = (std::io::Lines<Box<dyn BufRead>>, u64);

impl ExportReader {
    pub fn new(input: Box<dyn BufRead>, path: &str) -> Result<ExportReader, MoveError> {
        ExportReader::start((input.lines(), 0), path, false)
    }

    /// One tenant's part of a backup, read from `lines` on; its reader
    /// gives the lines back with [`ExportReader::rest`] once it ended.
    pub fn section(lines: Lines, path: &str) -> Result<ExportReader, MoveError> {
        ExportReader::start(lines, path, true)
    }

    /// The lines after this section's last one.
    pub fn rest(self) -> Lines {
        (self.lines, self.line)
    }

    /// The count, bytes and digest of the entries read so far.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// Whether the last line was read, and matched.
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn start((lines, line): Lines, path: &str, section: bool) -> Result<ExportReader, MoveError> {
        let mut reader = ExportReader {
            lines,
            path: path.to_owned(),
            line: line + 1,
            tenant: String::new(),
            digest: Digest::default(),
            last_key: None,
            ended: false,
            section,
        };
        let first = match reader.lines.next() {
            None if section => {
                return Err(reader.bad("the file ends before a tenant's part: it was cut short"));
            }
            None => return Err(reader.bad("the file is empty, not an export")),
            Some(line) => line.map_err(|source| reader.io(source))?,
        };
        let header: Header = serde_json::from_str(&first)
            .map_err(|e| reader.bad(format!("not an export's first line: {e}")))?;
        if header.format != EXPORT_FORMAT || header.version != EXPORT_VERSION {
            return Err(reader.bad(format!(
                "format {:?} version {}; this build reads {EXPORT_FORMAT:?} version {EXPORT_VERSION}",
                header.format, header.version
            )));
        }
        reader.tenant = header.tenant;
        Ok(reader)
    }

    fn bad(&self, why: impl Into<String>) -> MoveError {
        MoveError::BadFile {
            path: self.path.clone(),
            line: self.line,
            why: why.into(),
        }
    }

    fn io(&self, source: std::io::Error) -> MoveError {
        MoveError::Io {
            what: format!("read {}", self.path),
            source,
        }
    }
}

impl Entries for ExportReader {
    fn batch(&mut self) -> Result<Vec<Entry>, MoveError> {
        let (limit, max_bytes) = batch_bounds();
        let mut out = Vec::new();
        let mut bytes = 0usize;
        // Stops at half the budget, so that the entry that crosses it (one
        // value at most the engine's limit) still leaves the batch within.
        while !self.ended && out.len() < limit as usize && bytes < max_bytes / 2 {
            let Some(text) = self.lines.next() else {
                return Err(self.bad("the file ends before its last line: it was cut short"));
            };
            self.line += 1;
            let text = text.map_err(|source| self.io(source))?;
            if let Ok(trailer) = serde_json::from_str::<Trailer>(&text) {
                let end = trailer.end;
                if end.keys != self.digest.keys
                    || end.bytes != self.digest.bytes
                    || end.sha256 != self.digest.hex()
                {
                    return Err(self.bad(format!(
                        "the last line says {} keys with digest {}, but the lines before it hold {} with digest {}",
                        end.keys,
                        end.sha256,
                        self.digest.keys,
                        self.digest.hex()
                    )));
                }
                self.ended = true;
                if !self.section && self.lines.next().is_some() {
                    return Err(self.bad("lines follow the last line"));
                }
                break;
            }
            let line: Line =
                serde_json::from_str(&text).map_err(|e| self.bad(format!("not an entry: {e}")))?;
            let (Some(key), Some(value)) = (unhex(&line.key), unhex(&line.value)) else {
                return Err(self.bad("a key or value is not hex"));
            };
            if self.last_key.as_ref().is_some_and(|last| *last >= key) {
                return Err(self.bad("keys are not in rising order"));
            }
            self.last_key = Some(key.clone());
            let entry = (key, value);
            self.digest.add(&entry);
            bytes += entry.0.len() + entry.1.len();
            out.push(entry);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0x7f, 0xff];
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(&bytes[..]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn the_digest_tells_where_a_key_ends_and_its_value_begins() {
        let mut a = Digest::default();
        a.add(&(b"ab".to_vec(), b"c".to_vec()));
        let mut b = Digest::default();
        b.add(&(b"a".to_vec(), b"bc".to_vec()));
        assert_ne!(a.hex(), b.hex());
    }
}
