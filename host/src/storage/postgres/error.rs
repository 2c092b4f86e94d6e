//! What can go wrong talking to PostgreSQL, and how each failure reads in
//! the storage boundary's words. It owns [`PgError`] and the one mapping
//! from a driver error to a [`StorageError`]; it must never open a
//! connection or decide to retry.

use std::time::Duration;

use tokio_postgres::error::SqlState;

use crate::storage::error::StorageError;
use crate::storage::postgres::schema::SCHEMA_VERSION;
use crate::storage::postgres::tls::{SslMode, TlsError};

/// What went wrong talking to PostgreSQL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The server could not be reached or refused the login.
    #[error("cannot connect to PostgreSQL at {target}")]
    Connect {
        /// The server, as host and port.
        target: String,
        /// Why.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The tables exist but were made by another version of Leasehold.
    #[error(
        "the database holds Leasehold schema version {found:?}; this host knows version {SCHEMA_VERSION}"
    )]
    Schema {
        /// The version the database holds, if it says.
        found: Option<String>,
    },
    /// The TLS handshake failed: the server refused TLS that `sslmode`
    /// requires, or its certificate is not trusted or names another host.
    #[error("TLS with PostgreSQL at {target} failed (sslmode={})", .mode.name())]
    Tls {
        /// The server, as host and port.
        target: String,
        /// The `sslmode` asked for.
        mode: SslMode,
        /// Why.
        #[source]
        source: tokio_postgres::Error,
    },
    /// TLS could not be set up from the connection string.
    #[error("cannot set up TLS for PostgreSQL")]
    TlsSetup(#[source] TlsError),
    /// The server did not answer within the bound on this wait; the
    /// connection was dropped.
    #[error("PostgreSQL did not answer within {waited:?} when asked to {what}")]
    Timeout {
        /// What the call was doing.
        what: &'static str,
        /// How long it waited.
        waited: Duration,
    },
    /// The server cancelled the statement: its `statement_timeout` (or an
    /// operator) ended it.
    #[error("PostgreSQL cancelled the statement that was to {what}")]
    Canceled {
        /// What the call was doing.
        what: &'static str,
        /// Why.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement failed.
    #[error("PostgreSQL failed to {what}")]
    Query {
        /// What the call was doing.
        what: &'static str,
        /// Why.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The connection closed under the call.
    #[error("the connection to PostgreSQL closed before it could {what}")]
    Closed {
        /// What the call was doing.
        what: &'static str,
        /// Why.
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// A connection string that does not parse.
    #[error("invalid PostgreSQL connection string")]
    Url(#[source] tokio_postgres::Error),
    /// A parameter of the connection string with a value it cannot have.
    #[error("invalid {name} {value:?} in the PostgreSQL connection string: expected {expected}")]
    Param {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
}

impl PgError {
    /// Whether the server did not answer in time, or cancelled the
    /// statement for taking too long.
    pub fn is_timeout(&self) -> bool {
        matches!(self, PgError::Timeout { .. } | PgError::Canceled { .. })
    }
}

/// Whether the server said the transaction lost a race that running it again
/// can win.
fn is_conflict(e: &tokio_postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// A failed request in the storage boundary's words: a lost race is a
/// conflict, a cancelled statement or a closed connection leaves the store
/// unavailable, anything else is the statement's own failure.
pub(crate) fn failed(what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StorageError {
    move |source| {
        if is_conflict(&source) {
            StorageError::Conflict(Box::new(source))
        } else if source.code() == Some(&SqlState::QUERY_CANCELED) {
            StorageError::Unavailable(Box::new(PgError::Canceled { what, source }))
        } else if source.is_closed() {
            StorageError::Unavailable(Box::new(PgError::Closed {
                what,
                source: Some(source),
            }))
        } else {
            StorageError::Other(Box::new(PgError::Query { what, source }))
        }
    }
}
