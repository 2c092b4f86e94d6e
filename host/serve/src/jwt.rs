//! JWTs signed by the deployment's identity provider: the public keys (a PEM
//! file or a JWKS file), the checks (signature, expiry, not-before, issuer,
//! audience) and the claims that name the tenant, actor, roles and scope.
//! It must never accept an unsigned token, a symmetric algorithm, or a token
//! whose claims do not name exactly one scope.

use std::path::Path;

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use crate::principal::{AuthError, Principal, Scope};

/// The algorithms accepted: asymmetric only, so the service never holds a
/// key that could mint tokens.
const ACCEPTED: &[Algorithm] = &[Algorithm::RS256, Algorithm::ES256];

/// Which claims carry what.
#[derive(Clone, Debug)]
pub struct ClaimNames {
    /// The claim naming the tenant (default `tenant`).
    pub tenant: String,
    /// The claim naming the actor (default `sub`).
    pub actor: String,
    /// The claim listing the roles (default `roles`).
    pub roles: String,
    /// The claim naming the scope (default `scope`).
    pub scope: String,
}

impl Default for ClaimNames {
    fn default() -> Self {
        ClaimNames {
            tenant: "tenant".to_owned(),
            actor: "sub".to_owned(),
            roles: "roles".to_owned(),
            scope: "scope".to_owned(),
        }
    }
}

/// What the service requires of every JWT.
#[derive(Clone, Debug)]
pub struct JwtConfig {
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` every token must carry.
    pub audience: String,
    /// Which claims carry the principal.
    pub claims: ClaimNames,
}

#[derive(Clone)]
struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// Verifies JWTs against the configured public keys.
#[derive(Clone)]
pub struct JwtVerifier {
    keys: Vec<Key>,
    config: JwtConfig,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("keys", &self.keys.len())
            .field("config", &self.config)
            .finish()
    }
}

/// Why the keys could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwtKeyError {
    /// The file could not be read.
    #[error("cannot read the JWT key file {path}: {source}")]
    Read {
        /// The key file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no key the service accepts.
    #[error("the JWT key file {path} holds no RS256 or ES256 public key: {why}")]
    Unusable {
        /// The key file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

impl JwtVerifier {
    /// How many public keys it holds.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Loads a PEM public key (RSA or P-256) or a JWKS document.
    pub fn load(path: &Path, config: JwtConfig) -> Result<JwtVerifier, JwtKeyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| JwtKeyError::Read {
            path: shown.clone(),
            source,
        })?;
        let keys = parse_keys(&text).map_err(|why| JwtKeyError::Unusable { path: shown, why })?;
        Ok(JwtVerifier { keys, config })
    }

    /// The principal a JWT names, once its signature, issuer, audience and
    /// times check out.
    pub fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let bad = |why: String| AuthError::Jwt(why);
        let header = jsonwebtoken::decode_header(token).map_err(|e| bad(e.to_string()))?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(bad(format!("algorithm {:?} is not accepted", header.alg)));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = 30;
        let mut last = "no configured key fits the token's algorithm and key id".to_owned();
        for k in self.keys.iter().filter(|k| {
            k.algorithm == header.alg
                && (header.kid.is_none() || k.kid.is_none() || k.kid == header.kid)
        }) {
            match jsonwebtoken::decode::<Value>(token, &k.key, &validation) {
                Ok(data) => return self.principal(&data.claims).map_err(bad),
                Err(e) => last = e.to_string(),
            }
        }
        Err(bad(last))
    }

    fn principal(&self, claims: &Value) -> Result<Principal, String> {
        let names = &self.config.claims;
        let text = |name: &str| match claims.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(format!("claim {name:?} is missing or not a string")),
        };
        let roles = match claims.get(&names.roles) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .map(|r| r.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("claim {:?} must be a list of strings", names.roles))?,
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            Some(_) => return Err(format!("claim {:?} must be a list", names.roles)),
        };
        let scope_text = text(&names.scope)?;
        let mut scopes = scope_text.split_whitespace().filter_map(Scope::parse);
        let scope = match (scopes.next(), scopes.next()) {
            (Some(s), None) => s,
            _ => {
                return Err(format!(
                    "claim {:?} must name exactly one of reviewer, service, operator",
                    names.scope
                ));
            }
        };
        Ok(Principal {
            tenant: text(&names.tenant)?,
            actor: text(&names.actor)?,
            roles,
            scope,
        })
    }
}

fn parse_keys(text: &str) -> Result<Vec<Key>, String> {
    if text.trim_start().starts_with('{') {
        let set: JwkSet = serde_json::from_str(text).map_err(|e| format!("not a JWKS: {e}"))?;
        let mut keys = Vec::new();
        for jwk in &set.keys {
            let algorithm = match &jwk.algorithm {
                jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
                jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(p)
                    if p.curve == jsonwebtoken::jwk::EllipticCurve::P256 =>
                {
                    Algorithm::ES256
                }
                _ => continue,
            };
            let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
            keys.push(Key {
                kid: jwk.common.key_id.clone(),
                algorithm,
                key,
            });
        }
        if keys.is_empty() {
            return Err("the JWKS has no RSA or P-256 key".to_owned());
        }
        return Ok(keys);
    }
    let bytes = text.as_bytes();
    if let Ok(key) = DecodingKey::from_rsa_pem(bytes) {
        return Ok(vec![Key {
            kid: None,
            algorithm: Algorithm::RS256,
            key,
        }]);
    }
    DecodingKey::from_ec_pem(bytes)
        .map(|key| {
            vec![Key {
                kid: None,
                algorithm: Algorithm::ES256,
                key,
            }]
        })
        .map_err(|e| format!("neither an RSA nor an EC public key in PEM: {e}"))
}
