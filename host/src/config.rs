//! What an engine is configured with: the sandbox's limits and how hard a
//! commit presses data to disk. Plain values with safe defaults; this module
//! must never know a backend, a component or a call, so every other module
//! may depend on it.

use std::time::Duration;

/// The sandbox's limits. Every one has a safe default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call (epoch interruption).
    pub deadline: Duration,
    /// Budget of the consistency check, which walks the whole tenant.
    pub check_deadline: Duration,
    /// Linear memory one instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// Longest key the guest may use (before the tenant prefix).
    pub key_bytes: usize,
    /// Largest value the guest may write.
    pub value_bytes: usize,
    /// Most entries one scan may ask for, and most keys one `get-many`.
    pub scan_entries: u32,
    /// Most bytes (keys and values) one scan may hand the guest.
    pub scan_bytes: usize,
    /// Most bytes all of a call's reads together may hand the guest.
    pub call_read_bytes: usize,
    /// Most bytes (keys and values) one call may write.
    pub call_write_bytes: usize,
    /// How long a writing call waits for the writer ahead of it (redb), or
    /// any call for a free connection (PostgreSQL), before it answers
    /// [`Error::LockTimeout`](crate::Error::LockTimeout). Not part of the call's deadline.
    pub lock_wait: Duration,
    /// Most write calls one redb group commit takes before it commits, so
    /// that a stream of callers cannot hold a group open.
    pub group_calls: u32,
    /// A redb group older than this commits at the next call that finishes,
    /// whoever is waiting. A member's wait for its commit is bounded by
    /// this, one call's deadline and the commit itself.
    pub group_age: Duration,
    /// Instances that can run at once (pooling allocator slots).
    pub concurrent_calls: u32,
    /// How many times a call that lost a serialization race (PostgreSQL) is
    /// run again, from a fresh instance, before it answers
    /// [`Error::Conflict`](crate::Error::Conflict).
    pub conflict_retries: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(5),
            check_deadline: Duration::from_secs(600),
            memory_bytes: 64 << 20,
            key_bytes: 4096,
            value_bytes: 4 << 20,
            scan_entries: 4096,
            scan_bytes: 16 << 20,
            call_read_bytes: 64 << 20,
            call_write_bytes: 16 << 20,
            lock_wait: Duration::from_secs(5),
            group_calls: 128,
            group_age: Duration::from_millis(20),
            concurrent_calls: 128,
            conflict_retries: 32,
        }
    }
}

/// When an instance is kept to serve more than one call, the default (see
/// [`EngineBuilder::reuse_instances`](crate::EngineBuilder::reuse_instances)
/// and [`EngineBuilder::fresh_instances`](crate::EngineBuilder::fresh_instances)).
/// An instance only ever serves calls of the one tenant whose call made it,
/// and is thrown away after any call that did not answer `ok` (a trap, a
/// limit, a deadline, an error answer or a failed commit) and after any call
/// that grew its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reuse {
    /// Most calls one instance serves before it is thrown away.
    pub calls: u32,
    /// An instance this old or older is thrown away instead of serving the
    /// next call.
    pub age: Duration,
    /// Most instances kept idle at once, over all tenants; the least
    /// recently used goes first. Each holds a slot of the pool
    /// ([`Limits::concurrent_calls`]), so at most half the slots are kept.
    pub idle: u32,
    /// Most instances kept idle at once for any one tenant (a tenant has
    /// more than one only when its calls ran side by side); its least
    /// recently used goes first.
    pub per_tenant: u32,
    /// Most bytes of linear memory the idle instances hold together; the
    /// least recently used go first until the rest fit.
    pub idle_bytes: usize,
    /// An instance idle this long, by the engine's clock, is let go at the
    /// next call of any tenant instead of serving its tenant's next call.
    pub idle_for: Duration,
}

impl Default for Reuse {
    fn default() -> Self {
        Reuse {
            calls: 1000,
            age: Duration::from_secs(30),
            idle: 32,
            per_tenant: 4,
            idle_bytes: 256 << 20,
            idle_for: Duration::from_secs(10),
        }
    }
}

/// How hard a commit presses the data to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Each commit is on disk when the call returns (one fsync per call).
    #[default]
    Immediate,
    /// Commits are atomic but may be lost by a crash until a later durable
    /// commit. For benchmarks and throwaway databases.
    None,
}
