//! The command line, as clap derive types. Parsing only: nothing here opens a
//! database or calls the engine.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use leasehold_guest::validate::MAX_LIMIT;
use leasehold_host::{Lease, Settlement, Timestamp};

use super::time::{parse_lease, parse_time, parse_wait};

const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  the engine refused (claim refused, not found, not held...); `check` found discrepancies
  2  usage or input error (the message says what was wrong and where)
  3  storage or sandbox failure; a database file that is empty, damaged or not one
  4  busy: another process kept the database open for longer than --wait,
     or a PostgreSQL call lost every retry to concurrent calls; run it again

Times are RFC 3339 (2026-05-04T09:00:00Z, any offset) or integer milliseconds
since 1970. Durations are written with a unit: 30s, 5m, 1500ms.";

/// A human-task worklist and durable-timer engine whose rules run as a
/// sandboxed WebAssembly component over a local redb file or a shared
/// PostgreSQL database.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// Database: a redb file, or a PostgreSQL URL
    /// (postgres://user:password@host:port/db) that many hosts may share
    /// [default: leasehold.redb in the current folder]
    #[arg(long, global = true, env = "LEASEHOLD_DB", value_name = "PATH|URL")]
    pub db: Option<PathBuf>,

    /// The tenant every call is scoped to [default: default]; `copy` takes
    /// it more than once (one per tenant to copy)
    #[arg(long = "tenant", global = true, value_name = "NAME", action = ArgAction::Append)]
    pub tenants: Vec<String>,

    /// Print exact JSON for scripts instead of tables and sentences; errors
    /// go to stderr as a JSON object
    #[arg(long, global = true)]
    pub json: bool,

    /// How long to wait while another process has the database open, before
    /// giving up with exit code 4
    #[arg(
        long,
        global = true,
        default_value = "5s",
        value_name = "DURATION",
        value_parser = parse_wait
    )]
    pub wait: Duration,

    /// Where the compiled component is kept between runs, so that a command
    /// loads it instead of compiling it again [default:
    /// $XDG_CACHE_HOME/leasehold, else ~/.cache/leasehold]
    #[arg(long, global = true, env = "LEASEHOLD_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Compile the component afresh and keep nothing on disk (wins over
    /// --cache-dir)
    #[arg(long, global = true)]
    pub no_cache: bool,

    /// Instantiate the rules afresh for every call, instead of keeping an
    /// instance for the next calls of the same tenant (the default: an
    /// instance never serves another tenant and is thrown away after any
    /// failed call)
    #[arg(long, global = true)]
    pub fresh_instances: bool,

    /// Progress lines on stderr while `copy`, `restore`, `tenant import` and `tenant
    /// delete` run (at most twice a second): auto shows them at a terminal
    /// without --json; always shows them anywhere (as JSON lines with
    /// --json)
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "auto",
        value_name = "WHEN"
    )]
    pub progress: ProgressArg,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open, read, claim and settle one task
    #[command(subcommand)]
    Task(TaskCommand),
    /// Queued tasks an actor with these roles may claim, urgent first
    Queue(QueueArgs),
    /// Tasks past their due time that still await expiry, earliest first
    Overdue {
        /// The instant to compare due times with [default: the current clock]
        #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
        now: Option<Timestamp>,
        /// Most tasks to list (1-1000)
        #[arg(
            long,
            default_value_t = 20,
            value_name = "N",
            value_parser = parse_limit,
            allow_negative_numbers = true
        )]
        limit: u32,
    },
    /// Every task of a case, in any state, oldest first
    Case {
        case: String,
        /// Most tasks on this page (1-1000)
        #[arg(
            long,
            default_value_t = 20,
            value_name = "N",
            value_parser = parse_limit,
            allow_negative_numbers = true
        )]
        limit: u32,
        /// Continue after this cursor, as printed by the previous page
        #[arg(long, value_name = "CURSOR")]
        after: Option<String>,
    },
    /// Arm, sweep and disarm durable timers
    #[command(subcommand)]
    Timer(TimerCommand),
    /// Seal a run, or ask whether it is sealed
    #[command(subcommand)]
    Run(RunCommand),
    /// Pending and leased tasks, armed timers, and the next due timer and
    /// lease end for the tenant
    Stats,
    /// Run the consistency check; exits 1 when it finds any discrepancy
    Check,
    /// The tenant's feed of changes: every committed change of a task or a
    /// timer, once, in commit order per task. Prints where to read on; exits
    /// 1 when what follows --after was trimmed
    Events(EventsArgs),
    /// Remove old feed entries, with the history they cover (never a task's
    /// last history entry); give --before, --keep or both. Runs until
    /// nothing more is due
    Trim {
        /// Remove entries recorded before this time
        #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
        before: Option<Timestamp>,
        /// Keep at most this many entries, the newest
        #[arg(long, value_name = "N")]
        keep: Option<u64>,
        /// Most entries removed per call (1-1000); each call is one
        /// transaction
        #[arg(
            long,
            default_value_t = MAX_LIMIT,
            value_name = "N",
            value_parser = parse_limit,
            allow_negative_numbers = true
        )]
        limit: u32,
    },
    /// Repair a database file whose writer stopped without closing it
    /// (killed, or the machine lost power); a file closed cleanly is left
    /// as it is. Reading commands do this by themselves when they may write
    /// the file
    Repair,
    /// Walk through a short narrated scenario on a fresh database (a
    /// temporary file unless --db names a new one)
    Demo,
    /// Serve the HTTP API (JSON under /v1) until SIGTERM or SIGINT
    Serve(Box<ServeArgs>),
    /// Make credentials for `serve`
    #[command(subcommand)]
    Token(TokenCommand),
    /// Copy tenants' keys from one database to another (a redb file or a
    /// PostgreSQL URL each): the tenants named with --tenant, else every
    /// tenant of the source. Refuses a target tenant that holds anything
    /// but an unfinished copy of the source, which it finishes; ends with
    /// `check` and a digest of both sides, and exits 1 if they disagree
    Copy(CopyArgs),
    /// Export, import or delete one tenant's keys (--tenant)
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Back up every tenant (or those named with --tenant) to one file:
    /// from a running `serve` (--server, with an operator's token) while it
    /// serves, or from a database nobody holds (--db). Each tenant is one
    /// snapshot taken after the backup began; every digest is checked as
    /// the file is written
    Backup(BackupArgs),
    /// Restore a backup (every tenant, or those named with --tenant) into a
    /// database whose tenants of those names are empty: every digest is
    /// checked before anything is written, and each tenant ends with
    /// `check` and a digest of what was written
    Restore(RestoreArgs),
    /// Write the component this binary embeds to a file and print its
    /// SHA-256, so another host (JavaScript, Python) can run the same bytes
    Component {
        /// Where to write the .wasm file (replaced if it exists)
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// `leasehold copy`: from where, to where.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The database to copy from (read only)
    #[arg(long, value_name = "PATH|URL")]
    pub from: String,
    /// The database to copy to (a redb file is created if missing)
    #[arg(long, value_name = "PATH|URL")]
    pub to: String,
}

/// `leasehold backup`: from where, to where.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The running server's address (http://host:port); without it the
    /// backup reads --db, which no other process may hold
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// A file holding an operator's bearer token for --server (its first
    /// line)
    #[arg(long, value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,
    /// Where to write the backup (written beside it, then renamed over it
    /// once whole and checked)
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// `leasehold restore`: from where, to where.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file
    #[arg(long = "in", value_name = "FILE")]
    pub input: PathBuf,
    /// The database to restore into (a redb file is created if missing)
    #[arg(long, value_name = "PATH|URL")]
    pub to: String,
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Write the tenant's keys as JSON lines (docs/operations.md describes
    /// the format), with their count and digest on the last line
    Export {
        /// Where to write [default: standard output]
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Read an export into an empty tenant (--tenant, else the one the file
    /// names), then check it and compare digests; an unfinished import of
    /// the same file is finished
    Import {
        /// The export file; - or nothing reads standard input
        #[arg(long = "in", value_name = "FILE|-")]
        input: Option<PathBuf>,
    },
    /// Delete every key of the tenant named with --tenant, in batches
    Delete {
        /// Yes, delete it: there is no undo
        #[arg(long)]
        yes: bool,
    },
}

/// `leasehold events`: where to read from, and whether to keep following.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Read on from this position, as printed by the previous read
    /// [default: the oldest entry kept]
    #[arg(long, value_name = "POSITION")]
    pub after: Option<String>,
    /// Most entries to print per read (1-1000)
    #[arg(
        long,
        default_value_t = 100,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    pub limit: u32,
    /// Keep printing changes as they commit, until interrupted (with --json,
    /// one JSON object per line). On PostgreSQL it wakes when any host
    /// commits; on a redb file it reads again every second, whenever no
    /// other process holds the file
    #[arg(long)]
    pub follow: bool,
}

/// `leasehold serve`: where to listen and whom to believe.
#[derive(Debug, Args)]
pub struct ServeArgs {
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
    /// Most consistency checks running at once, over all tenants
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub max_checks: usize,
    /// Most connections open at once; past it, new ones are refused
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_connections: usize,
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
    /// stream whose next event would pass it is dropped as too slow
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
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Print a fresh random token once, and the line to add to the token
    /// file (which keeps only its hash). The tenant is --tenant
    New {
        /// The actor the token acts as
        #[arg(long, value_name = "A")]
        actor: String,
        /// The actor's roles (repeat, or list several after one --role)
        #[arg(long = "role", value_name = "R", num_args = 1..)]
        roles: Vec<String>,
        /// What the token may do
        #[arg(long, value_enum)]
        scope: ScopeArg,
    },
}

/// When `--progress` shows progress lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProgressArg {
    /// At a terminal, without --json
    Auto,
    /// Always, whatever stderr is
    Always,
    /// Never
    Never,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ScopeArg {
    Reviewer,
    Service,
    Operator,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Open a task from JSON (a file, or standard input for - or nothing)
    ///
    /// Required fields: id, run, kind. Optional: case, justification (any
    /// JSON document, inline or as a string of its text; default {}),
    /// candidate_roles, escalate_to, excluded_actors (default empty),
    /// priority (low|normal|high|urgent, default normal), on_expiry
    /// (deny|escalate|proceed, default deny), created_at (default now),
    /// due_at. Times are RFC 3339 strings or integer milliseconds. If the id
    /// exists, the stored task stands unchanged (first open wins).
    Open {
        /// JSON file holding the task; - or nothing reads standard input
        #[arg(value_name = "FILE|-")]
        file: Option<PathBuf>,
    },
    /// Show one task
    Get { id: String },
    /// Reserve a task for an actor, until released or under a lease
    Claim {
        id: String,
        #[arg(long, value_name = "A")]
        actor: String,
        /// The actor's roles (repeat, or list several after one --role)
        #[arg(long = "role", value_name = "R", num_args = 1..)]
        roles: Vec<String>,
        #[command(flatten)]
        lease: LeaseArgs,
    },
    /// Claim the first task of the actor's queue (same order and eligibility
    /// as `queue`); says so when the queue is empty
    ClaimNext {
        #[arg(long, value_name = "A")]
        actor: String,
        /// The actor's roles (repeat, or list several after one --role)
        #[arg(long = "role", value_name = "R", num_args = 1..)]
        roles: Vec<String>,
        #[command(flatten)]
        lease: LeaseArgs,
    },
    /// Extend the lease of a task the actor holds under one, to end a lease
    /// from now
    Renew {
        id: String,
        #[arg(long, value_name = "A")]
        actor: String,
        /// How long from now the lease holds
        #[arg(long, value_name = "DURATION", value_parser = parse_lease)]
        lease: u32,
        /// When the new lease starts [default: the current clock]
        #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
        now: Option<Timestamp>,
    },
    /// Put the tasks whose lease ended at or before now back in the queue
    /// (reclaim-lapsed)
    Reclaim {
        /// The sweep's instant [default: the current clock]
        #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
        now: Option<Timestamp>,
        /// Most tasks to move (1-1000)
        #[arg(
            long,
            default_value_t = 100,
            value_name = "N",
            value_parser = parse_limit,
            allow_negative_numbers = true
        )]
        limit: u32,
    },
    /// Act on the tasks past their due time by their on-expiry policy:
    /// escalate them, or settle them expired (expire-overdue)
    Expire {
        /// The sweep's instant [default: the current clock]
        #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
        now: Option<Timestamp>,
        /// Most tasks to act on (1-1000)
        #[arg(
            long,
            default_value_t = 100,
            value_name = "N",
            value_parser = parse_limit,
            allow_negative_numbers = true
        )]
        limit: u32,
    },
    /// Give back a task the actor holds
    Release {
        id: String,
        #[arg(long, value_name = "A")]
        actor: String,
    },
    /// Move a claim from one holder to another actor
    TakeOver {
        id: String,
        /// Who must hold the task now (compare-and-swap)
        #[arg(long, value_name = "B")]
        from: String,
        #[arg(long, value_name = "A")]
        actor: String,
        /// The new holder's roles (repeat, or list several after one --role)
        #[arg(long = "role", value_name = "R", num_args = 1..)]
        roles: Vec<String>,
        #[command(flatten)]
        lease: LeaseArgs,
    },
    /// Settle a pending task; a task already settled is left as it stands
    Settle {
        id: String,
        #[arg(value_enum)]
        settlement: SettlementArg,
        /// Settle only if this actor holds the task now (else refused, and
        /// nothing changes)
        #[arg(long, value_name = "A")]
        holder: Option<String>,
    },
    /// Escalate a pending task: clear its holder and widen its audience
    Escalate { id: String },
    /// Every change of a task, oldest first: who, what, when
    History {
        id: String,
        /// Continue after this entry number, as printed by the previous page
        #[arg(long, value_name = "SEQ")]
        after: Option<u64>,
        /// Most entries on this page (1-1000)
        #[arg(
            long,
            default_value_t = 100,
            value_name = "N",
            value_parser = parse_limit,
            allow_negative_numbers = true
        )]
        limit: u32,
    },
    /// Where entry SEQ of a task's history sits in the feed: its writer
    /// slot and its number there (none when that entry is not kept)
    Place { id: String, seq: u64 },
    /// Withdraw the listed tasks that belong to RUN and are still pending
    WithdrawRun {
        run: String,
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
}

/// A claim's optional lease.
#[derive(Clone, Copy, Debug, Args)]
pub struct LeaseArgs {
    /// Hold the task for this long, unless renewed (`task renew`); without
    /// it the claim holds until released
    #[arg(long, value_name = "DURATION", value_parser = parse_lease)]
    pub lease: Option<u32>,
    /// When the lease starts [default: the current clock]
    #[arg(
        long,
        value_name = "TIME",
        value_parser = parse_time,
        allow_negative_numbers = true,
        requires = "lease"
    )]
    pub now: Option<Timestamp>,
}

#[derive(Debug, Args)]
pub struct QueueArgs {
    /// The caller's roles (repeat, or list several after one --role); with
    /// none, only tasks open to anyone are shown
    #[arg(long = "role", value_name = "R", num_args = 1..)]
    pub roles: Vec<String>,
    /// Hide tasks that exclude this actor
    #[arg(long, value_name = "A")]
    pub actor: Option<String>,
    /// Most tasks on this page (1-1000)
    #[arg(
        long,
        default_value_t = 20,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    pub limit: u32,
    /// Continue after this cursor, as printed by the previous page
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TimerCommand {
    /// Arm a timer from JSON (a file, or standard input for - or nothing)
    ///
    /// Required fields: run, effect, fire_at (RFC 3339 or integer
    /// milliseconds). Optional: case, step (default 0), phase
    /// (forward|compensating, default forward). Re-arming an existing
    /// (run, effect) changes nothing.
    Arm {
        /// JSON file holding the timer; - or nothing reads standard input
        #[arg(value_name = "FILE|-")]
        file: Option<PathBuf>,
    },
    /// Claim the timers due now, each under a lease (claim-due)
    Sweep {
        /// The sweep's instant [default: the current clock]
        #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
        now: Option<Timestamp>,
        /// Most timers to claim (1-1000)
        #[arg(
            long,
            default_value_t = 100,
            value_name = "N",
            value_parser = parse_limit,
            allow_negative_numbers = true
        )]
        limit: u32,
        /// How long the claim holds before another sweep may take the timer
        #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_lease)]
        lease: u32,
    },
    /// Retire one timer
    Disarm { run: String, effect: String },
    /// Retire every timer of a run
    DisarmRun { run: String },
    /// When the next timer becomes claimable
    Next,
}

#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Seal a run: retire its timers and withdraw its pending awaited tasks
    Seal {
        run: String,
        /// Tasks the run awaits, withdrawn if still pending
        #[arg(long = "awaited", value_name = "ID", num_args = 1..)]
        awaited: Vec<String>,
    },
    /// Whether a run is sealed
    Sealed { run: String },
}

/// A page size or scan length: any whole number is read, so that one out of
/// range is refused with the range the engine accepts, not the type's.
pub fn parse_limit(text: &str) -> Result<u32, String> {
    let range = format!("1..={MAX_LIMIT}");
    let n: i128 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number in {range}"))?;
    u32::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| format!("limit is {n}, outside {range}"))
}

impl Cli {
    /// The one tenant a command is scoped to: the `--tenant` given, or
    /// `default`.
    pub fn tenant(&self) -> &str {
        self.tenants.last().map_or("default", String::as_str)
    }
}

impl LeaseArgs {
    /// The lease, starting at `--now` or else at `clock()`.
    pub fn lease(self, clock: impl FnOnce() -> Timestamp) -> Option<Lease> {
        self.lease.map(|lease_ms| Lease {
            now: self.now.unwrap_or_else(clock),
            lease_ms,
        })
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SettlementArg {
    Completed,
    Expired,
    Withdrawn,
}

impl From<SettlementArg> for Settlement {
    fn from(s: SettlementArg) -> Self {
        match s {
            SettlementArg::Completed => Settlement::Completed,
            SettlementArg::Expired => Settlement::Expired,
            SettlementArg::Withdrawn => Settlement::Withdrawn,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }

    #[test]
    fn a_limit_out_of_range_is_refused_with_the_engines_range() {
        use super::parse_limit;
        assert_eq!(parse_limit("1"), Ok(1));
        assert_eq!(parse_limit("1000"), Ok(1000));
        for bad in ["0", "1001", "-1", "4294967296", "99999999999999999999999"] {
            let e = parse_limit(bad).expect_err(bad);
            assert!(e.contains("1..=1000"), "{bad}: {e}");
        }
        assert!(parse_limit("ten").expect_err("ten").contains("1..=1000"));
    }

    /// Where each exported function of the world is reached from the
    /// command line: `stats` reads the counts and next times together.
    const REACHED_BY: &[(&str, &[&str])] = &[
        ("open", &["task", "open"]),
        ("get", &["task", "get"]),
        ("claim", &["task", "claim"]),
        ("release", &["task", "release"]),
        ("take-over", &["task", "take-over"]),
        ("renew", &["task", "renew"]),
        ("reclaim-lapsed", &["task", "reclaim"]),
        ("expire-overdue", &["task", "expire"]),
        ("claim-next", &["task", "claim-next"]),
        ("settle", &["task", "settle"]),
        ("withdraw-run", &["task", "withdraw-run"]),
        ("escalate", &["task", "escalate"]),
        ("queue", &["queue"]),
        ("for-case", &["case"]),
        ("open-count", &["stats"]),
        ("leased-count", &["stats"]),
        ("next-lease-end", &["stats"]),
        ("overdue", &["overdue"]),
        ("arm", &["timer", "arm"]),
        ("claim-due", &["timer", "sweep"]),
        ("disarm", &["timer", "disarm"]),
        ("disarm-run", &["timer", "disarm-run"]),
        ("pending-count", &["stats"]),
        ("next-due", &["timer", "next"]),
        ("seal", &["run", "seal"]),
        ("is-sealed", &["run", "sealed"]),
        ("check", &["check"]),
        ("history", &["task", "history"]),
        ("entry-place", &["task", "place"]),
        ("feed", &["events"]),
        ("trim", &["trim"]),
    ];

    /// Checked against the host's one declaration of the verbs: every verb
    /// has a command, every command named here exists, and the commands'
    /// code calls the verb's `Tenant` method. A verb added to the WIT and
    /// the host's table fails this until the command line reaches it.
    #[test]
    fn every_verb_is_reached_by_a_command() {
        let verbs: Vec<&str> = leasehold_host::exported_functions()
            .iter()
            .map(|f| f.name)
            .collect();
        let here: Vec<&str> = REACHED_BY.iter().map(|(v, _)| *v).collect();
        assert_eq!(
            here, verbs,
            "the command line's table and the host's differ"
        );
        let cli = super::Cli::command();
        let code = include_str!("commands.rs");
        for (verb, path) in REACHED_BY {
            let mut at = &cli;
            for part in *path {
                at = at
                    .find_subcommand(part)
                    .unwrap_or_else(|| panic!("{verb}: no command {}", path.join(" ")));
            }
            let method = verb.replace('-', "_");
            assert!(
                code.contains(&format!(".{method}(")),
                "{verb}: the commands never call Tenant::{method}"
            );
        }
    }
}
