//! The flags every command takes (`--db`, `--tenant`, `--json`, `--wait`,
//! the compile cache, `--progress`), as one clap struct the top level
//! flattens in. Parsing only: it must never open a database.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, ValueEnum};

use crate::values::parse_wait;

/// Where the database lives when neither `--db` nor `LEASEHOLD_DB` says.
pub const DEFAULT_DB: &str = "leasehold.redb";

#[derive(Debug, Args)]
pub struct Globals {
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
    /// --json). `jobs start-job` and `jobs run` show a bar at a terminal,
    /// and under --json print the job as JSON lines on stdout unless never
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "auto",
        value_name = "WHEN"
    )]
    pub progress: ProgressArg,
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

impl Globals {
    /// The one tenant a command is scoped to: the `--tenant` given, or
    /// `default`.
    pub fn tenant(&self) -> &str {
        self.tenants.last().map_or("default", String::as_str)
    }

    /// `--db`, else `LEASEHOLD_DB`, else [`DEFAULT_DB`].
    pub fn db_path(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DB))
    }
}
