//! `leasehold token new`: a fresh random token for `serve`'s token file,
//! printed once with the line that grants it (the file keeps only its
//! hash). It opens no database; who a token may act as is `serve`'s.

use std::io::Write;

use clap::{Subcommand, ValueEnum};
use leasehold_serve::{Principal, Scope, new_token, token_line};

use crate::context::Context;
use crate::error::CliError;

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

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ScopeArg {
    Reviewer,
    Service,
    Operator,
}

fn scope(s: ScopeArg) -> Scope {
    match s {
        ScopeArg::Reviewer => Scope::Reviewer,
        ScopeArg::Service => Scope::Service,
        ScopeArg::Operator => Scope::Operator,
    }
}

pub fn fresh_token() -> Result<String, CliError> {
    new_token().map_err(|e| CliError::Failed(format!("no random bytes from the system: {e}")))
}

impl TokenCommand {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        token(self, cx, out).map(|()| 0)
    }
}

/// Prints a fresh token and the line that grants it in a token file.
fn token(verb: &TokenCommand, cx: &Context, out: &mut dyn Write) -> Result<(), CliError> {
    let TokenCommand::New {
        actor,
        roles,
        scope: s,
    } = verb;
    leasehold_host::tenant_prefix(cx.tenant_name()).map_err(leasehold_host::Error::from)?;
    let token = fresh_token()?;
    let principal = Principal {
        tenant: cx.tenant_name().to_owned(),
        actor: actor.clone(),
        roles: roles.clone(),
        scope: scope(*s),
    };
    if principal.actor.chars().any(char::is_whitespace)
        || principal
            .roles
            .iter()
            .any(|r| r.is_empty() || r.contains([',', ' ']))
    {
        return Err(CliError::Input(
            "actor and roles may not contain spaces, and roles no commas".to_owned(),
        ));
    }
    if cx.json() {
        let line = token_line(&token, &principal);
        let json = serde_json::json!({ "token": token, "line": line });
        writeln!(out, "{json}")?;
    } else {
        // The token, then its file line, one per line on stdout so a script
        // can read both; the advice goes to stderr.
        writeln!(out, "{token}")?;
        writeln!(out, "{}", token_line(&token, &principal))?;
        eprintln!(
            "The first line is the token, shown this once. Add the second line to the token \
             file given to `leasehold serve --tokens`."
        );
    }
    Ok(())
}
