//! Webhook subscriptions (WIT `subscriptions`): a tenant's operators add,
//! list, read, change, pause, resume, rotate the signing key of, replay and
//! remove the endpoints its changes are pushed to. Operators only: an
//! endpoint and its secret are the tenant's configuration, and a
//! subscription belongs to the tenant, not to the credential that made it.
//! The server makes each id (`sub_` and random hex) and each secret, and
//! shows a secret once, in the answer that made it. An endpoint is held
//! to the sender's own policy (`crate::push`) before anything is written,
//! and every other rule is the component's; a refusal is an `invalid`
//! problem whose `field` is the request's path to the value to fix. What
//! an answer shows of a subscription is its stored row without key bytes
//! (each key's expiry alone) and how its deliveries stand. The verbs that
//! keep the deliveries' own books (advance, lease, release, record
//! attempts) are the delivery engine's and are not served. It must never
//! answer key bytes but in the one answer that made them, nor write
//! anything on a refusal.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use leasehold_guest::subscriptions as rows;
use leasehold_host::{FeedRead, Verb};
use leasehold_webhooks::{
    Running, Secret, SubscriptionStatus, change_at, entries_between, outcome_from_text,
    outcome_text,
};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Caller, Json, Path, Query, UpdateJson};
use crate::problem::{ApiError, Problem};
use crate::push::Push;
use crate::revision::{IfMatch, Tagged};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, PageParams};

/// How long an old key signs beside a new one after a rotation when the
/// request names no overlap: a day.
pub const DEFAULT_OVERLAP_MS: i64 = 24 * 3600 * 1000;

/// The operation that resumes a subscription: it calls
/// `set-subscription-state`, whose own route is the pause.
pub const RESUME: &str = "resume-subscription";

/// The subscriptions' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(add_subscription, list_subscriptions))
        .routes(routes!(
            get_subscription,
            change_subscription,
            remove_subscription
        ))
        .routes(routes!(pause_subscription))
        .routes(routes!(resume_subscription))
        .routes(routes!(rotate_subscription_key))
        .routes(routes!(replay_subscription))
}

/// Add a subscription: the server makes its id and its signing secret,
/// and answers the secret (`whsec_…`) this once. Deliveries start from
/// `from` (a position of the feed, as a read of `/v1/events` gave it), or
/// from the feed's head now: the changes made from then on. An endpoint
/// this server may not send to (plain `http` unless it allows it, an
/// address that is loopback, private, link-local, unique-local or a cloud
/// metadata service's unless a range allows it) is refused naming `url`.
#[utoipa::path(post, path = "/v1/subscriptions", operation_id = Verb::AddSubscription.name(), tag = "subscriptions",
    request_body = NewSubscription,
    responses(
        (status = 201, description = "The subscription as added, and its secret, shown this once", body = SubscriptionSecret),
        (status = 400, description = "An endpoint this server may not send to (`field` naming `url`), a filter the rules refuse (`filter`, `filter.verbs`, ...), a position the feed does not hold (`from`), or the tenant's hundred subscriptions already made (`subscriptions`)", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn add_subscription(
    c: Caller,
    Json(body): Json<NewSubscription>,
) -> Result<(StatusCode, axum::Json<SubscriptionSecret>), ApiError> {
    let push = push(&c)?;
    endpoint(push, &body.url)?;
    let filter = body.filter.unwrap_or_default().into_row();
    let secret = Secret::generate().map_err(|e| ApiError::Internal(Box::new(e)))?;
    let key = secret.as_bytes().to_vec();
    let id = new_id()?;
    let now = c.now(None)?;
    let (url, from) = (body.url, body.from);
    let added = c
        .call(Verb::AddSubscription, move |x| {
            x.add_subscription(&id, &url, &filter, &key, from.as_deref(), now)
        })
        .await?;
    push.changed(c.tenant.name(), &added.id).await;
    let shown = shown(&c, vec![reread(&c, added).await?]).await?.remove(0);
    Ok((
        StatusCode::CREATED,
        axum::Json(SubscriptionSecret {
            subscription: shown,
            secret: secret.to_whsec(),
        }),
    ))
}

/// The tenant's subscriptions by id, a page at a time, each with how its
/// deliveries stand.
#[utoipa::path(get, path = "/v1/subscriptions", operation_id = Verb::ListSubscriptions.name(), tag = "subscriptions",
    params(PageParams),
    responses(
        (status = 200, description = "One page of subscriptions", body = SubscriptionPage),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this list", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn list_subscriptions(c: Caller, Query(q): Query<PageParams>) -> Answer<SubscriptionPage> {
    let list = Verb::ListSubscriptions.name();
    let after = c.open_cursor(list, q.after)?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let page = c
        .call(Verb::ListSubscriptions, move |x| {
            x.list_subscriptions(limit, after.as_deref())
        })
        .await?;
    Ok(axum::Json(SubscriptionPage {
        subscriptions: shown(&c, page.subscriptions).await?,
        next: c.seal_cursor(list, page.next)?,
    }))
}

/// One subscription, with how its deliveries stand: its position and lag,
/// and, where this server delivers it, what is in flight, the next retry
/// and the last attempts.
#[utoipa::path(get, path = "/v1/subscriptions/{id}", operation_id = Verb::GetSubscription.name(), tag = "subscriptions",
    params(SubscriptionPath),
    responses(
        (status = 200, description = "The subscription", body = Subscription),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn get_subscription(
    c: Caller,
    Path(SubscriptionPath { id }): Path<SubscriptionPath>,
) -> Result<Tagged<Subscription>, ApiError> {
    let i = id.clone();
    match c
        .call(Verb::GetSubscription, move |x| x.get_subscription(&i))
        .await?
    {
        Some(s) => one(&c, s).await,
        None => Err(missing(&id)),
    }
}

/// Change the endpoint, the filter or both; the revision goes up and
/// deliveries go on from the position under the new ones. With
/// `If-Match`, only over that revision.
#[utoipa::path(patch, path = "/v1/subscriptions/{id}", operation_id = Verb::ChangeSubscription.name(), tag = "subscriptions",
    params(SubscriptionPath),
    request_body = SubscriptionPatch,
    responses(
        (status = 200, description = "The subscription as changed", body = Subscription),
        (status = 400, description = "An endpoint this server may not send to (`url`), or a filter the rules refuse", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn change_subscription(
    c: Caller,
    Path(SubscriptionPath { id }): Path<SubscriptionPath>,
    if_match: IfMatch,
    UpdateJson(body): UpdateJson<SubscriptionPatch>,
) -> Result<Tagged<Subscription>, ApiError> {
    let push = push(&c)?;
    if body.url.is_none() && body.filter.is_none() {
        return Err(ApiError::Invalid {
            field: None,
            detail: "a change names `url`, `filter` or both".to_owned(),
        });
    }
    if let Some(url) = &body.url {
        endpoint(push, url)?;
    }
    let filter = body.filter.map(SubscriptionFilter::into_row);
    let (i, url) = (id.clone(), body.url);
    let changed = c
        .call(Verb::ChangeSubscription, move |x| {
            x.change_subscription(&i, url.as_deref(), filter.as_ref(), if_match.0)
        })
        .await
        .map_err(|e| named(e, &id))?;
    push.changed(c.tenant.name(), &id).await;
    one(&c, reread(&c, changed).await?).await
}

/// Remove a subscription: its deliveries here stop before this answers,
/// and any other server's at its next checkpoint.
#[utoipa::path(delete, path = "/v1/subscriptions/{id}", operation_id = Verb::RemoveSubscription.name(), tag = "subscriptions",
    params(SubscriptionPath),
    responses(
        (status = 200, description = "Whether the subscription existed", body = SubscriptionRemoved),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn remove_subscription(
    c: Caller,
    Path(SubscriptionPath { id }): Path<SubscriptionPath>,
) -> Answer<SubscriptionRemoved> {
    let push = push(&c)?;
    let i = id.clone();
    let removed = c
        .call(Verb::RemoveSubscription, move |x| x.remove_subscription(&i))
        .await?;
    if removed {
        push.changed(c.tenant.name(), &id).await;
    }
    Ok(axum::Json(SubscriptionRemoved { removed }))
}

/// Pause a subscription, with a note (without one, the note names who
/// paused it): nothing more is sent until it is resumed, and its position
/// stays where deliveries stopped. Deliveries here stop before this
/// answers. With `If-Match`, only over that revision.
#[utoipa::path(post, path = "/v1/subscriptions/{id}/pause", operation_id = Verb::SetSubscriptionState.name(), tag = "subscriptions",
    params(SubscriptionPath),
    request_body = Option<PauseSubscription>,
    responses(
        (status = 200, description = "The subscription, paused", body = Subscription),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn pause_subscription(
    c: Caller,
    Path(SubscriptionPath { id }): Path<SubscriptionPath>,
    if_match: IfMatch,
    Json(body): Json<PauseSubscription>,
) -> Result<Tagged<Subscription>, ApiError> {
    let push = push(&c)?;
    let note = body
        .note
        .unwrap_or_else(|| format!("paused by {}", c.principal.actor));
    let i = id.clone();
    let paused = c
        .call(Verb::SetSubscriptionState, move |x| {
            x.set_subscription_state(&i, rows::SubState::Paused, Some(&note), if_match.0)
        })
        .await
        .map_err(|e| named(e, &id))?;
    push.changed(c.tenant.name(), &id).await;
    one(&c, reread(&c, paused).await?).await
}

/// Resume a paused or failing subscription: active again, its note
/// cleared, deliveries going on from its position, so what was owed when
/// it stopped is sent first. A `gone` one, whose entries were trimmed,
/// is refused: replay it from a position the feed holds. With `If-Match`,
/// only over that revision.
#[utoipa::path(post, path = "/v1/subscriptions/{id}/resume", operation_id = RESUME, tag = "subscriptions",
    params(SubscriptionPath),
    responses(
        (status = 200, description = "The subscription, active", body = Subscription),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "The subscription is `gone`: the feed no longer holds what follows its position; replay it instead", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn resume_subscription(
    c: Caller,
    Path(SubscriptionPath { id }): Path<SubscriptionPath>,
    if_match: IfMatch,
) -> Result<Tagged<Subscription>, ApiError> {
    let push = push(&c)?;
    let i = id.clone();
    let resumed = c
        .call(Verb::SetSubscriptionState, move |x| {
            x.set_subscription_state(&i, rows::SubState::Active, None, if_match.0)
        })
        .await
        .map_err(|e| match named(e, &id) {
            ApiError::Invalid { field: Some(f), .. } if f == "state" => ApiError::Invalid {
                field: None,
                detail: format!(
                    "subscription {id} is gone: the feed no longer holds the changes after \
                     its position; replay it from a position the feed holds"
                ),
            },
            e => e,
        })?;
    push.changed(c.tenant.name(), &id).await;
    one(&c, reread(&c, resumed).await?).await
}

/// Make a new signing secret, answered this once; the old one keeps
/// signing beside it for `overlap_ms` (a day unless given; at most seven),
/// so receivers can take the new one before the old one stops.
#[utoipa::path(post, path = "/v1/subscriptions/{id}/rotate", operation_id = Verb::RotateSubscriptionKey.name(), tag = "subscriptions",
    params(SubscriptionPath),
    request_body = Option<RotateKey>,
    responses(
        (status = 200, description = "The subscription with its new key, and the new secret, shown this once", body = SubscriptionSecret),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn rotate_subscription_key(
    c: Caller,
    Path(SubscriptionPath { id }): Path<SubscriptionPath>,
    Json(body): Json<RotateKey>,
) -> Answer<SubscriptionSecret> {
    let push = push(&c)?;
    let overlap = body.overlap_ms.unwrap_or(DEFAULT_OVERLAP_MS);
    if !(0..=rows::row::MAX_OVERLAP_MS).contains(&overlap) {
        return Err(ApiError::invalid(
            "overlap_ms",
            "overlap_ms: 0 to 604800000 (seven days): an old key signs for at most a week",
        ));
    }
    let secret = Secret::generate().map_err(|e| ApiError::Internal(Box::new(e)))?;
    let key = secret.as_bytes().to_vec();
    let now = c.now(None)?;
    let i = id.clone();
    let rotated = c
        .call(Verb::RotateSubscriptionKey, move |x| {
            x.rotate_subscription_key(&i, &key, now.saturating_add(overlap), now)
        })
        .await
        .map_err(|e| named(e, &id))?;
    push.changed(c.tenant.name(), &id).await;
    let shown = shown(&c, vec![reread(&c, rotated).await?]).await?.remove(0);
    Ok(axum::Json(SubscriptionSecret {
        subscription: shown,
        secret: secret.to_whsec(),
    }))
}

/// Replay: send again every change after `from` (a position of the feed;
/// without one, the feed's start) that the filter matches, each with the
/// `webhook-id` it had, so a receiver that kept them drops them. The
/// subscription is made active. A position whose changes were trimmed is
/// refused, naming `from`, and nothing changes.
#[utoipa::path(post, path = "/v1/subscriptions/{id}/replay", operation_id = Verb::RewindSubscription.name(), tag = "subscriptions",
    params(SubscriptionPath),
    request_body = Option<Replay>,
    responses(
        (status = 200, description = "The subscription, active at the position replayed from", body = Subscription),
        (status = 400, description = "A position the feed no longer holds (trimmed) or never held (`field` naming `from`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn replay_subscription(
    c: Caller,
    Path(SubscriptionPath { id }): Path<SubscriptionPath>,
    Json(body): Json<Replay>,
) -> Result<Tagged<Subscription>, ApiError> {
    let push = push(&c)?;
    let i = id.clone();
    let replayed = c
        .call(Verb::RewindSubscription, move |x| {
            x.rewind_subscription(&i, body.from.as_deref())
        })
        .await
        .map_err(|e| match named(e, &id) {
            ApiError::Invalid {
                field: Some(f),
                detail,
            } if f == "position" => ApiError::Invalid {
                field: Some("from".to_owned()),
                detail: detail.replacen("position", "from", 1),
            },
            e => e,
        })?;
    push.changed(c.tenant.name(), &id).await;
    one(&c, reread(&c, replayed).await?).await
}

/// The server's push, which every server sets as it starts.
fn push(c: &Caller) -> Result<&Push, ApiError> {
    c.state().push.as_deref().ok_or_else(|| {
        ApiError::Internal("this server was started without its webhook sender".into())
    })
}

/// An endpoint as the document promises it (ASCII, no spaces, `http://`
/// or `https://`) and as the sender takes it.
fn endpoint(push: &Push, url: &str) -> Result<(), ApiError> {
    let shaped = (url.starts_with("https://") || url.starts_with("http://"))
        && url.bytes().all(|b| b.is_ascii_graphic());
    if !shaped {
        return Err(ApiError::invalid(
            "url",
            "url: an absolute http or https URL in printable ASCII, without spaces \
             (percent-encode anything else)",
        ));
    }
    push.check_url("url", url)
}

/// A new subscription id: `sub_` and 32 hex digits from the system's
/// random source. Every `webhook-id` is made from it, so no caller
/// chooses it.
fn new_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::Internal(Box::new(e)))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sub_{hex}"))
}

/// No such subscription, in the words every subscription route uses.
fn missing(id: &str) -> ApiError {
    ApiError::NotFound(format!("no subscription {id}"))
}

/// A refusal about the subscription `id` names: its absence said as a
/// subscription's (the engine's words are a task's).
fn named(e: ApiError, id: &str) -> ApiError {
    match e {
        ApiError::NotFound(_) => missing(id),
        e => e,
    }
}

/// The subscription as it is now, once the deliveries here have taken a
/// change in (they may have taken its lease): `sub` if it is gone
/// meanwhile.
async fn reread(c: &Caller, sub: rows::Subscription) -> Result<rows::Subscription, ApiError> {
    let id = sub.id.clone();
    Ok(
        c.call(Verb::GetSubscription, move |x| x.get_subscription(&id))
            .await?
            .unwrap_or(sub),
    )
}

/// One subscription as answered, tagged with its revision.
async fn one(c: &Caller, sub: rows::Subscription) -> Result<Tagged<Subscription>, ApiError> {
    let revision = sub.revision;
    let shown = shown(c, vec![sub]).await?.remove(0);
    Ok(Tagged(revision, shown))
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How far each subscription's position lies behind the feed's head: the
/// entries after it, and the age of the first of them (ms since 1970).
type FeedLag = HashMap<String, (u64, Option<i64>)>;

/// Subscriptions as answered: each row with how its deliveries stand (what
/// this server's worker shows, where it delivers one; else the stored
/// position against the feed).
async fn shown(c: &Caller, subs: Vec<rows::Subscription>) -> Result<Vec<Subscription>, ApiError> {
    // What this server's workers show; without it (the store failed to
    // list), each is shown as one this server does not deliver.
    let live: HashMap<String, SubscriptionStatus> = match push(c)?.deliveries() {
        Some(d) => match d.status(c.tenant.name()).await {
            Ok(all) => all.into_iter().map(|s| (s.id.clone(), s)).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "the deliveries' status could not be read");
                HashMap::new()
            }
        },
        None => HashMap::new(),
    };
    let positions: Vec<(String, String)> = subs
        .iter()
        .map(|s| {
            let at = s
                .position
                .clone()
                .unwrap_or_else(|| leasehold_webhooks::START.to_owned());
            (s.id.clone(), at)
        })
        .collect();
    let lag: FeedLag = c
        .call(Verb::Feed, move |x| {
            let mut out = FeedLag::new();
            for (id, at) in positions {
                let (head, first) = match x.feed(Some(&at), 1)? {
                    FeedRead::Page(p) => (p.head, p.entries.first().map(|e| change_at(&e.change))),
                    FeedRead::Gone(head) => (head, None),
                };
                out.insert(id, (entries_between(&at, &head).unwrap_or(0), first));
            }
            Ok(out)
        })
        .await?;
    let now = c.state().now_ms();
    Ok(subs
        .into_iter()
        .map(|s| {
            let status = live.get(&s.id);
            let (entries, first) = lag.get(&s.id).copied().unwrap_or((0, None));
            let delivery = Delivery::of(
                status.and_then(|st| st.running.as_ref()),
                status.is_some_and(|st| st.over_bound),
                entries,
                first.map_or(0.0, |at| now.saturating_sub(at).max(0) as f64 / 1000.0),
            );
            Subscription::of(s, delivery)
        })
        .collect())
}

/// A field that may be left out, but not sent as `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

fn yes() -> bool {
    true
}

/// What a subscription is sent. Empty lists place no condition.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionFilter {
    /// Changes of tasks (default true).
    #[serde(default = "yes")]
    pub tasks: bool,
    /// Changes of timers (default true). At least one of `tasks` and
    /// `timers`.
    #[serde(default = "yes")]
    pub timers: bool,
    /// Only changes made by these verbs, as a change's `verb` names them
    /// (`claim`, `settle`, `arm`, `claim-due`, ...).
    #[serde(default)]
    #[schema(schema_with = crate::schema::filter_names)]
    pub verbs: Vec<String>,
    /// Only tasks of these kinds (timers have none: not restricted).
    #[serde(default)]
    #[schema(schema_with = crate::schema::filter_names)]
    pub kinds: Vec<String>,
    /// Only tasks and timers of these runs.
    #[serde(default)]
    #[schema(schema_with = crate::schema::filter_names)]
    pub runs: Vec<String>,
    /// Of tasks, only the change that settled each (to `completed`,
    /// `expired` or `withdrawn`): what a workflow waiting on a person
    /// needs. Does not restrict timers.
    #[serde(default)]
    pub settling_only: bool,
}

impl Default for SubscriptionFilter {
    /// Every change of every task and timer.
    fn default() -> Self {
        SubscriptionFilter {
            tasks: true,
            timers: true,
            verbs: Vec::new(),
            kinds: Vec::new(),
            runs: Vec::new(),
            settling_only: false,
        }
    }
}

impl SubscriptionFilter {
    fn into_row(self) -> rows::SubFilter {
        rows::SubFilter {
            tasks: self.tasks,
            timers: self.timers,
            verbs: self.verbs,
            kinds: self.kinds,
            runs: self.runs,
            settling_only: self.settling_only,
        }
    }
}

impl From<rows::SubFilter> for SubscriptionFilter {
    fn from(f: rows::SubFilter) -> Self {
        SubscriptionFilter {
            tasks: f.tasks,
            timers: f.timers,
            verbs: f.verbs,
            kinds: f.kinds,
            runs: f.runs,
            settling_only: f.settling_only,
        }
    }
}

/// A subscription's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionState {
    /// Delivering.
    Active,
    /// Stopped by an operator, or by the receiver's `410 Gone`.
    Paused,
    /// A change went unacknowledged through the whole retry schedule (72
    /// hours): the position stays before it, and nothing after it is sent
    /// until an operator resumes or replays.
    Failing,
    /// The feed was trimmed past the position before its changes were
    /// delivered; the note says where. Replay from a position it holds.
    Gone,
}

impl From<rows::SubState> for SubscriptionState {
    fn from(s: rows::SubState) -> Self {
        match s {
            rows::SubState::Active => SubscriptionState::Active,
            rows::SubState::Paused => SubscriptionState::Paused,
            rows::SubState::Failing => SubscriptionState::Failing,
            rows::SubState::Gone => SubscriptionState::Gone,
        }
    }
}

/// A signing key, without its bytes.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SigningKeyShown {
    /// Until when it signs (ms since 1970); null while it is the current
    /// key.
    pub until: Option<i64>,
}

/// One delivery attempt.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Attempt {
    /// The `webhook-id` sent: one change to one subscription always has
    /// the same.
    pub message_id: String,
    /// When it began (ms since 1970).
    pub at: i64,
    /// 1 for a change's first attempt, then one more each time.
    pub attempt: u32,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// What happened: the status, `timeout`, `refused: …` (an address this
    /// server may not reach) or `failed: …`.
    pub outcome: String,
    /// How long it took, in milliseconds.
    pub latency_ms: u64,
}

impl From<rows::Attempt> for Attempt {
    fn from(a: rows::Attempt) -> Self {
        let status = match outcome_from_text(&a.outcome) {
            leasehold_webhooks::Outcome::Status(s) => Some(s),
            _ => None,
        };
        Attempt {
            message_id: a.message_id,
            at: a.at,
            attempt: a.attempt,
            status,
            outcome: a.outcome,
            latency_ms: a.latency_ms,
        }
    }
}

impl From<&leasehold_webhooks::AttemptRecord> for Attempt {
    fn from(a: &leasehold_webhooks::AttemptRecord) -> Self {
        let status = match a.outcome {
            leasehold_webhooks::Outcome::Status(s) => Some(s),
            _ => None,
        };
        Attempt {
            message_id: a.message_id.clone(),
            at: a.at,
            attempt: a.attempt,
            status,
            outcome: outcome_text(&a.outcome),
            latency_ms: a.latency_ms,
        }
    }
}

/// Who delivers a subscription, and until when, unless renewed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryLease {
    /// The server holding it (each server names itself at random as it
    /// starts).
    pub holder: String,
    /// Ms since 1970.
    pub until: i64,
}

/// How a subscription's deliveries stand.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Delivery {
    /// Whether the server answering delivers it (it holds its lease). The
    /// fields below that only a deliverer knows are empty otherwise.
    pub here: bool,
    /// Feed entries after what was delivered (or matched nothing): the
    /// deliverer's count as of its last read of the feed here, else
    /// counted from the stored position.
    pub lag_entries: u64,
    /// The age, in seconds, of the oldest change still owed (here), or of
    /// the first entry after the stored position (otherwise); 0 when none.
    pub lag_seconds: f64,
    /// The position delivered up to, as the deliverer here knows it (the
    /// stored `position` follows it within a quarter of a second).
    pub delivered_to: Option<String>,
    /// Changes being sent now (at most one per task or timer).
    pub in_flight: u64,
    /// Changes read and owed, waiting their turn.
    pub queued: u64,
    /// When the soonest retry is planned (ms since 1970).
    pub next_retry: Option<i64>,
    /// The deliverer's last attempts here, oldest first, acknowledged or
    /// not.
    pub last_attempts: Vec<Attempt>,
    /// Whether it waits undelivered because the tenant's bound of
    /// subscriptions delivered at once is reached.
    pub over_bound: bool,
}

impl Delivery {
    fn of(running: Option<&Running>, over_bound: bool, lag_entries: u64, lag_seconds: f64) -> Self {
        match running {
            Some(r) => Delivery {
                here: true,
                lag_entries: r.lag_entries,
                lag_seconds: r.lag_seconds,
                delivered_to: Some(r.delivered_to.clone()),
                in_flight: r.in_flight as u64,
                queued: r.queued as u64,
                next_retry: r.next_retry.map(ms),
                last_attempts: r.last_attempts.iter().map(Into::into).collect(),
                over_bound,
            },
            None => Delivery {
                here: false,
                lag_entries,
                lag_seconds,
                delivered_to: None,
                in_flight: 0,
                queued: 0,
                next_retry: None,
                last_attempts: Vec::new(),
                over_bound,
            },
        }
    }
}

/// A webhook subscription: where the tenant's changes are pushed, which
/// of them, and how far deliveries have come. Its revision is its `ETag`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Subscription {
    /// Made by the server: `sub_` and 32 hex digits.
    pub id: String,
    /// The endpoint.
    pub url: String,
    pub filter: SubscriptionFilter,
    pub state: SubscriptionState,
    /// Why it is in its state, when it is not active.
    pub note: Option<String>,
    /// Every change up to this position was delivered or matched nothing;
    /// null for the feed's start.
    pub position: Option<String>,
    /// Its signing keys, oldest first, without their bytes: the last is
    /// the current one; the others sign beside it until their `until`.
    pub keys: Vec<SigningKeyShown>,
    /// When it was added (ms since 1970).
    pub created_at: i64,
    /// One more at each change but a delivery's.
    pub revision: u64,
    /// The last failed attempts recorded with it (by any server), oldest
    /// first.
    pub attempts: Vec<Attempt>,
    /// Who delivers it, when a server holds its lease.
    pub lease: Option<DeliveryLease>,
    pub delivery: Delivery,
}

impl Subscription {
    fn of(s: rows::Subscription, delivery: Delivery) -> Self {
        Subscription {
            id: s.id,
            url: s.url,
            filter: s.filter.into(),
            state: s.state.into(),
            note: s.note,
            position: s.position,
            keys: s
                .keys
                .into_iter()
                .map(|k| SigningKeyShown { until: k.until })
                .collect(),
            created_at: s.created_at,
            revision: s.revision,
            attempts: s.attempts.into_iter().map(Into::into).collect(),
            lease: s
                .lease_holder
                .zip(s.lease_until)
                .map(|(holder, until)| DeliveryLease { holder, until }),
            delivery,
        }
    }
}

/// A subscription, and a secret it signs with, shown this once.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionSecret {
    pub subscription: Subscription,
    /// The new signing secret, `whsec_` and standard base64 of 32 random
    /// bytes, as Standard Webhooks' libraries take it. It is never shown
    /// again.
    pub secret: String,
}

/// One page of subscriptions.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionPage {
    pub subscriptions: Vec<Subscription>,
    /// Pass as `after` for the next page; `null` at the end.
    pub next: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionRemoved {
    /// Whether the subscription existed.
    pub removed: bool,
}

/// A subscription to add.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSubscription {
    #[schema(schema_with = crate::schema::endpoint_url)]
    pub url: String,
    /// What it is sent (default: every change of every task and timer).
    #[serde(default)]
    pub filter: Option<SubscriptionFilter>,
    /// Deliver the changes after this position of the feed (default: its
    /// head now, so the changes from now on).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_feed_position)]
    pub from: Option<String>,
}

/// A change of a subscription: its endpoint, its filter or both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionPatch {
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schema::endpoint_url, required = false)]
    pub url: Option<String>,
    /// The whole filter, replacing the one it had.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    pub filter: Option<SubscriptionFilter>,
}

/// Pause a subscription.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseSubscription {
    /// Why (default: who paused it).
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schema::pause_note, required = false)]
    pub note: Option<String>,
}

/// Rotate a subscription's signing key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateKey {
    /// How long the old key keeps signing beside the new one, in
    /// milliseconds (default a day; at most seven days).
    #[serde(default, deserialize_with = "present_whole")]
    #[schema(schema_with = crate::schema::overlap_ms, required = false)]
    pub overlap_ms: Option<i64>,
}

/// Integers as JSON Schema counts them, and never `null`.
fn present_whole<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    crate::wire::whole::opt_i64(d)?
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom("a number of milliseconds, not null"))
}

/// Replay a subscription.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Replay {
    /// Send again what follows this position of the feed (default: the
    /// feed's start).
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schema::feed_position, required = false)]
    pub from: Option<String>,
}

/// The subscription a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SubscriptionPath {
    /// The subscription's id.
    #[param(schema_with = crate::schema::name)]
    pub id: String,
}
