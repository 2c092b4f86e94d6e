//! The PostgreSQL database the CLI's tests may use: the URL in
//! LEASEHOLD_TEST_PG (tests/pg-setup makes one). Without it a test says it
//! is skipped, in one line, unless LEASEHOLD_REQUIRE_PG is set (CI), which
//! makes a missing database a failure.

/// The database's URL, or none (the caller returns: skipped).
pub fn postgres() -> Option<String> {
    match std::env::var("LEASEHOLD_TEST_PG") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("LEASEHOLD_REQUIRE_PG").is_some() => {
            panic!("LEASEHOLD_REQUIRE_PG is set but LEASEHOLD_TEST_PG names no database")
        }
        _ => {
            eprintln!("skipped: no PostgreSQL here (LEASEHOLD_TEST_PG is not set)");
            None
        }
    }
}
