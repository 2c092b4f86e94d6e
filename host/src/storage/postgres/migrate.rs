//! Creating Leasehold's tables on first use, moving a version-1 database to
//! version 2, and giving the table its fill factor. It owns the one session that does this, before
//! any call runs; it must never migrate a version it does not know, and
//! never touch a tenant's rows.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use tokio_postgres::error::SqlState;

use crate::storage::error::StorageError;
use crate::storage::postgres::conn::{Connection, DriveError, drive, login};
use crate::storage::postgres::error::PgError;
use crate::storage::postgres::schema::{
    FILLFACTOR, FILLFACTOR_SET_SQL, MIGRATE_FROM_1, SCHEMA_SQL, SCHEMA_VERSION,
};
use crate::storage::postgres::settings::{DEFAULT_STATEMENT_TIMEOUT, Settings};
use crate::storage::postgres::tls::MakeRustls;

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
    // Hosts starting at once take turns (the batches' advisory lock); a
    // server that still reports a duplicate or a deadlock (an older host
    // beside this one takes no turn) finds the tables there on a retry.
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
                            || *c == SqlState::DUPLICATE_OBJECT
                            || *c == SqlState::T_R_DEADLOCK_DETECTED
                            || *c == SqlState::T_R_SERIALIZATION_FAILURE) =>
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
    // The fill factor, once per database: asked first, since `ALTER TABLE`
    // takes a lock that waits for (and holds up) other hosts' autovacuum and
    // their own setting of it. A role that does not own the table, or a
    // compatible engine without the option, keeps the table as it is: the
    // factor only spares work, and never decides what a call reads.
    let option = format!("fillfactor={FILLFACTOR}");
    let set = drive(
        &rt,
        &mut connection,
        trips,
        until,
        client.query_one(FILLFACTOR_SET_SQL, &[&option]),
    )
    .map(|row| row.get::<_, bool>(0));
    if matches!(set, Ok(false) | Err(DriveError::Query(_))) {
        let sql = format!("ALTER TABLE leasehold_kv SET (fillfactor = {FILLFACTOR})");
        if let Err(e) = drive(
            &rt,
            &mut connection,
            trips,
            until,
            client.batch_execute(&sql),
        ) {
            tracing::debug!(error = %e.into_error("set the fill factor"), "kept the table's fill factor");
        }
    }
    Ok(())
}
