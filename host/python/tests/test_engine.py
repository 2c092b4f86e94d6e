"""The engine's own promises beyond one call: a bounded number of instances
however many tenants it serves, the same error classes and fields as the
JavaScript package, a busy SQLite file reported as a retryable LockTimeout,
and a closed engine refusing calls with a StorageFailure."""

import sqlite3

import pytest

import leasehold as lh


def task(id, **extra):
    return lh.Task(id=id, run="r1", kind="k", created_at=1, **extra)


def test_many_tenants_hold_at_most_cached_instances_least_recently_used_evicted_first():
    engine = lh.open(lh.MemoryStore(), limits=lh.Limits(cached_instances=4))
    for i in range(40):
        t = engine.tenant(f"tenant-{i}")
        t.open(task("a"))
        assert t.open_count() == 1
        assert engine.instances_cached <= 4
    assert engine.instances_made == 40
    engine.tenant("tenant-39").get("a")
    assert engine.instances_made == 40, "a cached instance was made again"
    assert engine.tenant("tenant-0").get("a").id == "a"
    assert engine.instances_made == 41, "an evicted instance was not made again"
    assert engine.instances_cached == 4


def test_cached_instances_zero_makes_a_fresh_instance_for_every_call_as_the_rust_host_does():
    engine = lh.open(lh.MemoryStore(), limits=lh.Limits(cached_instances=0))
    t = engine.tenant("acme")
    t.open(task("a"))
    assert t.get("a").id == "a"
    assert t.claim("a", "bob", []).assignee == "bob"
    assert engine.instances_made == 3
    assert engine.instances_cached == 0


def test_a_refusal_has_one_spelling_in_both_packages_case_and_detail_with_tag_as_an_alias():
    t = lh.open(lh.MemoryStore()).tenant("acme")
    t.open(task("t1"))
    t.claim("t1", "bob", [])
    with pytest.raises(lh.ClaimRefusal) as e:
        t.claim("t1", "alice", [])
    r = e.value
    assert (r.case, r.detail, r.tag, r.retryable, r.invalid_input) == ("already-claimed", "bob", "already-claimed", True, False)


def test_a_busy_sqlite_file_is_a_retryable_lock_timeout_and_the_call_succeeds_once_the_lock_is_free(tmp_path):
    path = str(tmp_path / "busy.db")
    engine = lh.open(lh.SqliteStore(path, lock_timeout=0.05))
    t = engine.tenant("acme")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(lh.LockTimeout) as e:
        t.open(task("t1"))
    assert isinstance(e.value, lh.StorageFailure) and e.value.retryable
    other.execute("ROLLBACK")
    other.close()
    assert t.open(task("t1")).id == "t1"
    engine.close()


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_call_after_close_is_a_storage_failure_not_the_drivers_error(tmp_path, kind):
    store = lh.SqliteStore(str(tmp_path / "closed.db")) if kind == "sqlite" else lh.MemoryStore()
    engine = lh.open(store)
    t = engine.tenant("acme")
    t.open(task("t1"))
    engine.close()
    with pytest.raises(lh.StorageFailure, match="closed"):
        t.get("t1")


def test_a_store_closed_under_the_engine_is_a_storage_failure(tmp_path):
    store = lh.SqliteStore(str(tmp_path / "closed-store.db"))
    engine = lh.open(store)
    store.close()
    with pytest.raises(lh.StorageFailure) as e:
        engine.tenant("acme").get("t1")
    assert not isinstance(e.value, lh.LockTimeout)
