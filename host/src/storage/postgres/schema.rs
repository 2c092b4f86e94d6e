//! Leasehold's tables in PostgreSQL: their SQL, their version, the point
//! index's key, and creating or migrating them on first use. It owns the
//! shape of the data on the server; it must never run a call's reads or
//! writes, and never migrate a version it does not know.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use tokio_postgres::error::SqlState;

use crate::storage::error::StorageError;
use crate::storage::postgres::conn::{Connection, DriveError, drive, login};
use crate::storage::postgres::error::PgError;
use crate::storage::postgres::settings::{DEFAULT_STATEMENT_TIMEOUT, Settings};
use crate::storage::postgres::tls::MakeRustls;

/// The version of the tables below. Another version is refused, never
/// misread or migrated behind the caller's back.
pub const SCHEMA_VERSION: &str = "2";

/// The table of every tenant's keys: `(tenant, key, value)`.
pub const PG_TABLE: &str = "leasehold_kv";

/// Tables are created on first use, in the connection's `search_path`.
/// `COLLATE "C"` keeps tenant comparison bytewise; `bytea` compares as bytes,
/// which is the order the guest's keys are built for.
///
/// Point reads and deletes go through `leasehold_kv_point`, a hash index,
/// never the primary key's B-tree: SERIALIZABLE reads lock what they visit,
/// and a B-tree visit locks a whole leaf page of neighbouring keys, while a
/// hash visit locks one bucket of keys whose hashes meet. Range scans still
/// use the B-tree and lock the pages they cover, as they must.
const SCHEMA_SQL: &str = "
CREATE TABLE IF NOT EXISTS leasehold_meta (
    name text COLLATE \"C\" PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS leasehold_kv (
    tenant text COLLATE \"C\" NOT NULL,
    key bytea NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (tenant, key)
);
INSERT INTO leasehold_meta (name, value) VALUES ('schema-version', '1')
    ON CONFLICT (name) DO NOTHING;
";

/// Version 2 is version 1 with the hash index: a version-1 database (or a
/// fresh one) gets the index and its new mark in one transaction.
///
/// A hash index starts with buckets for the rows its table has when it is
/// built, and a serializable read locks the whole bucket it visits: on a
/// young table a few dozen buckets would make unrelated keys meet there. So
/// the index is built over 30,000 placeholder rows (some hundreds of
/// buckets, a few megabytes of index), under the empty tenant name (which no
/// caller can use), that the same transaction then deletes: the index keeps
/// their buckets, since a hash index never shrinks, and nobody ever sees the
/// rows.
const MIGRATE_FROM_1: &str = "
INSERT INTO leasehold_kv (tenant, key, value)
    SELECT '', int8send(g), '' FROM generate_series(1, 30000) AS g;
CREATE INDEX IF NOT EXISTS leasehold_kv_point ON leasehold_kv
    USING hash ((tenant || ':' || encode(key, 'hex'))) WITH (fillfactor = 10);
DELETE FROM leasehold_kv WHERE tenant = '';
UPDATE leasehold_meta SET value = '2' WHERE name = 'schema-version' AND value = '1';
";

/// The hash index's key of `key` in `tenant`: the tenant, a `:`, and the key
/// in hex. Tenant names hold no `:`, so no two (tenant, key) pairs share
/// one, and rows found by it need no second check. The SQL spells the same
/// expression as the index, or the planner would not use the index.
pub(crate) fn point(tenant: &str, key: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(tenant.len() + 1 + 2 * key.len());
    s.push_str(tenant);
    s.push(':');
    for b in key {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 15)]));
    }
    s
}

/// Creates the tables if they are missing and checks their version.
pub(crate) fn prepare_schema(
    settings: &Settings,
    tls: &MakeRustls,
    trips: &AtomicU64,
) -> Result<(), StorageError> {
    let (rt, client, mut connection) = login(settings, tls, trips)?;
    // Creating the index on a large version-1 table takes as long as it
    // takes; only the server's statement timeout bounds it.
    let until = Instant::now() + settings.connect_timeout + DEFAULT_STATEMENT_TIMEOUT;
    // Two hosts starting at once may both try to create the tables; the
    // loser's error is a duplicate, and the tables are there on its retry.
    let setup = |sql: &'static str, what: &'static str, connection: &mut Connection| {
        let mut tries = 0;
        loop {
            tries += 1;
            match drive(&rt, connection, trips, until, client.batch_execute(sql)) {
                Ok(()) => return Ok(()),
                Err(DriveError::Query(e))
                    if tries < 5
                        && matches!(e.code(), Some(c) if *c == SqlState::UNIQUE_VIOLATION
                            || *c == SqlState::DUPLICATE_TABLE
                            || *c == SqlState::DUPLICATE_OBJECT) =>
                {
                    continue;
                }
                Err(e) => return Err(e.into_error(what)),
            }
        }
    };
    setup(SCHEMA_SQL, "create Leasehold's tables", &mut connection)?;
    let version = |connection: &mut Connection| {
        drive(
            &rt,
            connection,
            trips,
            until,
            client.query_opt(
                "SELECT value FROM leasehold_meta WHERE name = 'schema-version'",
                &[],
            ),
        )
        .map(|row| row.map(|r| r.get::<_, String>(0)))
        .map_err(|e| e.into_error("read the schema version"))
    };
    let mut found = version(&mut connection)?;
    if found.as_deref() == Some("1") {
        setup(
            MIGRATE_FROM_1,
            "add the point index (schema version 1 to 2)",
            &mut connection,
        )?;
        found = version(&mut connection)?;
    }
    if found.as_deref() != Some(SCHEMA_VERSION) {
        return Err(StorageError::Other(Box::new(PgError::Schema { found })));
    }
    Ok(())
}
