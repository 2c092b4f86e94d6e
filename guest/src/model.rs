//! The domain values: what a task, a timer and an error are, in plain Rust.
//!
//! These mirror the WIT `types` interface one to one. They are also the JSON
//! shape of stored rows and of the host's CLI input, so a field renamed here is
//! a storage format change: add fields, never rename them.

#[allow(unused_imports)]
use crate::prelude::*;
use core::fmt;

use serde::{Deserialize, Serialize};

pub use crate::time::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    Normal,
    High,
    Urgent,
}

impl Priority {
    /// Queue order: urgent first.
    pub fn rank(self) -> i64 {
        match self {
            Priority::Urgent => 0,
            Priority::High => 1,
            Priority::Normal => 2,
            Priority::Low => 3,
        }
    }

    /// The WIT name.
    pub fn name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Urgent => "urgent",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Open,
    Claimed,
    Escalated,
    Completed,
    Expired,
    Withdrawn,
}

/// Every state, in the WIT's order.
pub const ALL_STATES: [TaskState; 6] = [
    TaskState::Open,
    TaskState::Claimed,
    TaskState::Escalated,
    TaskState::Completed,
    TaskState::Expired,
    TaskState::Withdrawn,
];

impl TaskState {
    /// A decision is still owed.
    pub fn is_pending(self) -> bool {
        matches!(
            self,
            TaskState::Open | TaskState::Claimed | TaskState::Escalated
        )
    }

    /// Offered to candidates.
    pub fn is_queued(self) -> bool {
        matches!(self, TaskState::Open | TaskState::Escalated)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Open => "open",
            TaskState::Claimed => "claimed",
            TaskState::Escalated => "escalated",
            TaskState::Completed => "completed",
            TaskState::Expired => "expired",
            TaskState::Withdrawn => "withdrawn",
        }
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExpiry {
    Deny,
    Escalate,
    Proceed,
}

impl OnExpiry {
    /// The WIT name.
    pub fn name(self) -> &'static str {
        match self {
            OnExpiry::Deny => "deny",
            OnExpiry::Escalate => "escalate",
            OnExpiry::Proceed => "proceed",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Settlement {
    Completed,
    Expired,
    Withdrawn,
}

impl Settlement {
    pub fn state(self) -> TaskState {
        match self {
            Settlement::Completed => TaskState::Completed,
            Settlement::Expired => TaskState::Expired,
            Settlement::Withdrawn => TaskState::Withdrawn,
        }
    }
}

/// A human task (WIT `task`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub run: String,
    pub case: Option<String>,
    pub kind: String,
    /// A JSON document, kept as the exact text it arrived as.
    pub justification: String,
    pub candidate_roles: Vec<String>,
    pub assignee: Option<String>,
    /// When the holder's lease ends; set only while the task is claimed
    /// under a lease.
    pub lease_until: Option<Timestamp>,
    pub priority: Priority,
    pub state: TaskState,
    pub on_expiry: OnExpiry,
    pub escalate_to: Vec<String>,
    pub excluded_actors: Vec<String>,
    pub created_at: Timestamp,
    pub due_at: Option<Timestamp>,
    /// How many recorded changes the task has had since a layout-10
    /// component first changed it (`open` gives 1); 0 for a task no such
    /// component has changed. `open` ignores what it is given.
    #[serde(default)]
    pub revision: u64,
    /// The decision the settling call recorded, if it carried one.
    #[serde(default)]
    pub decision: Option<DecisionRecord>,
    /// The outcomes the task allows; empty: its kind's, or any.
    #[serde(default)]
    pub outcomes: Vec<OutcomeRule>,
    /// Reminder offsets before the due time, largest first (earliest
    /// reminder first).
    #[serde(default)]
    pub remind_before: Vec<u64>,
    /// The escalation chain after the due time, in firing order.
    #[serde(default)]
    pub escalation: Vec<EscalationStep>,
    /// How many steps (reminders, then the chain) have fired.
    #[serde(default)]
    pub steps_done: u32,
}

/// What a chain step does (WIT `step-action`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepAction {
    /// Escalate, widening the candidate roles by these.
    Escalate(Vec<String>),
    /// Settle `expired`.
    Expire,
}

/// One step of an escalation chain (WIT `escalation-step`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EscalationStep {
    pub after_due_ms: u64,
    pub action: StepAction,
}

/// A reminder or chain step as it fired (WIT `task-step`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStep {
    /// A reminder this many milliseconds before the due time.
    Reminder(u64),
    /// A chain step, as the task held it.
    Escalation(EscalationStep),
}

impl Task {
    /// Whether an actor with `roles` may take this task at all (ignoring its
    /// state): not excluded, and a candidate role matches or none is named.
    pub fn admits_roles(&self, roles: &[String]) -> bool {
        self.candidate_roles.is_empty() || self.candidate_roles.iter().any(|r| roles.contains(r))
    }
}

/// One outcome a decision may have (WIT `outcome-rule`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeRule {
    pub name: String,
    /// A decision with this outcome must carry a non-empty reason.
    pub needs_reason: bool,
    /// A JSON Schema the output must satisfy, as text.
    pub output_schema: Option<String>,
}

/// A decision as `settle` is given it (WIT `decision`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub outcome: String,
    pub reason: Option<String>,
    /// A JSON document, kept as the exact text it arrived as.
    pub output: Option<String>,
}

/// A task a worker finished, as `settle-and-claim` is given it (WIT
/// `finished`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub id: String,
    pub settlement: Settlement,
    pub decision: Option<Decision>,
}

/// What became of one finished task (WIT `settle-answer`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettleAnswer {
    Settled,
    Already(TaskState),
    NotHeld(Option<String>),
    NotFound,
    Refused(String),
}

/// What `settle-and-claim` did (WIT `settled-and-claimed`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledAndClaimed {
    pub settled: Vec<SettleAnswer>,
    pub claimed: Vec<Task>,
}

/// A decision as the task keeps it (WIT `decision-record`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub outcome: String,
    pub reason: Option<String>,
    pub output: Option<String>,
    /// Who settled the task; `None` for the service.
    pub by: Option<String>,
    /// When the host ran the settling call (`kv.call-time`).
    pub at: Timestamp,
}

/// What a verb that changes one task may be given (WIT `guard`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    /// The revision the caller was shown: another one refuses the call
    /// with `stale(current)`.
    pub revision: Option<u64>,
    /// The bulk job making the change, recorded in its history entry.
    pub job: Option<String>,
}

/// The fields `update` may change (WIT `task-changes`); `None` leaves a
/// field as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskChanges {
    /// `Some(None)` clears the due time.
    pub due_at: Option<Option<Timestamp>>,
    pub priority: Option<Priority>,
    pub candidate_roles: Option<Vec<String>>,
    pub escalate_to: Option<Vec<String>>,
    pub excluded_actors: Option<Vec<String>>,
    pub on_expiry: Option<OnExpiry>,
    pub outcomes: Option<Vec<OutcomeRule>>,
    pub remind_before: Option<Vec<u64>>,
    pub escalation: Option<Vec<EscalationStep>>,
}

impl TaskChanges {
    /// Whether the changes name at least one field.
    pub fn names_a_field(&self) -> bool {
        self.due_at.is_some()
            || self.priority.is_some()
            || self.candidate_roles.is_some()
            || self.escalate_to.is_some()
            || self.excluded_actors.is_some()
            || self.on_expiry.is_some()
            || self.outcomes.is_some()
            || self.remind_before.is_some()
            || self.escalation.is_some()
    }
}

/// One field a change changed (WIT `field-change`): its WIT name and its
/// value before and after, each as JSON text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    pub before: String,
    pub after: String,
}

/// A kind's definition (WIT `kind-definition`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindDefinition {
    pub kind: String,
    pub outcomes: Vec<OutcomeRule>,
    pub revision: u64,
}

/// A claim that lapses unless renewed (WIT `lease`): held until
/// `now + lease_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub now: Timestamp,
    pub lease_ms: u32,
}

impl Lease {
    /// When the lease ends. Never clamped: a lease is as long as it was
    /// asked to be, even past the last instant a caller can name (s64 has
    /// room for any valid `now` plus any valid `lease_ms`). Saturating only
    /// so that an unchecked `now` cannot overflow; the verbs check it first.
    pub fn end(self) -> Timestamp {
        self.now.saturating_add(i64::from(self.lease_ms))
    }
}

/// A page of tasks (WIT `page`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub tasks: Vec<Task>,
    pub next: Option<String>,
}

/// WIT `queue-query`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueQuery {
    pub roles: Vec<String>,
    pub actor: Option<String>,
    pub limit: u32,
    pub after: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Forward,
    Compensating,
}

/// A durable wake-up (WIT `timer`). Identity is `(run, effect)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timer {
    pub run: String,
    pub case: Option<String>,
    pub effect: String,
    pub step: u32,
    pub phase: Phase,
    pub fire_at: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArmOutcome {
    Armed,
    AlreadyArmed,
    RunSealed,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealOutcome {
    pub timers_disarmed: u32,
    pub tasks_withdrawn: u32,
}

/// One entry of a task's history (WIT `history-entry`): one change of the
/// task, as the call that made it left it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// 1 for the task's first change, then one more for each change.
    pub seq: u64,
    /// When the host ran the call (`kv.call-time`): recorded, never used to
    /// decide a rule.
    pub at: Timestamp,
    /// The WIT name of the verb that made the change, e.g. `take-over`.
    pub verb: String,
    /// Who made it; `None` for the service (a sweep, an escalation, a
    /// settlement without a holder).
    pub actor: Option<String>,
    /// The state before the change; `None` for the change that opened it.
    pub before: Option<TaskState>,
    pub after: TaskState,
    /// The task's assignee, lease end, candidate roles and excluded actors
    /// after the change.
    pub assignee: Option<String>,
    pub lease_until: Option<Timestamp>,
    pub candidate_roles: Vec<String>,
    pub excluded_actors: Vec<String>,
    /// The task's revision after the change; 0 for a change recorded
    /// before layout 10.
    #[serde(default)]
    pub revision: u64,
    /// Each field the change changed but the state, before and after.
    #[serde(default)]
    pub changes: Vec<FieldChange>,
    /// The decision a settle recorded.
    #[serde(default)]
    pub decision: Option<DecisionRecord>,
    /// A note's remark.
    #[serde(default)]
    pub note: Option<String>,
    /// The bulk job that made the change.
    #[serde(default)]
    pub job: Option<String>,
    /// The reminder or chain step the change fired.
    #[serde(default)]
    pub step: Option<TaskStep>,
}

/// What a change did to a timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerEvent {
    Armed,
    Claimed,
    Retired,
    /// `reschedule` moved it; the fire time before is its previous entry's.
    Rescheduled,
}

/// One change of a timer (WIT `timer-change`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerChange {
    pub run: String,
    pub effect: String,
    pub at: Timestamp,
    pub verb: String,
    pub what: TimerEvent,
    pub fire_at: Timestamp,
    /// The sweeper's lease end, for a claim.
    pub lease_until: Option<Timestamp>,
}

/// One change of a task, in the feed (WIT `task-change`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskChange {
    pub id: String,
    pub entry: HistoryEntry,
    /// The task's run and kind; `None` for a change recorded before
    /// layout 10.
    #[serde(default)]
    pub run: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
}

/// What one feed entry records (WIT `change`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
// A task's change is the larger by far since it carries its record; boxing
// it would cost an allocation per feed entry read, and the enum mirrors the
// WIT variant field for field.
#[allow(clippy::large_enum_variant)]
pub enum Change {
    Task(TaskChange),
    Timer(TimerChange),
}

/// One committed change, with the position to resume after it (WIT
/// `feed-entry`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedEntry {
    pub position: String,
    pub change: Change,
}

/// A page of the feed (WIT `feed-page`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedPage {
    pub entries: Vec<FeedEntry>,
    /// Where the next read resumes: after the last entry, or where this one
    /// began when it found none.
    pub next: String,
    /// The end of the feed as this read saw it: `next == head` means caught
    /// up.
    pub head: String,
}

/// What a read of the feed answers (WIT `feed-read`): a page, or `Gone`
/// when entries after the position asked for were trimmed (or the position
/// is not one of this feed's), carrying the feed's end to follow from once
/// the reader has refreshed what it knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedRead {
    Page(FeedPage),
    Gone(String),
}

/// Where one entry sits in the feed (WIT `entry-place`): its writer slot,
/// and its number in that slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedPlace {
    pub slot: u32,
    pub seq: u64,
}

/// What `trim` removed (WIT `trim-outcome`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimOutcome {
    pub feed_removed: u32,
    pub history_removed: u32,
    /// Whether more is due for removal under the same rule.
    pub more: bool,
}

/// One disagreement found by the consistency check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discrepancy {
    pub structure: String,
    pub subject: String,
    pub detail: String,
}

/// A failure that is not a claim refusal (WIT `store-error`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "error", content = "detail")]
pub enum StoreError {
    NotFound(String),
    Invalid(String),
    Corrupt(String),
    Storage(String),
    /// The keyspace was moved to a layout newer than this component's by a
    /// newer build; the text names both layouts. Nothing was written.
    NewerLayout(String),
    /// The revision the caller expected is not the current one, which this
    /// is. Nothing was written.
    Stale(u64),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NotFound(id) => write!(f, "not found: {id}"),
            StoreError::Invalid(why) => write!(f, "invalid input: {why}"),
            StoreError::Corrupt(d) => write!(f, "corrupt storage: {d}"),
            StoreError::Storage(d) => write!(f, "storage failed: {d}"),
            StoreError::NewerLayout(d) => write!(f, "newer layout: {d}"),
            StoreError::Stale(r) => write!(f, "stale: the current revision is {r}"),
        }
    }
}

impl core::error::Error for StoreError {}

impl From<crate::kv::KvError> for StoreError {
    fn from(e: crate::kv::KvError) -> Self {
        StoreError::Storage(e.to_string())
    }
}

/// An armed timer as a listing shows it (WIT `timer-info`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerInfo {
    pub timer: Timer,
    /// The sweeper's lease end while claimed.
    pub lease_until: Option<Timestamp>,
}

/// One page of timers (WIT `timer-page`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerPage {
    pub timers: Vec<TimerInfo>,
    pub next: Option<String>,
}

/// Why `reschedule` moved nothing (WIT `timer-error`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "error", content = "detail")]
pub enum TimerError {
    NotFound,
    /// A sweeper holds it under a lease ending then.
    Held(Timestamp),
    RunSealed,
    Store(StoreError),
}

impl fmt::Display for TimerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerError::NotFound => f.write_str("no timer is armed under this run and effect"),
            TimerError::Held(until) => {
                write!(
                    f,
                    "a sweeper holds the timer under a lease ending at {until}"
                )
            }
            TimerError::RunSealed => f.write_str("the run is sealed"),
            TimerError::Store(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for TimerError {}

impl From<StoreError> for TimerError {
    fn from(e: StoreError) -> Self {
        TimerError::Store(e)
    }
}

impl From<crate::kv::KvError> for TimerError {
    fn from(e: crate::kv::KvError) -> Self {
        TimerError::Store(e.into())
    }
}

/// Why a claim, take-over or release did not happen (WIT `claim-error`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "error", content = "detail")]
pub enum ClaimError {
    NotFound(String),
    Excluded(String),
    WrongRole(String),
    NotPending(TaskState),
    AlreadyClaimed(String),
    NotHeld(String),
    /// The guard's revision is not the task's, which this is.
    Stale(u64),
    Store(StoreError),
}

impl fmt::Display for ClaimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimError::NotFound(id) => write!(f, "no task {id}"),
            ClaimError::Excluded(a) => write!(f, "{a} is excluded from this task"),
            ClaimError::WrongRole(a) => write!(f, "{a} has none of the task's candidate roles"),
            ClaimError::NotPending(s) => write!(f, "the task is already {s}"),
            ClaimError::AlreadyClaimed(h) => write!(f, "the task is held by {h}"),
            ClaimError::NotHeld(a) => write!(f, "{a} does not hold the task"),
            ClaimError::Stale(r) => write!(
                f,
                "the task changed since it was read: its revision is now {r}"
            ),
            ClaimError::Store(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for ClaimError {}

impl From<StoreError> for ClaimError {
    fn from(e: StoreError) -> Self {
        ClaimError::Store(e)
    }
}

impl From<crate::kv::KvError> for ClaimError {
    fn from(e: crate::kv::KvError) -> Self {
        ClaimError::Store(e.into())
    }
}
