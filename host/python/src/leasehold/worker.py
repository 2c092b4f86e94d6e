"""A worker loop over one tenant's queue, as graphile-worker's local queue
runs one: a small buffer of claimed tasks (``claim_batch``, then
``settle_and_claim``, so a steady worker makes one call per batch: the
tasks it finished acknowledged with the next fetch), handlers on a thread
pool of ``concurrency`` threads, the leases of held tasks renewed when half
is left, and a shutdown that settles what finished, releases what had not
started and waits for running handlers up to a deadline.

Every store call is made from the thread running ``Worker.run``; handlers
run on the pool and only hand their results back. What a crash leaves:
every task the worker held (buffered, running, or finished but not yet
settled) stays claimed by its actor until its lease ends; then any worker
of the tenant (each returns lapsed leases to the queue before it fetches, at
most once per ``reclaim_ms``), or a sweeper's ``reclaim_lapsed(now,
limit)``, returns it to the queue for another worker. A handler's work on such a task may run again:
handlers must be idempotent."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from .engine import Tenant
from .errors import ClaimRefusal, InvalidArgument, LeaseholdError
from .model import (
    AlreadySettled,
    Decision,
    Finished,
    Lease,
    NotFound,
    NotHeld,
    Refused,
    Settled,
    Settlement,
    Task,
    now_ms,
)

#: The most one batch call takes or settles (the component's bound).
MAX_BATCH = 100

#: What a handler answers: None settles the task ``completed``; a
#: ``Settlement`` settles it so; a ``Decision`` settles it ``completed`` with
#: that decision; a ``(Settlement, Decision)`` pair, both.
HandlerResult = None | Settlement | str | Decision | tuple[Settlement | str, Decision | None]


@dataclass
class WorkerStats:
    """Counts of what a worker did, for a caller's metrics."""

    calls: int = 0
    claimed: int = 0
    started: int = 0
    handled: int = 0
    failed: int = 0
    settled: int = 0
    refused: int = 0
    lost: int = 0
    renewed: int = 0
    released: int = 0
    reclaimed: int = 0
    abandoned: int = 0
    errors: int = 0


@dataclass(eq=False)
class _Held:
    task: Task
    lease_until: int
    cancel: threading.Event = field(default_factory=threading.Event)
    lost: bool = False
    abandoned: bool = False


def _wait(event: threading.Event, ms: int) -> None:
    event.wait(ms / 1000)


class Worker:
    """Runs ``handler(task, cancelled)`` on the tasks of ``roles``' queue
    claimed for ``actor``; ``cancelled`` (a ``threading.Event``) is set when
    the task's lease is lost or shutdown gives up on it.

    ``concurrency`` handlers run at once (default 4); ``batch`` tasks are
    claimed per fetch (at most 100; default ``concurrency``); every claim
    is leased for ``lease_ms`` (default 60 000) and renewed when half is
    left. ``on_error``: ``"release"`` (the default) releases the task of a
    handler that raised back to the queue at once; ``"lease"`` leaves it held
    until its lease lapses, to be returned to the queue a lease later.
    ``reclaim_ms`` is how often, at most, the worker returns the tenant's
    lapsed leases to the queue before it fetches (``reclaim_lapsed``), so a
    killed worker's tasks come back without a sweeper (default ``lease_ms``;
    0 never, for a tenant a sweeper serves). After an empty fetch the worker waits ``idle_ms``, doubling
    up to ``max_idle_ms`` (100 and 5 000). ``now`` is the clock leases are
    reckoned by (ms; default the wall clock); ``wait(event, ms)`` is the
    loop's only timer, returning early when ``event`` is set (a test passes
    a virtual one). ``on_event(name, detail)`` is told of every ``claimed``,
    ``started``, ``handled``, ``failed``, ``settled``, ``refused``, ``lost``,
    ``renewed``, ``released``, ``reclaimed``, ``idle``, ``error`` and ``stopped``, on the
    thread running the loop."""

    def __init__(
        self,
        tenant: Tenant,
        *,
        actor: str,
        handler: Callable[[Task, threading.Event], HandlerResult],
        roles: list[str] | None = None,
        concurrency: int = 4,
        batch: int | None = None,
        lease_ms: int = 60_000,
        on_error: Literal["release", "lease"] = "release",
        reclaim_ms: int | None = None,
        idle_ms: int = 100,
        max_idle_ms: int = 5_000,
        now: Callable[[], int] = now_ms,
        wait: Callable[[threading.Event, int], Any] = _wait,
        on_event: Callable[[str, dict[str, Any]], Any] | None = None,
    ) -> None:
        if not isinstance(actor, str) or not actor:
            raise InvalidArgument("actor must be a non-empty string")
        if not callable(handler):
            raise InvalidArgument("handler must be callable")
        batch = min(concurrency, MAX_BATCH) if batch is None else batch
        for name, v, top in (
            ("concurrency", concurrency, None),
            ("batch", batch, MAX_BATCH),
            ("lease_ms", lease_ms, 0xFFFFFFFF),
            ("idle_ms", idle_ms, None),
            ("max_idle_ms", max_idle_ms, None),
        ):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1 or (top is not None and v > top):
                raise InvalidArgument(f"{name} must be an integer in 1..{top or 'any'}, got {v!r}")
        reclaim_ms = lease_ms if reclaim_ms is None else reclaim_ms
        if not isinstance(reclaim_ms, int) or isinstance(reclaim_ms, bool) or reclaim_ms < 0:
            raise InvalidArgument(f"reclaim_ms must be a non-negative integer, got {reclaim_ms!r}")
        if on_error not in ("release", "lease"):
            raise InvalidArgument(f"on_error must be 'release' or 'lease', got {on_error!r}")
        self._tenant = tenant
        self.actor = actor
        self.roles = list(roles or [])
        self._handler = handler
        self.concurrency = concurrency
        self.batch = batch
        self.lease_ms = lease_ms
        self.on_error = on_error
        self.reclaim_ms = reclaim_ms
        self._idle_ms = idle_ms
        self._max_idle_ms = max(max_idle_ms, idle_ms)
        self._now = now
        self._wait_fn = wait
        self._on_event = on_event or (lambda name, detail: None)
        self.stats = WorkerStats()
        self._buffer: list[_Held] = []
        self._running: dict[str, _Held] = {}
        self._finished: list[tuple[Finished, int]] = []
        self._done: queue.SimpleQueue[tuple[_Held, Future]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._deadline = 0
        self._idle = 0
        self._next_fetch = 0
        self._next_reclaim = 0
        self._started = False

    @property
    def holding(self) -> int:
        """Tasks held and not yet settled or released: buffered, running and finished."""
        return len(self._buffer) + len(self._running) + len(self._finished)

    def stop(self, deadline_ms: int = 30_000) -> None:
        """Asks the loop to stop (from any thread): no more claims; the tasks
        not started are released; running handlers get until ``deadline_ms``
        (by the worker's clock) with their leases still renewed; what
        finished is settled. Handlers still running at the deadline have
        their ``cancelled`` set and their tasks left held until their leases
        lapse (``stats.abandoned``). ``run`` returns once that is done."""
        if not self._stopping.is_set():
            self._deadline = self._now() + deadline_ms
            self._stopping.set()
        self._wake.set()

    def run(self) -> WorkerStats:
        """Runs the loop on this thread until ``stop``; answers the stats."""
        if self._started:
            raise RuntimeError("this worker has already run")
        self._started = True
        # Not a `with`: its exit would wait for handlers shutdown gave up on.
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix=f"leasehold-{self.actor}")
        try:
            self._loop()
            self._shutdown()
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._emit("stopped", stats=self.stats)
        return self.stats

    # ---- the loop ------------------------------------------------------------------

    def _emit(self, name: str, **detail: Any) -> None:
        try:
            self._on_event(name, detail)
        except Exception:  # noqa: BLE001 - a listener's fault is not the worker's
            pass

    @property
    def _margin(self) -> int:
        return self.lease_ms // 2

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                self._drain()
                self._renew_due()
                self._start_buffered()
                now = self._now()
                want = self.batch if not self._buffer and len(self._running) < self.concurrency else 0
                fetch = want > 0 and now >= self._next_fetch
                flush = len(self._finished) >= self.batch or any(u - now <= self._margin for _, u in self._finished)
                if fetch or (flush and self._finished):
                    if fetch:
                        self._reclaim_due(now)
                    got = self._fetch(want if fetch else 0)
                    if fetch:
                        self._backoff(got, now)
                    continue
                self._wait_fn(self._wake, self._next_event(now, want > 0))
            except LeaseholdError as e:
                # A store call failed (a lock timeout, a failed commit):
                # nothing it did committed; what it was to settle is settled
                # by a later call.
                self.stats.errors += 1
                self._emit("error", error=e)
                now = self._now()
                self._backoff(0, now)
                self._wait_fn(self._wake, max(1, self._next_fetch - now))

    def _backoff(self, got: int, now: int) -> None:
        if got:
            self._idle = 0
            self._next_fetch = 0
            return
        self._idle = min(self._idle * 2, self._max_idle_ms) if self._idle else self._idle_ms
        self._next_fetch = now + self._idle
        self._emit("idle", wait_ms=self._idle)

    def _held(self) -> list[_Held]:
        return [*self._buffer, *self._running.values()]

    def _next_event(self, now: int, fetching: bool) -> int:
        at = self._next_fetch if fetching else now + self._max_idle_ms
        for e in self._held():
            if not e.lost:
                at = min(at, e.lease_until - self._margin)
        for _, until in self._finished:
            at = min(at, until - self._margin)
        return max(1, at - now)

    def _reclaim_due(self, now: int) -> None:
        """Returns the tenant's lapsed leases to the queue (a killed worker's
        tasks, a failed one left to its lease), at most once per
        ``reclaim_ms`` and at once again while a call finds a full batch, so
        the fetch after it may take them."""
        if self.reclaim_ms == 0 or now < self._next_reclaim:
            return
        self.stats.calls += 1
        back = self._tenant.reclaim_lapsed(now, MAX_BATCH)
        self._next_reclaim = now if len(back) == MAX_BATCH else now + self.reclaim_ms
        if back:
            self.stats.reclaimed += len(back)
            self._emit("reclaimed", ids=[t.id for t in back])

    def _query(self) -> dict[str, Any]:
        return {"roles": self.roles, "actor": self.actor}

    def _fetch(self, want: int) -> int:
        """One call: settles what finished (at most 100) and claims up to
        ``want`` more. Answers how many it claimed."""
        lease = Lease(now=self._now(), lease_ms=self.lease_ms)
        if self._finished:
            done = self._finished[:MAX_BATCH]
            self.stats.calls += 1
            answer = self._tenant.settle_and_claim([f for f, _ in done], **self._query(), count=want, lease=lease)
            del self._finished[: len(done)]
            for (f, _), a in zip(done, answer.settled):
                self._account(f, a)
            claimed = answer.claimed
        elif want:
            self.stats.calls += 1
            claimed = self._tenant.claim_batch(**self._query(), count=want, lease=lease)
        else:
            return 0
        for task in claimed:
            self._buffer.append(_Held(task, task.lease_until or 0))
            self.stats.claimed += 1
            self._emit("claimed", task=task)
        return len(claimed)

    def _account(self, f: Finished, a: Any) -> None:
        if isinstance(a, Settled):
            self.stats.settled += 1
            self._emit("settled", id=f.id, settlement=f.settlement)
        elif isinstance(a, Refused):
            # Still ours, its decision refused: the way of a failed handler.
            self.stats.refused += 1
            self._emit("refused", id=f.id, reason=a.reason)
            self._failed(f.id)
        else:
            assert isinstance(a, AlreadySettled | NotHeld | NotFound)
            # Settled or held by someone else, or gone: the lease lapsed
            # before the settle reached the store.
            self.stats.lost += 1
            self._emit("lost", id=f.id, answer=a)

    def _renew_due(self) -> None:
        now = self._now()
        for e in self._held():
            if e.lost or e.lease_until - now > self._margin:
                continue
            try:
                self.stats.calls += 1
                t = self._tenant.renew(e.task.id, self.actor, now, self.lease_ms)
            except ClaimRefusal as refusal:
                # Not ours any more (reclaimed, taken over): stop working on it.
                e.lost = True
                self.stats.lost += 1
                if e in self._buffer:
                    self._buffer.remove(e)
                e.cancel.set()
                self._emit("lost", id=e.task.id, error=refusal)
                continue
            e.lease_until = t.lease_until or 0
            self.stats.renewed += 1
            self._emit("renewed", id=e.task.id, lease_until=e.lease_until)

    def _start_buffered(self) -> None:
        while not self._stopping.is_set() and len(self._running) < self.concurrency and self._buffer:
            e = self._buffer.pop(0)
            self._running[e.task.id] = e
            self.stats.started += 1
            self._emit("started", task=e.task)
            fut = self._pool.submit(self._handler, e.task, e.cancel)
            fut.add_done_callback(lambda f, e=e: (self._done.put((e, f)), self._wake.set()))

    def _drain(self) -> None:
        """Takes in what handlers finished: to settle, or failed."""
        while True:
            try:
                e, fut = self._done.get_nowait()
            except queue.Empty:
                return
            self._running.pop(e.task.id, None)
            if e.lost or e.abandoned:
                continue
            error = fut.exception()
            if error is not None:
                self._emit("failed", id=e.task.id, error=error)
                self._failed(e.task.id)
                continue
            finished = self._finished_of(e.task.id, fut.result())
            if finished is None:
                self._emit("failed", id=e.task.id, error=InvalidArgument(f"the handler answered {fut.result()!r}"))
                self._failed(e.task.id)
                continue
            self.stats.handled += 1
            self._finished.append((finished, e.lease_until))
            self._emit("handled", id=e.task.id)

    @staticmethod
    def _finished_of(id: str, r: Any) -> Finished | None:
        settlement: Any = Settlement.COMPLETED
        decision: Any = None
        if isinstance(r, tuple) and len(r) == 2:
            settlement, decision = r
        elif isinstance(r, Decision):
            decision = r
        elif r is not None:
            settlement = r
        try:
            settlement = Settlement(settlement)
        except ValueError:
            return None
        if decision is not None and not isinstance(decision, Decision):
            return None
        return Finished(id=id, settlement=settlement, decision=decision)

    def _failed(self, id: str) -> None:
        """A handler raised (or its decision was refused): release the task,
        or leave it to its lease."""
        self.stats.failed += 1
        if self.on_error == "release":
            self._release(id)

    def _release(self, id: str) -> None:
        try:
            self.stats.calls += 1
            self._tenant.release(id, self.actor)
        except ClaimRefusal as e:
            self.stats.lost += 1
            self._emit("lost", id=id, error=e)
            return
        self.stats.released += 1
        self._emit("released", id=id)

    def _shutdown(self) -> None:
        def guarded(f: Callable[[], Any]) -> None:
            try:
                f()
            except LeaseholdError as e:
                self.stats.errors += 1
                self._emit("error", error=e)

        # Not started: back to the queue, where they were.
        while self._buffer:
            e = self._buffer.pop(0)
            guarded(lambda e=e: self._release(e.task.id))
        # Running: their leases renewed, what finishes settled, until the deadline.
        while True:
            self._wake.clear()
            guarded(self._drain)
            if not self._running or self._now() >= self._deadline:
                break
            guarded(self._renew_due)
            now = self._now()
            if any(u - now <= self._margin for _, u in self._finished):
                guarded(lambda: self._fetch(0))
            self._wait_fn(self._wake, max(1, min(self._deadline - now, self._next_event(now, False))))
        for e in self._running.values():
            e.abandoned = True
            e.cancel.set()
            self.stats.abandoned += 1
        self._running.clear()
        while self._finished:
            before = len(self._finished)
            guarded(lambda: self._fetch(0))
            if len(self._finished) >= before:
                break
