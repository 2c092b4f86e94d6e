//! What can go wrong in one CLI invocation, the exit code each calls for
//! (the codes are `exit`'s), and how an error is said: a sentence, or under
//! `--json` one object with a stable name. It owns that mapping; it must
//! never print.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use leasehold_host::{Error, OpenError, Refusal, StoreError};
use serde::Serialize;

use crate::exit::{BAD_INPUT, BUSY, FAILED, REFUSED};
use crate::keys::error::MoveError;

#[derive(Debug)]
pub enum CliError {
    /// The engine (or the database under it) answered an error.
    Engine(Error),
    /// The arguments do not parse: clap's error, in the CLI's shape.
    Usage {
        message: String,
        /// The argument or subcommand at fault, as clap names it.
        argument: Option<String>,
    },
    /// Input the CLI itself found wrong, before or instead of a call.
    Input(String),
    /// Writing the answer failed.
    Output(std::io::Error),
    /// Moving a tenant's keys (copy, export, import, delete) failed.
    Move(Box<MoveError>),
    /// Something local failed that is not the caller's doing (a temporary
    /// file), or the demo saw an outcome the contract rules out.
    Failed(String),
    /// The engine refused, answering why as a value rather than an error
    /// (a timer's move): nothing was written.
    Refused {
        /// The refusal's stable name (`timer_held`, `run_sealed`...).
        error: &'static str,
        message: String,
        /// What was refused (the timer).
        detail: Option<String>,
    },
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Output(e)
    }
}

impl From<MoveError> for CliError {
    fn from(e: MoveError) -> Self {
        CliError::Move(Box::new(e))
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        CliError::Engine(e)
    }
}

impl From<&clap::Error> for CliError {
    fn from(e: &clap::Error) -> Self {
        let message = if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            // clap's text here is the whole help page.
            "a subcommand is missing (--help lists them)".to_owned()
        } else {
            one_line(&e.render().to_string())
        };
        // For a missing subcommand clap names the parent; that is no detail.
        let at_fault = match e.kind() {
            ErrorKind::InvalidSubcommand => ContextKind::InvalidSubcommand,
            _ => ContextKind::InvalidArg,
        };
        let argument = match e.get(at_fault) {
            Some(ContextValue::String(s)) => Some(s.clone()),
            Some(ContextValue::Strings(list)) => Some(list.join(", ")),
            _ => None,
        };
        CliError::Usage { message, argument }
    }
}

/// clap's rendered error without its prefix, usage block and help pointer,
/// on one line: the tips stay, since they name the fix.
fn one_line(rendered: &str) -> String {
    let text = rendered.trim().strip_prefix("error: ").unwrap_or(rendered);
    text.split("\n\n")
        .map(str::trim)
        .filter(|p| {
            !p.is_empty() && !p.starts_with("Usage:") && !p.starts_with("For more information")
        })
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// An error as `--json` prints it on stderr.
#[derive(Debug, Serialize)]
pub struct ErrorReport<'a> {
    /// A stable, machine-readable name: `excluded`, `not_found`, `invalid`...
    pub error: &'static str,
    /// The variant's payload where it has one (the holder, the state, the
    /// id, the argument, the database path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'a str>,
    /// For `stale`: the task's (or kind's) current revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    pub message: String,
    pub exit: u8,
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Engine(
                Error::Open(OpenError::Busy { .. })
                | Error::LockTimeout(_)
                | Error::Conflict { .. },
            ) => BUSY,
            CliError::Engine(Error::Open(OpenError::Missing { .. })) => BAD_INPUT,
            CliError::Engine(e) if e.is_refusal() => REFUSED,
            // A kind's definition changed since it was read: refused like
            // a stale task, not a failure.
            CliError::Engine(Error::Store(StoreError::Stale(_))) => REFUSED,
            CliError::Engine(e) if e.is_invalid_input() => BAD_INPUT,
            CliError::Engine(_) | CliError::Output(_) | CliError::Failed(_) => FAILED,
            CliError::Usage { .. } | CliError::Input(_) => BAD_INPUT,
            CliError::Move(e) => e.exit_code(),
            CliError::Refused { .. } => REFUSED,
        }
    }

    pub fn message(&self) -> String {
        match self {
            CliError::Engine(e) => {
                let mut text = with_sources(e);
                // What the operator can do about it, where that is not plain.
                if let Error::Open(open) = e {
                    text.push_str(match open {
                        OpenError::Busy { .. } => " (--wait sets how long to wait)",
                        OpenError::Missing { .. } => {
                            " (a command that writes creates it; check --db or LEASEHOLD_DB)"
                        }
                        OpenError::NeedsRecovery { .. } => {
                            " (`leasehold repair` repairs it, run by a user who may write the file, under --wait like any other)"
                        }
                        _ => "",
                    });
                }
                // The engine's own words name the verb; the operator runs
                // a command.
                if let Error::Store(StoreError::Storage(m)) = e
                    && m.contains("search index is being built")
                {
                    text.push_str(" (`leasehold build-search-index` builds it now)");
                }
                text
            }
            CliError::Usage { message, .. } => message.clone(),
            CliError::Input(m) => m.clone(),
            CliError::Output(e) => format!("cannot write the answer: {e}"),
            CliError::Failed(m) => m.clone(),
            CliError::Move(e) => with_sources(e.as_ref()),
            CliError::Refused { message, .. } => message.clone(),
        }
    }

    pub fn report(&self) -> ErrorReport<'_> {
        let (error, detail) = self.kind();
        let revision = match self {
            CliError::Engine(
                Error::Refused(Refusal::Stale(r)) | Error::Store(StoreError::Stale(r)),
            ) => Some(*r),
            _ => None,
        };
        ErrorReport {
            error,
            detail,
            revision,
            message: self.message(),
            exit: self.exit_code(),
        }
    }

    fn kind(&self) -> (&'static str, Option<&str>) {
        let e = match self {
            CliError::Usage { argument, .. } => return ("usage", argument.as_deref()),
            CliError::Input(_) => return ("invalid", None),
            CliError::Output(_) => return ("output", None),
            CliError::Failed(_) => return ("failed", None),
            CliError::Move(e) => return e.kind(),
            CliError::Refused { error, detail, .. } => return (error, detail.as_deref()),
            CliError::Engine(e) => e,
        };
        match e {
            Error::Refused(r) => match r {
                Refusal::NotFound(id) => ("not_found", Some(id)),
                Refusal::Excluded(a) => ("excluded", Some(a)),
                Refusal::WrongRole(a) => ("wrong_role", Some(a)),
                Refusal::NotPending(s) => ("not_pending", Some(s.as_str())),
                Refusal::AlreadyClaimed(h) => ("already_claimed", Some(h)),
                Refusal::NotHeld(a) => ("not_held", Some(a)),
                Refusal::Stale(_) => ("stale", None),
                _ => ("refused", None),
            },
            Error::Store(s) => match s {
                StoreError::NotFound(id) => ("not_found", Some(id)),
                StoreError::Invalid(why) => ("invalid", Some(why)),
                StoreError::Corrupt(d) => ("corrupt", Some(d)),
                StoreError::Storage(d) => ("storage", Some(d)),
                StoreError::NewerLayout(d) => ("newer_layout", Some(d)),
                StoreError::Stale(_) => ("stale", None),
            },
            Error::Open(open) => open_kind(open),
            Error::ReadOnly { verb } => ("read_only", Some(verb)),
            Error::LockTimeout(_) => ("busy", None),
            Error::Conflict { .. } => ("conflict", None),
            Error::Sandbox(_) => ("sandbox", None),
            Error::Storage(_) => ("storage", None),
            Error::Tenant { .. } => ("invalid_tenant", None),
            Error::Setup { .. } => ("setup", None),
            _ => ("error", None),
        }
    }
}

/// The name of an open failure, and the path it was about.
fn open_kind(e: &OpenError) -> (&'static str, Option<&str>) {
    let (name, path) = match e {
        OpenError::Busy { path, .. } => ("busy", path),
        OpenError::Missing { path } => ("no_database", path),
        OpenError::Empty { path } => ("empty_file", path),
        OpenError::NotADatabase { path, .. } => ("not_a_database", path),
        OpenError::NotLeasehold { path } => ("not_leasehold", path),
        OpenError::NeedsRecovery { path } => ("needs_recovery", path),
        OpenError::Io { path, .. } => ("cannot_open", path),
        OpenError::Storage { path, .. } => ("storage", path),
        _ => return ("cannot_open", None),
    };
    (name, path.to_str())
}

/// The error and each error under it, as one sentence.
pub fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clap_error_becomes_one_line_without_usage() {
        let rendered = "error: unexpected argument '--actr' found\n\n  tip: a similar argument exists: '--actor'\n\nUsage: leasehold task claim --actor <A> <ID>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "unexpected argument '--actr' found; tip: a similar argument exists: '--actor'"
        );
    }
}
