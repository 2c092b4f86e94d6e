//! Push (webhooks) in a running server: the sender whose URL policy every
//! subscription's endpoint is held to when it is made or changed, and, when
//! the server delivers (the default; `--no-webhooks` turns it off), the
//! delivery engine of `leasehold-webhooks` over the component's
//! subscription rows (`ComponentStore`) and the engine's feed, woken by its
//! commits. Which tenants it delivers for: those the tokens name (at start
//! and after each reload), those whose stored data holds a subscription,
//! and any tenant heard committing (here, or on another server sharing
//! the database) that holds one, looked at no more than once a while.
//! Each subscription is delivered by whichever server holds its lease,
//! under a holder id this process makes at random, so another server takes
//! over when this one dies. It owns the engine's life in this process (its
//! start, the wake-ups after a change made through the API, its graceful
//! stop, which saves positions and gives leases up); the body a receiver
//! is sent is `crate::change`'s, handed in by the server. It must never
//! keep a subscription's state of its own (the store's row is the truth),
//! never decide who may manage one (that is the routes' scopes), and never
//! send to a URL its sender refuses.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use leasehold_host::Engine;
use leasehold_webhooks::{
    ComponentStore, Deliveries, Options as DeliveryOptions, Parts, RenderBody, Sender,
    SenderOptions, SubState, UrlError, render_prometheus,
};

pub use ipnet::IpNet;

use crate::problem::ApiError;

/// How long an API change waits for this server's worker of the
/// subscription to stop and its supervisor to see the change.
const RELOAD_WITHIN: Duration = Duration::from_secs(10);

/// How often, at most, a tenant heard committing is looked at for
/// subscriptions while it has none.
const PROBE_EVERY: Duration = Duration::from_secs(30);

/// How the server pushes changes to subscribed endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookOptions {
    /// Whether this server delivers (a server that does not still serves
    /// the subscriptions' API; another server sharing the database
    /// delivers them).
    pub deliver: bool,
    /// Whether plain `http` endpoints are taken (never by default: a
    /// delivery's body and signature would cross the network in the clear).
    pub allow_http: bool,
    /// Ranges beyond public addresses that endpoints may be in (a receiver
    /// on the operator's own network). A cloud metadata address is allowed
    /// only by a range naming it alone.
    pub allow_ranges: Vec<IpNet>,
    /// How long one attempt may take, connection and answer (Standard
    /// Webhooks recommends 15 to 30 s).
    pub timeout: Duration,
    /// The ceiling of the first wait before a failed delivery is tried
    /// again; each later ceiling doubles, up to 8 hours, for 72 hours.
    pub first_retry: Duration,
    /// How long a server holds a subscription's delivery lease unless it
    /// renews it: how soon another server takes over after one dies.
    pub lease: Duration,
    /// Deliveries in flight at once to one endpoint (each of a different
    /// task or timer; one task's changes go one at a time, in order).
    pub parallelism: usize,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        let sender = SenderOptions::default();
        let engine = DeliveryOptions::default();
        WebhookOptions {
            deliver: true,
            allow_http: false,
            allow_ranges: Vec::new(),
            timeout: sender.timeout,
            first_retry: engine.retry.first,
            lease: engine.lease,
            parallelism: engine.endpoint_parallelism,
        }
    }
}

/// The server's push: its sender, and its deliveries when it delivers.
pub struct Push {
    sender: Sender,
    deliveries: Option<Deliveries>,
    engine: Engine,
    /// Tenants delivered for here.
    served: Mutex<HashSet<String>>,
    /// Tenants heard committing that held no subscription, and when they
    /// were looked at.
    probed: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for Push {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Push")
            .field("sender", &self.sender)
            .field("delivers", &self.deliveries.is_some())
            .finish_non_exhaustive()
    }
}

/// A label's value as Prometheus' text format spells it.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Push {
    /// The sender for `options`, and the delivery engine when it delivers
    /// (each body made by `render`), serving `tenants` at once and, in the
    /// background, every stored tenant that holds a subscription. Must be
    /// called inside the server's runtime, whose tasks the engine runs on.
    pub fn start(
        engine: &Engine,
        options: &WebhookOptions,
        tenants: impl IntoIterator<Item = String>,
        render: RenderBody,
    ) -> Result<Arc<Push>, leasehold_webhooks::SenderError> {
        let sender = Sender::new(SenderOptions {
            allow_http: options.allow_http,
            allowed: options.allow_ranges.clone(),
            timeout: options.timeout,
            connect_timeout: options
                .timeout
                .min(SenderOptions::default().connect_timeout),
            ..SenderOptions::default()
        })?;
        let deliveries = options.deliver.then(|| {
            let mut parts = Parts::new(
                Arc::new(ComponentStore::new(engine.clone())),
                Arc::new(engine.clone()),
                sender.clone(),
            );
            parts.render = render;
            // The default holder is this process's id and random bytes:
            // unique among the servers sharing a database.
            let mut tuned = DeliveryOptions {
                lease: options.lease,
                endpoint_parallelism: options.parallelism.max(1),
                ..DeliveryOptions::default()
            };
            tuned.retry.first = options.first_retry;
            Deliveries::new(parts, tuned)
        });
        let push = Arc::new(Push {
            sender,
            deliveries,
            engine: engine.clone(),
            served: Mutex::default(),
            probed: Mutex::default(),
        });
        if let Some(d) = &push.deliveries {
            tracing::info!(holder = %d.options().holder, "delivering webhooks");
            // Runs for as long as the engine does; its handle is not needed.
            drop(d.follow(engine.changes()));
            for t in tenants {
                push.serve(&t);
            }
            tokio::spawn(Push::find_stored(Arc::downgrade(&push)));
            tokio::spawn(Push::hear_commits(Arc::downgrade(&push), engine.changes()));
        }
        Ok(push)
    }

    /// Whether `url` may be an endpoint here: the sender's own check, the
    /// one every delivery makes, as a refusal naming `field`.
    pub fn check_url(&self, field: &str, url: &str) -> Result<(), ApiError> {
        self.sender.check_url(url).map(|_| ()).map_err(|e| {
            let hint = match &e {
                UrlError::Scheme {
                    http_allowed: false,
                    ..
                } => " (this server takes plain http only when started with --webhooks-allow-http)",
                UrlError::Address(_) => {
                    " (this server reaches such an address only inside a range named with \
                     --webhooks-allow-range)"
                }
                _ => "",
            };
            ApiError::invalid(field, format!("{field}: {e}{hint}"))
        })
    }

    /// The delivery engine, when this server delivers.
    pub fn deliveries(&self) -> Option<&Deliveries> {
        self.deliveries.as_ref()
    }

    /// Delivers `tenant`'s subscriptions from now on. Idempotent.
    pub fn serve(&self, tenant: &str) {
        let Some(d) = &self.deliveries else { return };
        if lock(&self.served).insert(tenant.to_owned()) {
            d.serve(tenant);
            lock(&self.probed).remove(tenant);
        }
    }

    /// Subscription `id` of `tenant` was added, changed or removed through
    /// the API: once this answers, this server's worker of it no longer
    /// sends under what it was, and one under what it is now has started
    /// if this server holds its lease (another server's notices at its
    /// next checkpoint or poll).
    pub async fn changed(&self, tenant: &str, id: &str) {
        self.serve(tenant);
        if let Some(d) = &self.deliveries {
            d.reload(tenant, id, RELOAD_WITHIN).await;
        }
    }

    /// Stops every delivery here: positions saved, leases given up.
    pub async fn shutdown(&self) {
        if let Some(d) = &self.deliveries {
            d.shutdown().await;
        }
    }

    /// The deliveries' counters in Prometheus' text format, and a gauge of
    /// each subscription's state (1 for the state it is in, 0 for the
    /// others, so `leasehold_webhook_state{state="failing"} == 1` names
    /// the failing ones), of the tenants this server delivers for; empty
    /// when it delivers nothing.
    pub fn metrics_text(&self) -> String {
        use std::fmt::Write as _;
        let Some(d) = &self.deliveries else {
            return String::new();
        };
        let mut out = render_prometheus(&d.metrics());
        let states = d.states();
        let _ = writeln!(out, "# TYPE leasehold_webhook_state gauge");
        for (tenant, id, state) in &states {
            for s in [
                SubState::Active,
                SubState::Paused,
                SubState::Failing,
                SubState::Gone,
            ] {
                let _ = writeln!(
                    out,
                    "leasehold_webhook_state{{tenant=\"{}\",subscription=\"{}\",state=\"{}\"}} {}",
                    label(tenant),
                    label(id),
                    s.as_str(),
                    u8::from(*state == s)
                );
            }
        }
        out
    }

    /// Whether `tenant` holds a subscription.
    fn holds_one(engine: &Engine, tenant: &str) -> bool {
        let found = engine
            .tenant(tenant)
            .and_then(|t| t.list_subscriptions(1, None));
        match found {
            Ok(page) => !page.subscriptions.is_empty(),
            Err(e) => {
                tracing::warn!(tenant, error = %e, "looking for a tenant's subscriptions failed");
                false
            }
        }
    }

    /// Serves every stored tenant that holds a subscription.
    async fn find_stored(push: std::sync::Weak<Push>) {
        let Some(p) = push.upgrade() else { return };
        let engine = p.engine.clone();
        drop(p);
        let found = tokio::task::spawn_blocking(move || {
            let stored = match engine.stored_tenants() {
                Ok(Some(t)) => t,
                Ok(None) => return Vec::new(),
                Err(e) => {
                    tracing::warn!(error = %e, "listing the stored tenants failed");
                    return Vec::new();
                }
            };
            stored
                .into_iter()
                .filter(|t| Push::holds_one(&engine, t))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        if let Some(p) = push.upgrade() {
            for t in found {
                p.serve(&t);
            }
        }
    }

    /// Serves a tenant heard committing once it holds a subscription (one
    /// added on another server, or by a tenant no token names).
    async fn hear_commits(push: std::sync::Weak<Push>, mut changes: leasehold_host::Changes) {
        loop {
            let heard = changes.changed().await;
            let Some(p) = push.upgrade() else { return };
            if heard.any {
                tokio::spawn(Push::find_stored(push.clone()));
            }
            let due: Vec<String> = {
                let served = lock(&p.served);
                let mut probed = lock(&p.probed);
                let mut due = Vec::new();
                for t in &heard.tenants {
                    let fresh = probed
                        .get(&**t)
                        .is_some_and(|at| at.elapsed() < PROBE_EVERY);
                    if !served.contains(&**t) && !fresh {
                        probed.insert(t.to_string(), Instant::now());
                        due.push(t.to_string());
                    }
                }
                due
            };
            if due.is_empty() {
                continue;
            }
            let engine = p.engine.clone();
            drop(p);
            let found = tokio::task::spawn_blocking(move || {
                due.into_iter()
                    .filter(|t| Push::holds_one(&engine, t))
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            if let Some(p) = push.upgrade() {
                for t in found {
                    p.serve(&t);
                }
            }
        }
    }
}
