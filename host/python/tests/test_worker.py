"""The worker loop (leasehold.Worker) over real stores. Nothing here waits
on wall time: the workers run on a virtual clock whose wait moves it, and
the tests wait for the workers' own events. Covered: a backlog shared by
two workers, each task handled and settled exactly once; a handler that
raises (released and retried, or left to its lease); a handler that
outlives its lease (renewed, nobody else gets the task); shutdown with
handlers running (what finished settled, what had not started released,
what is still running left to its lease); and a worker killed with SIGKILL
whose tasks come back after their leases, returned to the queue by another
worker (no sweeper runs), which finishes them."""

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import leasehold as lh

#: Only against a hang: no test's outcome waits on it.
HANG = 120


class VirtualTime:
    """A clock the worker's waits move forward, unless woken first."""

    def __init__(self, start: int = 1_000_000) -> None:
        self.t = start

    def now(self) -> int:
        return self.t

    def wait(self, event: threading.Event, ms: int) -> None:
        if not event.wait(0.001):
            self.t += ms


class Recorder:
    """A worker's events; ``count(name, n)`` returns once ``n`` of them happened."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []
        self.cond = threading.Condition()

    def __call__(self, name: str, detail: dict) -> None:
        with self.cond:
            self.events.append((name, detail))
            self.cond.notify_all()

    def of(self, name: str) -> list[dict]:
        with self.cond:
            return [d for n, d in self.events if n == name]

    def count(self, name: str, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len([1 for e, _ in self.events if e == name]) >= n, HANG), (
                f"{name} x{n}: {self.events}"
            )


def fill(t, ids):
    for i, id in enumerate(ids):
        t.open(lh.Task(id=id, run="r", kind="job", candidate_roles=["op"], created_at=i + 1))


def start(worker: lh.Worker) -> threading.Thread:
    th = threading.Thread(target=worker.run, daemon=True)
    th.start()
    return th


def stop(worker: lh.Worker, th: threading.Thread, deadline_ms: int = 30_000) -> lh.WorkerStats:
    worker.stop(deadline_ms)
    th.join(HANG)
    assert not th.is_alive()
    return worker.stats


@pytest.fixture
def acme(tmp_path):
    engine = lh.open(lh.SqliteStore(tmp_path / "worker.db", durability="none"))
    yield engine.tenant("acme")
    engine.close()


def test_two_workers_share_a_backlog_every_task_handled_and_settled_exactly_once(acme):
    t = acme
    ids = [f"t{i:02}" for i in range(30)]
    fill(t, ids)
    time = VirtualTime()
    rec = Recorder()
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def make(actor):
        def handler(task, cancelled):
            with lock:
                seen.append((task.id, actor))

        return lh.Worker(
            t, actor=actor, roles=["op"], concurrency=3, batch=4, handler=handler, now=time.now, wait=time.wait, on_event=rec
        )

    a, b = make("w1"), make("w2")
    ta, tb = start(a), start(b)
    rec.count("settled", len(ids))
    sa, sb = stop(a, ta), stop(b, tb)
    assert sorted(id for id, _ in seen) == ids
    assert sa.settled + sb.settled == len(ids)
    assert sa.claimed + sb.claimed == len(ids)
    assert sa.failed + sb.failed + sa.lost + sb.lost + sa.errors + sb.errors == 0
    for id, actor in seen:
        got = t.get(id)
        assert (got.state, got.assignee) == (lh.TaskState.COMPLETED, actor)
    assert t.open_count() == 0


def test_a_handler_that_raises_has_its_task_released_and_tried_again(acme):
    t = acme
    fill(t, ["a", "b", "c", "d", "e"])
    tries: dict[str, int] = {}
    rec = Recorder()
    time = VirtualTime()

    def handler(task, cancelled):
        tries[task.id] = tries.get(task.id, 0) + 1
        if task.id == "c" and tries["c"] == 1:
            raise RuntimeError("flaky")

    w = lh.Worker(t, actor="w1", roles=["op"], concurrency=2, batch=2, handler=handler, now=time.now, wait=time.wait, on_event=rec)
    th = start(w)
    rec.count("settled", 5)
    stats = stop(w, th)
    assert tries == {"a": 1, "b": 1, "c": 2, "d": 1, "e": 1}
    assert (stats.failed, stats.released, stats.handled, stats.settled) == (1, 1, 5, 5)
    assert [(d["id"], str(d["error"])) for d in rec.of("failed")] == [("c", "flaky")]
    assert any(e.verb == "release" and e.actor == "w1" for e in t.history("c"))


def test_on_error_lease_leaves_a_failed_task_held_until_its_lease_lapses(acme):
    t = acme
    fill(t, ["x"])
    rec = Recorder()
    time = VirtualTime()

    def handler(task, cancelled):
        raise RuntimeError("broken")

    w = lh.Worker(
        t, actor="w1", roles=["op"], on_error="lease", lease_ms=10_000, handler=handler, now=time.now, wait=time.wait, on_event=rec
    )
    th = start(w)
    rec.count("failed", 1)
    stats = stop(w, th, 0)
    assert (stats.failed, stats.released) == (1, 0)
    held = t.get("x")
    assert (held.state, held.assignee) == (lh.TaskState.CLAIMED, "w1")
    assert t.reclaim_lapsed(held.lease_until - 1, 10) == []
    assert [(x.id, x.state) for x in t.reclaim_lapsed(held.lease_until, 10)] == [("x", lh.TaskState.OPEN)]


def test_a_handler_that_outlives_its_lease_has_it_renewed_and_nobody_else_gets_the_task(acme):
    t = acme
    fill(t, ["slow"])
    rec = Recorder()
    time = VirtualTime()
    gate = threading.Event()

    def handler(task, cancelled):
        gate.wait(HANG)
        return (lh.Settlement.COMPLETED, lh.Decision(outcome="done", reason="slowly"))

    w = lh.Worker(t, actor="w1", roles=["op"], lease_ms=1000, handler=handler, now=time.now, wait=time.wait, on_event=rec)
    th = start(w)
    rec.count("claimed", 1)
    first_end = rec.of("claimed")[0]["task"].lease_until
    rec.count("renewed", 4)
    # The worker is parked between renewals only while this test looks: it
    # may renew again, which keeps the task its own all the same.
    task = t.get("slow")
    now = time.t
    assert now >= first_end + 1000, "the handler has run past two leases"
    assert (task.state, task.assignee) == (lh.TaskState.CLAIMED, "w1")
    assert task.lease_until >= now - 1000
    assert t.claim_batch(roles=["op"], actor="w2", count=5) == []
    # Its lease is never past, whenever a sweeper looks.
    assert t.reclaim_lapsed(time.t, 10) == []
    assert t.get("slow").assignee == "w1"
    gate.set()
    rec.count("settled", 1)
    stats = stop(w, th)
    assert stats.renewed >= 4
    done = t.get("slow")
    assert (done.state, done.assignee, done.decision.outcome, done.decision.by) == (lh.TaskState.COMPLETED, "w1", "done", "w1")


def test_shutdown_settles_what_finished_releases_what_had_not_started_and_leaves_the_running(acme):
    t = acme
    fill(t, ["a", "b", "c", "d", "e", "f"])
    rec = Recorder()
    time = VirtualTime()
    gates = {id: threading.Event() for id in "abcdef"}
    cancels: dict[str, threading.Event] = {}

    def handler(task, cancelled):
        cancels[task.id] = cancelled
        gates[task.id].wait(HANG)

    w = lh.Worker(
        t, actor="w1", roles=["op"], concurrency=2, batch=4, lease_ms=10_000, handler=handler, now=time.now, wait=time.wait, on_event=rec
    )
    th = start(w)
    rec.count("started", 2)
    assert [d["task"].id for d in rec.of("started")] == ["a", "b"]
    gates["a"].set()
    rec.count("started", 3)  # c takes a's place; d waits in the buffer
    rec.count("handled", 1)
    stats = stop(w, th, 60_000)
    try:
        assert (stats.claimed, stats.handled, stats.settled, stats.released, stats.abandoned) == (4, 1, 1, 1, 2)

        def state(id):
            x = t.get(id)
            return (x.state, x.assignee)

        assert state("a") == (lh.TaskState.COMPLETED, "w1")
        assert state("d") == (lh.TaskState.OPEN, None)
        assert state("b") == state("c") == (lh.TaskState.CLAIMED, "w1")
        assert state("e") == state("f") == (lh.TaskState.OPEN, None)
        assert cancels["b"].is_set() and cancels["c"].is_set(), "the abandoned handlers were told"
        end = max(t.get("b").lease_until, t.get("c").lease_until)
        assert sorted(x.id for x in t.reclaim_lapsed(end, 10)) == ["b", "c"]
    finally:
        for g in gates.values():
            g.set()


def test_a_worker_killed_with_sigkill_its_tasks_come_back_after_their_leases(tmp_path):
    path = tmp_path / "killed.db"
    engine = lh.open(lh.SqliteStore(path))
    fill(engine.tenant("acme"), ["k1", "k2", "k3", "k4", "k5"])
    engine.close()
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("killed_worker.py")), str(path), "600000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline()
    finally:
        child.send_signal(signal.SIGKILL)
        assert child.wait(HANG) == -signal.SIGKILL
        child.stdout.close()
    claimed = json.loads(line)
    assert claimed == ["k1", "k2", "k3"]

    engine = lh.open(lh.SqliteStore(path))
    t = engine.tenant("acme")
    held = t.held("doomed", 10).tasks
    assert [x.id for x in held] == claimed
    first = min(x.lease_until for x in held)
    end = max(x.lease_until for x in held)
    # Nothing comes back before the leases end; everything after, brought
    # back by the second worker itself.
    assert t.reclaim_lapsed(first - 1, 10) == []

    rec = Recorder()
    time = VirtualTime(end)
    handled: list[str] = []
    w = lh.Worker(
        t, actor="heir", roles=["op"], handler=lambda task, c: handled.append(task.id), now=time.now, wait=time.wait, on_event=rec
    )
    th = start(w)
    rec.count("settled", 5)
    stop(w, th)
    assert [i for d in rec.of("reclaimed") for i in d["ids"]] == claimed
    assert w.stats.reclaimed == 3
    assert sorted(handled) == ["k1", "k2", "k3", "k4", "k5"]
    for id in handled:
        x = t.get(id)
        assert (x.state, x.assignee) == (lh.TaskState.COMPLETED, "heir")
    engine.close()


def test_a_worker_refuses_options_it_cannot_run_with(acme):
    h = lambda task, c: None  # noqa: E731
    with pytest.raises(lh.InvalidArgument):
        lh.Worker(acme, actor="", handler=h)
    with pytest.raises(lh.InvalidArgument):
        lh.Worker(acme, actor="w", handler=h, batch=101)
    with pytest.raises(lh.InvalidArgument):
        lh.Worker(acme, actor="w", handler=h, on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(lh.InvalidArgument):
        lh.Worker(acme, actor="w", handler=h, reclaim_ms=-1)


def test_settle_and_claim_refuses_a_malformed_finished_entry_before_the_guest_runs(acme):
    def refused(done, field):
        with pytest.raises(lh.InvalidArgument) as e:
            acme.settle_and_claim(done, roles=["op"], actor="w1", count=1)
        assert field in e.value.detail

    refused("a", "done")
    refused(["a"], "done[0]")
    refused([lh.Finished("a", "done")], "done[0].settlement")
    refused([lh.Finished(7)], "done[0].id")  # type: ignore[arg-type]
