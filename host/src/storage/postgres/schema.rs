//! Leasehold's tables in PostgreSQL: their SQL, their version and the
//! point index's key. It owns the shape of the data on the server and talks
//! to no server itself (`migrate` runs this SQL); it must never change the
//! shape a version names once that version has shipped.

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
///
/// Each batch runs as one transaction and first takes a transaction-level
/// advisory lock on the schema it works in, so hosts that start together on
/// a fresh database take turns instead of meeting in one another's catalog
/// and index locks (a deadlock), and the one that comes second finds the
/// work done.
pub(crate) const SCHEMA_SQL: &str = "
SELECT pg_advisory_xact_lock(19530, hashtext(current_schema()));
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
/// A hash index starts with buckets for the rows its table seems to hold
/// when it is built, and a serializable read locks the whole bucket it
/// visits: on a young table a few dozen buckets would make unrelated keys
/// meet there, and every key a call reads or writes is one more chance to.
/// The server judges the rows by the heap's size, so the index is built over
/// 12,000 placeholder rows of 1,900 bytes each (thousands of buckets, tens of
/// megabytes of index, so that calls on different tasks seldom meet even as
/// each reads and writes its change record too), under the empty tenant name
/// (which no caller can use), that the same transaction then deletes: the
/// index keeps its buckets, since a hash index never shrinks, and nobody
/// ever sees the rows. Wide rows rather than many make the heap as large for
/// a fraction of the work; below the size PostgreSQL compresses at, they
/// take the room they are written with. How many buckets there are is
/// tuning, not shape: version 2 names the tables and the index, whatever a
/// database's count.
pub(crate) const MIGRATE_FROM_1: &str = "
SELECT pg_advisory_xact_lock(19530, hashtext(current_schema()));
INSERT INTO leasehold_kv (tenant, key, value)
    SELECT '', int8send(g), decode(repeat('00', 1900), 'hex')
    FROM generate_series(1, 12000) AS g
    WHERE EXISTS (SELECT 1 FROM leasehold_meta WHERE name = 'schema-version' AND value = '1');
CREATE INDEX IF NOT EXISTS leasehold_kv_point ON leasehold_kv
    USING hash ((tenant || ':' || encode(key, 'hex'))) WITH (fillfactor = 10);
DELETE FROM leasehold_kv WHERE tenant = '';
UPDATE leasehold_meta SET value = '2' WHERE name = 'schema-version' AND value = '1';
";

/// Room each heap page of `leasehold_kv` keeps free, in percent of the page:
/// almost every call rewrites rows it read (a task, its log, a counter
/// shard, a feed head), and a new version that fits in its old page is a
/// HOT update, which writes no index entry and leaves nothing for vacuum to
/// clean from the indexes. Like the hash index's buckets it is tuning, not
/// shape: version 2 names the tables whatever a database's fill factor, so
/// hosts that set it and hosts that do not share a database.
pub(crate) const FILLFACTOR: u32 = 75;

/// Whether `leasehold_kv` already has [`FILLFACTOR`]: `$1` the option as
/// `pg_class.reloptions` spells it.
pub(crate) const FILLFACTOR_SET_SQL: &str = "SELECT EXISTS (SELECT 1 FROM pg_class \
     WHERE oid = 'leasehold_kv'::regclass AND $1::text = ANY(reloptions))";

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
