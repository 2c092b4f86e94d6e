//! Durable timers: arm one, claim those due (which may wait for one to
//! become due, as a long-poll: `crate::long_poll`), retire one, or every
//! timer of a run. Services and operators only.

use leasehold_host::{self as host, Verb};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Caller, Json, Path};
use crate::long_poll::LongPoll;
use crate::problem::Problem;
use crate::state::AppState;
use crate::wire::{Answer, RunPath, mirror_enum, whole};

/// Timers one `claim-due` claims at most when it names no `limit`.
const DEFAULT_TIMERS: u32 = 10;

/// The timers' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(arm))
        .routes(routes!(claim_due))
        .routes(routes!(disarm))
        .routes(routes!(disarm_run))
}

/// Arm a durable timer. First arming wins.
#[utoipa::path(post, path = "/v1/timers", operation_id = Verb::Arm.name(), tag = "timers",
    request_body = Timer,
    responses(
        (status = 200, description = "What arming did", body = Armed),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn arm(c: Caller, Json(body): Json<Timer>) -> Answer<Armed> {
    let timer = host::Timer::from(body);
    let outcome = c.call(Verb::Arm, move |x| x.arm(&timer)).await?;
    Ok(axum::Json(Armed {
        outcome: outcome.into(),
    }))
}

/// Claim due timers, each leased for `lease_ms`.
#[utoipa::path(post, path = "/v1/timers/claim-due", operation_id = Verb::ClaimDue.name(), tag = "timers",
    request_body = ClaimDueRequest,
    responses(
        (status = 200, description = "The timers claimed", body = TimerList),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn claim_due(c: Caller, Json(body): Json<ClaimDueRequest>) -> Answer<TimerList> {
    let limit = body.limit.unwrap_or(DEFAULT_TIMERS);
    let lease_ms = body.lease_ms;
    let mut wait = LongPoll::new(&c, Verb::ClaimDue, body.wait_ms, body.now)?;
    loop {
        if !wait.may_try()? {
            return Ok(axum::Json(TimerList { timers: Vec::new() }));
        }
        let now = c.now(body.now)?;
        let timers = c
            .call_at(wait.attempt(), Verb::ClaimDue, move |x| {
                x.claim_due(now, limit, lease_ms)
            })
            .await?;
        if !timers.is_empty() || wait.over() {
            return Ok(axum::Json(TimerList {
                timers: timers.into_iter().map(Into::into).collect(),
            }));
        }
        if wait.ready(&c).await? {
            continue;
        }
        // Something may become due by time alone: a timer's fire time, or
        // the end of another worker's lease; else only by a change of a
        // timer.
        let next = c
            .call_at(wait.attempt(), Verb::NextDue, |x| x.next_due())
            .await?;
        wait.wait(&c, next, |change| matches!(change, host::Change::Timer(_)))
            .await;
    }
}

/// Retire one timer.
#[utoipa::path(delete, path = "/v1/runs/{run}/timers/{effect}", operation_id = Verb::Disarm.name(), tag = "timers",
    params(TimerPath),
    responses(
        (status = 200, description = "Whether the timer existed", body = Disarmed),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn disarm(c: Caller, Path(TimerPath { run, effect }): Path<TimerPath>) -> Answer<Disarmed> {
    let disarmed = c
        .call(Verb::Disarm, move |x| x.disarm(&run, &effect))
        .await?;
    Ok(axum::Json(Disarmed { disarmed }))
}

/// Retire every timer of a run; a schedule whose occurrence this retires
/// ends (`next_at` null, nothing waiting).
#[utoipa::path(delete, path = "/v1/runs/{run}/timers", operation_id = Verb::DisarmRun.name(), tag = "timers",
    params(RunPath),
    responses(
        (status = 200, description = "How many timers were retired", body = DisarmedRun),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn disarm_run(c: Caller, Path(RunPath { run }): Path<RunPath>) -> Answer<DisarmedRun> {
    let disarmed = c.call(Verb::DisarmRun, move |x| x.disarm_run(&run)).await?;
    Ok(axum::Json(DisarmedRun { disarmed }))
}

mirror_enum!(
    /// Which half of a saga step a timer belongs to.
    Phase => Phase { Forward, Compensating });
mirror_enum!(
    /// What `arm` did.
    ArmOutcome => ArmOutcome { Armed, AlreadyArmed, RunSealed });

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
