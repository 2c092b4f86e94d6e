//! `leasehold serve`: the flags turned into the service's configuration,
//! and the service run until SIGTERM or SIGINT. The service itself is
//! `leasehold-serve`; this module must never decide who may do what.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use leasehold_serve::{
    BackupLimits, Bounds, ClaimNames, Config, ConnectionLimits, Credentials, CursorKey,
    EventOptions, JwtConfig, JwtVerifier, Options, Principal, Reload, Scope, Server, TokenTable,
};

use crate::commands::token::fresh_token;
use crate::context::Context;
use crate::error::CliError;
use crate::values::parse_wait;

/// `leasehold serve`: where to listen and whom to believe.
#[derive(Debug, Args)]
pub struct Serve {
    /// The address to listen on
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// The token file: one line per token, as `token new` prints them
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// The identity provider's public keys: a PEM public key (RSA or P-256)
    /// or a JWKS file. Needs --jwt-issuer and --jwt-audience
    #[arg(long, value_name = "FILE", requires_all = ["jwt_issuer", "jwt_audience"])]
    pub jwt_keys: Option<PathBuf>,
    /// The `iss` every JWT must carry
    #[arg(long, value_name = "ISSUER")]
    pub jwt_issuer: Option<String>,
    /// An `aud` every JWT must carry
    #[arg(long, value_name = "AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// The JWT claim that names the tenant
    #[arg(long, default_value = "tenant", value_name = "CLAIM")]
    pub jwt_tenant_claim: String,
    /// The JWT claim that names the actor
    #[arg(long, default_value = "sub", value_name = "CLAIM")]
    pub jwt_actor_claim: String,
    /// The JWT claim that lists the roles
    #[arg(long, default_value = "roles", value_name = "CLAIM")]
    pub jwt_roles_claim: String,
    /// The JWT claim that names the scope (reviewer, service or operator)
    #[arg(long, default_value = "scope", value_name = "CLAIM")]
    pub jwt_scope_claim: String,
    /// Start without a credential source: prints a warning and one operator
    /// token for a throwaway tenant
    #[arg(long)]
    pub dev: bool,
    /// The listener's certificate chain (PEM), for HTTPS
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The listener's private key (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Largest request body accepted, in bytes
    #[arg(long, default_value_t = 512 * 1024, value_name = "BYTES")]
    pub body_limit: usize,
    /// The least rate a request body must arrive at, in bytes a second,
    /// over the time the server waits for it past --body-grace; past it,
    /// 408 `body-timeout` and the connection is closed. 0 turns it off
    #[arg(long, default_value_t = 1024, value_name = "BYTES")]
    pub min_body_rate: u64,
    /// How long the server waits for a body before --min-body-rate applies
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = parse_wait)]
    pub body_grace: Duration,
    /// How long a request may take; a call that has not begun to commit by
    /// then commits nothing and is answered 503 `timeout`
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_wait)]
    pub request_timeout: Duration,
    /// The same for the consistency check (`GET /v1/check`)
    #[arg(long, default_value = "300s", value_name = "DURATION", value_parser = parse_wait)]
    pub check_timeout: Duration,
    /// How long past its deadline a call whose commit has begun is waited
    /// for before the answer says its outcome is unknown
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_wait)]
    pub commit_grace: Duration,
    /// Most engine calls in flight at once; past it, 503 `overloaded`
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_in_flight: usize,
    /// Most engine calls of one tenant in flight at once; past it, that
    /// tenant's next call waits for one of them to finish while other
    /// tenants' calls go on, and is answered 503 `timeout` if its deadline
    /// (--request-timeout) passes first
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max_in_flight_per_tenant: usize,
    /// Most calls of one tenant waiting for their turn at once (behind
    /// --max-in-flight-per-tenant, or for the tenant's one check slot);
    /// past it, 429 `too-many-requests` with Retry-After, at once
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_waiting_per_tenant: usize,
    /// Most consistency checks running at once, over all tenants; a tenant
    /// runs one at a time, so the tenants take these in turn
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub max_checks: usize,
    /// Most connections of callers that showed a good credential, open at
    /// once; past it (or --max-connections-per-tenant or
    /// --max-connections-per-caller), the request is answered 503
    /// `overloaded` and its connection closed
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_connections: usize,
    /// Most connections of one tenant's callers open at once
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_connections_per_tenant: usize,
    /// Most connections of one caller (a credential's tenant, actor and
    /// scope) open at once
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub max_connections_per_caller: usize,
    /// Most connections that have shown no credential yet, apart from
    /// --max-connections; past it, the oldest of them that the server has
    /// waited for --unauthenticated-grace is closed to make room
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_unauthenticated_connections: usize,
    /// How long the server waits for a connection that has shown no
    /// credential before it may be closed to make room for a new one
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_wait)]
    pub unauthenticated_grace: Duration,
    /// How long a client has to send a request's head, counted from the
    /// connection's start or the end of its previous answer (so also how
    /// long an idle kept-alive connection stays open)
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_wait)]
    pub header_timeout: Duration,
    /// How long a client has to finish its TLS handshake
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_wait)]
    pub handshake_timeout: Duration,
    /// On SIGTERM or SIGINT, how long open connections may finish before
    /// they are closed and the process exits
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_wait)]
    pub shutdown_grace: Duration,
    /// The kernel's send buffer for each connection, in bytes: it bounds
    /// what a client that stopped reading holds in the kernel; 0 leaves it
    /// to the kernel, which grows it to megabytes a connection
    #[arg(long, default_value_t = 256 * 1024, value_name = "BYTES")]
    pub send_buffer: usize,
    /// Most event-stream subscribers (`GET /v1/events` as
    /// `text/event-stream`) at once, over all tenants; past it (or a
    /// tenant's or caller's bound), 503 `overloaded` with Retry-After
    #[arg(long, default_value_t = 512, value_name = "N")]
    pub max_subscribers: usize,
    /// Most event-stream subscribers of one tenant at once
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub max_subscribers_per_tenant: usize,
    /// Most event-stream subscribers of one caller (one credential's
    /// tenant, actor and scope) at once
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max_subscribers_per_caller: usize,
    /// Events queued for one subscriber before it is dropped as too slow
    /// (with a final `dropped` event to resume from)
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub event_buffer: usize,
    /// Bytes of events queued for one subscriber before it is dropped as
    /// too slow
    #[arg(long, default_value_t = 256 * 1024, value_name = "BYTES")]
    pub event_buffer_bytes: usize,
    /// Bytes of events queued for all of one tenant's subscribers; a
    /// stream whose next event would pass it, or a quarter of it for the
    /// streams of its caller together, is dropped as too slow
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_name = "BYTES")]
    pub tenant_event_buffer_bytes: usize,
    /// Most long-polls (`claim-next` or `claim-due` with `wait_ms`) waiting
    /// at once, over all tenants; past it (or a tenant's or caller's
    /// bound), 503 `overloaded` with Retry-After. Streams and long-polls
    /// together are kept to three quarters of --max-connections
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_long_polls: usize,
    /// Most long-polls of one tenant waiting at once
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_long_polls_per_tenant: usize,
    /// Most long-polls of one caller waiting at once
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub max_long_polls_per_caller: usize,
    /// How long a write to a client may wait for it to read before the
    /// connection is closed (a stalled event-stream reader's above all)
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_wait)]
    pub write_timeout: Duration,
    /// Also serve /healthz, /readyz and /metrics (without a credential) on
    /// this address, with connections of their own; on the API's listener
    /// /metrics takes an operator's credential
    #[arg(long, value_name = "ADDR")]
    pub ops_listen: Option<std::net::SocketAddr>,
    /// How often an idle event stream sends a heartbeat comment
    #[arg(long, default_value = "15s", value_name = "DURATION", value_parser = parse_wait)]
    pub heartbeat: Duration,
    /// Do not keep time here: no lapsed lease comes back and no overdue
    /// task acts unless someone calls `reclaim-lapsed` and
    /// `expire-overdue` (for an embedder that sweeps elsewhere)
    #[arg(long)]
    pub no_sweep: bool,
    /// Wait this long after start before the first sweep acts. What it will
    /// do (per tenant: lapsed leases, overdue tasks to escalate or expire,
    /// due timers) is logged at start whatever this is, so that after an
    /// upgrade or a long stop an operator can read it, and stop the server
    /// before it acts
    #[arg(long, default_value = "0s", value_name = "DURATION", value_parser = parse_wait)]
    pub first_sweep_after: Duration,
    /// Operators of this tenant administer the whole server: they may back
    /// up every tenant (GET /backup, `leasehold backup --server`; any other
    /// operator only its own) and read /metrics, every tenant's counts, on
    /// the API listener (else only on --ops-listen)
    #[arg(long, value_name = "TENANT")]
    pub admin_tenant: Option<String>,
    /// Most tenants' backups running at once (GET /backup); a tenant runs
    /// one at a time, and the --admin-tenant's operators one more outside
    /// this bound; past it, 503 `overloaded` (a tenant's second, `busy`)
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub max_backups: usize,
    /// How long a backup's reader has before --backup-min-rate applies
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_wait)]
    pub backup_grace: Duration,
    /// The least bytes a second a backup's reader must take, on average
    /// after --backup-grace; a reader behind it is cut off, its snapshot
    /// and its place freed (0: no rate asked)
    #[arg(long, default_value_t = 256 * 1024, value_name = "BYTES")]
    pub backup_min_rate: u64,
    /// The longest a backup may run, however fast its reader
    #[arg(long, default_value = "24h", value_name = "DURATION", value_parser = parse_wait)]
    pub backup_max_lifetime: Duration,
    /// Keep the change record (history and events) this long, trimming
    /// older entries as tenants commit (default: keep it all). A task's last
    /// history entry stays while the task does
    #[arg(long, value_name = "DURATION", value_parser = parse_wait)]
    pub retain: Option<Duration>,
    /// Keep at most this many of a tenant's newest events
    #[arg(long, value_name = "N")]
    pub retain_count: Option<u64>,
    /// Accept `now` (and a new task's `created_at`) from service and
    /// operator credentials instead of the server's clock: for replay and
    /// tests, never production. Off, any request that gives one is 403
    #[arg(long)]
    pub allow_clock_override: bool,
    /// The key page cursors are sealed with: a file of 64 hex digits
    /// (`openssl rand -hex 32`). Servers sharing one database should share
    /// it; without it each server makes its own at start
    #[arg(long, value_name = "FILE")]
    pub cursor_key: Option<PathBuf>,
    /// Log one JSON object per line instead of text (the level comes from
    /// RUST_LOG, default info)
    #[arg(long)]
    pub log_json: bool,
    /// Deliver no webhooks from this server (the subscriptions' API is
    /// still served, and another server sharing the database delivers
    /// them). By default a server delivers every subscription whose lease
    /// it holds
    #[arg(long)]
    pub no_webhooks: bool,
    /// Take webhook endpoints with plain `http` URLs, whose bodies and
    /// signatures cross the network in the clear (for a receiver on the
    /// same host or a trusted network; by default only `https`)
    #[arg(long)]
    pub webhooks_allow_http: bool,
    /// Let webhook endpoints be in this range (CIDR, such as 10.20.0.0/16
    /// or fd00::/8), beyond public addresses; repeat for more. Loopback,
    /// private, link-local, unique-local and reserved addresses are refused
    /// otherwise, and a cloud metadata address unless a range names it
    /// alone (169.254.169.254/32)
    #[arg(long, value_name = "CIDR", value_parser = parse_range)]
    pub webhooks_allow_range: Vec<leasehold_serve::IpNet>,
    /// How long one webhook attempt may take, connecting and answering; a
    /// slower endpoint's attempt fails and is tried again
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_positive)]
    pub webhooks_timeout: Duration,
    /// The ceiling of the first wait before a failed webhook is tried
    /// again, with full jitter; each later one doubles, up to 8 hours, for
    /// 72 hours in all
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_positive)]
    pub webhooks_first_retry: Duration,
    /// How long this server holds a subscription's delivery lease unless it
    /// renews it (every third of it): how soon another server sharing the
    /// database takes a subscription over after this one dies
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_positive)]
    pub webhooks_lease: Duration,
    /// Webhooks in flight at once to one endpoint, each of a different task
    /// or timer (one task's changes go one at a time, in order)
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub webhooks_parallelism: u16,
}

/// A duration of at least a millisecond, as the webhook flags take it.
fn parse_positive(text: &str) -> Result<Duration, String> {
    let ms = crate::values::parse_duration_ms(text)?;
    match u64::try_from(ms) {
        Ok(ms) if ms >= 1 => Ok(Duration::from_millis(ms)),
        Ok(_) => Err(format!("{text:?} is shorter than one millisecond")),
        Err(_) => Err(format!("{text:?} is too long")),
    }
}

/// A CIDR range, as --webhooks-allow-range takes it.
fn parse_range(text: &str) -> Result<leasehold_serve::IpNet, String> {
    text.parse()
        .map_err(|e| format!("{text:?} is not a CIDR range such as 10.0.0.0/8 or fd00::/8: {e}"))
}

/// The files credentials are read from, at start and on every SIGHUP.
struct CredentialFiles {
    tokens: Option<PathBuf>,
    jwt: Option<(PathBuf, JwtConfig)>,
}

impl CredentialFiles {
    fn from_args(args: &Serve) -> Self {
        CredentialFiles {
            tokens: args.tokens.clone(),
            jwt: args.jwt_keys.clone().map(|path| {
                (
                    path,
                    JwtConfig {
                        issuer: args.jwt_issuer.clone().unwrap_or_default(),
                        audience: args.jwt_audience.clone().unwrap_or_default(),
                        claims: ClaimNames {
                            tenant: args.jwt_tenant_claim.clone(),
                            actor: args.jwt_actor_claim.clone(),
                            roles: args.jwt_roles_claim.clone(),
                            scope: args.jwt_scope_claim.clone(),
                        },
                    },
                )
            }),
        }
    }

    fn load(&self) -> Result<Credentials, String> {
        let mut credentials = Credentials::default();
        if let Some(path) = &self.tokens {
            credentials.tokens = TokenTable::load(path).map_err(|e| e.to_string())?;
        }
        if let Some((path, config)) = &self.jwt {
            credentials.jwt =
                Some(JwtVerifier::load(path, config.clone()).map_err(|e| e.to_string())?);
        }
        Ok(credentials)
    }
}

/// Whether log lines may carry colour: only for a person at a terminal,
/// never into a file, a pipe or a log collector, and never when `NO_COLOR`
/// is set to anything but the empty string (no-color.org).
fn colour_logs() -> bool {
    let declined = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !declined && std::io::stderr().is_terminal()
}

impl Serve {
    /// Runs the service until SIGTERM or SIGINT; SIGHUP reloads
    /// credentials.
    pub fn run(&self, cx: &Context) -> Result<u8, CliError> {
        serve(self, cx).map(|()| 0)
    }
}

fn serve(args: &Serve, cx: &Context) -> Result<(), CliError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour_logs());
    // A second subscriber (in-process tests) is not an error worth failing.
    let _ = if args.log_json {
        logs.json().try_init()
    } else {
        logs.try_init()
    };

    let files = CredentialFiles::from_args(args);
    let mut credentials = files.load().map_err(CliError::Input)?;
    let mut dev = None;
    if args.dev {
        let token = fresh_token()?;
        let tenant = format!("dev-{}", &fresh_token()?[3..11]);
        let principal = Principal {
            tenant: tenant.clone(),
            actor: "dev".to_owned(),
            roles: Vec::new(),
            scope: Scope::Operator,
        };
        credentials.tokens.insert(&token, principal.clone());
        dev = Some((token.clone(), principal));
        eprintln!(
            "WARNING: --dev: anyone with the token below is an operator of the throwaway \
             tenant {tenant}. Never use --dev in production."
        );
        eprintln!("dev operator token: {token}");
    }
    if credentials.is_empty() {
        return Err(CliError::Input(
            "no credential source: give --tokens FILE or --jwt-keys FILE (or --dev for a \
             throwaway tenant)"
                .to_owned(),
        ));
    }
    // SIGHUP reads the files again; the --dev token, made once, stays.
    let reload: Reload = Arc::new(move || {
        let mut c = files.load()?;
        if let Some((token, p)) = &dev {
            c.tokens.insert(token, p.clone());
        }
        Ok(c)
    });
    let cursor_key = match &args.cursor_key {
        Some(path) => Some(CursorKey::load(path).map_err(|e| CliError::Input(e.to_string()))?),
        None => None,
    };
    let db = cx.db_path();
    let config = Config {
        db: db.to_string_lossy().into_owned(),
        listen: args.listen,
        credentials,
        reload: Some(reload),
        options: Options {
            body_limit: args.body_limit,
            body_rate: leasehold_serve::BodyRate {
                min_bytes_per_sec: args.min_body_rate,
                grace: args.body_grace,
            },
            request_timeout: args.request_timeout,
            check_timeout: args.check_timeout,
            commit_grace: args.commit_grace,
            max_in_flight: args.max_in_flight,
            max_in_flight_per_tenant: args.max_in_flight_per_tenant,
            max_waiting_per_tenant: args.max_waiting_per_tenant,
            max_checks: args.max_checks,
            allow_clock_override: args.allow_clock_override,
            sweep: !args.no_sweep,
            first_sweep_after: args.first_sweep_after,
            admin_tenant: match &args.admin_tenant {
                Some(t) => Some(
                    leasehold_serve::backup::TenantName::new(t)
                        .map_err(|e| CliError::Input(format!("--admin-tenant {t:?}: {e}")))?,
                ),
                None => None,
            },
            retention: (args.retain.is_some() || args.retain_count.is_some()).then_some(
                leasehold_host::Retention {
                    max_age: args.retain,
                    keep: args.retain_count,
                },
            ),
            connections: ConnectionLimits {
                max_connections: args.max_connections,
                max_connections_per_tenant: args.max_connections_per_tenant,
                max_connections_per_caller: args.max_connections_per_caller,
                max_unauthenticated: args.max_unauthenticated_connections,
                unauthenticated_grace: args.unauthenticated_grace,
                header_timeout: args.header_timeout,
                handshake_timeout: args.handshake_timeout,
                shutdown_grace: args.shutdown_grace,
                send_buffer: (args.send_buffer > 0).then_some(args.send_buffer),
                write_timeout: args.write_timeout,
            },
            events: EventOptions {
                max_subscribers: args.max_subscribers,
                max_subscribers_per_tenant: args.max_subscribers_per_tenant,
                max_subscribers_per_caller: args.max_subscribers_per_caller,
                buffer: args.event_buffer,
                buffer_bytes: args.event_buffer_bytes,
                tenant_buffer_bytes: args.tenant_event_buffer_bytes,
                heartbeat: args.heartbeat,
            },
            long_polls: Bounds {
                all: args.max_long_polls,
                per_tenant: args.max_long_polls_per_tenant,
                per_caller: args.max_long_polls_per_caller,
            },
            ops_listen: args.ops_listen,
            backups: BackupLimits {
                max_running: args.max_backups,
                grace: args.backup_grace,
                min_rate: args.backup_min_rate,
                max_lifetime: args.backup_max_lifetime,
            },
            webhooks: leasehold_serve::WebhookOptions {
                deliver: !args.no_webhooks,
                allow_http: args.webhooks_allow_http,
                allow_ranges: args.webhooks_allow_range.clone(),
                timeout: args.webhooks_timeout,
                first_retry: args.webhooks_first_retry,
                lease: args.webhooks_lease,
                parallelism: usize::from(args.webhooks_parallelism),
            },
        },
        engine: cx.builder(),
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
        cursor_key,
        handle_signals: true,
    };
    let server = Server::start(config).map_err(|e| CliError::Failed(e.to_string()))?;
    let scheme = if args.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    eprintln!("leasehold serve: listening on {scheme}://{}", server.addr());
    server.wait().map_err(|e| CliError::Failed(e.to_string()))?;
    eprintln!("leasehold serve: stopped");
    Ok(())
}
