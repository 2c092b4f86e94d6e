//! The Leasehold HTTP service: JSON over HTTP under `/v1`, one endpoint or
//! action per WIT verb, over either backend. Every request carries a bearer
//! credential (a token from the token file, or a JWT from the deployment's
//! identity provider) that names exactly one tenant, actor, set of roles and
//! scope; the request body never chooses them. Errors are RFC 9457 problem
//! documents. The `leasehold serve` command runs it.
//!
//! ```no_run
//! use leasehold_serve::{Config, Credentials, Options, Server, TokenTable};
//!
//! let tokens = TokenTable::load("tokens.txt".as_ref())?;
//! let server = Server::start(Config {
//!     db: "worklist.redb".into(),
//!     listen: "127.0.0.1:8080".parse()?,
//!     credentials: Credentials { tokens, jwt: None },
//!     reload: None,
//!     options: Options::default(),
//!     engine: leasehold_host::Engine::builder(),
//!     tls: None,
//!     cursor_key: None,
//!     handle_signals: true,
//! })?;
//! println!("listening on {}", server.addr());
//! server.wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod access;
mod admission;
mod admit;
mod api;
mod auth;
pub mod backup;
mod backup_bounds;
mod body_rate;
mod caller_positions;
mod change;
mod connections;
mod cursor;
mod door;
mod drain;
mod error;
mod extract;
mod feed_pager;
mod holds;
mod inbox;
mod jwt;
mod long_poll;
mod openapi;
mod ops;
mod principal;
mod problem;
mod push;
mod reviewer_view;
mod revision;
mod router;
mod routes;
mod schema;
mod server;
mod shared_reads;
mod sse;
mod state;
mod timeline;
mod tls;
mod update;
mod waiters;
mod wire;

pub use auth::{
    AuthError, Credentials, LiveCredentials, Principal, Reload, Scope, TOKEN_PREFIX,
    TokenFileError, TokenTable, new_token, token_hash, token_line,
};
pub use backup_bounds::BackupLimits;
pub use body_rate::BodyRate;
pub use connections::ConnectionLimits;
pub use cursor::{CursorKey, CursorKeyError};
pub use holds::Bounds;
pub use inbox::CONTENT_SECURITY_POLICY;
pub use jwt::{ClaimNames, JwtConfig, JwtKeyError, JwtVerifier};
pub use problem::{ApiError, CATALOG as PROBLEM_CATALOG, Problem, TYPE_PREFIX};
pub use push::{IpNet, WebhookOptions};
pub use router::{REQUEST_ID, app, openapi, routes};
pub use routes::Route;
pub use server::{Config, ServeError, Server};
pub use state::Options;

/// A schedule as the API spells it (`/v1/schedules`); the CLI's `--json`
/// answers one so too, so a script reads one shape from either.
pub use api::schedules::Schedule as ScheduleJson;
pub use waiters::EventOptions;
