//! SEED BASELINE, NOT PRODUCT CODE. The few types of the seed's `core` and
//! `redb` modules that its timer and task stores name (`/work/shared/seeds`,
//! README there), cut down to what those two files use, so they compile here
//! as they were written: ids as strings, instants as whole seconds. It
//! measures nothing and must never be used outside the seed comparison.

use redb::{ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

/// The seed's storage error, as the two stores raise it.
#[derive(Debug)]
pub(crate) enum StoreError {
    Backend(String),
    Corrupt { seq: u64, detail: String },
    NotFound(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for StoreError {}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Backend(e.to_string())
    }
}

/// Why a claim was refused (the seed's `case::ClaimError`).
#[derive(Debug)]
pub(crate) enum ClaimError {
    NotFound(TaskId),
    Excluded { actor: String },
    WrongRole { actor: String },
    NotPending { task: TaskId, state: TaskState },
    AlreadyClaimed { task: TaskId, holder: String },
    NotHeld { task: TaskId, actor: String },
    Store(StoreError),
}

impl From<StoreError> for ClaimError {
    fn from(e: StoreError) -> Self {
        ClaimError::Store(e)
    }
}

impl From<serde_json::Error> for ClaimError {
    fn from(e: serde_json::Error) -> Self {
        ClaimError::Store(e.into())
    }
}

impl std::fmt::Display for ClaimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for ClaimError {}

/// An instant, in whole seconds (the seed's columns are `unix_timestamp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Timestamp(pub(crate) i64);

impl Timestamp {
    pub(crate) fn unix_timestamp(self) -> i64 {
        self.0
    }
    pub(crate) fn from_unix_timestamp(s: i64) -> Result<Self, String> {
        Ok(Timestamp(s))
    }
}

macro_rules! id {
    ($name:ident) => {
        /// 128 bits, spelt as 32 hex digits (the seed's ids are UUIDs).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub(crate) struct $name(pub(crate) u128);

        impl $name {
            pub(crate) fn parse(s: &str) -> Result<Self, String> {
                u128::from_str_radix(s, 16)
                    .map($name)
                    .map_err(|e| e.to_string())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{:032x}", self.0)
            }
        }
    };
}

id!(RunId);
id!(CaseId);

/// A task's id: 128 bits, keyed as 32 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TaskId(pub(crate) u128);

impl TaskId {
    pub(crate) fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EffectKey(pub(crate) String);

impl EffectKey {
    pub(crate) fn to_hex(&self) -> String {
        self.0.clone()
    }
    pub(crate) fn from_hex(s: &str) -> Result<Self, String> {
        Ok(EffectKey(s.to_owned()))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StepId(pub(crate) u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Forward,
    Compensating,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Compensating => "compensating",
        }
    }
    pub(crate) fn parse(s: &str) -> Option<Phase> {
        match s {
            "forward" => Some(Phase::Forward),
            "compensating" => Some(Phase::Compensating),
            _ => None,
        }
    }
}

/// A durable timer, as the seed's sweep hands it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Timer {
    pub(crate) run: RunId,
    pub(crate) case: Option<CaseId>,
    pub(crate) effect: EffectKey,
    pub(crate) step: StepId,
    pub(crate) phase: Phase,
    pub(crate) fire_at: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TaskState {
    Open,
    Claimed,
    Escalated,
    Completed,
}

impl TaskState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TaskState::Open => "open",
            TaskState::Claimed => "claimed",
            TaskState::Escalated => "escalated",
            TaskState::Completed => "completed",
        }
    }
    pub(crate) fn is_pending(self) -> bool {
        matches!(
            self,
            TaskState::Open | TaskState::Claimed | TaskState::Escalated
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Priority {
    Low,
    Normal,
    High,
    Urgent,
}

impl Priority {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Urgent => "urgent",
        }
    }
}

/// A human task, stored whole as JSON by the seed: the fields the
/// benchmark's Leasehold task carries, so both stores write rows of about
/// one size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Task {
    pub(crate) id: TaskId,
    pub(crate) run: String,
    pub(crate) case: Option<CaseId>,
    pub(crate) kind: String,
    pub(crate) justification: String,
    pub(crate) candidate_roles: Vec<String>,
    pub(crate) assignee: Option<String>,
    pub(crate) priority: Priority,
    pub(crate) state: TaskState,
    pub(crate) escalate_to: Vec<String>,
    pub(crate) excluded_actors: Vec<String>,
    pub(crate) created_at: Timestamp,
    pub(crate) due_at: Option<Timestamp>,
}

impl Task {
    pub(crate) fn escalate(&mut self) {
        self.state = TaskState::Escalated;
        self.assignee = None;
    }
}

/// The seed's redb store, with the async hop taken out: `with_db` runs the
/// closure on the caller's thread, where the seed handed it to a blocking
/// pool and awaited it.
pub(crate) struct RedbStore {
    db: redb::Database,
    tenant: String,
}

/// Sorts after every key string the benchmark writes.
pub(crate) const MAX_STR: &str = "\u{10FFFF}";

pub(crate) fn be(e: &dyn std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

pub(crate) fn decoded<T>(what: &str, s: &str, v: Option<T>) -> Result<T, StoreError> {
    v.ok_or_else(|| StoreError::Corrupt {
        seq: 0,
        detail: format!("bad {what} '{s}'"),
    })
}

/// A write transaction without a flush, as the product's runs here.
pub(crate) fn begin_write(db: &redb::Database) -> Result<redb::WriteTransaction, StoreError> {
    let mut w = db.begin_write().map_err(|e| be(&e))?;
    w.set_durability(redb::Durability::None)
        .map_err(|e| be(&e))?;
    Ok(w)
}

/// `(tenant, run_id) -> ()`: the runs sealed against further wake-ups.
const SEALED: TableDefinition<(&str, &str), ()> = TableDefinition::new("runs_sealed");

pub(crate) fn is_sealed(
    w: &redb::WriteTransaction,
    tenant: &str,
    run: &str,
) -> Result<bool, StoreError> {
    let t = w.open_table(SEALED).map_err(|e| be(&e))?;
    Ok(t.get((tenant, run)).map_err(|e| be(&e))?.is_some())
}

impl RedbStore {
    /// A store on redb's in-memory backend with its tables made.
    pub(crate) fn in_memory(tenant: &str) -> Result<RedbStore, StoreError> {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|e| be(&e))?;
        let w = begin_write(&db)?;
        w.open_table(SEALED).map_err(|e| be(&e))?;
        super::timers::create_tables(&w)?;
        super::tasks::create_tables(&w)?;
        w.commit().map_err(|e| be(&e))?;
        Ok(RedbStore {
            db,
            tenant: tenant.to_owned(),
        })
    }

    pub(crate) fn tenant_name(&self) -> String {
        self.tenant.clone()
    }

    /// The seed's hop onto a blocking thread, taken out.
    pub(crate) fn with_db<T>(
        &self,
        f: impl FnOnce(&redb::Database) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        f(&self.db)
    }
}
