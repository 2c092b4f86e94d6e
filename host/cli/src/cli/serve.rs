//! `leasehold serve` and `leasehold token new`: turn the flags into the
//! service's configuration and run it, or mint a token. The service itself
//! is `leasehold-serve`; this module must never decide who may do what.

use std::io::Write;

use leasehold_host::{Engine, Reuse};
use leasehold_serve::{
    ClaimNames, Config, Credentials, JwtConfig, JwtVerifier, Options, Principal, Scope, Server,
    TokenTable, new_token, token_line,
};

use super::args::{Cli, ScopeArg, ServeArgs, TokenCommand};
use super::commands::db_path;
use super::error::CliError;

fn scope(s: ScopeArg) -> Scope {
    match s {
        ScopeArg::Reviewer => Scope::Reviewer,
        ScopeArg::Service => Scope::Service,
        ScopeArg::Operator => Scope::Operator,
    }
}

fn fresh_token() -> Result<String, CliError> {
    new_token().map_err(|e| CliError::Failed(format!("no random bytes from the system: {e}")))
}

/// Prints a fresh token and the line that grants it in a token file.
pub fn token(cli: &Cli, verb: &TokenCommand, out: &mut impl Write) -> Result<(), CliError> {
    let TokenCommand::New {
        actor,
        roles,
        scope: s,
    } = verb;
    leasehold_host::tenant_prefix(&cli.tenant).map_err(leasehold_host::Error::from)?;
    let token = fresh_token()?;
    let principal = Principal {
        tenant: cli.tenant.clone(),
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
    if cli.json {
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

/// Runs the service until SIGTERM or SIGINT.
pub fn serve(cli: &Cli, args: &ServeArgs) -> Result<(), CliError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second subscriber (in-process tests) is not an error worth failing.
    let _ = if args.log_json {
        logs.json().try_init()
    } else {
        logs.try_init()
    };

    let mut credentials = Credentials::default();
    if let Some(path) = &args.tokens {
        credentials.tokens = TokenTable::load(path).map_err(|e| CliError::Input(e.to_string()))?;
    }
    if let Some(path) = &args.jwt_keys {
        let config = JwtConfig {
            issuer: args.jwt_issuer.clone().unwrap_or_default(),
            audience: args.jwt_audience.clone().unwrap_or_default(),
            claims: ClaimNames {
                tenant: args.jwt_tenant_claim.clone(),
                actor: args.jwt_actor_claim.clone(),
                roles: args.jwt_roles_claim.clone(),
                scope: args.jwt_scope_claim.clone(),
            },
        };
        credentials.jwt =
            Some(JwtVerifier::load(path, config).map_err(|e| CliError::Input(e.to_string()))?);
    }
    if args.dev {
        let token = fresh_token()?;
        let tenant = format!("dev-{}", &fresh_token()?[3..11]);
        credentials.tokens.insert(
            &token,
            Principal {
                tenant: tenant.clone(),
                actor: "dev".to_owned(),
                roles: Vec::new(),
                scope: Scope::Operator,
            },
        );
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
    let db = db_path(cli);
    let config = Config {
        db: db.to_string_lossy().into_owned(),
        listen: args.listen,
        credentials,
        options: Options {
            body_limit: args.body_limit,
            request_timeout: args.request_timeout,
            max_in_flight: args.max_in_flight,
        },
        engine: if args.reuse_instances {
            Engine::builder()
                .file_wait(cli.wait)
                .reuse_instances(Reuse::default())
        } else {
            Engine::builder().file_wait(cli.wait)
        },
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
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
