//! The reference Leasehold host: runs the Leasehold component under wasmtime,
//! supplies its `kv` import over a storage backend (a redb file, PostgreSQL,
//! or any implementation of [`storage::Backend`]), and runs each exported
//! call in exactly one transaction, scoped to one tenant. This file only
//! names the modules and what is public; nothing inside the crate imports
//! through it.
//!
//! ```no_run
//! use leasehold_host::{Engine, QueueQuery};
//!
//! let engine = Engine::open("worklist.redb")?;
//! let acme = engine.tenant("acme")?;
//! let page = acme.queue(&QueueQuery {
//!     roles: vec!["reviewer".into()],
//!     actor: Some("alice".into()),
//!     limit: 20,
//!     after: None,
//! })?;
//! for task in page.tasks {
//!     println!("{} ({:?})", task.id, task.priority);
//! }
//! # Ok::<(), leasehold_host::Error>(())
//! ```

#![warn(missing_docs)]

mod bindings;
mod cache;
mod call;
mod clock;
mod compiled;
mod config;
mod ctx;
mod engine;
mod error;
mod keep;
#[cfg(test)]
mod layering;
#[cfg(feature = "native")]
pub mod native;
pub mod new_task;
mod runtime;
pub mod storage;
mod sweeper;
mod tenant;
pub mod tenant_keys;
#[cfg(test)]
mod testing;
#[cfg(feature = "testkit")]
pub mod testkit;
mod verbs;
mod view;
mod watch;
pub mod whole;
pub mod worker;

pub use cache::{CompiledFrom, default_cache_dir};
pub use clock::{Alarm, Clock, ManualClock, SystemClock};
pub use config::{Durability, Limits, Reuse};
pub use engine::{Engine, EngineBuilder, GUEST_COMPONENT};
pub use error::{Error, Refusal, SandboxError};
pub use keep::InstanceStats;
pub use leasehold_guest::calendar::{
    CatchUp, GapPolicy, Overlap, RepeatPolicy, Rule, ScheduleSpec,
};
pub use leasehold_guest::jobs::{Job, JobAction, JobAssign, JobFailure, JobState};
pub use leasehold_guest::model::{
    ArmOutcome, Change, Decision, DecisionRecord, Discrepancy, EscalationStep, FeedEntry, FeedPage,
    FeedPlace, FeedRead, FieldChange, Finished, Guard, HistoryEntry, KindDefinition, Lease,
    OnExpiry, OutcomeRule, Page, Phase, Priority, QueueQuery, SealOutcome, SettleAnswer,
    SettledAndClaimed, Settlement, StepAction, StoreError, Task, TaskChange, TaskChanges,
    TaskState, TaskStep, Timer, TimerChange, TimerEvent, TimerInfo, TimerPage, Timestamp,
    TrimOutcome,
};
pub use leasehold_guest::schedules::{Schedule, ScheduleDef, SchedulePage};
pub use leasehold_guest::search::{
    AssigneeFilter, CountAnswer, IndexProgress, SavedView, SearchPage, SearchQuery, SortKey,
    TaskFilter, TaskSort, Viewer,
};
pub use leasehold_guest::subscriptions::{
    Attempt, SigningKey, SubFilter, SubState, Subscription, SubscriptionPage,
};
pub use storage::file::{KV_TABLE_NAME, OpenError, repair};
pub use storage::postgres::{
    DEFAULT_POOL_SIZE, PG_TABLE, PgError, SCHEMA_VERSION, SslMode, TlsError, WAIT_GRACE, is_url,
};
pub use storage::redb::tenant_prefix;
pub use storage::{CommitHung, CommitStats, GroupFailure, MAX_TENANT_BYTES};
pub use sweeper::{
    Duty, FirstSweepPlan, OnSweep, PLAN_LIMIT, Retention, StepJobs, SweepReport, Sweeper,
    SweeperError, SweeperOptions, SweeperStats, Turn, standard_duties,
};
pub use tenant::Tenant;
pub use tenant::timers::Rescheduled;
pub use verbs::{ExportedFunction, Verb, exported_functions};
pub use watch::{Changed, Changes};
pub use worker::{OnFailure, Outcome, Worker, WorkerError, WorkerOptions, WorkerStats};

// The guides' Rust examples, compiled and run as this crate's doctests by
// `cargo test --workspace`, so a guide cannot drift from the API it shows
// (tests/docs/README.md says how examples are marked).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;
#[cfg(doctest)]
#[doc = include_str!("../../docs/embedding.md")]
struct EmbeddingExamples;
#[cfg(doctest)]
#[doc = include_str!("../../docs/postgres.md")]
struct PostgresExamples;
#[cfg(doctest)]
#[doc = include_str!("../../docs/architecture.md")]
struct ArchitectureExamples;
