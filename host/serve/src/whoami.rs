//! `GET /v1/whoami`: the tenant, actor, roles and scope the caller's
//! credential names, so a page or client learns who it acts as without
//! parsing its token (a proxy's JWT, say). A stand-in for the lead's route
//! of the same shape, kept to its contract; it must never answer anything
//! but the caller's own principal.

use serde::Serialize;
use utoipa::ToSchema;

use crate::extract::Caller;
use crate::problem::{ApiError, Problem};

/// Who the credential acts as.
#[derive(Debug, Serialize, ToSchema)]
pub struct Whoami {
    pub tenant: String,
    pub actor: String,
    pub scope: String,
    pub roles: Vec<String>,
}

/// The caller's own tenant, actor, scope and roles.
#[utoipa::path(get, path = "/v1/whoami", operation_id = "whoami", tag = "admin",
    responses(
        (status = 200, description = "Who the credential acts as", body = Whoami),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
pub async fn whoami(c: Caller) -> Result<axum::Json<Whoami>, ApiError> {
    let p = c.principal;
    Ok(axum::Json(Whoami {
        tenant: p.tenant,
        actor: p.actor,
        scope: p.scope.to_string(),
        roles: p.roles,
    }))
}
