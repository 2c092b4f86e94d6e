//! The connection string: what the driver parses, the libpq parameters it
//! does not know (`sslmode` beyond `require`, `sslrootcert`), and the
//! defaults that bound every wait. It opens nothing and never puts the
//! password in an error.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::Config;

use crate::storage::postgres::error::PgError;
use crate::storage::postgres::tls::SslMode;

/// Whether `text` names a PostgreSQL database rather than a file.
pub fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// How long logging in may take, TLS and authentication included, unless
/// `connect_timeout` says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP keepalive, unless `keepalives*` say otherwise: an idle connection to
/// a host that vanished is found out within about a minute, not two hours.
pub const DEFAULT_KEEPALIVES_IDLE: Duration = Duration::from_secs(30);
pub const DEFAULT_KEEPALIVES_INTERVAL: Duration = Duration::from_secs(10);
pub const DEFAULT_KEEPALIVES_RETRIES: u32 = 3;
/// How long sent data may go unacknowledged before the kernel gives up on
/// the connection, unless `tcp_user_timeout` says otherwise.
pub const DEFAULT_TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);
/// The server's own bound on one statement, unless `options` set
/// `statement_timeout`: a backstop for a server that is slow, not gone.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The server's bound on a transaction left open by a host that stopped
/// (frozen, or cut off), unless `options` set it.
pub const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// Run on each new connection after its timeouts are set: keeps the
/// session's `statement_timeout`, whatever set it, where a read-only call
/// restores it from after waiting for its snapshot under a shorter one
/// (see `txn::SAFE_SNAPSHOT_WAIT`).
const KEEP_STATEMENT_TIMEOUT: &str = "SELECT set_config('leasehold.statement_timeout', \
     current_setting('statement_timeout'), false);";

/// The parameters this module takes out before the driver parses the rest.
const OWN: [&str; 2] = ["sslmode", "sslrootcert"];

/// A parsed connection string.
#[derive(Clone)]
pub struct Settings {
    /// The driver's configuration, with the defaults above filled in.
    pub config: Config,
    pub ssl_mode: SslMode,
    pub root_cert: Option<PathBuf>,
    /// Bounds the whole login.
    pub connect_timeout: Duration,
    /// `SET` on each new connection: the server-side timeouts the
    /// connection string's `options` did not set, and the one kept for
    /// read-only calls to restore.
    pub session_sql: String,
}

impl Settings {
    pub fn parse(url: &str) -> Result<Settings, PgError> {
        let (rest, own, seen) = if is_url(url) {
            split_url(url)
        } else {
            split_key_values(url)?
        };
        let mut config: Config = rest.parse().map_err(PgError::Url)?;
        let mut ssl_mode = SslMode::Prefer;
        let mut root_cert = None;
        for (k, v) in own {
            match k.as_str() {
                "sslmode" => {
                    ssl_mode = SslMode::parse(&v).ok_or(PgError::Param {
                        name: "sslmode",
                        value: v.clone(),
                        expected: "disable, prefer, require, verify-ca or verify-full",
                    })?;
                }
                _ => root_cert = Some(PathBuf::from(v)),
            }
        }
        config.ssl_mode(ssl_mode.driver_mode());
        let has = |k: &str| seen.contains(k);
        if !has("connect_timeout") {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if !has("keepalives_idle") {
            config.keepalives_idle(DEFAULT_KEEPALIVES_IDLE);
        }
        if !has("keepalives_interval") {
            config.keepalives_interval(DEFAULT_KEEPALIVES_INTERVAL);
        }
        if !has("keepalives_retries") {
            config.keepalives_retries(DEFAULT_KEEPALIVES_RETRIES);
        }
        if !has("tcp_user_timeout") {
            config.tcp_user_timeout(DEFAULT_TCP_USER_TIMEOUT);
        }
        let connect_timeout = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let options = config.get_options().unwrap_or("").to_owned();
        // A sequential scan under SERIALIZABLE locks the whole table against
        // every writer; on a small or unanalyzed table the planner picks one
        // even for a point read. Off, it takes an index whenever one serves.
        // Leasehold's statements are prepared once per connection and have
        // one good plan whatever their parameters (a primary-key range, or
        // hash-index points). Left to choose, the server plans some of them
        // afresh on every execution, which costs more than running them.
        let mut session_sql =
            String::from("SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan;");
        for (name, default) in [
            ("statement_timeout", DEFAULT_STATEMENT_TIMEOUT),
            (
                "idle_in_transaction_session_timeout",
                DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
            ),
        ] {
            if !options.contains(name) {
                session_sql.push_str(&format!("SET {name} = {};", default.as_millis()));
            }
        }
        session_sql.push_str(KEEP_STATEMENT_TIMEOUT);
        Ok(Settings {
            config,
            ssl_mode,
            root_cert,
            connect_timeout,
            session_sql,
        })
    }
}

type Split = (String, Vec<(String, String)>, HashSet<String>);

/// `postgres://…?k=v&…`: takes out this module's parameters.
fn split_url(url: &str) -> Split {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), Vec::new(), HashSet::new());
    };
    let (mut kept, mut own, mut seen) = (Vec::new(), Vec::new(), HashSet::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        seen.insert(k.to_owned());
        if OWN.contains(&k) {
            own.push((k.to_owned(), percent_decode(v)));
        } else {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, own, seen)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (hex(bytes.get(i + 1)), hex(bytes.get(i + 2)))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `k=v k='v w' …`: takes out this module's parameters and writes the rest
/// back, quoted, for the driver.
fn split_key_values(text: &str) -> Result<Split, PgError> {
    let (mut kept, mut own, mut seen) = (String::new(), Vec::new(), HashSet::new());
    let mut chars = text.chars().peekable();
    let malformed = || PgError::Param {
        name: "connection string",
        value: String::new(),
        expected: "space-separated key=value pairs",
    };
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(malformed());
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.push(chars.next().ok_or_else(malformed)?),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => return Err(malformed()),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.push(chars.next().ok_or_else(malformed)?);
                } else {
                    value.push(c);
                }
            }
        }
        seen.insert(key.clone());
        if OWN.contains(&key.as_str()) {
            own.push((key, value));
        } else {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push_str(&format!("{key}='{quoted}' "));
        }
    }
    Ok((kept, own, seen))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_modes_and_the_root_cert_are_taken_out_of_a_url() {
        let s = Settings::parse(
            "postgres://u:p@db.example:5433/work?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x",
        )
        .expect("parses");
        assert_eq!(s.ssl_mode, SslMode::VerifyFull);
        assert_eq!(s.root_cert, Some(PathBuf::from("/tmp/ca.pem")));
        assert_eq!(s.config.get_application_name(), Some("x"));
        assert_eq!(s.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert!(s.session_sql.contains("statement_timeout"));
    }

    #[test]
    fn verify_modes_and_the_root_cert_are_taken_out_of_key_values() {
        let s = Settings::parse(
            "host=db user=u sslmode=verify-ca sslrootcert='/a b/ca.pem' connect_timeout=3 \
             options='-c statement_timeout=1000'",
        )
        .expect("parses");
        assert_eq!(s.ssl_mode, SslMode::VerifyCa);
        assert_eq!(s.root_cert, Some(PathBuf::from("/a b/ca.pem")));
        assert_eq!(s.connect_timeout, Duration::from_secs(3));
        assert_eq!(s.config.get_user(), Some("u"));
        assert!(!s.session_sql.contains("SET statement_timeout"));
        assert!(s.session_sql.contains("leasehold.statement_timeout"));
        assert!(
            s.session_sql
                .contains("idle_in_transaction_session_timeout")
        );
    }

    #[test]
    fn an_unknown_sslmode_is_refused_by_name() {
        let e = Settings::parse("postgres://u@h/db?sslmode=verify")
            .err()
            .expect("refused");
        assert!(e.to_string().contains("sslmode"), "{e}");
    }
}
