//! Administration and the caller itself: the consistency check over the
//! caller's tenant (operators only), and who a credential is (`whoami`,
//! which calls no verb).

use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::Caller;
use crate::problem::Problem;
use crate::state::AppState;
use crate::wire::Answer;

/// The operation id of `whoami`, which names the caller and calls no verb.
pub const WHOAMI: &str = "whoami";

/// The administration routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(check))
        .routes(routes!(whoami))
}

/// The consistency check over the caller's tenant.
#[utoipa::path(get, path = "/v1/check", operation_id = Verb::Check.name(), tag = "admin",
    responses(
        (status = 200, description = "Every discrepancy found; empty means consistent", body = CheckReport),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn check(c: Caller) -> Answer<CheckReport> {
    let found = c.call(Verb::Check, |x| x.check()).await?;
    Ok(axum::Json(CheckReport {
        discrepancies: found
            .into_iter()
            .map(|d| Discrepancy {
                structure: d.structure,
                subject: d.subject,
                detail: d.detail,
            })
            .collect(),
    }))
}

/// Who this credential is: its tenant, actor, scope and roles. Calls no
/// verb; a page asks it once it has a credential.
#[utoipa::path(get, path = "/v1/whoami", operation_id = WHOAMI, tag = "service",
    responses(
        (status = 200, description = "The caller", body = WhoAmI),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn whoami(c: Caller) -> Answer<WhoAmI> {
    let p = &c.principal;
    Ok(axum::Json(WhoAmI {
        tenant: p.tenant.clone(),
        actor: p.actor.clone(),
        scope: p.scope.to_string(),
        roles: p.roles.clone(),
    }))
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

/// The caller a credential names.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    pub tenant: String,
    pub actor: String,
    /// `reviewer`, `service` or `operator`.
    pub scope: String,
    pub roles: Vec<String>,
}
