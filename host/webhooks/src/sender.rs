//! One HTTP attempt at a delivery, made safely: only `https` URLs (plain
//! `http` when the operator allows it), every address a name resolves to
//! judged by the [`AddressPolicy`] as the connection is made (a resolver of
//! our own feeds the connector, so a name that resolves elsewhere later is
//! judged again then), a URL naming an address judged before any request,
//! no proxies (an environment proxy would resolve names out of our sight),
//! no redirects followed, connect and total timeouts, and at most a few KiB
//! of the answer read and thrown away. It owns the client and its
//! settings; it must never decide what an answer means for the entry (see
//! [`crate::retry`]) nor retry on its own.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};

use crate::address::{AddressPolicy, Refused};
use crate::retry::parse_retry_after;
use crate::signing::{HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP};

/// The longest URL a subscription may have.
pub const MAX_URL_BYTES: usize = 2048;

/// How the sender behaves.
#[derive(Clone, Debug)]
pub struct SenderOptions {
    /// Whether plain `http` URLs are sent to (off by default: a delivery's
    /// body and signature would cross the network in the clear).
    pub allow_http: bool,
    /// Ranges beyond public addresses deliveries may connect to.
    pub allowed: Vec<IpNet>,
    /// The most time to open a connection.
    pub connect_timeout: Duration,
    /// The most time for a whole attempt: connecting, sending, and reading
    /// the answer's head and its first bytes.
    pub timeout: Duration,
    /// The most bytes of an answer's body read (and thrown away).
    pub max_response_bytes: usize,
    /// The `User-Agent` sent.
    pub user_agent: String,
    /// Certificate authorities (PEM) trusted besides the built-in roots:
    /// a private authority an operator's receivers use, or a test's.
    pub extra_roots: Vec<Vec<u8>>,
    /// Names answered without asking DNS (the addresses still judged like
    /// any other): a deployment's fixed names, or a test's.
    pub resolve: HashMap<String, Vec<IpAddr>>,
}

impl Default for SenderOptions {
    fn default() -> Self {
        SenderOptions {
            allow_http: false,
            allowed: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            // The spec recommends 15 to 30 s.
            timeout: Duration::from_secs(15),
            max_response_bytes: 4096,
            user_agent: concat!("leasehold-webhooks/", env!("CARGO_PKG_VERSION")).to_owned(),
            extra_roots: Vec::new(),
            resolve: HashMap::new(),
        }
    }
}

/// Why a sender could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SenderError {
    /// An extra root certificate is not PEM.
    #[error("an extra root certificate could not be read: {0}")]
    Root(#[source] reqwest::Error),
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {0}")]
    Client(#[source] reqwest::Error),
}

/// Why a URL cannot be a delivery's endpoint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// Not an absolute URL.
    #[error("not an absolute URL: {0}")]
    Syntax(String),
    /// Longer than [`MAX_URL_BYTES`].
    #[error("a URL is at most {MAX_URL_BYTES} bytes")]
    TooLong,
    /// Neither `https` nor (where allowed) `http`.
    #[error("deliveries go to {allowed} URLs; this one is {scheme}",
        allowed = if *http_allowed { "https or http" } else { "https" })]
    Scheme {
        /// The URL's scheme.
        scheme: String,
        /// Whether `http` would have been taken.
        http_allowed: bool,
    },
    /// Credentials in the URL (`user:pass@`), which would be logged.
    #[error("a URL may not carry credentials (user:password@)")]
    Credentials,
    /// A fragment (`#…`), which is never sent.
    #[error("a URL may not carry a fragment (#…)")]
    Fragment,
    /// No host.
    #[error("a URL needs a host")]
    NoHost,
    /// The URL names an address deliveries may not connect to.
    #[error(transparent)]
    Address(#[from] Refused),
}

/// The headers and body of one attempt.
#[derive(Clone, Debug)]
pub struct Signed {
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`, seconds since 1970.
    pub timestamp: i64,
    /// `webhook-signature`.
    pub signature: String,
    /// The body, as signed.
    pub body: bytes::Bytes,
}

/// What became of one attempt.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The receiver answered with this status.
    Status(u16),
    /// No answer within the total timeout (or no connection within the
    /// connect timeout).
    Timeout,
    /// The URL, or every address its name resolved to, is one deliveries
    /// may not reach.
    Refused(String),
    /// Anything else: no such name, connection refused or reset, a TLS
    /// failure.
    Failed(String),
}

/// One attempt's outcome, how long it took, and what `Retry-After` asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempted {
    /// What happened.
    pub outcome: Outcome,
    /// From the start of the attempt to its end.
    pub latency: Duration,
    /// The answer's `Retry-After`, read.
    pub retry_after: Option<Duration>,
}

/// Sends attempts. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
    options: Arc<SenderOptions>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("policy", &self.policy)
            .field("allow_http", &self.options.allow_http)
            .finish_non_exhaustive()
    }
}

/// The resolver the client connects through: names answered (by DNS or
/// the configured table), then every address judged; only those allowed
/// are handed to the connector.
struct CheckedResolver {
    policy: Arc<AddressPolicy>,
    fixed: HashMap<String, Vec<IpAddr>>,
}

/// Every address a name resolved to was refused.
#[derive(Debug, thiserror::Error)]
#[error("{name} resolves only to addresses deliveries may not reach ({first})")]
struct NameRefused {
    name: String,
    first: Refused,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let policy = self.policy.clone();
        let fixed = self.fixed.get(&host).cloned();
        Box::pin(async move {
            let found: Vec<IpAddr> = match fixed {
                Some(v) => v,
                None => tokio::net::lookup_host((host.as_str(), 0))
                    .await?
                    .map(|a| a.ip())
                    .collect(),
            };
            let mut first_refusal = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|ip| match policy.check(*ip) {
                    Ok(()) => true,
                    Err(r) => {
                        first_refusal.get_or_insert(r);
                        false
                    }
                })
                .map(|ip| SocketAddr::new(ip, 0))
                .collect();
            if allowed.is_empty()
                && let Some(first) = first_refusal
            {
                return Err(Box::new(NameRefused { name: host, first }) as _);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

impl Sender {
    /// A sender with these options.
    pub fn new(options: SenderOptions) -> Result<Sender, SenderError> {
        let policy = Arc::new(AddressPolicy::allowing(options.allowed.clone()));
        let resolver = CheckedResolver {
            policy: policy.clone(),
            fixed: options.resolve.clone(),
        };
        let mut builder = reqwest::Client::builder()
            .dns_resolver(Arc::new(resolver))
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(options.connect_timeout)
            .timeout(options.timeout)
            .user_agent(options.user_agent.clone())
            .https_only(!options.allow_http)
            // A receiver that never answers should not keep a pooled
            // connection forever.
            .pool_idle_timeout(Duration::from_secs(60));
        for pem in &options.extra_roots {
            let cert = reqwest::Certificate::from_pem(pem).map_err(SenderError::Root)?;
            builder = builder.add_root_certificate(cert);
        }
        Ok(Sender {
            client: builder.build().map_err(SenderError::Client)?,
            policy,
            options: Arc::new(options),
        })
    }

    /// The options it was built with.
    pub fn options(&self) -> &SenderOptions {
        &self.options
    }

    /// Whether `url` may be a delivery's endpoint here: absolute, `https`
    /// (or `http` where allowed), with a host, without credentials or a
    /// fragment, and not naming a refused address. A name is judged when
    /// each attempt connects.
    pub fn check_url(&self, url: &str) -> Result<reqwest::Url, UrlError> {
        if url.len() > MAX_URL_BYTES {
            return Err(UrlError::TooLong);
        }
        let parsed = reqwest::Url::parse(url).map_err(|e| UrlError::Syntax(e.to_string()))?;
        match parsed.scheme() {
            "https" => {}
            "http" if self.options.allow_http => {}
            other => {
                return Err(UrlError::Scheme {
                    scheme: other.to_owned(),
                    http_allowed: self.options.allow_http,
                });
            }
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(UrlError::Credentials);
        }
        if parsed.fragment().is_some() {
            return Err(UrlError::Fragment);
        }
        match parsed.host() {
            None => return Err(UrlError::NoHost),
            Some(url::Host::Ipv4(a)) => self.policy.check(IpAddr::V4(a))?,
            Some(url::Host::Ipv6(a)) => self.policy.check(IpAddr::V6(a))?,
            Some(url::Host::Domain(_)) => {}
        }
        Ok(parsed)
    }

    /// One attempt: POSTs `signed` to `url` and reads at most
    /// [`SenderOptions::max_response_bytes`] of the answer.
    pub async fn send(&self, url: &str, signed: &Signed) -> Attempted {
        let started = Instant::now();
        let done = |outcome, retry_after| Attempted {
            outcome,
            latency: started.elapsed(),
            retry_after,
        };
        let url = match self.check_url(url) {
            Ok(u) => u,
            Err(e) => return done(Outcome::Refused(e.to_string()), None),
        };
        let request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(HEADER_ID, &signed.id)
            .header(HEADER_TIMESTAMP, signed.timestamp.to_string())
            .header(HEADER_SIGNATURE, &signed.signature)
            .body(signed.body.clone());
        let limit = self.options.max_response_bytes;
        let attempt = async move {
            let mut response = request.send().await?;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            // Read a little of the body, so a small answer leaves the
            // connection reusable; the rest is dropped with it.
            let mut read = 0usize;
            while read < limit {
                match response.chunk().await {
                    Ok(Some(chunk)) => read += chunk.len(),
                    Ok(None) | Err(_) => break,
                }
            }
            Ok::<_, reqwest::Error>((status, retry_after))
        };
        match tokio::time::timeout(self.options.timeout, attempt).await {
            Err(_) => done(Outcome::Timeout, None),
            Ok(Ok((status, retry_after))) => done(Outcome::Status(status), retry_after),
            Ok(Err(e)) => done(classify(&e), None),
        }
    }
}

/// What a client error was: our refusal, a timeout, or something else.
fn classify(e: &reqwest::Error) -> Outcome {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<NameRefused>() {
            return Outcome::Refused(r.to_string());
        }
        source = s.source();
    }
    if e.is_timeout() {
        return Outcome::Timeout;
    }
    Outcome::Failed(error_chain(e))
}

/// An error and its sources, joined: reqwest's own text says only "error
/// sending request".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender(allow_http: bool) -> Sender {
        Sender::new(SenderOptions {
            allow_http,
            ..SenderOptions::default()
        })
        .expect("sender")
    }

    #[test]
    fn urls_are_checked_before_any_attempt() {
        let s = sender(false);
        assert!(s.check_url("https://hooks.example.com/in?x=1").is_ok());
        assert!(matches!(
            s.check_url("http://hooks.example.com/"),
            Err(UrlError::Scheme { ref scheme, http_allowed: false }) if scheme == "http"
        ));
        assert!(matches!(
            s.check_url("ftp://x/"),
            Err(UrlError::Scheme { .. })
        ));
        assert!(matches!(s.check_url("/relative"), Err(UrlError::Syntax(_))));
        assert_eq!(
            s.check_url("https://u:p@hooks.example.com/"),
            Err(UrlError::Credentials)
        );
        assert_eq!(
            s.check_url("https://hooks.example.com/#frag"),
            Err(UrlError::Fragment)
        );
        let long = format!("https://hooks.example.com/{}", "a".repeat(MAX_URL_BYTES));
        assert_eq!(s.check_url(&long), Err(UrlError::TooLong));
        for literal in [
            "https://127.0.0.1/",
            "https://[::1]/",
            "https://10.0.0.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://[::ffff:7f00:1]/",
            "https://[fd00:ec2::254]/",
            // Shorthand forms the URL parser reads as 127.0.0.1.
            "https://2130706433/",
            "https://0x7f.1/",
        ] {
            assert!(
                matches!(s.check_url(literal), Err(UrlError::Address(_))),
                "{literal}: {:?}",
                s.check_url(literal)
            );
        }
        assert!(sender(true).check_url("http://hooks.example.com/").is_ok());
    }
}
