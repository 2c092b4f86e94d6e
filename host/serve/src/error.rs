//! Why the server could not start, or stopped with an error: the one
//! error enum of starting and running the server, each with its source. A
//! leaf; it must never carry a credential or a request's contents.

use std::net::SocketAddr;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// No credential could ever be accepted.
    #[error("no credential source: give --tokens FILE or --jwt-keys FILE, or --dev")]
    NoCredentials,
    /// The database could not be opened.
    #[error("cannot open the database: {0}")]
    Engine(#[source] leasehold_host::Error),
    /// The address could not be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime could not be started.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The TLS certificate or key could not be used.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// No cursor key could be made.
    #[error("cursor key: {0}")]
    CursorKey(#[source] crate::cursor::CursorKeyError),
    /// Serving failed.
    #[error("the server failed: {0}")]
    Serve(#[source] std::io::Error),
    /// The sweeper could not be started.
    #[error("cannot start the sweeper: {0}")]
    Sweeper(#[source] leasehold_host::SweeperError),
    /// The webhooks' HTTP client could not be built.
    #[error("cannot start webhook deliveries: {0}")]
    Webhooks(#[source] leasehold_webhooks::SenderError),
}
