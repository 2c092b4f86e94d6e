// A durable store on SQLite (better-sqlite3): one table keyed by
// (tenant, key), so no key the guest can spell reaches another tenant, and
// BLOB keys that SQLite compares bytewise, as the kv contract orders them.
//
// Each call is one SQLite transaction: a write call takes the write lock up
// front (BEGIN IMMEDIATE), a read call reads a snapshot (a deferred BEGIN
// that only ever reads). The batch is applied and committed only after the
// call answered ok; anything else rolls back.
import Database from 'better-sqlite3';

import { LockTimeout } from './errors.js';

const blob = (bytes) => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));

class SqliteTxn {
  constructor(store, tenant, mode) {
    this.s = store;
    this.tenant = tenant;
    this.mode = mode;
    try {
      (mode === 'write' ? store.beginWrite : store.beginRead).run();
    } catch (e) {
      // better-sqlite3 waits up to its timeout for the lock, then throws.
      if (e.code === 'SQLITE_BUSY') {
        throw new LockTimeout(`another connection held the database's write lock past ${store.lockTimeoutMs} ms`, { cause: e });
      }
      throw e;
    }
  }

  get(key) {
    const row = this.s.getStmt.get(this.tenant, blob(key));
    return row === undefined ? undefined : row[0];
  }

  scan(start, end, limit, reverse, maxBytes) {
    const stmt = this.s.scanStmts[(end === undefined ? 0 : 2) + (reverse ? 1 : 0)];
    const params = end === undefined ? [this.tenant, blob(start), limit] : [this.tenant, blob(start), blob(end), limit];
    const entries = [];
    let bytes = 0;
    for (const [k, v] of stmt.iterate(...params)) {
      bytes += k.length + v.length;
      // Leaving the loop closes the statement's iterator.
      if (bytes > maxBytes) return { entries, over: true };
      entries.push([k, v]);
    }
    return { entries, over: false };
  }

  commit(batch) {
    if (this.mode === 'read' && batch.length > 0) {
      this.abort();
      throw new Error('a read transaction cannot write');
    }
    try {
      for (const { key, value } of batch) {
        if (value === null) this.s.deleteStmt.run(this.tenant, blob(key));
        else this.s.putStmt.run(this.tenant, blob(key), blob(value));
      }
      this.s.commitStmt.run();
    } catch (e) {
      this.abort();
      throw e;
    }
  }

  abort() {
    if (this.s.db.inTransaction) this.s.rollbackStmt.run();
  }
}

/**
 * Every tenant's keys in one SQLite file (or ':memory:').
 * `durability: 'immediate'` (the default) syncs each commit to disk;
 * `'none'` leaves that to the OS: atomic, but a crash may lose recent calls.
 * A writing call waits up to `lockTimeoutMs` for another connection's write
 * lock, then fails with a LockTimeout.
 */
export class SqliteStore {
  constructor(path, { durability = 'immediate', lockTimeoutMs = 5000 } = {}) {
    const db = new Database(path, { timeout: lockTimeoutMs });
    this.lockTimeoutMs = lockTimeoutMs;
    this.db = db;
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${durability === 'none' ? 'OFF' : 'FULL'}`);
    db.exec(`CREATE TABLE IF NOT EXISTS leasehold_kv (
      tenant TEXT NOT NULL,
      key BLOB NOT NULL,
      value BLOB NOT NULL,
      PRIMARY KEY (tenant, key)
    ) WITHOUT ROWID`);
    const raw = (sql) => db.prepare(sql).raw(true);
    this.getStmt = raw('SELECT value FROM leasehold_kv WHERE tenant = ? AND key = ?');
    const scan = (bound, order) =>
      raw(`SELECT key, value FROM leasehold_kv WHERE tenant = ? AND key >= ? ${bound} ORDER BY key ${order} LIMIT ?`);
    this.scanStmts = [scan('', 'ASC'), scan('', 'DESC'), scan('AND key < ?', 'ASC'), scan('AND key < ?', 'DESC')];
    this.putStmt = db.prepare('INSERT OR REPLACE INTO leasehold_kv (tenant, key, value) VALUES (?, ?, ?)');
    this.deleteStmt = db.prepare('DELETE FROM leasehold_kv WHERE tenant = ? AND key = ?');
    this.dumpStmt = raw('SELECT key, value FROM leasehold_kv WHERE tenant = ? ORDER BY key');
    this.beginWrite = db.prepare('BEGIN IMMEDIATE');
    this.beginRead = db.prepare('BEGIN DEFERRED');
    this.commitStmt = db.prepare('COMMIT');
    this.rollbackStmt = db.prepare('ROLLBACK');
  }

  /** One call's transaction on `tenant`'s keys; `mode` is 'read' or 'write'. */
  begin(tenant, mode) {
    return new SqliteTxn(this, tenant, mode);
  }

  /**
   * The kv import's `concurrent-writers`: SQLite lets one writer at a time
   * into the whole file, so writers never meet on a key.
   */
  get concurrentWriters() {
    return false;
  }

  /** Writes one key outside the component: for tests and repairs. */
  putRaw(tenant, key, value) {
    this.putStmt.run(tenant, blob(key), blob(value));
  }

  /** Every key and value of `tenant`, in key order. */
  dump(tenant) {
    return this.dumpStmt.all(tenant);
  }

  close() {
    this.db.close();
  }
}
