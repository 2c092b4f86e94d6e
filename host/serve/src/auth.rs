//! Who a request is: the bearer credential mapped to exactly one tenant, one
//! actor, its roles and one scope, from the token file or a verified JWT.
//! It owns token hashing, the token file format and JWT checks; it must
//! never keep or log a token in the clear, and never let a request body
//! choose the tenant, the actor or the scope.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use sha2::{Digest, Sha256};

use crate::jwt::JwtVerifier;
pub use crate::principal::{AuthError, Principal, Scope};

/// Why the token file could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The token file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line of the file is not a token line.
    #[error("token file line {line}: {why}")]
    Line {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

/// The prefix of every token `token new` makes, so a leaked one is easy to
/// recognise in logs and scanners.
pub const TOKEN_PREFIX: &str = "lh_";

/// The SHA-256 of a token, in lowercase hex: all the token file keeps.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A fresh random token: 32 bytes from the operating system's generator.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{TOKEN_PREFIX}{}", hex(&bytes)))
}

/// The token file line that grants `token` to `principal`.
pub fn token_line(token: &str, p: &Principal) -> String {
    format!(
        "{} tenant={} actor={} scope={} roles={}",
        token_hash(token),
        p.tenant,
        p.actor,
        p.scope,
        p.roles.join(",")
    )
}

/// Tokens by hash. Lines are `<sha256-hex> tenant=T actor=A scope=S
/// roles=R1,R2`; blank lines and `#` comments are skipped.
#[derive(Clone, Debug, Default)]
pub struct TokenTable {
    by_hash: HashMap<String, Principal>,
}

impl TokenTable {
    /// The tenants the tokens name, each once.
    pub fn tenants(&self) -> std::collections::BTreeSet<String> {
        self.by_hash.values().map(|p| p.tenant.clone()).collect()
    }

    /// Reads a token file: one `HASH TENANT ACTOR ROLES SCOPE` line per
    /// token (see [`token_line`]), `#` comments and blank lines skipped.
    pub fn load(path: &Path) -> Result<TokenTable, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        TokenTable::parse(&text)
    }

    /// Parses a token file's text, as [`load`](Self::load) does.
    pub fn parse(text: &str) -> Result<TokenTable, TokenFileError> {
        let mut table = TokenTable::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |why: String| TokenFileError::Line { line: i + 1, why };
            let (hash, principal) = parse_line(line).map_err(err)?;
            if table.by_hash.insert(hash, principal).is_some() {
                return Err(err("the same token hash is listed twice".to_owned()));
            }
        }
        Ok(table)
    }

    /// Accepts `token` (kept by its hash) as `principal`.
    pub fn insert(&mut self, token: &str, principal: Principal) {
        self.by_hash.insert(token_hash(token), principal);
    }

    /// How many tokens it accepts.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether it accepts no token.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    fn lookup(&self, token: &str) -> Option<&Principal> {
        self.by_hash.get(&token_hash(token))
    }

    /// The roles this file grants `actor` in `tenant` as a reviewer: those
    /// of all its reviewer tokens there, each once, sorted; none when it
    /// has no reviewer token there.
    pub fn reviewer_roles(&self, tenant: &str, actor: &str) -> Vec<String> {
        let mut roles: Vec<String> = self
            .by_hash
            .values()
            .filter(|p| p.tenant == tenant && p.actor == actor && p.scope == Scope::Reviewer)
            .flat_map(|p| p.roles.iter().cloned())
            .collect();
        roles.sort_unstable();
        roles.dedup();
        roles
    }
}

fn parse_line(line: &str) -> Result<(String, Principal), String> {
    let mut words = line.split_whitespace();
    let hash = words.next().unwrap_or_default().to_ascii_lowercase();
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the line must start with the token's SHA-256 in hex".to_owned());
    }
    let (mut tenant, mut actor, mut scope, mut roles) = (None, None, None, None);
    for word in words {
        let Some((key, value)) = word.split_once('=') else {
            return Err(format!("{word:?} is not key=value"));
        };
        let slot = match key {
            "tenant" => &mut tenant,
            "actor" => &mut actor,
            "scope" => &mut scope,
            "roles" => &mut roles,
            _ => return Err(format!("unknown key {key:?}")),
        };
        if slot.replace(value.to_owned()).is_some() {
            return Err(format!("{key} is given twice"));
        }
    }
    let need = |v: Option<String>, key: &str| match v {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(format!("{key}= is missing")),
    };
    let scope_name = need(scope, "scope")?;
    let scope = Scope::parse(&scope_name)
        .ok_or_else(|| format!("scope {scope_name:?} is not one of reviewer, service, operator"))?;
    let roles = roles
        .unwrap_or_default()
        .split(',')
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect();
    Ok((
        hash,
        Principal {
            tenant: need(tenant, "tenant")?,
            actor: need(actor, "actor")?,
            roles,
            scope,
        },
    ))
}

/// Every way the service accepts a credential.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// Tokens from the token file.
    pub tokens: TokenTable,
    /// JWTs signed by the deployment's identity provider, if it has one.
    pub jwt: Option<JwtVerifier>,
}

impl Credentials {
    /// Whether any credential could ever be accepted.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.jwt.is_none()
    }

    /// How many credentials it accepts: tokens, and JWT signing keys.
    pub fn live(&self) -> (usize, usize) {
        (
            self.tokens.len(),
            self.jwt.as_ref().map_or(0, JwtVerifier::key_count),
        )
    }

    /// The principal an `Authorization` header value names.
    pub fn authenticate(&self, header: Option<&str>) -> Result<Principal, AuthError> {
        let header = header.ok_or(AuthError::Missing)?;
        let (scheme, token) = header.split_once(' ').ok_or(AuthError::NotBearer)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::NotBearer);
        }
        let token = token.trim();
        if let Some(p) = self.tokens.lookup(token) {
            return Ok(p.clone());
        }
        match &self.jwt {
            // Our own tokens are not JWTs; anything with two dots may be.
            Some(jwt) if token.matches('.').count() == 2 => jwt.verify(token),
            _ => Err(AuthError::Unknown),
        }
    }
}

/// Where fresh credentials come from when the server is asked to reload
/// them (SIGHUP): the token file and JWT keys read again.
pub type Reload = Arc<dyn Fn() -> Result<Credentials, String> + Send + Sync>;

/// The credentials in force, replaced whole by a reload: a request
/// authenticates against one set, never a mix of old and new. Every reload
/// is announced, so that what a credential holds open (a stream, a
/// waiting long-poll) is checked again at once.
#[derive(Clone, Debug)]
pub struct LiveCredentials {
    current: Arc<RwLock<Arc<Credentials>>>,
    reloads: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for LiveCredentials {
    fn default() -> Self {
        LiveCredentials::new(Credentials::default())
    }
}

impl LiveCredentials {
    /// Puts `c` in force.
    pub fn new(c: Credentials) -> Self {
        LiveCredentials {
            current: Arc::new(RwLock::new(Arc::new(c))),
            reloads: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// The credentials in force now.
    pub fn current(&self) -> Arc<Credentials> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A watch that changes each time new credentials are put in force.
    pub fn reloads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    /// Puts `c` in force, unless it accepts nobody (a token file emptied
    /// by mistake would lock everyone out): the old set then stays.
    pub fn replace(&self, c: Credentials) -> Result<(usize, usize), String> {
        if c.is_empty() {
            return Err("the new credentials accept nobody; keeping the old ones".to_owned());
        }
        let live = c.live();
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(c);
        self.reloads.send_modify(|n| *n += 1);
        Ok(live)
    }

    /// A watch on one request's credential, for work that outlives the
    /// request's start.
    pub fn hold(&self, header: Option<String>, principal: Principal) -> HeldCredential {
        let expires = header.as_deref().and_then(expiry);
        HeldCredential {
            live: self.clone(),
            reloads: self.reloads.subscribe(),
            header,
            principal,
            expires,
        }
    }
}

/// Slack past a JWT's `exp` that verification allows (its leeway).
const JWT_LEEWAY_SECS: i64 = 30;

/// When a bearer JWT stops being accepted, from its `exp` claim; `None` for
/// tokens of the token file, which last until a reload removes them. Read
/// without verifying: it only says when to check again.
fn expiry(header: &str) -> Option<std::time::SystemTime> {
    use base64::Engine as _;
    let token = header.split_once(' ')?.1.trim();
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let exp = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()?
        .get("exp")?
        .as_i64()?;
    let at = u64::try_from(exp.saturating_add(JWT_LEEWAY_SECS)).ok()?;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(at))
}

/// The credential a stream or a long-poll was opened with, watched for as
/// long as it runs: it stops holding once a reload revokes it or changes
/// whom it names, or once it expires.
pub struct HeldCredential {
    live: LiveCredentials,
    reloads: tokio::sync::watch::Receiver<u64>,
    header: Option<String>,
    principal: Principal,
    expires: Option<std::time::SystemTime>,
}

impl HeldCredential {
    /// Whether the credential still names the same caller.
    pub fn holds(&self) -> bool {
        if self
            .expires
            .is_some_and(|at| std::time::SystemTime::now() >= at)
        {
            return false;
        }
        self.live
            .current()
            .authenticate(self.header.as_deref())
            .is_ok_and(|p| p == self.principal)
    }

    /// Whether the credential stopped holding, looked at again only when a
    /// reload came since the last look or the credential can expire: cheap
    /// enough for every piece of a stream, and true at once after a reload
    /// that revoked it has returned.
    pub fn revoked_now(&mut self) -> bool {
        let reloaded = self.reloads.has_changed().unwrap_or(false);
        if reloaded {
            self.reloads.borrow_and_update();
        }
        (reloaded || self.expires.is_some()) && !self.holds()
    }

    /// Returns once the credential no longer holds: at a reload that
    /// revokes it, or at its expiry.
    pub async fn lapsed(&mut self) {
        loop {
            if !self.holds() {
                return;
            }
            let until_expiry = self.expires.map(|at| {
                at.duration_since(std::time::SystemTime::now())
                    .unwrap_or_default()
            });
            let expiry = async {
                match until_expiry {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = self.reloads.changed() => {
                    if changed.is_err() {
                        // The server is gone; nothing will reload.
                        std::future::pending::<()>().await;
                    }
                }
                () = expiry => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reviewer() -> Principal {
        Principal {
            tenant: "acme".into(),
            actor: "alice".into(),
            roles: vec!["finance".into(), "legal".into()],
            scope: Scope::Reviewer,
        }
    }

    #[test]
    fn a_new_token_authenticates_through_its_file_line_alone() {
        let token = new_token().expect("random bytes");
        assert!(token.starts_with(TOKEN_PREFIX));
        let line = token_line(&token, &reviewer());
        assert!(!line.contains(&token), "the line keeps only the hash");
        let table = TokenTable::parse(&format!("# comment\n\n{line}\n")).expect("parses");
        let creds = Credentials {
            tokens: table,
            jwt: None,
        };
        let p = creds
            .authenticate(Some(&format!("Bearer {token}")))
            .expect("known");
        assert_eq!(p, reviewer());
        assert!(matches!(
            creds.authenticate(Some("Bearer lh_00")),
            Err(AuthError::Unknown)
        ));
        assert!(matches!(
            creds.authenticate(Some(&format!("Basic {token}"))),
            Err(AuthError::NotBearer)
        ));
        assert!(matches!(creds.authenticate(None), Err(AuthError::Missing)));
    }

    #[test]
    fn two_tokens_never_share_a_value() {
        let a = new_token().expect("random");
        let b = new_token().expect("random");
        assert_ne!(a, b);
    }

    #[test]
    fn a_bad_token_file_line_is_refused_with_its_number() {
        let good = token_line("x", &reviewer());
        for bad in [
            "nothex tenant=a actor=b scope=reviewer",
            &good.replace("scope=reviewer", "scope=admin"),
            &good.replace("tenant=acme ", ""),
            &format!("{good} colour=blue"),
            &format!("{good} actor=bob"),
        ] {
            let e = TokenTable::parse(&format!("# first\n{bad}\n")).expect_err(bad);
            assert!(
                matches!(e, TokenFileError::Line { line: 2, .. }),
                "{bad}: {e}"
            );
        }
        let twice = format!("{good}\n{good}\n");
        assert!(TokenTable::parse(&twice).is_err());
    }
}
