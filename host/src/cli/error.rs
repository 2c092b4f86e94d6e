//! What can go wrong in one CLI invocation, and the exit code each calls for.
//!
//! The mapping is the CLI's contract with scripts: 1 when the engine refused
//! (a claim ladder rung, an unknown id), 2 when the caller's input was wrong,
//! 3 when storage or the sandbox failed. It lives here and nowhere else.

use leasehold_host::{Error, Refusal, StoreError};
use serde::Serialize;

/// Exit code: the engine refused, or `check` found discrepancies.
pub const REFUSED: u8 = 1;
/// Exit code: usage or input error.
pub const BAD_INPUT: u8 = 2;
/// Exit code: storage or sandbox failure.
pub const FAILED: u8 = 3;

#[derive(Debug)]
pub enum CliError {
    /// The engine (or the database under it) answered an error.
    Engine(Error),
    /// Input the CLI itself found wrong, before or instead of a call.
    Input(String),
    /// Writing the answer failed.
    Output(std::io::Error),
    /// Something local failed that is not the caller's doing (a temporary
    /// file), or the demo saw an outcome the contract rules out.
    Failed(String),
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Output(e)
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        CliError::Engine(e)
    }
}

/// An error as `--json` prints it on stderr.
#[derive(Debug, Serialize)]
pub struct ErrorReport<'a> {
    /// A stable, machine-readable name: `excluded`, `not_found`, `invalid`...
    pub error: &'static str,
    /// The variant's payload where it has one (the holder, the state, the id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'a str>,
    pub message: String,
    pub exit: u8,
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Engine(e) if e.is_refusal() => REFUSED,
            CliError::Engine(e) if e.is_invalid_input() => BAD_INPUT,
            CliError::Engine(_) | CliError::Output(_) | CliError::Failed(_) => FAILED,
            CliError::Input(_) => BAD_INPUT,
        }
    }

    pub fn message(&self) -> String {
        match self {
            CliError::Engine(e) => e.to_string(),
            CliError::Input(m) => m.clone(),
            CliError::Output(e) => format!("cannot write the answer: {e}"),
            CliError::Failed(m) => m.clone(),
        }
    }

    pub fn report(&self) -> ErrorReport<'_> {
        let (error, detail) = self.kind();
        ErrorReport {
            error,
            detail,
            message: self.message(),
            exit: self.exit_code(),
        }
    }

    fn kind(&self) -> (&'static str, Option<&str>) {
        let e = match self {
            CliError::Input(_) => return ("invalid", None),
            CliError::Output(_) => return ("output", None),
            CliError::Failed(_) => return ("failed", None),
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
                _ => ("refused", None),
            },
            Error::Store(s) => match s {
                StoreError::NotFound(id) => ("not_found", Some(id)),
                StoreError::Invalid(why) => ("invalid", Some(why)),
                StoreError::Corrupt(d) => ("corrupt", Some(d)),
                StoreError::Storage(d) => ("storage", Some(d)),
            },
            Error::Sandbox(_) => ("sandbox", None),
            Error::Storage(_) => ("storage", None),
            Error::Tenant { .. } => ("invalid_tenant", None),
            Error::Setup(_) | Error::Open { .. } => ("setup", None),
            Error::LockTimeout(_) => ("busy", None),
            Error::ReadOnly => ("read_only", None),
            _ => ("error", None),
        }
    }
}
