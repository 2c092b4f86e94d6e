//! The storage trait: what a backend must do for one call, free of the
//! component's bindings. It owns the promises every backend keeps (snapshot
//! reads, bytewise order, one atomic batch, tenancy) and the two facts a
//! backend states about itself; it must never know a verb, a limit of the
//! sandbox or how any one backend keeps its data.
//!
//! A backend serves one tenant's keys inside one transaction: snapshot
//! reads ([`Txn::get`], [`Txn::get_many`], ordered [`Txn::scan`] and
//! [`Txn::scan_many`]), then,
//! when the call answered `ok`, one batch of writes applied atomically by
//! [`Txn::commit`]. The component keeps its own writes until then, so a
//! backend needs no read-your-writes, no savepoints and no undo. Keys are the
//! component's keys; how a backend keeps tenants apart is its own business
//! (a key prefix in redb, a column in PostgreSQL), as long as no key of one
//! tenant is ever seen or touched through another, including a tenant whose
//! name is a prefix of the other's.
//!
//! The conformance kit (`leasehold_host::testkit`, feature `testkit`) checks
//! every promise here against any backend, then runs the scenario suite
//! through the component on it.

use std::sync::Arc;
use std::time::Duration;

pub use leasehold_guest::kv::{Entry, Write};

use crate::storage::commit::{CommitStats, Pending};
use crate::storage::error::StorageError;

/// Whether a call writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Runs on a snapshot; never waits for a writer, never writes. Its
    /// commit is handed only an empty batch.
    Read,
    /// Runs in the one write transaction of its call.
    Write,
}

/// A store of many tenants' ordered keys.
///
/// # The promises
///
/// - **Snapshot reads.** Every read of one transaction sees the tenant's
///   keys as they were at one point: never a write another transaction has
///   not committed, and, for a [`Mode::Read`] transaction, never one that
///   was committed after the transaction began.
/// - **Serializable writers.** Write transactions of one tenant that
///   commit leave it as some order of them, one after the other, would:
///   two must not both commit what they computed from a value the other
///   changed, whether a key both wrote (a lost update), a key only one wrote
///   (write skew), or a key one added inside a range the other scanned (a
///   phantom). Either they take turns (one waits for the other,
///   [`StorageError::Busy`] past `lock_wait`), or the one that loses answers
///   [`StorageError::Conflict`] and writes nothing. The engine runs a
///   conflicting call again from the start.
/// - **Bytewise order.** Keys compare as byte strings (`[0x00]` before
///   `[0x00, 0x00]` before `[0x01]`, `[0xff]` last); a scan walks them in
///   that order or its reverse.
/// - **One atomic batch.** [`Txn::commit`] applies all of a batch or none of
///   it. Each key appears at most once in a batch; a delete of an absent key
///   is not an error; an empty batch commits nothing and succeeds.
/// - **Tenancy.** Tenant names are 1–64 bytes of ASCII letters, digits,
///   `-`, `_` and `.` (the engine checks them before a backend sees one),
///   compared byte for byte: `Acme`, `acme` and `acme.` are three tenants.
///   Every key belongs to the tenant its transaction was begun for.
pub trait Backend: Send + Sync + 'static {
    /// Begins one call's transaction on `tenant`'s keys. A write transaction
    /// waits at most `lock_wait` for its turn (a single writer, a free
    /// connection) before it answers [`StorageError::Busy`].
    fn begin(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError>;

    /// Whether other processes may write the same tenants' keys while a call
    /// runs (a database server several hosts share), or this process is
    /// their only writer (an embedded store it holds locked). The component
    /// lays out a fresh keyspace by it: spread wide enough that concurrent
    /// writers seldom meet on a key, or narrow so that reads touch fewer
    /// keys. It decides contention, never correctness, and must not change
    /// while the backend lives.
    fn concurrent_writers(&self) -> bool;

    /// Whether every call must be a read: a writing verb is refused before
    /// it begins.
    fn read_only(&self) -> bool {
        false
    }

    /// [`begin`](Self::begin) for a call that must be over within
    /// `deadline` of now: a backend that waits on a server gives up those
    /// waits past it (plus a grace it states). One in this process has no
    /// such waits and need not override it.
    fn begin_with_deadline(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        let _ = deadline;
        self.begin(tenant, mode, lock_wait)
    }

    /// [`begin_with_deadline`](Self::begin_with_deadline) for a call that
    /// sweeps the head of one of the tenant's indexes (`claim-next`,
    /// `reclaim-lapsed`, `claim-due`). Every such call on one `line` reads
    /// what the others write, so calls that run side by side can only race,
    /// and all but one lose. A backend whose writers do run side by side may
    /// have them take turns instead, each waiting at most `lock_wait`; one
    /// with a single writer has turns already and need do nothing.
    fn begin_in_line(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
        line: &'static str,
    ) -> Result<Box<dyn Txn>, StorageError> {
        let _ = line;
        self.begin_with_deadline(tenant, mode, lock_wait, deadline)
    }

    /// How many times, so far, a call waited for a server's answer; `None`
    /// for a backend in this process.
    fn round_trips(&self) -> Option<u64> {
        None
    }

    /// What group commit has done so far; `None` for a backend that does
    /// not group commits itself.
    fn commit_stats(&self) -> Option<CommitStats> {
        None
    }

    /// This process committed a non-empty batch on `tenant` (called once
    /// the commit is durable): a backend that other processes share may
    /// tell them, so that they wake whoever waits on the tenant. A hint
    /// only, and never a commit's business: it may be coalesced, delayed or
    /// lost (a waiter then wakes at its own timeout), and must never fail
    /// or block the call. The default, for a store no other process
    /// writes, does nothing.
    fn announce(&self, tenant: &str) {
        let _ = tenant;
    }

    /// Starts hearing of commits other processes announce, calling `heard`
    /// for each (and perhaps for this process's own, or spuriously:
    /// readers reread, so that costs a read): [`Heard::Tenant`] for a
    /// commit on that tenant, [`Heard::Any`] when commits may have gone
    /// unheard (the way of hearing was lost and is back). Returns once it
    /// is listening, or once a first attempt failed (it keeps trying), so
    /// that a commit announced after it returns is heard while the way
    /// stays up. Answers whether it will call `heard` at all; the default,
    /// for a store no other process writes, answers `false`, and this
    /// process's own commits still wake its waiters. The engine calls it
    /// when its first waiter subscribes; engines sharing one backend may
    /// each call it.
    fn listen(&self, heard: HeardHook) -> bool {
        let _ = heard;
        false
    }

    /// The names of the tenants that have keys here, each once, in bytewise
    /// order; `None` from a backend that cannot list them (the default). A
    /// service that keeps time for every tenant starts from this list, so
    /// that a tenant nobody has called since the process started is still
    /// swept. Reads only; a tenant whose first commit lands while it runs
    /// may or may not be in it (the service hears of that commit anyway).
    fn tenants(&self) -> Result<Option<Vec<String>>, StorageError> {
        Ok(None)
    }

    /// Begins one write transaction over whole tenants ([`Load`]), for a
    /// restore, an import or a copy: what it puts is committed all at once
    /// or not at all, and from its first read of a tenant to its commit no
    /// other writer's commit on that tenant interleaves with it (it waits,
    /// or it or the other fails). It waits at most `lock_wait` for its
    /// turn; a backend that waits on a server gives up past `deadline`.
    /// `None` from a backend that cannot (the default).
    fn begin_load(
        &self,
        lock_wait: Duration,
        deadline: Duration,
    ) -> Result<Option<Box<dyn Load>>, StorageError> {
        let _ = (lock_wait, deadline);
        Ok(None)
    }
}

/// One write transaction over whole tenants (see [`Backend::begin_load`]).
/// Unlike a call's [`Txn`], its writes go to the store as they come, so
/// that a tenant of any size streams through it; none is seen by anyone
/// else before [`commit`](Load::commit). Dropping it without committing
/// writes nothing.
pub trait Load: Send {
    /// Up to `limit` of `tenant`'s entries with `start <= key`, in key
    /// order, within `max_bytes` as [`Txn::scan`] bounds them; as this
    /// transaction sees them (its own puts included). On a store of many
    /// writers, reading a tenant is what holds it: a writer that commits
    /// on it afterwards makes this transaction or itself fail.
    fn scan(
        &mut self,
        tenant: &str,
        start: &[u8],
        limit: u32,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError>;

    /// Puts `entries` into `tenant`, each key at most once.
    fn put(&mut self, tenant: &str, entries: &[Entry]) -> Result<(), StorageError>;

    /// Commits everything put, durably, or nothing.
    fn commit(self: Box<Self>) -> Result<(), StorageError>;
}

/// What a backend heard of another process's commits (see
/// [`Backend::listen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard<'a> {
    /// A commit on this tenant.
    Tenant(&'a str),
    /// Commits may have gone unheard: any tenant may have changed.
    Any,
}

/// Where a backend reports what it heard (see [`Backend::listen`]).
pub type HeardHook = Arc<dyn Fn(Heard<'_>) + Send + Sync>;

/// One call's transaction on one tenant's keys. Dropping it without
/// committing writes nothing.
pub trait Txn: Send {
    /// The value stored under `key`, if any.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

    /// The values stored under `keys`, one per key, in the order asked (a
    /// repeated key answered in each place). A backend that can read many
    /// keys in one go (one round trip, one cursor) should override this.
    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Up to `limit` entries with `start <= key < end` (no `end`: to the end
    /// of the tenant's keys), in key order or its reverse. Stops early,
    /// answering what it has and `true`, once the entries' keys and values
    /// would hold more than `max_bytes`; otherwise answers `false`.
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError>;

    /// Several scans, answered in the order asked, each as [`Txn::scan`]
    /// answers it alone, the entries of all of them together within
    /// `max_bytes`: once they would hold more, the answers stop there (the
    /// range that went over cut, the later ones empty) with `true`. A
    /// backend that can read several ranges in one round trip should
    /// override this; the default scans them one by one.
    fn scan_many(
        &mut self,
        ranges: &[ScanRange<'_>],
        max_bytes: usize,
    ) -> Result<(Vec<Vec<Entry>>, bool), StorageError> {
        scan_one_by_one(self, ranges, max_bytes)
    }

    /// Applies `batch` atomically and commits; a read transaction accepts
    /// only an empty batch ([`StorageError::ReadOnly`] otherwise). The
    /// commit may still be becoming durable when this returns: the call is
    /// acknowledged only after [`Pending::wait`], and from then on (or at
    /// once, for [`Pending::done`]) every transaction begun sees the batch.
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError>;

    /// The writer slot of this call (`kv.writer-slot`): different for calls
    /// that may run side by side, where the backend can arrange it, so that
    /// a keyspace spread by writer gives them different counter shards. A
    /// backend whose writers never overlap answers 0.
    fn writer_slot(&self) -> u32 {
        0
    }

    /// Ends a call that answered an error, writing nothing. Where the call
    /// may have read writes not yet durable (a group commit's open group),
    /// the answer must wait for them: the returned [`Pending`] settles when
    /// they are. Dropping the transaction is enough elsewhere.
    fn finish_unwritten(self: Box<Self>) -> Pending {
        Pending::done()
    }
}

/// One range of [`Txn::scan_many`]: [`Txn::scan`]'s arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanRange<'a> {
    /// The first key the range holds.
    pub start: &'a [u8],
    /// The first key past it; no end: to the end of the tenant's keys.
    pub end: Option<&'a [u8]>,
    /// The most entries to answer.
    pub limit: u32,
    /// Whether to walk it from its end.
    pub reverse: bool,
}

/// [`Txn::scan_many`] as one [`Txn::scan`] after another, each within what
/// the ones before left of `max_bytes`: the default, and what a backend
/// that answers some ranges together does with the rest.
pub fn scan_one_by_one<T: Txn + ?Sized>(
    txn: &mut T,
    ranges: &[ScanRange<'_>],
    max_bytes: usize,
) -> Result<(Vec<Vec<Entry>>, bool), StorageError> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut left = max_bytes;
    for r in ranges {
        let (entries, over) = txn.scan(r.start, r.end, r.limit, r.reverse, left)?;
        left -= entries_bytes(&entries).min(left);
        out.push(entries);
        if over {
            out.resize_with(ranges.len(), Vec::new);
            return Ok((out, true));
        }
    }
    Ok((out, false))
}

/// The bytes `entries`' keys and values hold, as the scans' caps count them.
pub fn entries_bytes(entries: &[Entry]) -> usize {
    entries.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// Takes `entries`, in the order given, until their keys and values would
/// hold more than `max_bytes`, and says whether it stopped there: what
/// [`Txn::scan`] answers, for a backend that reads entries one at a time
/// (limit them first, with `take`). The entry over the cap is not kept.
pub fn take_within<E>(
    entries: impl IntoIterator<Item = Result<Entry, E>>,
    max_bytes: usize,
) -> Result<(Vec<Entry>, bool), E> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for entry in entries {
        let (k, v) = entry?;
        bytes = bytes.saturating_add(k.len() + v.len());
        if bytes > max_bytes {
            return Ok((out, true));
        }
        out.push((k, v));
    }
    Ok((out, false))
}

/// Implements [`Backend`] for a wrapper by forwarding every method,
/// optional ones included, to the backend it wraps: a wrapper written by
/// hand that forgot one would silently fall back to its default.
macro_rules! forward_backend {
    ([$($generics:tt)*] $ty:ty, $this:ident => $inner:expr) => {
        impl<$($generics)*> $crate::storage::backend::Backend for $ty {
            fn begin(
                &$this,
                tenant: &str,
                mode: $crate::storage::backend::Mode,
                lock_wait: ::std::time::Duration,
            ) -> Result<Box<dyn $crate::storage::backend::Txn>, $crate::storage::error::StorageError> {
                $inner.begin(tenant, mode, lock_wait)
            }

            fn concurrent_writers(&$this) -> bool {
                $inner.concurrent_writers()
            }

            fn read_only(&$this) -> bool {
                $inner.read_only()
            }

            fn begin_with_deadline(
                &$this,
                tenant: &str,
                mode: $crate::storage::backend::Mode,
                lock_wait: ::std::time::Duration,
                deadline: ::std::time::Duration,
            ) -> Result<Box<dyn $crate::storage::backend::Txn>, $crate::storage::error::StorageError> {
                $inner.begin_with_deadline(tenant, mode, lock_wait, deadline)
            }

            fn begin_in_line(
                &$this,
                tenant: &str,
                mode: $crate::storage::backend::Mode,
                lock_wait: ::std::time::Duration,
                deadline: ::std::time::Duration,
                line: &'static str,
            ) -> Result<Box<dyn $crate::storage::backend::Txn>, $crate::storage::error::StorageError> {
                $inner.begin_in_line(tenant, mode, lock_wait, deadline, line)
            }

            fn round_trips(&$this) -> Option<u64> {
                $inner.round_trips()
            }

            fn commit_stats(&$this) -> Option<$crate::storage::commit::CommitStats> {
                $inner.commit_stats()
            }

            fn announce(&$this, tenant: &str) {
                $inner.announce(tenant)
            }

            fn listen(&$this, heard: $crate::storage::backend::HeardHook) -> bool {
                $inner.listen(heard)
            }

            fn tenants(&$this) -> Result<Option<Vec<String>>, $crate::storage::error::StorageError> {
                $inner.tenants()
            }

            fn begin_load(
                &$this,
                lock_wait: ::std::time::Duration,
                deadline: ::std::time::Duration,
            ) -> Result<Option<Box<dyn $crate::storage::backend::Load>>, $crate::storage::error::StorageError> {
                $inner.begin_load(lock_wait, deadline)
            }
        }
    };
}
// Only the conformance kit's wrapper names it from outside this file.
#[cfg(feature = "testkit")]
pub(crate) use forward_backend;

// A shared backend is a backend: an engine can take an `Arc` of one that the
// caller keeps a handle on (to inspect it, or to hand it to a second engine).
forward_backend!([B: Backend + ?Sized] Arc<B>, self => (**self));

// A boxed backend is a backend: one chosen at run time.
forward_backend!([B: Backend + ?Sized] Box<B>, self => (**self));
