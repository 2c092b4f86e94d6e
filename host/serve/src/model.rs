//! The JSON the API speaks: request and answer bodies, with their OpenAPI
//! schemas. Field names are the WIT's (with underscores, as the CLI and the
//! stored rows spell them). It must never carry a tenant, a scope or, for a
//! reviewer, anyone else's identity: those come from the credential.

use leasehold_host as host;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

macro_rules! mirror_enum {
    ($(#[$doc:meta])* $name:ident => $host:ident { $($variant:ident),+ }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($variant,)+
        }

        impl From<host::$host> for $name {
            fn from(v: host::$host) -> Self {
                match v {
                    $(host::$host::$variant => $name::$variant,)+
                }
            }
        }

        impl From<$name> for host::$host {
            fn from(v: $name) -> Self {
                match v {
                    $($name::$variant => host::$host::$variant,)+
                }
            }
        }
    };
}

mirror_enum!(
    /// Queue order: `urgent` tasks are offered first.
    Priority => Priority { Low, Normal, High, Urgent });
mirror_enum!(
    /// Where a task is in its life; `open`, `claimed` and `escalated` are pending.
    TaskState => TaskState { Open, Claimed, Escalated, Completed, Expired, Withdrawn });
mirror_enum!(
    /// What the task's owner wants done when `due_at` passes.
    OnExpiry => OnExpiry { Deny, Escalate, Proceed });
mirror_enum!(
    /// The final states `settle` accepts.
    Settlement => Settlement { Completed, Expired, Withdrawn });
mirror_enum!(
    /// Which half of a saga step a timer belongs to.
    Phase => Phase { Forward, Compensating });
mirror_enum!(
    /// What `arm` did.
    ArmOutcome => ArmOutcome { Armed, AlreadyArmed, RunSealed });

/// A human task (WIT `task`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Task {
    pub id: String,
    pub run: String,
    pub case: Option<String>,
    pub kind: String,
    /// The JSON document explaining the request, as stored.
    #[schema(value_type = Object)]
    pub justification: Box<RawValue>,
    pub candidate_roles: Vec<String>,
    pub assignee: Option<String>,
    /// Milliseconds since 1970 when the holder's lease ends.
    pub lease_until: Option<i64>,
    pub priority: Priority,
    pub state: TaskState,
    pub on_expiry: OnExpiry,
    pub escalate_to: Vec<String>,
    pub excluded_actors: Vec<String>,
    pub created_at: i64,
    pub due_at: Option<i64>,
}

impl From<host::Task> for Task {
    fn from(t: host::Task) -> Self {
        // The rules accept only JSON documents; a row written otherwise is
        // shown as the string it holds rather than refused.
        let justification = RawValue::from_string(t.justification.clone()).unwrap_or_else(|_| {
            RawValue::from_string(serde_json::Value::String(t.justification).to_string())
                .unwrap_or_else(|_| empty_object())
        });
        Task {
            id: t.id,
            run: t.run,
            case: t.case,
            kind: t.kind,
            justification,
            candidate_roles: t.candidate_roles,
            assignee: t.assignee,
            lease_until: t.lease_until,
            priority: t.priority.into(),
            state: t.state.into(),
            on_expiry: t.on_expiry.into(),
            escalate_to: t.escalate_to,
            excluded_actors: t.excluded_actors,
            created_at: t.created_at,
            due_at: t.due_at,
        }
    }
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).unwrap_or_default()
}

/// A task to open. State, assignee and lease are not given: a new task is
/// open and unclaimed.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTask {
    pub id: String,
    pub run: String,
    #[serde(default)]
    pub case: Option<String>,
    pub kind: String,
    /// Any JSON document; `{}` when omitted. Stored as sent.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub justification: Option<Box<RawValue>>,
    #[serde(default)]
    pub candidate_roles: Vec<String>,
    #[serde(default)]
    pub escalate_to: Vec<String>,
    #[serde(default)]
    pub excluded_actors: Vec<String>,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub on_expiry: Option<OnExpiry>,
    /// Defaults to the service's clock.
    #[serde(default)]
    pub created_at: Option<i64>,
    #[serde(default)]
    pub due_at: Option<i64>,
}

impl NewTask {
    pub fn into_host(self, created_at: i64) -> host::Task {
        host::Task {
            id: self.id,
            run: self.run,
            case: self.case,
            kind: self.kind,
            justification: self
                .justification
                .map_or_else(|| "{}".to_owned(), |j| j.get().to_owned()),
            candidate_roles: self.candidate_roles,
            assignee: None,
            lease_until: None,
            priority: self.priority.map_or(host::Priority::Normal, Into::into),
            state: host::TaskState::Open,
            on_expiry: self.on_expiry.map_or(host::OnExpiry::Deny, Into::into),
            escalate_to: self.escalate_to,
            excluded_actors: self.excluded_actors,
            created_at,
            due_at: self.due_at,
        }
    }
}

/// Claim a task (or the head of the queue). A reviewer claims as itself;
/// an operator may name the actor and roles.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    #[serde(default)]
    pub actor: Option<String>,
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    /// Hold the task for this long (1–604800000 ms), renewable; without it
    /// the claim holds until released.
    #[serde(default)]
    pub lease_ms: Option<u32>,
    /// Service and operator only.
    #[serde(default)]
    pub now: Option<i64>,
}

/// Give a claimed task back.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    #[serde(default)]
    pub actor: Option<String>,
}

/// Move a claim from `from` to `actor` (default: the operator itself).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeOverRequest {
    pub from: String,
    #[serde(default)]
    pub actor: Option<String>,
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    #[serde(default)]
    pub lease_ms: Option<u32>,
    #[serde(default)]
    pub now: Option<i64>,
}

/// Extend the holder's lease to `now + lease_ms`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewRequest {
    pub lease_ms: u32,
    #[serde(default)]
    pub actor: Option<String>,
    #[serde(default)]
    pub now: Option<i64>,
}

/// Settle a pending task. A reviewer settles as the holder, always.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    pub settlement: Settlement,
    #[serde(default)]
    pub holder: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Settled {
    /// Whether this call settled the task (false: it was already settled).
    pub settled: bool,
}

/// A page of tasks; pass `next` back as `after` to read on.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Page {
    pub tasks: Vec<Task>,
    pub next: Option<String>,
}

/// What `claim-next` claimed; `task` is null when the queue was empty.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClaimedNext {
    pub task: Option<Task>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskList {
    pub tasks: Vec<Task>,
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QueueParams {
    /// 1–1000 tasks per page (default 20).
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Operator only: whose queue (default: the caller's).
    pub actor: Option<String>,
    /// Operator only: comma-separated roles (default: the caller's).
    pub roles: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// 1–1000 tasks per page (default 20).
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    pub after: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OverdueParams {
    /// 1–1000 tasks (default 20).
    pub limit: Option<u32>,
    /// Compare due times with this instant (default: the service's clock).
    pub now: Option<i64>,
}

/// Return lapsed claims to the queue.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReclaimRequest {
    /// 1–1000 (default 100).
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub now: Option<i64>,
}

/// The tasks of a run the caller still awaits.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitedRequest {
    #[serde(default)]
    pub awaited: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Withdrawn {
    pub withdrawn: u32,
}

/// What `seal` moved in this call.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SealOutcome {
    pub timers_disarmed: u32,
    pub tasks_withdrawn: u32,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunStatus {
    pub run: String,
    pub sealed: bool,
}

/// A durable wake-up (WIT `timer`); identity is `(run, effect)`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Timer {
    pub run: String,
    #[serde(default)]
    pub case: Option<String>,
    pub effect: String,
    pub step: u32,
    pub phase: Phase,
    pub fire_at: i64,
}

impl From<Timer> for host::Timer {
    fn from(t: Timer) -> Self {
        host::Timer {
            run: t.run,
            case: t.case,
            effect: t.effect,
            step: t.step,
            phase: t.phase.into(),
            fire_at: t.fire_at,
        }
    }
}

impl From<host::Timer> for Timer {
    fn from(t: host::Timer) -> Self {
        Timer {
            run: t.run,
            case: t.case,
            effect: t.effect,
            step: t.step,
            phase: t.phase.into(),
            fire_at: t.fire_at,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Armed {
    pub outcome: ArmOutcome,
}

/// Claim due timers under a lease.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimDueRequest {
    /// 1–1000 (default 10).
    #[serde(default)]
    pub limit: Option<u32>,
    pub lease_ms: u32,
    #[serde(default)]
    pub now: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TimerList {
    pub timers: Vec<Timer>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Disarmed {
    /// Whether the timer existed.
    pub disarmed: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DisarmedRun {
    /// How many timers were retired.
    pub disarmed: u32,
}

/// One counter or instant of the tenant's stats.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Count {
    pub count: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NextAt {
    /// Milliseconds since 1970; null when there is none.
    pub at: Option<i64>,
}

/// One disagreement found by the consistency check.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Discrepancy {
    pub structure: String,
    pub subject: String,
    pub detail: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CheckReport {
    /// Empty means consistent.
    pub discrepancies: Vec<Discrepancy>,
}

mirror_enum!(
    /// What a change did to a timer.
    TimerEvent => TimerEvent { Armed, Claimed, Retired });

/// One change of a task (WIT `history-entry`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryEntry {
    pub seq: u64,
    /// Milliseconds since 1970 when the service made the call.
    pub at: i64,
    /// The verb that made the change.
    pub verb: String,
    /// Who made it; null for the service.
    pub actor: Option<String>,
    /// The state before; null for the change that opened the task.
    pub before: Option<TaskState>,
    pub after: TaskState,
    pub assignee: Option<String>,
    pub lease_until: Option<i64>,
    pub candidate_roles: Vec<String>,
    pub excluded_actors: Vec<String>,
}

impl From<host::HistoryEntry> for HistoryEntry {
    fn from(e: host::HistoryEntry) -> Self {
        HistoryEntry {
            seq: e.seq,
            at: e.at,
            verb: e.verb,
            actor: e.actor,
            before: e.before.map(Into::into),
            after: e.after.into(),
            assignee: e.assignee,
            lease_until: e.lease_until,
            candidate_roles: e.candidate_roles,
            excluded_actors: e.excluded_actors,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryParams {
    /// 1–1000 entries per page (default 20).
    pub limit: Option<u32>,
    /// The `seq` of the last entry already read.
    pub after: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct History {
    pub entries: Vec<HistoryEntry>,
}

/// One change of a task, in the feed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskChange {
    pub id: String,
    pub entry: HistoryEntry,
}

/// One change of a timer, in the feed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TimerChange {
    pub run: String,
    pub effect: String,
    pub at: i64,
    pub verb: String,
    pub what: TimerEvent,
    pub fire_at: i64,
    pub lease_until: Option<i64>,
}

/// What one event records.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Task(TaskChange),
    Timer(TimerChange),
}

/// One committed change, with the position to resume after it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Event {
    pub position: String,
    pub change: Change,
}

impl From<host::FeedEntry> for Event {
    fn from(e: host::FeedEntry) -> Self {
        let change = match e.change {
            host::Change::Task(t) => Change::Task(TaskChange {
                id: t.id,
                entry: t.entry.into(),
            }),
            host::Change::Timer(t) => Change::Timer(TimerChange {
                run: t.run,
                effect: t.effect,
                at: t.at,
                verb: t.verb,
                what: t.what.into(),
                fire_at: t.fire_at,
                lease_until: t.lease_until,
            }),
        };
        Event {
            position: e.position,
            change,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsParams {
    /// 1–1000 events (default 20).
    pub limit: Option<u32>,
    /// A `position`, `next` or `head` of an earlier read; from the oldest
    /// event kept without it.
    pub after: Option<String>,
}

/// A read of the feed. `gone`: the events after `after` were trimmed (or
/// `after` is not a position of this feed); refresh, then read on from
/// `head`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Events {
    pub entries: Vec<Event>,
    pub next: String,
    pub head: String,
    pub gone: bool,
}

/// Which feed entries `trim` removes: those recorded before `before`, and
/// the oldest beyond the newest `keep`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrimRequest {
    pub before: Option<i64>,
    pub keep: Option<u64>,
    /// 1–1000 (default 1000).
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Trimmed {
    pub feed_removed: u32,
    pub history_removed: u32,
    pub more: bool,
}
