"""The sandbox, proved with the hostile fixture component the Rust suite uses
(tests/fixtures/hostile): a guest that loops, hoards memory, breaks a limit
or answers what the contract rules out is stopped and reported by name, the
host keeps serving, and nothing the guest staged commits."""

import json
import sqlite3

import pytest

import leasehold as lh

#: A deadline only a guest that never returns can pass.
SHORT = 1.0


def task(id):
    return lh.Task(id=id, run="r", kind="k", created_at=1)


@pytest.fixture
def hostile(hostile_wasm):
    def make(**limits):
        store = lh.MemoryStore()
        engine = lh.open(store, limits=lh.Limits(**limits), component=hostile_wasm)
        return store, engine, engine.tenant("acme")

    return make


def fails(kind, f, *args):
    with pytest.raises(lh.SandboxError) as e:
        f(*args)
    assert e.value.kind == kind, str(e.value)


def still_serves(t):
    assert t.get("plain") is None


def test_a_guest_that_loops_forever_is_stopped_at_the_deadline_and_the_host_keeps_serving(hostile):
    _, _, t = hostile(deadline=SHORT)
    fails("deadline", t.get, "loop")
    still_serves(t)


def test_a_write_followed_by_a_deadline_commits_nothing(hostile):
    store, _, t = hostile(deadline=SHORT)
    fails("deadline", t.open, task("write-then-loop"))
    fails("deadline", t.open, task("read-then-loop"))
    assert store.dump("acme") == []


def test_a_guest_that_allocates_without_bound_is_stopped_at_the_memory_cap(hostile):
    # wasmtime-py's store limits refuse the memory.grow but give no callback
    # to say so, so the trap that follows is reported as a trap.
    _, _, t = hostile(memory_bytes=16 << 20)
    fails("trap", t.get, "alloc")
    still_serves(t)


def test_writes_commit_when_the_guest_answers_ok_and_none_when_it_traps_or_answers_an_error(hostile):
    store, _, t = hostile()
    fails("trap", t.open, task("write-then-trap"))
    with pytest.raises(lh.StoreError) as e:
        t.open(task("write-then-error"))
    assert e.value.case == "invalid"
    assert store.dump("acme") == []
    t.open(task("write-ok"))
    assert [k for k, _ in store.dump("acme")] == [b"hostile-ok"]


class _FailingStore(lh.MemoryStore):
    """The memory store, but the commit after ``fail_next`` is set fails
    (once), as a disk that is gone or a database that went away would."""

    def __init__(self):
        super().__init__()
        self.fail_next = False

    def begin(self, tenant, mode):
        txn = super().begin(tenant, mode)
        store = self
        commit = txn.commit

        def failing(batch):
            if store.fail_next:
                store.fail_next = False
                raise OSError("the disk is gone")
            commit(batch)

        txn.commit = failing
        return txn


def test_a_failed_commit_drops_the_instance_so_the_next_call_finds_nothing_the_guest_kept(hostile_wasm):
    store = _FailingStore()
    engine = lh.open(store, component=hostile_wasm)
    t = engine.tenant("acme")

    def recall():
        return t.get("recall").justification

    def commit_fails(f, *args):
        store.fail_next = True
        with pytest.raises(lh.StorageFailure, match="the disk is gone"):
            f(*args)

    assert t.get("remember-kept") is None
    # An instance goes on after a call that committed, memory and all.
    assert recall() == "kept|2"
    # A write call whose guest answered ok, but whose commit failed.
    commit_fails(t.open, task("write-ok"))
    assert store.dump("acme") == []
    assert recall() == "|1", "the next call ran on the instance whose commit failed"
    # A read call's commit (of nothing) failing too.
    assert t.get("remember-again") is None
    commit_fails(t.get, "remember-lost")
    assert recall() == "|1", "the next call ran on the instance whose commit failed"
    engine.close()


@pytest.mark.parametrize(
    "kind, verb, arg",
    [
        ("second-batch", "open", task("stage-twice")),
        ("key-size", "get", "huge-key"),
        ("scan-length", "get", "long-scan"),
        ("get-many-length", "get", "long-get-many"),
        ("scan-length", "get", "long-scan-many"),
        ("scan-length", "get", "many-empty-scans"),
        ("key-size", "get", "scan-many-huge-key"),
        ("write-in-read-call", "get", "write"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_limits_in_the_kv_import_fail_the_call_by_name_and_commit_nothing(hostile, kind, verb, arg):
    store, _, t = hostile()
    fails(kind, getattr(t, verb), arg)
    assert store.dump("acme") == []
    still_serves(t)


@pytest.mark.parametrize("id", ["stage-too-large", "write-flood"])
def test_a_batch_past_what_wasmtime_py_copies_into_a_host_call_fails_and_commits_nothing(hostile, id):
    # wasmtime-py caps the bytes one host call may take from the guest below
    # the value and write budgets, so these batches never reach the kv import:
    # the call traps, and nothing commits.
    store, _, t = hostile()
    with pytest.raises(lh.SandboxError) as e:
        t.open(task(id))
    assert e.value.kind == "trap" and "too much data" in str(e.value)
    assert store.dump("acme") == []
    still_serves(t)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.open(task("wrong-id")),
        lambda t: t.get("wrong-id"),
        lambda t: t.claim("t1", "alice", []),
        lambda t: t.escalate("t1"),
        lambda t: t.claim_due(10, 2, 1000),
        lambda t: t.overdue(10, 2),
        lambda t: t.reclaim_lapsed(10, 5),
        lambda t: t.claim_next(roles=[], actor="alice"),
        # Each writes first: the refusal must commit nothing.
        lambda t: t.claim_batch(roles=[], actor="alice", count=5),
        lambda t: t.settle_and_claim([lh.Finished("t1")], roles=[], actor="alice", count=1),
        lambda t: t.reschedule("r", "e", 10),
        lambda t: t.timers_of("r", 10),
        # It writes first: the refusal must commit nothing.
        lambda t: t.add_schedule(lh.ScheduleSpec(id="s", run="r", recurrence=lh.Cron("* * * * *"), zone="UTC"), 10),
        lambda t: t.next_occurrences("s", 10, 5),
        lambda t: t.get_schedule("s"),
        lambda t: t.tz_version(),
        # Neither escalated, expired nor reminded: open with no step fired,
        # more reminders fired than it has, escalated yet held. Each writes
        # first.
        lambda t: t.expire_overdue(0, 5),
        lambda t: t.expire_overdue(1, 5),
        lambda t: t.expire_overdue(2, 5),
        lambda t: t.get_subscription("s"),
        # It writes first: the refusal must commit nothing.
        lambda t: t.advance_subscription("s", 1, "f"),
        lambda t: t.search(lh.SearchQuery(limit=3)),
        lambda t: t.get_view("v"),
    ],
    ids=[
        "open",
        "get",
        "claim",
        "escalate",
        "claim-due",
        "overdue",
        "reclaim-lapsed",
        "claim-next",
        "claim-batch-unheld",
        "settle-and-claim-answers-none",
        "reschedule-another-timer",
        "timers-of-another-run",
        "add-schedule-another-id",
        "next-occurrences-out-of-order",
        "get-schedule-another-id",
        "tz-version-no-version",
        "expire-overdue-open-no-step",
        "expire-overdue-reminders-past-its-own",
        "expire-overdue-escalated-held",
        "get-subscription-another-id",
        "advance-subscription-another-revision",
        "search-past-its-limit",
        "get-view-another-name",
    ],
)
def test_answers_the_contract_rules_out_are_reported_not_passed_on_and_commit_nothing(hostile, call):
    store, _, t = hostile()
    fails("malformed", call, t)
    assert store.dump("acme") == []


def test_an_expire_overdue_answer_a_reminder_leaves_is_accepted(hostile):
    # The control for the three above: pending, one reminder fired of its one.
    _, _, t = hostile()
    [swept] = t.expire_overdue(3, 5)
    assert (swept.state, swept.steps_done, swept.remind_before) == (lh.TaskState.OPEN, 1, [1000])


def test_the_guest_is_granted_no_environment_arguments_files_input_or_network(hostile):
    _, _, t = hostile()
    found = json.loads(t.get("wasi").justification)
    assert found == {"env": 0, "args": 0, "files": 0, "stdin": 0, "network": False}


def test_a_guest_sees_nothing_outside_its_tenant_however_it_asks(hostile):
    store, engine, _ = hostile()
    store.put_raw("ab", b"task\0t1", b"other")
    store.put_raw("a", b"mine", b"1")
    seen = json.loads(engine.tenant("a").get("escape").justification)
    assert seen and all(k == b"mine".hex() for k in seen), seen


def test_byte_budgets_bound_what_one_call_can_make_the_host_hold(hostile):
    # The deadline is far off, so the budget, not a slow machine, ends the
    # flood.
    store, _, t = hostile(scan_bytes=2 << 20, call_read_bytes=4 << 20, deadline=120.0)
    for k in [b"big-0", b"big-1", b"big-2"]:
        store.put_raw("acme", k, bytes([7]) * (1 << 20))
    fails("scan-bytes", t.get, "big-scan")
    # Each range within one scan's bytes, all of them past.
    fails("scan-bytes", t.get, "big-scan-many")
    fails("read-bytes", t.get, "read-flood")
    still_serves(t)


def test_a_call_stopped_at_its_deadline_rolls_back_and_gives_up_the_sqlite_write_lock(hostile_wasm, tmp_path):
    path = str(tmp_path / "deadline.db")
    store = lh.SqliteStore(path, lock_timeout=0.05)
    engine = lh.open(store, limits=lh.Limits(deadline=SHORT), component=hostile_wasm)
    fails("deadline", engine.tenant("acme").open, task("write-then-loop"))
    other = sqlite3.connect(path, isolation_level=None, timeout=0.05)
    other.execute("BEGIN IMMEDIATE")
    other.execute("ROLLBACK")
    other.close()
    assert store.dump("acme") == []
    engine.close()
