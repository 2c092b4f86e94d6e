//! `leasehold serve` and `leasehold token new`: turn the flags into the
//! service's configuration and run it, or mint a token. The service itself
//! is `leasehold-serve`; this module must never decide who may do what.

use std::io::{IsTerminal, Write};

use std::path::PathBuf;
use std::sync::Arc;

use leasehold_serve::{
    Bounds, ClaimNames, Config, ConnectionLimits, Credentials, CursorKey, EventOptions, JwtConfig,
    JwtVerifier, Options, Principal, Reload, Scope, Server, TokenTable, new_token, token_line,
};

use super::args::{Cli, ScopeArg, ServeArgs, TokenCommand};
use super::commands::{builder, db_path};
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
    leasehold_host::tenant_prefix(cli.tenant()).map_err(leasehold_host::Error::from)?;
    let token = fresh_token()?;
    let principal = Principal {
        tenant: cli.tenant().to_owned(),
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

/// The files credentials are read from, at start and on every SIGHUP.
struct CredentialFiles {
    tokens: Option<PathBuf>,
    jwt: Option<(PathBuf, JwtConfig)>,
}

impl CredentialFiles {
    fn from_args(args: &ServeArgs) -> Self {
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

/// Runs the service until SIGTERM or SIGINT; SIGHUP reloads credentials.
pub fn serve(cli: &Cli, args: &ServeArgs) -> Result<(), CliError> {
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
    let db = db_path(cli);
    let config = Config {
        db: db.to_string_lossy().into_owned(),
        listen: args.listen,
        credentials,
        reload: Some(reload),
        options: Options {
            body_limit: args.body_limit,
            request_timeout: args.request_timeout,
            check_timeout: args.check_timeout,
            commit_grace: args.commit_grace,
            max_in_flight: args.max_in_flight,
            max_in_flight_per_tenant: args.max_in_flight_per_tenant,
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
        },
        engine: builder(cli),
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
