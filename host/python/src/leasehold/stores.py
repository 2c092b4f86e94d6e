"""The stores behind the component's ``kv`` import. A store serves one
tenant's keys inside one call's transaction: snapshot reads (``get``, ordered
``scan``), then, only if the call answered ok, one batch applied atomically.
Each keeps tenants apart itself, so no key the guest can spell reaches
another tenant.

A transaction's ``commit(batch)`` takes ``(key, value)`` pairs, where a value
of None deletes the key.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Iterable
from typing import Literal, Protocol

from .errors import LockTimeout

Mode = Literal["read", "write"]
Batch = Iterable[tuple[bytes, bytes | None]]


class Txn(Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def scan(
        self, start: bytes, end: bytes | None, limit: int, reverse: bool, max_bytes: int
    ) -> tuple[list[tuple[bytes, bytes]], bool]:
        """Up to ``limit`` entries with ``start <= key < end``, in key order or
        its reverse; stops early (answering what it has and True) once the
        entries hold more than ``max_bytes``."""
        ...

    def commit(self, batch: Batch) -> None: ...

    def abort(self) -> None: ...


class Store(Protocol):
    #: Whether other processes write the same tenants' keys at once: the kv
    #: import's ``concurrent-writers``, by which the component lays out a
    #: fresh keyspace.
    concurrent_writers: bool

    def begin(self, tenant: str, mode: Mode) -> Txn: ...

    def put_raw(self, tenant: str, key: bytes, value: bytes) -> None:
        """Writes one key outside the component: for tests and repairs."""
        ...

    def dump(self, tenant: str) -> list[tuple[bytes, bytes]]:
        """Every key and value of ``tenant``, in key order."""
        ...

    def close(self) -> None: ...


class _Keyspace:
    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.values: dict[bytes, bytes] = {}

    def put(self, key: bytes, value: bytes) -> None:
        if key not in self.values:
            bisect.insort(self.keys, key)
        self.values[key] = value

    def delete(self, key: bytes) -> None:
        if self.values.pop(key, None) is not None:
            del self.keys[bisect.bisect_left(self.keys, key)]


class _MemoryTxn:
    def __init__(self, space: _Keyspace, mode: Mode) -> None:
        self.space = space
        self.mode = mode

    def get(self, key: bytes) -> bytes | None:
        return self.space.values.get(key)

    def scan(self, start, end, limit, reverse, max_bytes):
        keys, values = self.space.keys, self.space.values
        lo = bisect.bisect_left(keys, start)
        hi = len(keys) if end is None else bisect.bisect_left(keys, end)
        order = range(hi - 1, lo - 1, -1) if reverse else range(lo, hi)
        out: list[tuple[bytes, bytes]] = []
        size = 0
        for i in order:
            if len(out) == limit:
                break
            k = keys[i]
            v = values[k]
            size += len(k) + len(v)
            if size > max_bytes:
                return out, True
            out.append((k, v))
        return out, False

    def commit(self, batch: Batch) -> None:
        batch = list(batch)
        if self.mode == "read" and batch:
            raise RuntimeError("a read transaction cannot write")
        for key, value in batch:
            if value is None:
                self.space.delete(key)
            else:
                self.space.put(key, value)

    def abort(self) -> None:
        pass


class MemoryStore:
    """Every tenant's keys in memory, one sorted keyspace per tenant. Calls
    run one at a time (the engine holds a lock) and a call's writes arrive
    only when it commits, so each call reads the store as it began."""

    #: No other process can write this process's memory.
    concurrent_writers = False

    def __init__(self) -> None:
        self._tenants: dict[str, _Keyspace] = {}

    def _space(self, tenant: str) -> _Keyspace:
        return self._tenants.setdefault(tenant, _Keyspace())

    def begin(self, tenant: str, mode: Mode) -> _MemoryTxn:
        return _MemoryTxn(self._space(tenant), mode)

    def put_raw(self, tenant: str, key: bytes, value: bytes) -> None:
        self._space(tenant).put(bytes(key), bytes(value))

    def dump(self, tenant: str) -> list[tuple[bytes, bytes]]:
        s = self._space(tenant)
        return [(k, s.values[k]) for k in s.keys]

    def close(self) -> None:
        pass


_SCHEMA = """CREATE TABLE IF NOT EXISTS leasehold_kv (
    tenant TEXT NOT NULL,
    key BLOB NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID"""


class _SqliteTxn:
    def __init__(self, db: sqlite3.Connection, tenant: str, mode: Mode, lock_timeout: float) -> None:
        self.db = db
        self.tenant = tenant
        self.mode = mode
        # A write call takes the write lock up front; a read call reads one
        # snapshot and never writes.
        try:
            db.execute("BEGIN IMMEDIATE" if mode == "write" else "BEGIN DEFERRED")
        except sqlite3.OperationalError as e:
            # sqlite3 waits up to its timeout for the lock, then raises.
            if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY or "locked" in str(e):
                raise LockTimeout(
                    f"another connection held the database's write lock past {lock_timeout} s"
                ) from e
            raise

    def get(self, key: bytes) -> bytes | None:
        row = self.db.execute(
            "SELECT value FROM leasehold_kv WHERE tenant = ? AND key = ?", (self.tenant, key)
        ).fetchone()
        return None if row is None else row[0]

    def scan(self, start, end, limit, reverse, max_bytes):
        order = "DESC" if reverse else "ASC"
        if end is None:
            sql = f"SELECT key, value FROM leasehold_kv WHERE tenant = ? AND key >= ? ORDER BY key {order} LIMIT ?"
            params: tuple = (self.tenant, start, limit)
        else:
            sql = f"SELECT key, value FROM leasehold_kv WHERE tenant = ? AND key >= ? AND key < ? ORDER BY key {order} LIMIT ?"
            params = (self.tenant, start, end, limit)
        out: list[tuple[bytes, bytes]] = []
        size = 0
        for k, v in self.db.execute(sql, params):
            size += len(k) + len(v)
            if size > max_bytes:
                return out, True
            out.append((k, v))
        return out, False

    def commit(self, batch: Batch) -> None:
        batch = list(batch)
        if self.mode == "read" and batch:
            self.abort()
            raise RuntimeError("a read transaction cannot write")
        try:
            for key, value in batch:
                if value is None:
                    self.db.execute("DELETE FROM leasehold_kv WHERE tenant = ? AND key = ?", (self.tenant, key))
                else:
                    self.db.execute(
                        "INSERT OR REPLACE INTO leasehold_kv (tenant, key, value) VALUES (?, ?, ?)",
                        (self.tenant, key, value),
                    )
            self.db.execute("COMMIT")
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")


class SqliteStore:
    """Every tenant's keys in one SQLite file (or ``":memory:"``), one table
    keyed by ``(tenant, key)`` with BLOB keys, which SQLite compares bytewise
    as the kv contract orders them. One SQLite transaction per call.
    ``durability="immediate"`` (the default) syncs each commit to disk;
    ``"none"`` leaves that to the OS: atomic, but a crash may lose recent
    calls. A writing call waits up to ``lock_timeout`` seconds for another
    connection's write lock, then fails with a ``LockTimeout``."""

    #: SQLite lets one writer at a time into the whole file, so writers never
    #: meet on a key.
    concurrent_writers = False

    def __init__(
        self, path: str, *, durability: Literal["immediate", "none"] = "immediate", lock_timeout: float = 5.0
    ) -> None:
        # Autocommit mode: the transactions are this store's own BEGINs.
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=lock_timeout)
        self.lock_timeout = lock_timeout
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute(f"PRAGMA synchronous = {'OFF' if durability == 'none' else 'FULL'}")
        self.db.execute(_SCHEMA)

    def begin(self, tenant: str, mode: Mode) -> _SqliteTxn:
        return _SqliteTxn(self.db, tenant, mode, self.lock_timeout)

    def put_raw(self, tenant: str, key: bytes, value: bytes) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO leasehold_kv (tenant, key, value) VALUES (?, ?, ?)",
            (tenant, bytes(key), bytes(value)),
        )

    def dump(self, tenant: str) -> list[tuple[bytes, bytes]]:
        return list(self.db.execute("SELECT key, value FROM leasehold_kv WHERE tenant = ? ORDER BY key", (tenant,)))

    def close(self) -> None:
        self.db.close()
