//! The JSON the API speaks: request and answer bodies, with their OpenAPI
//! schemas. Field names are the WIT's (with underscores, as the CLI and the
//! stored rows spell them). It must never carry a tenant, a scope or, for a
//! reviewer, anyone else's identity: those come from the credential.

use leasehold_host as host;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

/// Integers as JSON Schema counts them: `738` and `738.0` are the same
/// integer, so a field the document declares `integer` takes both; a
/// fraction or a value out of range is refused, naming the field.
pub mod whole {
    use serde::de::{self, Deserializer, Visitor};

    struct Whole;

    impl Visitor<'_> for Whole {
        type Value = i128;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an integer")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i128, E> {
            Ok(i128::from(v))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i128, E> {
            Ok(i128::from(v))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i128, E> {
            // Exact below 2^53, which covers every bound the rules have.
            if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
                Ok(v as i128)
            } else {
                Err(E::invalid_value(de::Unexpected::Float(v), &self))
            }
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<i128, E> {
            if let Ok(n) = v.parse::<i128>() {
                return Ok(n);
            }
            match v.parse::<f64>() {
                Ok(f) if f.is_finite() => self.visit_f64(f),
                _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
            }
        }
    }

    fn whole<'de, D: Deserializer<'de>, T: TryFrom<i128>>(d: D) -> Result<T, D::Error> {
        let n = d.deserialize_any(Whole)?;
        T::try_from(n).map_err(|_| {
            de::Error::invalid_value(de::Unexpected::Other("an integer out of range"), &Whole)
        })
    }

    pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        whole(d)
    }

    pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        whole(d)
    }

    struct Maybe<T>(std::marker::PhantomData<T>);

    impl<'de, T: TryFrom<i128>> Visitor<'de> for Maybe<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an integer or null")
        }

        fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
            whole(d).map(Some)
        }
    }

    pub fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        d.deserialize_option(Maybe(std::marker::PhantomData))
    }

    pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        d.deserialize_option(Maybe(std::marker::PhantomData))
    }

    pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        d.deserialize_option(Maybe(std::marker::PhantomData))
    }
}

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
    #[schema(schema_with = crate::schema::stored_justification)]
    pub justification: Box<RawValue>,
    pub candidate_roles: Vec<String>,
    pub assignee: Option<String>,
    /// Milliseconds since 1970 when the holder's lease ends.
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub lease_until: Option<i64>,
    pub priority: Priority,
    pub state: TaskState,
    pub on_expiry: OnExpiry,
    pub escalate_to: Vec<String>,
    pub excluded_actors: Vec<String>,
    #[serde(deserialize_with = "whole::i64")]
    pub created_at: i64,
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
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
    #[schema(schema_with = crate::schema::name)]
    pub id: String,
    #[schema(schema_with = crate::schema::name)]
    pub run: String,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub case: Option<String>,
    #[schema(schema_with = crate::schema::name)]
    pub kind: String,
    /// Any JSON document; `{}` when omitted. Stored as sent.
    #[serde(default)]
    #[schema(schema_with = crate::schema::justification)]
    pub justification: Option<Box<RawValue>>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub candidate_roles: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub escalate_to: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub excluded_actors: Vec<String>,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub on_expiry: Option<OnExpiry>,
    /// Defaults to the service's clock; giving it is a clock override
    /// (`--allow-clock-override`).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub created_at: Option<i64>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
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
    /// Operator only: whose claim (default: the caller).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    /// Operator only: with which roles (default: the caller's).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_names)]
    pub roles: Option<Vec<String>>,
    /// Hold the task for this long, renewable; without it the claim holds
    /// until released.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_lease_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub lease_ms: Option<u32>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// Claim the head of the queue; without a body, as the caller, untimed,
/// without waiting.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimNextRequest {
    /// Operator only: whose claim (default: the caller).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    /// Operator only: with which roles (default: the caller's).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_names)]
    pub roles: Option<Vec<String>>,
    /// Hold the task for this long, renewable; without it the claim holds
    /// until released.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_lease_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub lease_ms: Option<u32>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
    /// With the queue empty, hold the request up to this many milliseconds
    /// (at most 30000) until a task arrives; with `now`, tried once without waiting.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_wait_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub wait_ms: Option<u32>,
}

/// Give a claimed task back.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// Operator only: whose claim (default: the caller).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
}

/// Move a claim from `from` to `actor` (default: the operator itself).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeOverRequest {
    #[schema(schema_with = crate::schema::name)]
    pub from: String,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_names)]
    pub roles: Option<Vec<String>>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_lease_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub lease_ms: Option<u32>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// Extend the holder's lease to `now + lease_ms`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewRequest {
    #[schema(schema_with = crate::schema::lease_ms)]
    #[serde(deserialize_with = "whole::u32")]
    pub lease_ms: u32,
    /// Operator only: whose lease (default: the caller's).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// Settle a pending task. A reviewer settles as the holder, always.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    pub settlement: Settlement,
    /// Settle only if this actor holds the task (a reviewer always settles
    /// as the holder).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
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
    /// Tasks per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    #[param(schema_with = crate::schema::cursor)]
    pub after: Option<String>,
    /// Operator only: whose queue (default: the caller's).
    #[param(schema_with = crate::schema::name)]
    pub actor: Option<String>,
    /// Operator only: the roles, one `roles=` each (default: the
    /// caller's).
    #[serde(default)]
    #[param(schema_with = crate::schema::names)]
    pub roles: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Tasks per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    #[param(schema_with = crate::schema::cursor)]
    pub after: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OverdueParams {
    /// How many tasks (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// A clock override: compare due times with this instant instead of the
    /// service's clock; refused unless the server allows them.
    #[param(schema_with = crate::schema::instant)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// Return lapsed claims to the queue.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReclaimRequest {
    /// How many tasks at most (default 100).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_limit)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// The tasks of a run the caller still awaits.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitedRequest {
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub awaited: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Withdrawn {
    #[serde(deserialize_with = "whole::u32")]
    pub withdrawn: u32,
}

/// What `seal` moved in this call.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SealOutcome {
    #[serde(deserialize_with = "whole::u32")]
    pub timers_disarmed: u32,
    #[serde(deserialize_with = "whole::u32")]
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
    #[schema(schema_with = crate::schema::name)]
    pub run: String,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub case: Option<String>,
    #[schema(schema_with = crate::schema::name)]
    pub effect: String,
    #[schema(schema_with = crate::schema::step)]
    #[serde(deserialize_with = "whole::u32")]
    pub step: u32,
    pub phase: Phase,
    #[schema(schema_with = crate::schema::instant)]
    #[serde(deserialize_with = "whole::i64")]
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
    /// How many timers at most (default 10).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_limit)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    #[schema(schema_with = crate::schema::lease_ms)]
    #[serde(deserialize_with = "whole::u32")]
    pub lease_ms: u32,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
    /// With nothing due, hold the request up to this many milliseconds
    /// (at most 30000) until a timer becomes due; with `now`, tried once without waiting.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_wait_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub wait_ms: Option<u32>,
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
    #[serde(deserialize_with = "whole::u32")]
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
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
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

/// The task a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TaskPath {
    /// The task id.
    #[param(schema_with = crate::schema::name)]
    pub id: String,
}

/// One entry of a task's history, as a path names it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct EntryPath {
    /// The task id.
    #[param(schema_with = crate::schema::name)]
    pub id: String,
    /// The entry's `seq`.
    #[param(schema_with = crate::schema::entry_seq)]
    pub seq: u64,
}

/// The case a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CasePath {
    /// The case.
    #[param(schema_with = crate::schema::name)]
    pub case: String,
}

/// The run a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    /// The run.
    #[param(schema_with = crate::schema::name)]
    pub run: String,
}

/// The timer a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TimerPath {
    /// The run.
    #[param(schema_with = crate::schema::name)]
    pub run: String,
    /// The timer's effect key.
    #[param(schema_with = crate::schema::name)]
    pub effect: String,
}

mirror_enum!(
    /// What a change did to a timer.
    TimerEvent => TimerEvent { Armed, Claimed, Retired });

/// One change of a task (WIT `history-entry`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryEntry {
    /// 1 for the change that opened the task, one more for each change after
    /// it; 0 for the `before-history` entry of a task written before history
    /// was kept.
    pub seq: u64,
    /// Milliseconds since 1970 when the service made the call (for
    /// `before-history`: when history began, or the task's creation if it
    /// has not).
    pub at: i64,
    /// The verb that made the change; `before-history` for entry 0, which
    /// says what the task held when its history began.
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
    /// Entries per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `seq` of the last entry already read.
    #[param(schema_with = crate::schema::seq)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u64")]
    pub after: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct History {
    pub entries: Vec<HistoryEntry>,
}

/// Where one history entry sits in the feed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FeedPlace {
    /// The writer slot the entry was recorded in.
    pub slot: u32,
    /// Its number in that slot: within a slot, a higher number committed
    /// later.
    pub seq: u64,
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
    /// Events per page (default 20); a stream reads as it needs.
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// A `position`, `next` or `head` of an earlier read. Without it, a page
    /// starts at the oldest event kept, and a stream at the newest.
    #[param(schema_with = crate::schema::position)]
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
    /// Remove entries recorded before this instant.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub before: Option<i64>,
    /// Keep at most this many of the newest entries.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_seq)]
    #[serde(deserialize_with = "whole::opt_u64")]
    pub keep: Option<u64>,
    /// Most feed entries removed by this call (default 1000).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_limit)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Trimmed {
    pub feed_removed: u32,
    pub history_removed: u32,
    pub more: bool,
}

/// The caller a credential names.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    pub tenant: String,
    pub actor: String,
    /// `reviewer`, `service` or `operator`.
    pub scope: String,
    pub roles: Vec<String>,
}
