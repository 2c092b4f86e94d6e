"""The engine: the component under wasmtime-py, one instance per tenant, and
the rule that each exported call runs in exactly one store transaction,
committed only when the guest answered ok, its answer passed the host's
checks and no limit was broken.

An instance (with its own wasmtime store) is reused for its tenant's calls
and replaced after a trap, a limit or a host failure inside an import, since
wasmtime-py leaves an instance unusable once a host function has raised.
Calls of one engine run one at a time; the kv import serves the call in
progress, whose transaction is scoped to that call's tenant.

wasmtime-py lifts a ``result``, ``option`` or ``variant`` untagged when its
cases have distinct Python types: an export's ``result<T, E>`` comes back as
a bare ``T`` or a bare ``Variant`` for ``E``, and the kv ``write`` variant
arrives as a bare ``Record`` (put) or bare ``bytes`` (delete). Both are told
apart here by type, in one place each (``_answer`` and ``_stage``).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import component as cm

from .errors import (
    ClaimRefusal,
    LeaseholdError,
    SandboxError,
    StorageFailure,
    StoreError,
    TenantError,
)
from .limits import Limits
from .model import (
    ArmOutcome,
    Discrepancy,
    Lease,
    OnExpiry,
    Page,
    Phase,
    Priority,
    SealOutcome,
    Settlement,
    Task,
    TaskState,
    Timer,
)
from .stores import Mode, Store

PACKAGE = "leasehold:engine"
VERSION = "0.2.0"

#: How often the deadline clock ticks; deadlines are accurate to one tick.
TICK = 0.005

_TENANT_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _packaged_component() -> bytes:
    return resources.files("leasehold").joinpath("leasehold.wasm").read_bytes()


class _Compiled:
    """A compiled component and the clock that ends overlong calls; one per
    component bytes, shared by every engine of the process."""

    def __init__(self, wasm: bytes) -> None:
        config = wasmtime.Config()
        config.epoch_interruption = True
        self.engine = wasmtime.Engine(config)
        self.component = cm.Component(self.engine, wasm)
        self.sha256 = hashlib.sha256(wasm).hexdigest()
        engine = self.engine

        def tick() -> None:
            while True:
                engine.increment_epoch()
                time.sleep(TICK)

        threading.Thread(target=tick, name="leasehold-deadline", daemon=True).start()


_COMPILED: dict[str, _Compiled] = {}
_COMPILED_LOCK = threading.Lock()


def _compiled(wasm: bytes) -> _Compiled:
    key = hashlib.sha256(wasm).hexdigest()
    with _COMPILED_LOCK:
        if key not in _COMPILED:
            _COMPILED[key] = _Compiled(wasm)
        return _COMPILED[key]


class _Violation(Exception):
    """Raised inside an import: it unwinds the guest and ends the call."""


@dataclass
class _Call:
    """What one call's guest sees of storage, every guest-controlled size
    checked before use."""

    txn: Any
    mode: Mode
    limits: Limits
    # The store's answer to the kv import's ``concurrent-writers``.
    concurrent_writers: bool
    read_bytes: int = 0
    staged: list[tuple[bytes, bytes | None]] | None = None
    violation: LeaseholdError | None = None

    def fail(self, error: LeaseholdError) -> None:
        if self.violation is None:
            self.violation = error
        raise _Violation(str(error))

    def check_key(self, key: bytes) -> None:
        if len(key) > self.limits.key_bytes:
            self.fail(
                SandboxError(
                    "key-size", f"the guest used a key of {len(key)} bytes; the cap is {self.limits.key_bytes}"
                )
            )

    def count_read(self, n: int) -> None:
        self.read_bytes += n
        if self.read_bytes > self.limits.call_read_bytes:
            self.fail(
                SandboxError("read-bytes", f"the call read more than its budget of {self.limits.call_read_bytes} bytes")
            )

    def store(self, f: Callable[[], Any]) -> Any:
        try:
            return f()
        except _Violation:
            raise
        except Exception as e:  # a store failure of any kind ends the call
            self.fail(StorageFailure(f"the store failed: {e}"))


class _Kv:
    """The kv import, serving whichever call of its engine is in progress."""

    def __init__(self) -> None:
        self.call: _Call | None = None

    def _current(self) -> _Call:
        if self.call is None:
            raise RuntimeError("storage used outside a call")
        return self.call

    def concurrent_writers(self, _store: Any) -> bool:
        return self._current().concurrent_writers

    def get(self, _store: Any, key: bytes) -> bytes | None:
        c = self._current()
        c.check_key(key)
        value = c.store(lambda: c.txn.get(key))
        c.count_read(len(value) if value is not None else 0)
        return value

    def get_many(self, _store: Any, keys: list[bytes]) -> list[bytes | None]:
        c = self._current()
        if len(keys) > c.limits.scan_entries:
            c.fail(
                SandboxError(
                    "get-many-length",
                    f"the guest asked one get-many for {len(keys)} keys; the cap is {c.limits.scan_entries}",
                )
            )
        for k in keys:
            c.check_key(k)
        found = c.store(lambda: [c.txn.get(k) for k in keys])
        c.count_read(sum(len(v) for v in found if v is not None))
        return found

    def scan(self, _store: Any, key_range: Any, limit: int, reverse: bool) -> list[Any]:
        c = self._current()
        if limit > c.limits.scan_entries:
            c.fail(
                SandboxError(
                    "scan-length", f"the guest asked one scan for {limit} entries; the cap is {c.limits.scan_entries}"
                )
            )
        start, end = key_range.start, key_range.end
        c.check_key(start)
        if end is not None:
            c.check_key(end)
        entries, over = c.store(lambda: c.txn.scan(start, end, limit, reverse, c.limits.scan_bytes))
        if over:
            c.fail(SandboxError("scan-bytes", f"one scan read more than its budget of {c.limits.scan_bytes} bytes"))
        c.count_read(sum(len(k) + len(v) for k, v in entries))
        out = []
        for k, v in entries:
            e = cm.Record()
            e.key = k
            e.value = v
            out.append(e)
        return out

    def stage(self, _store: Any, batch: list[Any]) -> None:
        c = self._current()
        if c.staged is not None:
            c.fail(SandboxError("second-batch", "the guest staged a second batch of writes in one call"))
        if c.mode == "read" and batch:
            c.fail(SandboxError("write-in-read-call", "the guest staged writes in a read-only call"))
        size = 0
        out: list[tuple[bytes, bytes | None]] = []
        for w in batch:
            # Untagged: `delete(list<u8>)` is bare bytes, `put(entry)` a bare Record.
            if isinstance(w, (bytes, bytearray)):
                c.check_key(w)
                size += len(w)
                out.append((bytes(w), None))
            else:
                c.check_key(w.key)
                if len(w.value) > c.limits.value_bytes:
                    c.fail(
                        SandboxError(
                            "value-size",
                            f"the guest wrote a value of {len(w.value)} bytes; the cap is {c.limits.value_bytes}",
                        )
                    )
                size += len(w.key) + len(w.value)
                out.append((bytes(w.key), bytes(w.value)))
        if size > c.limits.call_write_bytes:
            c.fail(
                SandboxError(
                    "write-bytes", f"the call's writes came to {size} bytes; the budget is {c.limits.call_write_bytes}"
                )
            )
        c.staged = out


#: Every export: (interface, WIT name, whether it writes). The WIT doc of each
#: function says whether it writes; host/src/verbs.rs lists the same.
VERBS: dict[str, tuple[str, Mode]] = {
    "open": ("tasks", "write"),
    "get": ("tasks", "read"),
    "claim": ("tasks", "write"),
    "release": ("tasks", "write"),
    "take-over": ("tasks", "write"),
    "renew": ("tasks", "write"),
    "reclaim-lapsed": ("tasks", "write"),
    "claim-next": ("tasks", "write"),
    "settle": ("tasks", "write"),
    "withdraw-run": ("tasks", "write"),
    "escalate": ("tasks", "write"),
    "queue": ("tasks", "read"),
    "for-case": ("tasks", "read"),
    "open-count": ("tasks", "read"),
    "leased-count": ("tasks", "read"),
    "next-lease-end": ("tasks", "read"),
    "overdue": ("tasks", "read"),
    "arm": ("timers", "write"),
    "claim-due": ("timers", "write"),
    "disarm": ("timers", "write"),
    "disarm-run": ("timers", "write"),
    "pending-count": ("timers", "read"),
    "next-due": ("timers", "read"),
    "seal": ("runs", "write"),
    "is-sealed": ("runs", "read"),
    "check": ("admin", "read"),
}

_CLAIM_VERBS = frozenset({"claim", "release", "take-over", "renew", "settle"})


@dataclass
class _Instance:
    """One tenant's instance, in a wasmtime store of its own."""

    store: wasmtime.Store
    funcs: dict[str, cm.Func]


class Engine:
    """The component over ``store``. Calls are serialised: one at a time per
    engine, each in its own transaction."""

    def __init__(self, store: Store, *, limits: Limits | None = None, component: bytes | str | Path | None = None):
        if not hasattr(store, "begin"):
            raise TypeError("open(store=...) needs a store: MemoryStore() or SqliteStore(path)")
        if not isinstance(getattr(store, "concurrent_writers", None), bool):
            raise TypeError(
                "a store must say whether other processes write its keys at once: "
                "store.concurrent_writers, True or False"
            )
        if component is None:
            wasm = _packaged_component()
        elif isinstance(component, bytes):
            wasm = component
        else:
            wasm = Path(component).read_bytes()
        self.store = store
        self.limits = limits or Limits()
        self._compiled = _compiled(wasm)
        self._kv = _Kv()
        self._linker = self._link()
        self._lock = threading.Lock()
        self._instances: dict[str, _Instance | None] = {}
        self._made: dict[str, int] = {}

    @property
    def component_sha256(self) -> str:
        """The SHA-256 of the component bytes this engine runs."""
        return self._compiled.sha256

    def _link(self) -> cm.Linker:
        linker = cm.Linker(self._compiled.engine)
        # The component imports only kv (and the types it speaks in): no WASI.
        with linker.root() as root:
            with root.add_instance(f"{PACKAGE}/kv@{VERSION}") as kv:
                kv.add_func("concurrent-writers", self._kv.concurrent_writers)
                kv.add_func("get", self._kv.get)
                kv.add_func("get-many", self._kv.get_many)
                kv.add_func("scan", self._kv.scan)
                kv.add_func("stage", self._kv.stage)
        return linker

    def tenant(self, name: str) -> Tenant:
        """A handle on one tenant: every call through it sees only its keys."""
        if not isinstance(name, str) or not _TENANT_NAME.fullmatch(name):
            raise TenantError(f"invalid tenant name {name!r}: use 1-64 ASCII letters, digits, '-', '_' and '.'")
        return Tenant(self, name)

    def instances_made(self, tenant: str) -> int:
        """How many instances a tenant has had: one, plus one after each trap."""
        return self._made.get(tenant, 0)

    def close(self) -> None:
        self.store.close()

    def _instance(self, tenant: str) -> _Instance:
        inst = self._instances.get(tenant)
        if inst is None:
            store = wasmtime.Store(self._compiled.engine)
            store.set_limits(memory_size=self.limits.memory_bytes)
            # Instantiation runs guest code too, under the same budget.
            store.set_epoch_deadline(int(self.limits.deadline / TICK) + 1)
            instance = self._linker.instantiate(store, self._compiled.component)
            funcs = {}
            parents: dict[str, Any] = {}
            for verb, (interface, _) in VERBS.items():
                if interface not in parents:
                    parents[interface] = instance.get_export_index(store, f"{PACKAGE}/{interface}@{VERSION}")
                index = instance.get_export_index(store, verb, parents[interface])
                func = instance.get_func(store, index) if index is not None else None
                if func is None:
                    raise LeaseholdError(f"the component does not export {verb} from {interface}")
                funcs[verb] = func
            self._made[tenant] = self._made.get(tenant, 0) + 1
            inst = _Instance(store, funcs)
            self._instances[tenant] = inst
        return inst

    def call(self, tenant: str, verb: str, args: tuple, check: Callable[[Any], Any]) -> Any:
        """Runs one export in one transaction; ``check`` turns the guest's ok
        answer into the caller's, raising on what the contract rules out."""
        mode = VERBS[verb][1]
        with self._lock:
            txn = self.store.begin(tenant, mode)
            call = _Call(txn, mode, self.limits, self.store.concurrent_writers)
            try:
                answer = self._run(tenant, verb, args, call)
                result = check(answer)
                try:
                    txn.commit(call.staged or [])
                except Exception as e:
                    raise StorageFailure(f"the store could not commit: {e}") from e
                return result
            except BaseException:
                txn.abort()
                raise

    def _run(self, tenant: str, verb: str, args: tuple, call: _Call) -> Any:
        deadline = self.limits.check_deadline if verb == "check" else self.limits.deadline
        self._kv.call = call
        try:
            inst = self._instance(tenant)
            inst.store.set_epoch_deadline(int(deadline / TICK) + 1)
            answer = inst.funcs[verb](inst.store, *args)
        except Exception as e:
            self._instances[tenant] = None
            if call.violation is not None:
                raise call.violation from None
            if isinstance(e, wasmtime.Trap) and e.trap_code == wasmtime.TrapCode.INTERRUPT:
                raise SandboxError("deadline", f"the call ran past its deadline of {deadline} s") from None
            if isinstance(e, (TypeError, ValueError)) and not isinstance(e, wasmtime.WasmtimeError):
                # wasmtime-py refuses an argument of the wrong type before the guest runs.
                raise
            raise SandboxError("trap", f"the guest trapped: {e}") from e
        finally:
            self._kv.call = None
        if call.violation is not None:
            self._instances[tenant] = None
            raise call.violation
        return _answer(answer, verb)


def _answer(answer: Any, verb: str) -> Any:
    """An export's untagged ``result``: a bare Variant is the error case (no
    ok type of the world lifts to a Variant at the top)."""
    if not isinstance(answer, cm.Variant):
        return answer
    if verb not in _CLAIM_VERBS:
        raise StoreError(answer.tag, answer.payload)
    if answer.tag == "store":
        raise StoreError(answer.payload.tag, answer.payload.payload)
    raise ClaimRefusal(answer.tag, answer.payload)


# ---- conversions -------------------------------------------------------------------


def _record(**fields: Any) -> cm.Record:
    r = cm.Record()
    for k, v in fields.items():
        setattr(r, k.replace("_", "-"), v)
    return r


def _wit_task(t: Task) -> cm.Record:
    return _record(
        id=t.id,
        run=t.run,
        case=t.case,
        kind=t.kind,
        justification=t.justification,
        candidate_roles=list(t.candidate_roles),
        assignee=t.assignee,
        lease_until=t.lease_until,
        priority=str(Priority(t.priority)),
        state=str(TaskState(t.state)),
        on_expiry=str(OnExpiry(t.on_expiry)),
        escalate_to=list(t.escalate_to),
        excluded_actors=list(t.excluded_actors),
        created_at=t.created_at,
        due_at=t.due_at,
    )


def _task(r: Any) -> Task:
    g = lambda name: getattr(r, name)  # noqa: E731 - fields are kebab-case attributes
    return Task(
        id=r.id,
        run=r.run,
        kind=r.kind,
        case=r.case,
        justification=r.justification,
        candidate_roles=g("candidate-roles"),
        assignee=r.assignee,
        lease_until=g("lease-until"),
        priority=Priority(r.priority),
        state=TaskState(r.state),
        on_expiry=OnExpiry(g("on-expiry")),
        escalate_to=g("escalate-to"),
        excluded_actors=g("excluded-actors"),
        created_at=g("created-at"),
        due_at=g("due-at"),
    )


def _wit_timer(t: Timer) -> cm.Record:
    return _record(run=t.run, case=t.case, effect=t.effect, step=t.step, phase=str(Phase(t.phase)), fire_at=t.fire_at)


def _timer(r: Any) -> Timer:
    return Timer(
        run=r.run, effect=r.effect, fire_at=getattr(r, "fire-at"), case=r.case, step=r.step, phase=Phase(r.phase)
    )


def _wit_lease(lease: Lease | None) -> cm.Record | None:
    return None if lease is None else _record(now=lease.now, lease_ms=lease.lease_ms)


def _malformed(what: str) -> SandboxError:
    return SandboxError("malformed", f"the guest answered something the contract rules out: {what}")


def _same_task(r: Any, id: str) -> Task:
    if r.id != id:
        raise _malformed(f"asked for task {id}, answered task {r.id}")
    return _task(r)


def _at_most(items: list, limit: int, verb: str) -> list:
    if len(items) > limit:
        raise _malformed(f"{verb} answered {len(items)} entries for a limit of {limit}")
    return items


def _page(p: Any, limit: int, verb: str) -> Page:
    return Page(tasks=[_task(t) for t in _at_most(p.tasks, limit, verb)], next=p.next)


def _same(x: Any) -> Any:
    return x


class Tenant:
    """One tenant of an engine; every method is one call in one transaction."""

    def __init__(self, engine: Engine, name: str) -> None:
        self._engine = engine
        self.name = name

    def _call(self, verb: str, *args: Any, check: Callable[[Any], Any] = _same) -> Any:
        return self._engine.call(self.name, verb, args, check)

    @property
    def instances_made(self) -> int:
        return self._engine.instances_made(self.name)

    def open(self, task: Task) -> Task:
        """Creates a task; first open wins, and the stored task is answered."""
        return self._call("open", _wit_task(task), check=lambda r: _same_task(r, task.id))

    def get(self, id: str) -> Task | None:
        return self._call("get", id, check=lambda r: None if r is None else _same_task(r, id))

    def claim(self, id: str, actor: str, roles: list[str], lease: Lease | None = None) -> Task:
        """Reserves the task for ``actor``; with a lease, until ``now + lease_ms``."""
        return self._call("claim", id, actor, list(roles), _wit_lease(lease), check=lambda r: _same_task(r, id))

    def renew(self, id: str, actor: str, now: int, lease_ms: int) -> Task:
        """The holder of a leased claim extends it to ``now + lease_ms``."""
        return self._call("renew", id, actor, now, lease_ms, check=lambda r: _same_task(r, id))

    def reclaim_lapsed(self, now: int, limit: int) -> list[Task]:
        """Returns to the queue every task whose lease ended at or before ``now``."""
        return self._call(
            "reclaim-lapsed", now, limit, check=lambda ts: [_task(t) for t in _at_most(ts, limit, "reclaim-lapsed")]
        )

    def claim_next(
        self,
        *,
        roles: list[str],
        actor: str,
        limit: int = 1,
        after: str | None = None,
        lease: Lease | None = None,
    ) -> Task | None:
        """Claims the head of the caller's queue; None when it is empty."""
        q = _record(roles=list(roles), actor=actor, limit=limit, after=after)
        return self._call("claim-next", q, _wit_lease(lease), check=lambda r: None if r is None else _task(r))

    def leased_count(self) -> int:
        """Tasks claimed under a lease. One counter read."""
        return self._call("leased-count")

    def next_lease_end(self) -> int | None:
        return self._call("next-lease-end")

    def release(self, id: str, actor: str) -> None:
        self._call("release", id, actor, check=lambda _: None)

    def take_over(self, id: str, from_: str, actor: str, roles: list[str], lease: Lease | None = None) -> Task:
        return self._call(
            "take-over", id, from_, actor, list(roles), _wit_lease(lease), check=lambda r: _same_task(r, id)
        )

    def settle(self, id: str, settlement: Settlement | str, holder: str | None = None) -> bool:
        """Compare-and-set from pending: True when this call settled the task.
        With ``holder``, the task must be claimed by exactly that actor."""
        return self._call("settle", id, str(Settlement(settlement)), holder)

    def withdraw_run(self, run: str, awaited: list[str]) -> int:
        awaited = list(awaited)

        def check(n: int) -> int:
            if n > len(awaited):
                raise _malformed(f"withdraw-run moved {n} of {len(awaited)} awaited tasks")
            return n

        return self._call("withdraw-run", run, awaited, check=check)

    def escalate(self, id: str) -> Task:
        return self._call("escalate", id, check=lambda r: _same_task(r, id))

    def queue(self, *, roles: list[str], limit: int, actor: str | None = None, after: str | None = None) -> Page:
        q = _record(roles=list(roles), actor=actor, limit=limit, after=after)
        return self._call("queue", q, check=lambda p: _page(p, limit, "queue"))

    def for_case(self, case: str, limit: int, after: str | None = None) -> Page:
        return self._call("for-case", case, limit, after, check=lambda p: _page(p, limit, "for-case"))

    def open_count(self) -> int:
        """Pending tasks (claimed ones count). One counter read."""
        return self._call("open-count")

    def overdue(self, now: int, limit: int) -> list[Task]:
        return self._call("overdue", now, limit, check=lambda ts: [_task(t) for t in _at_most(ts, limit, "overdue")])

    def arm(self, timer: Timer) -> ArmOutcome:
        return self._call("arm", _wit_timer(timer), check=ArmOutcome)

    def claim_due(self, now: int, limit: int, lease_ms: int) -> list[Timer]:
        """Leases up to ``limit`` due timers until ``now + lease_ms``."""

        def check(ts: list) -> list[Timer]:
            timers = [_timer(t) for t in _at_most(ts, limit, "claim-due")]
            if len({(t.run, t.effect) for t in timers}) != len(timers):
                raise _malformed("claim-due answered one timer twice")
            return timers

        return self._call("claim-due", now, limit, lease_ms, check=check)

    def disarm(self, run: str, effect: str) -> bool:
        return self._call("disarm", run, effect)

    def disarm_run(self, run: str) -> int:
        return self._call("disarm-run", run)

    def pending_count(self) -> int:
        """Armed timers. One counter read."""
        return self._call("pending-count")

    def next_due(self) -> int | None:
        return self._call("next-due")

    def seal(self, run: str, awaited: list[str]) -> SealOutcome:
        return self._call(
            "seal",
            run,
            list(awaited),
            check=lambda o: SealOutcome(getattr(o, "timers-disarmed"), getattr(o, "tasks-withdrawn")),
        )

    def is_sealed(self, run: str) -> bool:
        return self._call("is-sealed", run)

    def check(self) -> list[Discrepancy]:
        """Every discrepancy between the tenant's rows and its indexes and counters."""
        return self._call("check", check=lambda ds: [Discrepancy(d.structure, d.subject, d.detail) for d in ds])


def open(store: Store, *, limits: Limits | None = None, component: bytes | str | Path | None = None) -> Engine:  # noqa: A001
    """The engine over ``store``: the packaged component unless ``component``
    (bytes or a path) names another build of the world."""
    return Engine(store, limits=limits, component=component)
