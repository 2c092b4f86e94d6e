//! Who a caller is, in the types every other module shares: its scope,
//! the principal a credential names, and why a credential was refused. A
//! leaf: it owns the names and their spelling, and must never decide
//! whether a credential is good (that is `auth` and `jwt`).

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a credential may do (README, "Scopes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// A person: acts only as its own actor with its own roles.
    Reviewer,
    /// A workflow or integration: opens tasks, runs timers and sweeps.
    Service,
    /// Everything, on anyone's behalf, plus check and stats.
    Operator,
}

impl Scope {
    /// The scope a name (`reviewer`, `service`, `operator`) means.
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "reviewer" => Some(Scope::Reviewer),
            "service" => Some(Scope::Service),
            "operator" => Some(Scope::Operator),
            _ => None,
        }
    }

    /// The scope's name, as [`parse`](Self::parse) reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Reviewer => "reviewer",
            Scope::Service => "service",
            Scope::Operator => "operator",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The caller of one request, as its credential says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The one tenant every call of the request is scoped to.
    pub tenant: String,
    /// Who the caller acts as.
    pub actor: String,
    /// The caller's roles, for claims and queues.
    pub roles: Vec<String>,
    /// What the caller may do.
    pub scope: Scope,
}

/// Why a credential was not accepted. All of them answer 401; the reason is
/// logged, and told to the client only in general terms.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The request has no `Authorization` header.
    #[error("no bearer credential")]
    Missing,
    /// The header is not a bearer credential.
    #[error("the Authorization header is not `Bearer <token>`")]
    NotBearer,
    /// No token of the token file, and not a JWT.
    #[error("unknown token")]
    Unknown,
    /// A JWT that does not verify, for this reason.
    #[error("the token is not a valid JWT for this service: {0}")]
    Jwt(String),
}

/// A tenant's name held by value, so that the service's options stay `Copy`:
/// the tenant whose operators may back up every tenant.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TenantName {
    bytes: [u8; leasehold_host::MAX_TENANT_BYTES],
    len: u8,
}

impl TenantName {
    /// A name the engine would accept, or why not.
    pub fn new(name: &str) -> Result<TenantName, leasehold_host::storage::InvalidTenant> {
        leasehold_host::storage::check_tenant(name)?;
        let mut bytes = [0; leasehold_host::MAX_TENANT_BYTES];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Ok(TenantName {
            bytes,
            len: name.len() as u8,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Checked ASCII when made.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for TenantName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}
