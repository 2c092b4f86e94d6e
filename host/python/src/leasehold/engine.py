"""The engine: the component under wasmtime-py, a bounded cache of one
instance per tenant, and the rule that each exported call runs in exactly
one store transaction, committed only when the guest answered ok, its answer
passed the host's checks and no limit was broken. Arguments are checked
here before the guest runs, and never wrapped: wasmtime-py writes integers
into C fields unchecked.

An instance (with its own wasmtime store) is reused for its tenant's calls
and replaced after a trap, a limit or a host failure inside an import, since
wasmtime-py leaves an instance unusable once a host function has raised; the
least recently used one is evicted past ``Limits.cached_instances``. Calls
of one engine run one at a time; the kv import serves the call in progress,
whose transaction is scoped to that call's tenant. A component that imports
WASI gets it with nothing granted (no environment, arguments, files, input
or network), as the Rust host gives it.

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
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import component as cm

from .errors import (
    ClaimRefusal,
    InvalidArgument,
    LeaseholdError,
    SandboxError,
    StorageFailure,
    StoreError,
    TenantError,
)
from .limits import Limits
from .model import (
    UNCHANGED,
    AlreadySettled,
    Finished,
    NotFound,
    NotHeld,
    Refused,
    SettleAnswer,
    Settled,
    SettledAndClaimed,
    ArmOutcome,
    Decision,
    DecisionRecord,
    Discrepancy,
    FeedEntry,
    FeedGone,
    FeedPage,
    FieldChange,
    Guard,
    HistoryEntry,
    KindDefinition,
    Lease,
    OnExpiry,
    OutcomeRule,
    Page,
    Phase,
    Priority,
    SealOutcome,
    Settlement,
    Task,
    TaskChange,
    TaskChanges,
    TaskState,
    Rescheduled,
    Timer,
    TimerChange,
    TimerHeld,
    TimerInfo,
    TimerMoved,
    TimerNotFound,
    TimerPage,
    TimerRunSealed,
    TimerEvent,
    TrimOutcome,
    FeedPlace,
    CatchUp,
    CatchUpAllWithin,
    CatchUpLatestWithin,
    CatchUpNone,
    Cron,
    GapPolicy,
    Interval,
    OverlapPolicy,
    Recurrence,
    RepeatPolicy,
    Schedule,
    SchedulePage,
    ScheduleSpec,
    EscalationStep,
    Reminder,
    StepEscalate,
    StepExpire,
    TaskStep,
    Attempt,
    SigningKey,
    SubFilter,
    SubState,
    Subscription,
    SubscriptionPage,
    AssigneeActor,
    AssigneeFilter,
    AssigneeNobody,
    CountAnswer,
    IndexProgress,
    Job,
    JobAction,
    JobAssign,
    JobMiss,
    JobState,
    JobVerb,
    SavedView,
    SearchPage,
    SearchQuery,
    SortKey,
    TaskFilter,
    TaskSort,
    Viewer,
    now_ms,
)
from .stores import Mode, Store

PACKAGE = "leasehold:engine"
VERSION = "0.3.0"

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
        _check_version(self.component, self.engine)
        engine = self.engine

        def tick() -> None:
            while True:
                engine.increment_epoch()
                time.sleep(TICK)

        threading.Thread(target=tick, name="leasehold-deadline", daemon=True).start()


def _check_version(component: cm.Component, engine: wasmtime.Engine) -> None:
    """Refuses a component that speaks another version of the package,
    naming both, before any instance is made: its export names say which
    it speaks (``leasehold:engine/tasks@0.3.0``)."""
    prefix = f"{PACKAGE}/tasks@"
    spoken = sorted(n[len(prefix) :] for n in component.type.exports(engine) if n.startswith(prefix))
    if not spoken:
        raise LeaseholdError(f"the component exports no {PACKAGE}/tasks interface; this host speaks {VERSION}")
    if VERSION not in spoken:
        raise LeaseholdError(f"this component speaks {PACKAGE}@{spoken[0]}; this host speaks {VERSION}")


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
    # The instant the call's changes are recorded at (``kv.call-time``).
    call_time: int = 0
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



def _wit_entries(entries: list[tuple[bytes, bytes]]) -> list[Any]:
    """Entries as the kv import's `entry` records."""
    out = []
    for k, v in entries:
        e = cm.Record()
        e.key = k
        e.value = v
        out.append(e)
    return out

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

    def writer_slot(self, _store: Any) -> int:
        # This host runs one call at a time per store: every call one slot.
        self._current()
        return 0

    def call_time(self, _store: Any) -> int:
        return self._current().call_time

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
        return _wit_entries(entries)

    def scan_many(self, _store: Any, requests: list[Any]) -> list[list[Any]]:
        # Held to one scan's limits as a whole: each range counts its limit
        # (at least one) against the entries' cap, all answers against the
        # bytes' cap.
        c = self._current()
        asked = min(sum(max(r.limit, 1) for r in requests), 0xFFFFFFFF)
        if asked > c.limits.scan_entries:
            c.fail(
                SandboxError(
                    "scan-length", f"the guest asked one scan for {asked} entries; the cap is {c.limits.scan_entries}"
                )
            )
        for r in requests:
            c.check_key(r.range.start)
            if r.range.end is not None:
                c.check_key(r.range.end)
        left = c.limits.scan_bytes
        answers = []
        for r in requests:
            start, end, limit, reverse, budget = r.range.start, r.range.end, r.limit, r.reverse, left
            entries, over = c.store(lambda: c.txn.scan(start, end, limit, reverse, budget))
            if over:
                c.fail(
                    SandboxError("scan-bytes", f"one scan read more than its budget of {c.limits.scan_bytes} bytes")
                )
            size = sum(len(k) + len(v) for k, v in entries)
            left -= min(size, left)
            c.count_read(size)
            answers.append(_wit_entries(entries))
        return answers

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
    "expire-overdue": ("tasks", "write"),
    "claim-next": ("tasks", "write"),
    "claim-batch": ("tasks", "write"),
    "settle-and-claim": ("tasks", "write"),
    "settle": ("tasks", "write"),
    "withdraw-run": ("tasks", "write"),
    "escalate": ("tasks", "write"),
    "queue": ("tasks", "read"),
    "for-case": ("tasks", "read"),
    "open-count": ("tasks", "read"),
    "leased-count": ("tasks", "read"),
    "next-lease-end": ("tasks", "read"),
    "next-wake": ("tasks", "read"),
    "overdue": ("tasks", "read"),
    "held": ("tasks", "read"),
    "update": ("tasks", "write"),
    "assign": ("tasks", "write"),
    "unassign": ("tasks", "write"),
    "delegate": ("tasks", "write"),
    "note": ("tasks", "write"),
    "define-kind": ("kinds", "write"),
    "get-kind": ("kinds", "read"),
    "list-kinds": ("kinds", "read"),
    "remove-kind": ("kinds", "write"),
    "arm": ("timers", "write"),
    "claim-due": ("timers", "write"),
    "disarm": ("timers", "write"),
    "disarm-run": ("timers", "write"),
    "pending-count": ("timers", "read"),
    "next-due": ("timers", "read"),
    "reschedule": ("timers", "write"),
    "timers-of": ("timers", "read"),
    "due-between": ("timers", "read"),
    "seal": ("runs", "write"),
    "is-sealed": ("runs", "read"),
    "check": ("admin", "read"),
    "history": ("changes", "read"),
    "entry-place": ("changes", "read"),
    "feed": ("changes", "read"),
    "trim": ("changes", "write"),
    "add-schedule": ("schedules", "write"),
    "remove-schedule": ("schedules", "write"),
    "pause-schedule": ("schedules", "write"),
    "resume-schedule": ("schedules", "write"),
    "trigger-schedule": ("schedules", "write"),
    "next-occurrences": ("schedules", "read"),
    "get-schedule": ("schedules", "read"),
    "list-schedules": ("schedules", "read"),
    "tz-version": ("schedules", "read"),
    "add-subscription": ("subscriptions", "write"),
    "get-subscription": ("subscriptions", "read"),
    "list-subscriptions": ("subscriptions", "read"),
    "change-subscription": ("subscriptions", "write"),
    "set-subscription-state": ("subscriptions", "write"),
    "rotate-subscription-key": ("subscriptions", "write"),
    "remove-subscription": ("subscriptions", "write"),
    "advance-subscription": ("subscriptions", "write"),
    "rewind-subscription": ("subscriptions", "write"),
    "lease-subscription": ("subscriptions", "write"),
    "release-subscription": ("subscriptions", "write"),
    "record-subscription-attempts": ("subscriptions", "write"),
    "search": ("search", "read"),
    "count": ("search", "read"),
    "build-search-index": ("search", "write"),
    "put-view": ("search", "write"),
    "get-view": ("search", "read"),
    "list-views": ("search", "read"),
    "delete-view": ("search", "write"),
    "start-job": ("jobs", "write"),
    "step-job": ("jobs", "write"),
    "cancel-job": ("jobs", "write"),
    "get-job": ("jobs", "read"),
    "list-jobs": ("jobs", "read"),
    "runnable-jobs": ("jobs", "read"),
}

_CLAIM_VERBS = frozenset(
    {"claim", "release", "take-over", "renew", "settle", "escalate", "update", "assign", "unassign", "delegate", "note"}
)

#: Verbs whose error result is a ``timer-error``: its refusals (every case
#: but ``store``) are answers, as the Rust host's ``Rescheduled`` makes them.
_TIMER_VERBS = frozenset({"reschedule"})


class _Refused(Exception):
    """A refusal a verb answers as a value (a ``timer-error`` case other
    than ``store``), carried from ``_answer`` to ``Engine.call``."""

    def __init__(self, variant: Any) -> None:
        super().__init__(variant.tag)
        self.variant = variant


@dataclass
class _Instance:
    """One tenant's instance, in a wasmtime store of its own."""

    store: wasmtime.Store
    funcs: dict[str, cm.Func]


class Engine:
    """The component over ``store``. Calls are serialised: one at a time per
    engine, each in its own transaction."""

    def __init__(
        self,
        store: Store,
        *,
        limits: Limits | None = None,
        component: bytes | str | Path | None = None,
        clock: Callable[[], int] = now_ms,
    ):
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
        if not callable(clock):
            raise TypeError("clock must be a function answering milliseconds since 1970")
        self.store = store
        #: Read once per call: the instant its changes are recorded at.
        self.clock = clock
        self.limits = limits or Limits()
        self._compiled = _compiled(wasm)
        self._kv = _Kv()
        self._linker = self._link()
        self._lock = threading.Lock()
        # Most recently used last.
        self._instances: OrderedDict[str, _Instance] = OrderedDict()
        self._made = 0
        self._closed = False

    @property
    def component_sha256(self) -> str:
        """The SHA-256 of the component bytes this engine runs."""
        return self._compiled.sha256

    def _link(self) -> cm.Linker:
        linker = cm.Linker(self._compiled.engine)
        # The shipped guest imports only kv (and the types it speaks in);
        # another build may import WASI, which each store grants nothing of.
        linker.add_wasip2()
        with linker.root() as root:
            with root.add_instance(f"{PACKAGE}/kv@{VERSION}") as kv:
                kv.add_func("concurrent-writers", self._kv.concurrent_writers)
                kv.add_func("writer-slot", self._kv.writer_slot)
                kv.add_func("call-time", self._kv.call_time)
                kv.add_func("get", self._kv.get)
                kv.add_func("get-many", self._kv.get_many)
                kv.add_func("scan", self._kv.scan)
                kv.add_func("scan-many", self._kv.scan_many)
                kv.add_func("stage", self._kv.stage)
        return linker

    def tenant(self, name: str) -> Tenant:
        """A handle on one tenant: every call through it sees only its keys."""
        if not isinstance(name, str) or not _TENANT_NAME.fullmatch(name):
            raise TenantError(f"invalid tenant name {name!r}: use 1-64 ASCII letters, digits, '-', '_' and '.'")
        return Tenant(self, name)

    @property
    def instances_made(self) -> int:
        """Instances made so far: one per tenant on first use, again after a
        trap, a limit or an eviction."""
        return self._made

    @property
    def instances_cached(self) -> int:
        """Instances held now: at most ``limits.cached_instances``."""
        return len(self._instances)

    def close(self) -> None:
        """Drops the instances and closes the store; every later call fails
        with a ``StorageFailure``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._instances.clear()
            self.store.close()

    def _instance(self, tenant: str) -> _Instance:
        inst = self._instances.get(tenant)
        if inst is not None:
            self._instances.move_to_end(tenant)
        else:
            store = wasmtime.Store(self._compiled.engine)
            store.set_wasi(wasmtime.WasiConfig())
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
            self._made += 1
            inst = _Instance(store, funcs)
            self._instances[tenant] = inst
            while len(self._instances) > self.limits.cached_instances:
                self._instances.popitem(last=False)
        return inst

    def call(self, tenant: str, verb: str, args: tuple, check: Callable[[Any], Any]) -> Any:
        """Runs one export in one transaction; ``check`` turns the guest's ok
        answer into the caller's, raising on what the contract rules out."""
        mode = VERBS[verb][1]
        with self._lock:
            if self._closed:
                raise StorageFailure("the engine is closed")
            try:
                txn = self.store.begin(tenant, mode)
            except LeaseholdError:
                raise
            except Exception as e:
                raise StorageFailure(f"the store could not begin a transaction: {e}") from e
            at = self.clock()
            if type(at) is not int or not _S64[0] <= at <= _S64[1]:
                txn.abort()
                raise StorageFailure(f"the clock answered {at!r}, not integer milliseconds")
            call = _Call(txn, mode, self.limits, self.store.concurrent_writers, at)
            try:
                answer = self._run(tenant, verb, args, call)
                result = check(answer)
                try:
                    txn.commit(call.staged or [])
                except LeaseholdError:
                    raise
                except Exception as e:
                    raise StorageFailure(f"the store could not commit: {e}") from e
                return result
            except _Refused as r:
                # Like every error answer it commits nothing and drops the
                # instance; ``check`` turns it into the caller's value.
                self._instances.pop(tenant, None)
                txn.abort()
                return check(r.variant)
            except BaseException:
                # An instance goes on only from a call that answered ok and
                # committed, as the Rust host's: an error answer, an answer
                # the contract rules out or a failed commit discards it.
                self._instances.pop(tenant, None)
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
            self._instances.pop(tenant, None)
            if call.violation is not None:
                raise call.violation from None
            if _interrupted(e):
                raise SandboxError("deadline", f"the call ran past its deadline of {deadline} s") from None
            if isinstance(e, (TypeError, ValueError)) and not isinstance(e, wasmtime.WasmtimeError):
                # Arguments are checked before the call; one wasmtime-py still
                # refuses is this host's fault, reported by name.
                raise InvalidArgument(f"wasmtime-py refused an argument: {e}") from e
            raise SandboxError("trap", f"the guest trapped: {e}") from e
        finally:
            self._kv.call = None
        if call.violation is not None:
            self._instances.pop(tenant, None)
            raise call.violation
        return _answer(answer, verb)


def _interrupted(e: Exception) -> bool:
    """The epoch deadline stopped the guest. A component call's trap arrives
    as a bare WasmtimeError with no trap code, so its text is read: wasmtime
    words the interrupt trap as ``wasm trap: interrupt``."""
    if isinstance(e, wasmtime.Trap):
        return e.trap_code == wasmtime.TrapCode.INTERRUPT
    return isinstance(e, wasmtime.WasmtimeError) and "wasm trap: interrupt" in str(e)


def _answer(answer: Any, verb: str) -> Any:
    """An export's untagged ``result``: a bare Variant is the error case (no
    ok type of the world lifts to a Variant at the top)."""
    if not isinstance(answer, cm.Variant):
        return answer
    if verb in _TIMER_VERBS:
        if answer.tag == "store":
            raise StoreError(answer.payload.tag, answer.payload.payload)
        raise _Refused(answer)
    if verb not in _CLAIM_VERBS:
        raise StoreError(answer.tag, answer.payload)
    if answer.tag == "store":
        raise StoreError(answer.payload.tag, answer.payload.payload)
    raise ClaimRefusal(answer.tag, answer.payload)


# ---- arguments ---------------------------------------------------------------------
#
# Every argument is checked before the guest runs: wasmtime-py writes an int
# into its C field unchecked (2**32 + 60000 arrives as 60000), iterates a
# str given for a list (one role per letter) and lowers anything iterable.

_S64 = (-(2**63), 2**63 - 1)
_U32 = (0, 2**32 - 1)
_U64 = (0, 2**64 - 1)


def _int(v: Any, field: str, bounds: tuple[int, int], what: str) -> int:
    if type(v) is not int:  # bool is an int subclass, and no integer
        raise InvalidArgument(f"{field} must be an int ({what}), got {v!r}")
    lo, hi = bounds
    if not lo <= v <= hi:
        raise InvalidArgument(f"{field} must be an integer in {lo}..{hi} ({what}), got {v}")
    return v


def _s64(v: Any, field: str) -> int:
    return _int(v, field, _S64, "signed 64 bits, milliseconds since the epoch for a time")


def _u32(v: Any, field: str) -> int:
    return _int(v, field, _U32, "unsigned 32 bits")


def _opt_s64(v: Any, field: str) -> int | None:
    return None if v is None else _s64(v, field)


def _u64(v: Any, field: str) -> int:
    return _int(v, field, _U64, "unsigned 64 bits")


def _opt_u64(v: Any, field: str) -> int | None:
    return None if v is None else _u64(v, field)


def _str(v: Any, field: str) -> str:
    if not isinstance(v, str):
        raise InvalidArgument(f"{field} must be a str, got {v!r}")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{field} must be well-formed Unicode (it has a lone surrogate)") from None
    return str(v)


def _opt_str(v: Any, field: str) -> str | None:
    return None if v is None else _str(v, field)


def _strs(v: Any, field: str) -> list[str]:
    # A str is iterable too, and would become one role per letter.
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise InvalidArgument(f"{field} must be a list of str, got {v!r}")
    return [_str(x, f"{field}[{i}]") for i, x in enumerate(v)]


def _enum(cls: type, v: Any, field: str) -> str:
    try:
        return str(cls(v))
    except ValueError:
        cases = ", ".join(m.value for m in cls)
        raise InvalidArgument(f"{field} must be one of {cases}; got {v!r}") from None


def _of(cls: type, v: Any, field: str) -> Any:
    if not isinstance(v, cls):
        raise InvalidArgument(f"{field} must be a {cls.__name__}, got {v!r}")
    return v


# ---- conversions -------------------------------------------------------------------


def _record(**fields: Any) -> cm.Record:
    r = cm.Record()
    for k, v in fields.items():
        setattr(r, k.replace("_", "-"), v)
    return r


def _wit_task(t: Task) -> cm.Record:
    _of(Task, t, "task")
    return _record(
        id=_str(t.id, "id"),
        run=_str(t.run, "run"),
        case=_opt_str(t.case, "case"),
        kind=_str(t.kind, "kind"),
        justification=_str(t.justification, "justification"),
        candidate_roles=_strs(t.candidate_roles, "candidate_roles"),
        assignee=_opt_str(t.assignee, "assignee"),
        lease_until=_opt_s64(t.lease_until, "lease_until"),
        priority=_enum(Priority, t.priority, "priority"),
        state=_enum(TaskState, t.state, "state"),
        on_expiry=_enum(OnExpiry, t.on_expiry, "on_expiry"),
        escalate_to=_strs(t.escalate_to, "escalate_to"),
        excluded_actors=_strs(t.excluded_actors, "excluded_actors"),
        created_at=_s64(t.created_at, "created_at"),
        due_at=_opt_s64(t.due_at, "due_at"),
        # The engine keeps a task's revision, decision and steps done: open ignores them.
        revision=0,
        decision=None,
        outcomes=_wit_outcomes(t.outcomes, "outcomes"),
        remind_before=_offsets(t.remind_before, "remind_before"),
        escalation=_wit_escalation(t.escalation, "escalation"),
        steps_done=0,
    )


def _offsets(v: Any, field: str) -> list[int]:
    """Reminder offsets: a list of u64, milliseconds before the due time."""
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise InvalidArgument(f"{field} must be a list of int, got {v!r}")
    return [_u64(x, f"{field}[{i}]") for i, x in enumerate(v)]


def _wit_step_action(a: Any, field: str) -> list[str] | None:
    """``step-action`` lowers untagged: ``escalate`` is its list of roles,
    ``expire`` (no payload) None, which wasmtime-py tells apart by type."""
    if isinstance(a, StepEscalate):
        return _strs(a.roles, f"{field}.roles")
    if isinstance(a, StepExpire):
        return None
    raise InvalidArgument(f"{field} must be a StepEscalate or a StepExpire, got {a!r}")


def _wit_escalation(v: Any, field: str) -> list[cm.Record]:
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise InvalidArgument(f"{field} must be a list of EscalationStep, got {v!r}")
    out = []
    for i, step in enumerate(v):
        f = f"{field}[{i}]"
        _of(EscalationStep, step, f)
        out.append(
            _record(
                after_due_ms=_u64(step.after_due_ms, f"{f}.after_due_ms"),
                action=_wit_step_action(step.action, f"{f}.action"),
            )
        )
    return out


def _wit_outcomes(v: Any, field: str) -> list[cm.Record]:
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise InvalidArgument(f"{field} must be a list of OutcomeRule, got {v!r}")
    out = []
    for i, r in enumerate(v):
        f = f"{field}[{i}]"
        _of(OutcomeRule, r, f)
        if type(r.needs_reason) is not bool:
            raise InvalidArgument(f"{f}.needs_reason must be a bool, got {r.needs_reason!r}")
        out.append(
            _record(
                name=_str(r.name, f"{f}.name"),
                needs_reason=r.needs_reason,
                output_schema=_opt_str(r.output_schema, f"{f}.output_schema"),
            )
        )
    return out


def _wit_decision(d: Decision | None) -> cm.Record | None:
    if d is None:
        return None
    _of(Decision, d, "decision")
    return _record(
        outcome=_str(d.outcome, "decision.outcome"),
        reason=_opt_str(d.reason, "decision.reason"),
        output=_opt_str(d.output, "decision.output"),
    )


def _wit_changes(c: TaskChanges) -> cm.Record:
    _of(TaskChanges, c, "changes")

    def some(v: Any, f: Callable[[Any, str], Any], field: str) -> Any:
        return None if v is None else f(v, f"changes.{field}")

    # option<option<timestamp>> lifts tagged: both of its cases can be None.
    if c.due_at is UNCHANGED:
        due_at = cm.Variant("none")
    else:
        due_at = cm.Variant("some", _opt_s64(c.due_at, "changes.due_at"))
    return _record(
        due_at=due_at,
        priority=some(c.priority, lambda v, f: _enum(Priority, v, f), "priority"),
        candidate_roles=some(c.candidate_roles, _strs, "candidate_roles"),
        escalate_to=some(c.escalate_to, _strs, "escalate_to"),
        excluded_actors=some(c.excluded_actors, _strs, "excluded_actors"),
        on_expiry=some(c.on_expiry, lambda v, f: _enum(OnExpiry, v, f), "on_expiry"),
        outcomes=some(c.outcomes, _wit_outcomes, "outcomes"),
        remind_before=some(c.remind_before, _offsets, "remind_before"),
        escalation=some(c.escalation, _wit_escalation, "escalation"),
    )


def _wit_guard(g: Guard) -> cm.Record:
    _of(Guard, g, "guard")
    return _record(revision=_opt_u64(g.revision, "guard.revision"), job=_opt_str(g.job, "guard.job"))


def _wit_kind(k: KindDefinition) -> cm.Record:
    _of(KindDefinition, k, "definition")
    return _record(
        kind=_str(k.kind, "definition.kind"), outcomes=_wit_outcomes(k.outcomes, "definition.outcomes"), revision=0
    )


def _outcome_rule(r: Any) -> OutcomeRule:
    return OutcomeRule(name=r.name, needs_reason=getattr(r, "needs-reason"), output_schema=getattr(r, "output-schema"))


def _decision_record(r: Any) -> DecisionRecord | None:
    if r is None:
        return None
    return DecisionRecord(outcome=r.outcome, reason=r.reason, output=r.output, by=r.by, at=r.at)


def _kind(r: Any, kind: str) -> KindDefinition:
    if r.kind != kind:
        raise _malformed(f"asked about kind {kind}, answered kind {r.kind}")
    return KindDefinition(kind=r.kind, outcomes=[_outcome_rule(o) for o in r.outcomes], revision=r.revision)


def _escalation_step(r: Any) -> EscalationStep:
    # step-action lifts untagged: escalate as its list of roles, expire as None.
    a = r.action
    return EscalationStep(after_due_ms=getattr(r, "after-due-ms"), action=StepExpire() if a is None else StepEscalate(a))


def _task_step(v: Any) -> TaskStep | None:
    """A history entry's step: task-step lifts untagged, a reminder as its
    int, a chain step as its record."""
    if v is None:
        return None
    if isinstance(v, int):
        return Reminder(v)
    return _escalation_step(v)


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
        revision=r.revision,
        decision=_decision_record(r.decision),
        outcomes=[_outcome_rule(o) for o in r.outcomes],
        remind_before=list(g("remind-before")),
        escalation=[_escalation_step(s) for s in r.escalation],
        steps_done=g("steps-done"),
    )


def _wit_timer(t: Timer) -> cm.Record:
    _of(Timer, t, "timer")
    return _record(
        run=_str(t.run, "run"),
        case=_opt_str(t.case, "case"),
        effect=_str(t.effect, "effect"),
        step=_u32(t.step, "step"),
        phase=_enum(Phase, t.phase, "phase"),
        fire_at=_s64(t.fire_at, "fire_at"),
    )


def _timer(r: Any) -> Timer:
    return Timer(
        run=r.run, effect=r.effect, fire_at=getattr(r, "fire-at"), case=r.case, step=r.step, phase=Phase(r.phase)
    )


def _timer_info(r: Any) -> TimerInfo:
    return TimerInfo(timer=_timer(r.timer), lease_until=getattr(r, "lease-until"))


def _timer_page(p: Any, limit: int, verb: str) -> TimerPage:
    return TimerPage(timers=[_timer_info(i) for i in _at_most(p.timers, limit, verb)], next=p.next)


def _rescheduled(r: Any, run: str, effect: str) -> Rescheduled:
    """``reschedule``'s answer: a refusal arrives as its ``timer-error``
    variant, a move as the timer info, which must be the timer asked about."""
    if isinstance(r, cm.Variant):
        if r.tag == "not-found":
            return TimerNotFound()
        if r.tag == "held":
            return TimerHeld(lease_until=r.payload)
        if r.tag == "run-sealed":
            return TimerRunSealed()
        raise _malformed(f"reschedule refused with {r.tag}, which timer-error does not have")
    info = _timer_info(r)
    if info.timer.run != run or info.timer.effect != effect:
        raise _malformed(f"asked to move timer {run}/{effect}, answered {info.timer.run}/{info.timer.effect}")
    return TimerMoved(info)


def _wit_recurrence(r: Any) -> str | cm.Record:
    """``recurrence`` lowers untagged: its cases are a str and a record,
    which wasmtime-py tells apart by their Python types."""
    if isinstance(r, Cron):
        return _str(r.expr, "spec.recurrence.expr")
    if isinstance(r, Interval):
        return _record(
            every_ms=_u64(r.every_ms, "spec.recurrence.every_ms"), anchor=_s64(r.anchor, "spec.recurrence.anchor")
        )
    raise InvalidArgument(f"spec.recurrence must be a Cron or an Interval, got {r!r}")


def _wit_catch_up(c: Any) -> cm.Variant:
    if isinstance(c, CatchUpAllWithin):
        return cm.Variant("all-within", _u64(c.window_ms, "spec.catch_up.window_ms"))
    if isinstance(c, CatchUpLatestWithin):
        return cm.Variant("latest-within", _u64(c.window_ms, "spec.catch_up.window_ms"))
    if isinstance(c, CatchUpNone):
        return cm.Variant("none")
    raise InvalidArgument(f"spec.catch_up must be a CatchUpAllWithin, CatchUpLatestWithin or CatchUpNone, got {c!r}")


def _wit_schedule_spec(s: ScheduleSpec) -> cm.Record:
    _of(ScheduleSpec, s, "spec")
    return _record(
        id=_str(s.id, "spec.id"),
        run=_str(s.run, "spec.run"),
        case=_opt_str(s.case, "spec.case"),
        step=_u32(s.step, "spec.step"),
        phase=_enum(Phase, s.phase, "spec.phase"),
        recurrence=_wit_recurrence(s.recurrence),
        zone=_str(s.zone, "spec.zone"),
        start=_opt_s64(s.start, "spec.start"),
        end=_opt_s64(s.end, "spec.end"),
        gap=_enum(GapPolicy, s.gap, "spec.gap"),
        repeat=_enum(RepeatPolicy, s.repeat, "spec.repeat"),
        overlap=_enum(OverlapPolicy, s.overlap, "spec.overlap"),
        catch_up=_wit_catch_up(s.catch_up),
        jitter_ms=_u32(s.jitter_ms, "spec.jitter_ms"),
    )


def _recurrence(r: Any) -> Recurrence:
    if isinstance(r, str):
        return Cron(r)
    return Interval(every_ms=getattr(r, "every-ms"), anchor=r.anchor)


def _catch_up(v: Any) -> CatchUp:
    if v.tag == "all-within":
        return CatchUpAllWithin(v.payload)
    if v.tag == "latest-within":
        return CatchUpLatestWithin(v.payload)
    return CatchUpNone()


def _schedule_spec(r: Any) -> ScheduleSpec:
    return ScheduleSpec(
        id=r.id,
        run=r.run,
        recurrence=_recurrence(r.recurrence),
        zone=r.zone,
        case=r.case,
        step=r.step,
        phase=Phase(r.phase),
        start=r.start,
        end=r.end,
        gap=GapPolicy(r.gap),
        repeat=RepeatPolicy(r.repeat),
        overlap=OverlapPolicy(r.overlap),
        catch_up=_catch_up(getattr(r, "catch-up")),
        jitter_ms=getattr(r, "jitter-ms"),
    )


def _schedule(r: Any) -> Schedule:
    return Schedule(
        spec=_schedule_spec(r.spec),
        paused=r.paused,
        next_at=getattr(r, "next-at"),
        last_at=getattr(r, "last-at"),
        waiting=list(r.waiting),
        revision=r.revision,
    )


def _same_schedule(r: Any, id: str) -> Schedule:
    """A single-schedule answer must be the schedule that was asked about."""
    if r.spec.id != id:
        raise _malformed(f"asked for schedule {id}, answered schedule {r.spec.id}")
    return _schedule(r)


def _bytes(v: Any, field: str) -> bytes:
    """A ``list<u8>``: bytes (or a bytearray, copied); its length is the rules' to judge."""
    if not isinstance(v, (bytes, bytearray)):
        raise InvalidArgument(f"{field} must be bytes, got {v!r}")
    return bytes(v)


def _bool(v: Any, field: str) -> bool:
    if type(v) is not bool:
        raise InvalidArgument(f"{field} must be a bool, got {v!r}")
    return v


def _wit_filter(f: SubFilter, field: str) -> cm.Record:
    _of(SubFilter, f, field)
    return _record(
        tasks=_bool(f.tasks, f"{field}.tasks"),
        timers=_bool(f.timers, f"{field}.timers"),
        verbs=_strs(f.verbs, f"{field}.verbs"),
        kinds=_strs(f.kinds, f"{field}.kinds"),
        runs=_strs(f.runs, f"{field}.runs"),
        settling_only=_bool(f.settling_only, f"{field}.settling_only"),
    )


def _wit_attempts(v: Any, field: str) -> list[cm.Record]:
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise InvalidArgument(f"{field} must be a list of Attempt, got {v!r}")
    out = []
    for i, a in enumerate(v):
        f = f"{field}[{i}]"
        _of(Attempt, a, f)
        out.append(
            _record(
                message_id=_str(a.message_id, f"{f}.message_id"),
                at=_s64(a.at, f"{f}.at"),
                attempt=_u32(a.attempt, f"{f}.attempt"),
                outcome=_str(a.outcome, f"{f}.outcome"),
                latency_ms=_u64(a.latency_ms, f"{f}.latency_ms"),
            )
        )
    return out


def _subscription(r: Any) -> Subscription:
    g = lambda name: getattr(r, name)  # noqa: E731 - fields are kebab-case attributes
    f = r.filter
    return Subscription(
        id=r.id,
        url=r.url,
        filter=SubFilter(
            tasks=f.tasks,
            timers=f.timers,
            verbs=list(f.verbs),
            kinds=list(f.kinds),
            runs=list(f.runs),
            settling_only=getattr(f, "settling-only"),
        ),
        state=SubState(r.state),
        note=r.note,
        position=r.position,
        keys=[SigningKey(key=bytes(k.key), until=k.until) for k in r.keys],
        created_at=g("created-at"),
        revision=r.revision,
        attempts=[
            Attempt(
                message_id=getattr(a, "message-id"),
                at=a.at,
                attempt=a.attempt,
                outcome=a.outcome,
                latency_ms=getattr(a, "latency-ms"),
            )
            for a in r.attempts
        ],
        lease_holder=g("lease-holder"),
        lease_until=g("lease-until"),
    )


def _same_subscription(r: Any, id: str, verb: str) -> Subscription:
    """A single-subscription answer must be the subscription that was asked about."""
    if r.id != id:
        raise _malformed(f"{verb} asked for subscription {id}, answered subscription {r.id}")
    return _subscription(r)


def _wit_assignee(a: Any, field: str) -> cm.Variant:
    """``option<assignee-filter>``. wasmtime-py lowers ``assignee-filter``
    untagged (``nobody`` is None, ``actor`` a str: their Python types differ),
    so the option around it is tagged: both of its cases can be None."""
    if a is None:
        return cm.Variant("none")
    if isinstance(a, AssigneeNobody):
        return cm.Variant("some", None)
    if isinstance(a, AssigneeActor):
        return cm.Variant("some", _str(a.actor, f"{field}.actor"))
    raise InvalidArgument(f"{field} must be an AssigneeNobody or an AssigneeActor, got {a!r}")


def _wit_task_filter(f: TaskFilter | None, field: str) -> cm.Record:
    """A search's filter; how many states and kinds, and whether a range
    holds an instant, are the rules' to judge."""
    f = TaskFilter() if f is None else _of(TaskFilter, f, field)
    if isinstance(f.states, (str, bytes)) or not isinstance(f.states, (list, tuple)):
        raise InvalidArgument(f"{field}.states must be a list of TaskState, got {f.states!r}")
    return _record(
        states=[_enum(TaskState, s, f"{field}.states[{i}]") for i, s in enumerate(f.states)],
        kinds=_strs(f.kinds, f"{field}.kinds"),
        role=_opt_str(f.role, f"{field}.role"),
        assignee=_wit_assignee(f.assignee, f"{field}.assignee"),
        case=_opt_str(f.case, f"{field}.case"),
        run=_opt_str(f.run, f"{field}.run"),
        priority_at_least=None
        if f.priority_at_least is None
        else _enum(Priority, f.priority_at_least, f"{field}.priority_at_least"),
        due_before=_opt_s64(f.due_before, f"{field}.due_before"),
        due_after=_opt_s64(f.due_after, f"{field}.due_after"),
        created_before=_opt_s64(f.created_before, f"{field}.created_before"),
        created_after=_opt_s64(f.created_after, f"{field}.created_after"),
        overdue_at=_opt_s64(f.overdue_at, f"{field}.overdue_at"),
    )


def _wit_sort(s: TaskSort | None, field: str) -> cm.Record:
    s = TaskSort() if s is None else _of(TaskSort, s, field)
    return _record(key=_enum(SortKey, s.key, f"{field}.key"), descending=_bool(s.descending, f"{field}.descending"))


def _wit_viewer(v: Viewer | None, field: str) -> cm.Record | None:
    if v is None:
        return None
    _of(Viewer, v, field)
    return _record(actor=_str(v.actor, f"{field}.actor"), roles=_strs(v.roles, f"{field}.roles"))


def _wit_view(v: SavedView) -> cm.Record:
    _of(SavedView, v, "view")
    # The revision and the time are the engine's to set: what is given is ignored.
    return _record(
        name=_str(v.name, "view.name"),
        filter=_wit_task_filter(v.filter, "view.filter"),
        sort=_wit_sort(v.sort, "view.sort"),
        revision=0,
        by=_opt_str(v.by, "view.by"),
        at=0,
    )


def _assignee_filter(v: Any) -> AssigneeFilter | None:
    """An ``option<assignee-filter>`` as wasmtime-py lifts it: tagged around
    an untagged variant (see ``_wit_assignee``)."""
    if v.tag == "none":
        return None
    if v.payload is None:
        return AssigneeNobody()
    if isinstance(v.payload, str):
        return AssigneeActor(v.payload)
    raise _malformed(f"a filter's assignee is {v.payload!r}, which assignee-filter does not have")


def _task_filter(r: Any) -> TaskFilter:
    g = lambda name: getattr(r, name)  # noqa: E731 - fields are kebab-case attributes
    p = g("priority-at-least")
    return TaskFilter(
        states=[TaskState(s) for s in r.states],
        kinds=list(r.kinds),
        role=r.role,
        assignee=_assignee_filter(r.assignee),
        case=r.case,
        run=r.run,
        priority_at_least=None if p is None else Priority(p),
        due_before=g("due-before"),
        due_after=g("due-after"),
        created_before=g("created-before"),
        created_after=g("created-after"),
        overdue_at=g("overdue-at"),
    )


def _saved_view(r: Any) -> SavedView:
    return SavedView(
        name=r.name,
        filter=_task_filter(r.filter),
        sort=TaskSort(key=SortKey(r.sort.key), descending=r.sort.descending),
        revision=r.revision,
        by=r.by,
        at=r.at,
    )


def _same_view(r: Any, name: str, verb: str) -> SavedView:
    """A single-view answer must be the view that was asked about."""
    if r.name != name:
        raise _malformed(f"{verb} asked for view {name}, answered view {r.name}")
    return _saved_view(r)


# ---- bulk jobs -----------------------------------------------------------------------

#: How many failures, and how many skips, a job keeps with their reasons.
_KEPT_MISSES = 16


def _wit_job_action(a: Any) -> cm.Variant:
    """``job-action`` lowers tagged: three of its cases carry nothing."""
    if isinstance(a, JobAssign):
        return cm.Variant(
            "assign",
            _record(
                to=_str(a.to, "action.to"),
                roles=_strs(a.roles, "action.roles"),
                override_roles=_bool(a.override_roles, "action.override_roles"),
            ),
        )
    if isinstance(a, TaskChanges):
        return cm.Variant("update", _wit_changes(a))
    if isinstance(a, str) and a in set(JobVerb):
        return cm.Variant(str(a))
    raise InvalidArgument(f"action must be a JobVerb, a JobAssign or TaskChanges, got {a!r}")


def _task_changes(r: Any) -> TaskChanges:
    """A job's update as answered: only the fields it changes."""
    g = lambda name: getattr(r, name)  # noqa: E731 - fields are kebab-case attributes
    due = g("due-at")
    opt = lambda v, f: None if v is None else f(v)  # noqa: E731
    return TaskChanges(
        due_at=UNCHANGED if due.tag == "none" else due.payload,
        priority=opt(r.priority, Priority),
        candidate_roles=opt(g("candidate-roles"), list),
        escalate_to=opt(g("escalate-to"), list),
        excluded_actors=opt(g("excluded-actors"), list),
        on_expiry=opt(g("on-expiry"), OnExpiry),
        outcomes=opt(r.outcomes, lambda o: [_outcome_rule(x) for x in o]),
        remind_before=opt(g("remind-before"), list),
        escalation=opt(r.escalation, lambda e: [_escalation_step(x) for x in e]),
    )


def _job_action(v: Any) -> JobAction:
    if v.tag == "assign":
        return JobAssign(
            to=v.payload.to, roles=list(v.payload.roles), override_roles=getattr(v.payload, "override-roles")
        )
    if v.tag == "update":
        return _task_changes(v.payload)
    if v.tag in set(JobVerb):
        return JobVerb(v.tag)
    raise _malformed(f"a job's action is {v.tag}, which job-action does not have")


def _same_job(r: Any, id: str, verb: str) -> Job:
    """A job answered about ``id`` whose counts add up: no more taken than
    found, no more reasons kept than the contract keeps, all taken once done."""
    g = lambda name: getattr(r, name)  # noqa: E731 - fields are kebab-case attributes
    if r.id != id:
        raise _malformed(f"{verb} asked for job {id}, answered job {r.id}")
    fails, skips = g("last-failures"), g("last-skipped")
    taken = r.done + r.skipped + r.failed
    if (
        taken > r.total
        or len(fails) > min(_KEPT_MISSES, r.failed)
        or len(skips) > min(_KEPT_MISSES, r.skipped)
        or (r.state == "done" and taken != r.total)
    ):
        raise _malformed(
            f"{verb} answered job {id} with counts that do not add up: {r.total} found, {r.done} done, "
            f"{r.skipped} skipped, {r.failed} failed, {r.state}"
        )
    return Job(
        id=r.id,
        filter=_task_filter(r.filter),
        action=_job_action(r.action),
        by=r.by,
        state=JobState(r.state),
        total=r.total,
        done=r.done,
        skipped=r.skipped,
        failed=r.failed,
        last_failures=[JobMiss(f.id, f.reason) for f in fails],
        last_skipped=[JobMiss(f.id, f.reason) for f in skips],
        created_at=g("created-at"),
    )


def _in_id_order(ids: list[str], after: str | None, verb: str) -> None:
    """Ids strictly ascending, and after ``after`` (str order is the UTF-8 byte order)."""
    prev = after
    for i in ids:
        if prev is not None and prev >= i:
            raise _malformed(f"{verb} answered out of id order")
        prev = i


def _wit_lease(lease: Lease | None) -> cm.Record | None:
    if lease is None:
        return None
    _of(Lease, lease, "lease")
    return _record(now=_s64(lease.now, "lease.now"), lease_ms=_u32(lease.lease_ms, "lease.lease_ms"))


def _wit_query(roles: Any, actor: Any, limit: Any, after: Any) -> cm.Record:
    return _record(
        roles=_strs(roles, "roles"), actor=_opt_str(actor, "actor"), limit=_u32(limit, "limit"), after=_opt_str(after, "after")
    )


# ---- answers -----------------------------------------------------------------------


def _malformed(what: str) -> SandboxError:
    return SandboxError("malformed", f"the guest answered something the contract rules out: {what}")


def _same_task(r: Any, id: str) -> Task:
    """A single-task answer must be the task that was asked about."""
    if r.id != id:
        raise _malformed(f"asked for task {id}, answered task {r.id}")
    return _task(r)


def _held(t: Task, actor: str) -> Task:
    """A claim's answer must be the task, now held by the claimant."""
    if t.state != TaskState.CLAIMED or t.assignee != actor:
        raise _malformed(f"answered task {t.id} as {t.state} by {t.assignee}, not claimed by {actor}")
    return t


def _held_task(r: Any, id: str, actor: str) -> Task:
    return _held(_same_task(r, id), actor)


def _at_most(items: list, limit: int, verb: str) -> list:
    if len(items) > limit:
        raise _malformed(f"{verb} answered {len(items)} entries for a limit of {limit}")
    return items


#: The states a task waits in: a reminder may fire on any of them.
_PENDING = frozenset({TaskState.OPEN, TaskState.CLAIMED, TaskState.ESCALATED})


def _distinct(tasks: list[Task], verb: str) -> list[Task]:
    """Tasks a verb moved must be distinct: one task moved twice is no answer the rules can give."""
    seen: set[str] = set()
    for t in tasks:
        if t.id in seen:
            raise _malformed(f"{verb} answered task {t.id} twice")
        seen.add(t.id)
    return tasks


def _claimed_batch(ts: list, count: int, actor: str, verb: str) -> list[Task]:
    """A batch of claims: at most ``count``, distinct, each held by ``actor``."""
    if len(ts) > count:
        raise _malformed(f"{verb} claimed {len(ts)} tasks, more than the {count} asked for")
    return _distinct([_held(_task(t), actor) for t in ts], verb)


def _wit_finished(f: Any, field: str) -> cm.Record:
    _of(Finished, f, field)
    return _record(
        id=_str(f.id, f"{field}.id"),
        settlement=_enum(Settlement, f.settlement, f"{field}.settlement"),
        decision=_wit_decision(f.decision),
    )


def _settle_answer(v: Any) -> SettleAnswer:
    if not isinstance(v, cm.Variant):
        raise _malformed(f"settle-and-claim answered {v!r}, not a settle-answer")
    if v.tag == "settled":
        return Settled()
    if v.tag == "already":
        return AlreadySettled(TaskState(v.payload))
    if v.tag == "not-held":
        return NotHeld(v.payload)
    if v.tag == "not-found":
        return NotFound()
    if v.tag == "refused":
        return Refused(v.payload)
    raise _malformed(f"settle-and-claim answered {v.tag}, which settle-answer does not have")


def _page(p: Any, limit: int, verb: str) -> Page:
    return Page(tasks=[_task(t) for t in _at_most(p.tasks, limit, verb)], next=p.next)


def _same(x: Any) -> Any:
    return x


def _history_entry(r: Any) -> HistoryEntry:
    g = lambda name: getattr(r, name)  # noqa: E731 - fields are kebab-case attributes
    before = r.before
    return HistoryEntry(
        seq=r.seq,
        at=r.at,
        verb=r.verb,
        actor=r.actor,
        before=None if before is None else TaskState(before),
        after=TaskState(r.after),
        assignee=r.assignee,
        lease_until=g("lease-until"),
        candidate_roles=g("candidate-roles"),
        excluded_actors=g("excluded-actors"),
        revision=r.revision,
        changes=[FieldChange(c.field, c.before, c.after) for c in r.changes],
        decision=_decision_record(r.decision),
        note=r.note,
        job=r.job,
        step=_task_step(r.step),
    )


def _change(v: Any) -> TaskChange | TimerChange:
    """A feed entry's change: a tagged variant of two records."""
    if v.tag == "task":
        t = v.payload
        return TaskChange(id=t.id, entry=_history_entry(t.entry), run=t.run, kind=t.kind)
    t = v.payload
    return TimerChange(
        run=t.run,
        effect=t.effect,
        at=t.at,
        verb=t.verb,
        what=TimerEvent(t.what),
        fire_at=getattr(t, "fire-at"),
        lease_until=getattr(t, "lease-until"),
    )


class Tenant:
    """One tenant of an engine; every method is one call in one transaction,
    its arguments checked before the guest runs and its answer before the
    call commits."""

    def __init__(self, engine: Engine, name: str, guard: Guard | None = None) -> None:
        self._engine = engine
        self.name = name
        self._guard = None if guard is None else _wit_guard(guard)

    def guarded(self, guard: Guard) -> Tenant:
        """This tenant, for calls guarded by ``guard``: every verb that
        changes one task (claim, release, take_over, renew, settle and
        decide, escalate, update, assign, unassign, delegate, note) goes
        ahead only on the task at ``guard.revision``, if given (else
        ``ClaimRefusal`` ``stale`` whose ``current`` is the task's revision,
        nothing written), and records ``guard.job`` in the change's history
        entry. Meant for one call: the revision moves with every change.
        Other verbs ignore it."""
        return Tenant(self._engine, self.name, guard)

    def _call(self, verb: str, *args: Any, check: Callable[[Any], Any] = _same) -> Any:
        return self._engine.call(self.name, verb, args, check)

    def open(self, task: Task) -> Task:
        """Creates a task; first open wins, and the stored task is answered."""
        return self._call("open", _wit_task(task), check=lambda r: _same_task(r, task.id))

    def get(self, id: str) -> Task | None:
        return self._call("get", _str(id, "id"), check=lambda r: None if r is None else _same_task(r, id))

    def claim(self, id: str, actor: str, roles: list[str], lease: Lease | None = None) -> Task:
        """Reserves the task for ``actor``; with a lease, until ``now + lease_ms``."""
        args = (_str(id, "id"), _str(actor, "actor"), _strs(roles, "roles"), _wit_lease(lease), self._guard)
        return self._call("claim", *args, check=lambda r: _held_task(r, id, actor))

    def renew(self, id: str, actor: str, now: int, lease_ms: int) -> Task:
        """The holder of a leased claim extends it to ``now + lease_ms``."""
        args = (_str(id, "id"), _str(actor, "actor"), _s64(now, "now"), _u32(lease_ms, "lease_ms"), self._guard)
        return self._call("renew", *args, check=lambda r: _held_task(r, id, actor))

    def reclaim_lapsed(self, now: int, limit: int) -> list[Task]:
        """Returns to the queue every task whose lease ended at or before ``now``."""

        def check(ts: list) -> list[Task]:
            tasks = _distinct([_task(t) for t in _at_most(ts, limit, "reclaim-lapsed")], "reclaim-lapsed")
            for t in tasks:
                if t.state not in (TaskState.OPEN, TaskState.ESCALATED) or t.assignee is not None:
                    raise _malformed(
                        f"reclaim-lapsed answered task {t.id} as {t.state} by {t.assignee}, not back in the queue"
                    )
            return tasks

        return self._call("reclaim-lapsed", _s64(now, "now"), _u32(limit, "limit"), check=check)

    def expire_overdue(self, now: int, limit: int) -> list[Task]:
        """Acts on up to ``limit`` tasks overdue at ``now``, each by its
        ``on_expiry`` (escalated, or settled ``expired``), then, within the
        same limit, fires the due reminder or chain step of pending tasks, one
        per task per call, each recorded in the history with its ``step``.
        Answers the tasks as they now stand: escalated (unheld), expired, or
        reminded (pending, its ``steps_done`` counting a reminder)."""

        def check(ts: list) -> list[Task]:
            tasks = _distinct([_task(t) for t in _at_most(ts, limit, "expire-overdue")], "expire-overdue")
            for t in tasks:
                # As the Rust host checks it: a reminder leaves a task as it
                # was but for its step count; anything else is escalated
                # (unheld) or expired.
                reminded = t.state in _PENDING and 1 <= t.steps_done <= len(t.remind_before)
                escalated = t.state == TaskState.ESCALATED and t.assignee is None
                if not (escalated or t.state == TaskState.EXPIRED or reminded):
                    raise _malformed(
                        f"expire-overdue answered task {t.id} as {t.state} by {t.assignee}, "
                        "neither escalated, expired nor reminded"
                    )
            return tasks

        return self._call("expire-overdue", _s64(now, "now"), _u32(limit, "limit"), check=check)

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
        q = _wit_query(roles, actor, limit, after)
        # Only an actor can hold a task; without one the guest must answer invalid.
        return self._call(
            "claim-next", q, _wit_lease(lease), check=lambda r: None if r is None else _held(_task(r), actor or "")
        )

    def claim_batch(
        self,
        *,
        roles: list[str],
        actor: str,
        count: int,
        after: str | None = None,
        lease: Lease | None = None,
    ) -> list[Task]:
        """Claims up to ``count`` (1-100) heads of the caller's queue in one
        call, in queue order, each under ``lease`` if given; fewer, or none,
        when the queue runs short."""
        q = _wit_query(roles, actor, 1, after)
        n = _u32(count, "count")
        return self._call(
            "claim-batch", q, _wit_lease(lease), n, check=lambda ts: _claimed_batch(ts, n, actor or "", "claim-batch")
        )

    def settle_and_claim(
        self,
        done: list[Finished],
        *,
        roles: list[str],
        actor: str,
        count: int,
        after: str | None = None,
        lease: Lease | None = None,
    ) -> SettledAndClaimed:
        """Settles each of ``done`` (at most 100) that ``actor`` holds, each
        answered on its own in the order given, then claims up to ``count``
        (0-100) more as ``claim_batch`` does: a steady worker's one call per
        batch."""
        if not isinstance(done, list):
            raise InvalidArgument(f"done must be a list of Finished, got {done!r}")
        d = [_wit_finished(f, f"done[{i}]") for i, f in enumerate(done)]
        q = _wit_query(roles, actor, 1, after)
        n = _u32(count, "count")

        def check(r: Any) -> SettledAndClaimed:
            if len(r.settled) != len(d):
                raise _malformed(f"settle-and-claim answered {len(r.settled)} of {len(d)} finished tasks")
            settled = [_settle_answer(a) for a in r.settled]
            claimed = _claimed_batch(r.claimed, n, actor or "", "settle-and-claim")
            for t in claimed:
                if any(f.id == t.id and isinstance(a, Settled) for f, a in zip(done, settled)):
                    raise _malformed(f"settle-and-claim settled task {t.id} and claimed it again")
            return SettledAndClaimed(settled=settled, claimed=claimed)

        return self._call("settle-and-claim", d, q, _wit_lease(lease), n, check=check)

    def leased_count(self) -> int:
        """Tasks claimed under a lease. One counter read."""
        return self._call("leased-count")

    def next_lease_end(self) -> int | None:
        return self._call("next-lease-end")

    def next_wake(self) -> int | None:
        """The earliest instant at which ``expire_overdue`` has something to
        do: a due time owed its expiry, or a reminder or chain step to fire;
        None when nothing waits. What a sweeper sleeps until."""
        return self._call("next-wake")

    def release(self, id: str, actor: str) -> None:
        self._call("release", _str(id, "id"), _str(actor, "actor"), self._guard, check=lambda _: None)

    def take_over(self, id: str, from_: str, actor: str, roles: list[str], lease: Lease | None = None) -> Task:
        args = (
            _str(id, "id"),
            _str(from_, "from_"),
            _str(actor, "actor"),
            _strs(roles, "roles"),
            _wit_lease(lease),
            self._guard,
        )
        return self._call("take-over", *args, check=lambda r: _held_task(r, id, actor))

    def settle(self, id: str, settlement: Settlement | str, holder: str | None = None) -> bool:
        """Compare-and-set from pending: True when this call settled the task.
        With ``holder``, the task must be claimed by exactly that actor."""
        return self.decide(id, settlement, holder, None)

    def decide(
        self, id: str, settlement: Settlement | str, holder: str | None = None, decision: Decision | None = None
    ) -> bool:
        """``settle`` with a decision (outcome, reason, output as JSON text),
        kept with the task with who decided (``holder``). It is checked
        against the outcomes the task, or else its kind, declares: an
        outcome not allowed, a missing reason where needed, or an output the
        outcome's schema refuses is a ``StoreError`` ``invalid`` naming the
        field (the output's first violation by its path), nothing written.
        A settled task answers False, its decision unchecked."""
        args = (
            _str(id, "id"),
            _enum(Settlement, settlement, "settlement"),
            _opt_str(holder, "holder"),
            _wit_decision(decision),
            self._guard,
        )
        return self._call("settle", *args)

    def withdraw_run(self, run: str, awaited: list[str]) -> int:
        awaited = _strs(awaited, "awaited")

        def check(n: int) -> int:
            if n > len(awaited):
                raise _malformed(f"withdraw-run moved {n} of {len(awaited)} awaited tasks")
            return n

        return self._call("withdraw-run", _str(run, "run"), awaited, check=check)

    def escalate(self, id: str) -> Task:
        return self._call("escalate", _str(id, "id"), self._guard, check=lambda r: _same_task(r, id))

    def queue(self, *, roles: list[str], limit: int, actor: str | None = None, after: str | None = None) -> Page:
        q = _wit_query(roles, actor, limit, after)
        return self._call("queue", q, check=lambda p: _page(p, limit, "queue"))

    def for_case(self, case: str, limit: int, after: str | None = None) -> Page:
        args = (_str(case, "case"), _u32(limit, "limit"), _opt_str(after, "after"))
        return self._call("for-case", *args, check=lambda p: _page(p, limit, "for-case"))

    def open_count(self) -> int:
        """Pending tasks (claimed ones count). One counter read."""
        return self._call("open-count")

    def overdue(self, now: int, limit: int) -> list[Task]:
        args = (_s64(now, "now"), _u32(limit, "limit"))
        return self._call("overdue", *args, check=lambda ts: [_task(t) for t in _at_most(ts, limit, "overdue")])

    def held(self, actor: str, limit: int, after: str | None = None) -> Page:
        """One page of the tasks ``actor`` holds, soonest lease end first,
        claims without a lease last, then by id; pass ``next`` back as
        ``after``."""
        args = (_str(actor, "actor"), _u32(limit, "limit"), _opt_str(after, "after"))

        def check(p: Any) -> Page:
            page = _page(p, limit, "held")
            for t in page.tasks:
                _held(t, actor)
            return page

        return self._call("held", *args, check=check)

    def update(self, id: str, by: str | None, changes: TaskChanges) -> Task:
        """Changes fields of a pending task, each by ``open``'s rules; ``by``
        is recorded as who changed it (None: the service). A change that
        excludes the holder ends the claim; one of the due time, the
        reminders or the chain re-arms the steps. Answers the task as it now
        stands."""
        args = (_str(id, "id"), _opt_str(by, "by"), _wit_changes(changes), self._guard)
        return self._call("update", *args, check=lambda r: _same_task(r, id))

    def assign(
        self,
        id: str,
        to: str,
        roles: list[str],
        lease: Lease | None = None,
        override_roles: bool = False,
        by: str | None = None,
    ) -> Task:
        """A manager claims the task for ``to``, from whoever holds it, by the
        claim ladder for ``to`` (its roles rung skipped only with
        ``override_roles``, which the history then records). Answers the
        task, held by ``to``."""
        if type(override_roles) is not bool:
            raise InvalidArgument(f"override_roles must be a bool, got {override_roles!r}")
        args = (
            _str(id, "id"),
            _str(to, "to"),
            _strs(roles, "roles"),
            _wit_lease(lease),
            override_roles,
            _opt_str(by, "by"),
            self._guard,
        )
        return self._call("assign", *args, check=lambda r: _held_task(r, id, to))

    def unassign(self, id: str, by: str | None = None) -> Task:
        """Back to the queue from whoever holds it; a pending task nobody
        holds is answered as it stands."""

        def check(r: Any) -> Task:
            t = _same_task(r, id)
            if t.state == TaskState.CLAIMED:
                raise _malformed(f"unassign answered task {id} still claimed by {t.assignee}")
            return t

        return self._call("unassign", _str(id, "id"), _opt_str(by, "by"), self._guard, check=check)

    def delegate(self, id: str, from_: str, to: str, roles: list[str], lease: Lease | None = None) -> Task:
        """The holder ``from_`` hands the task to ``to``, by the claim ladder
        for ``to``; anyone else is refused ``not-held``."""
        args = (_str(id, "id"), _str(from_, "from_"), _str(to, "to"), _strs(roles, "roles"), _wit_lease(lease), self._guard)
        return self._call("delegate", *args, check=lambda r: _held_task(r, id, to))

    def note(self, id: str, actor: str, text: str) -> Task:
        """An append-only remark by ``actor`` (1 byte to 4 KiB), kept in the
        task's history. Answers the task."""
        args = (_str(id, "id"), _str(actor, "actor"), _str(text, "text"), self._guard)
        return self._call("note", *args, check=lambda r: _same_task(r, id))

    def define_kind(self, definition: KindDefinition, expected: int | None = None) -> KindDefinition:
        """Creates or replaces a kind's definition; with ``expected``, only
        if the kind's revision is that (0: not defined), else ``StoreError``
        ``stale`` whose ``current`` is the revision. Answers the definition
        with its new revision."""
        args = (_wit_kind(definition), _opt_u64(expected, "expected"))
        return self._call("define-kind", *args, check=lambda r: _kind(r, definition.kind))

    def get_kind(self, kind: str) -> KindDefinition | None:
        """A kind's definition, or None."""
        return self._call("get-kind", _str(kind, "kind"), check=lambda r: None if r is None else _kind(r, kind))

    def list_kinds(self, limit: int, after: str | None = None) -> list[KindDefinition]:
        """Defined kinds in name order, after ``after``, at most ``limit``."""

        def check(ks: list) -> list[KindDefinition]:
            return [_kind(k, k.kind) for k in _at_most(ks, limit, "list-kinds")]

        return self._call("list-kinds", _u32(limit, "limit"), _opt_str(after, "after"), check=check)

    def remove_kind(self, kind: str) -> bool:
        """Removes a kind's definition; True if there was one."""
        return self._call("remove-kind", _str(kind, "kind"))

    def arm(self, timer: Timer) -> ArmOutcome:
        return self._call("arm", _wit_timer(timer), check=ArmOutcome)

    def claim_due(self, now: int, limit: int, lease_ms: int) -> list[Timer]:
        """Leases up to ``limit`` due timers until ``now + lease_ms``."""

        def check(ts: list) -> list[Timer]:
            timers = [_timer(t) for t in _at_most(ts, limit, "claim-due")]
            if len({(t.run, t.effect) for t in timers}) != len(timers):
                raise _malformed("claim-due answered one timer twice")
            return timers

        args = (_s64(now, "now"), _u32(limit, "limit"), _u32(lease_ms, "lease_ms"))
        return self._call("claim-due", *args, check=check)

    def disarm(self, run: str, effect: str) -> bool:
        return self._call("disarm", _str(run, "run"), _str(effect, "effect"))

    def disarm_run(self, run: str) -> int:
        """Retires every timer of `run`; answers how many. A schedule whose
        occurrence this retires ends (`next_at` None, nothing waiting)."""
        return self._call("disarm-run", _str(run, "run"))

    def pending_count(self) -> int:
        """Armed timers. One counter read."""
        return self._call("pending-count")

    def next_due(self) -> int | None:
        return self._call("next-due")

    def reschedule(self, run: str, effect: str, fire_at: int, *, take_back: bool = False) -> Rescheduled:
        """Moves the armed timer ``(run, effect)`` to ``fire_at``, keeping its
        identity (step, phase, case); it then waits unclaimed. Answers
        ``TimerMoved(info)``, or why nothing moved: ``TimerNotFound()``,
        ``TimerHeld(lease_until)`` (a sweeper holds it; ``take_back=True``
        moves it anyway and ends that lease) or ``TimerRunSealed()``."""
        if type(take_back) is not bool:
            raise InvalidArgument(f"take_back must be a bool, got {take_back!r}")
        args = (_str(run, "run"), _str(effect, "effect"), _s64(fire_at, "fire_at"), take_back)
        return self._call("reschedule", *args, check=lambda r: _rescheduled(r, run, effect))

    def timers_of(self, run: str, limit: int, after: str | None = None) -> TimerPage:
        """One page of the timers armed for ``run``, by effect; pass ``next``
        back as ``after``."""
        args = (_str(run, "run"), _u32(limit, "limit"), _opt_str(after, "after"))

        def check(p: Any) -> TimerPage:
            page = _timer_page(p, limit, "timers-of")
            for i in page.timers:
                if i.timer.run != run:
                    raise _malformed(f"timers-of {run} answered a timer of run {i.timer.run}")
            return page

        return self._call("timers-of", *args, check=check)

    def due_between(self, from_: int, to: int, limit: int, after: str | None = None) -> TimerPage:
        """One page of the timers that become claimable in ``[from_, to)``,
        in the order ``claim_due`` takes them (a held one at its lease end)."""
        args = (_s64(from_, "from_"), _s64(to, "to"), _u32(limit, "limit"), _opt_str(after, "after"))
        return self._call("due-between", *args, check=lambda p: _timer_page(p, limit, "due-between"))

    def add_schedule(self, spec: ScheduleSpec, now: int) -> Schedule:
        """Adds a schedule and arms its first occurrence at or after ``now``.
        Answers the schedule as stored (its zone under its canonical name).
        A bad spec, an id in use or a sealed run is a ``StoreError``
        ``invalid`` naming the field; nothing is written then."""
        args = (_wit_schedule_spec(spec), _s64(now, "now"))
        return self._call("add-schedule", *args, check=lambda r: _same_schedule(r, spec.id))

    def remove_schedule(self, id: str) -> bool:
        """Removes a schedule with its armed and waiting occurrences (one a
        sweeper holds stays with it); True if there was one."""
        return self._call("remove-schedule", _str(id, "id"))

    def pause_schedule(self, id: str, note: str) -> Schedule:
        """Pauses a schedule with a note (1–1024 characters): nothing fires
        until it is resumed."""

        def check(r: Any) -> Schedule:
            s = _same_schedule(r, id)
            if s.paused != note or s.next_at is not None:
                raise _malformed(f"pause-schedule answered schedule {id} not paused with its note")
            return s

        return self._call("pause-schedule", _str(id, "id"), _str(note, "note"), check=check)

    def resume_schedule(self, id: str, now: int) -> Schedule:
        """Resumes a paused schedule from ``now``: what fell in the pause does
        not fire."""

        def check(r: Any) -> Schedule:
            s = _same_schedule(r, id)
            if s.paused is not None:
                raise _malformed(f"resume-schedule answered schedule {id} still paused")
            return s

        return self._call("resume-schedule", _str(id, "id"), _s64(now, "now"), check=check)

    def trigger_schedule(self, id: str, now: int) -> Timer:
        """Arms an extra occurrence at ``now`` beside the schedule's own
        (paused or not), and answers its timer."""

        def check(r: Any) -> Timer:
            t = _timer(r)
            if t.effect != f"schedule/{id}/{now}":
                raise _malformed(f"trigger-schedule of {id} at {now} answered timer {t.run}/{t.effect}")
            return t

        return self._call("trigger-schedule", _str(id, "id"), _s64(now, "now"), check=check)

    def next_occurrences(self, id: str, after: int, n: int) -> list[int]:
        """The schedule's next ``n`` (1–1000) occurrences after ``after``,
        before jitter, in order."""
        args = (_str(id, "id"), _s64(after, "after"), _u32(n, "n"))

        def check(r: list) -> list[int]:
            instants = list(_at_most(r, n, "next-occurrences"))
            if any(t <= prev for prev, t in zip([after, *instants], instants)):
                raise _malformed(f"next-occurrences of {id} answered instants out of order")
            return instants

        return self._call("next-occurrences", *args, check=check)

    def get_schedule(self, id: str) -> Schedule | None:
        return self._call(
            "get-schedule", _str(id, "id"), check=lambda r: None if r is None else _same_schedule(r, id)
        )

    def list_schedules(self, limit: int, after: str | None = None) -> SchedulePage:
        """One page of schedules by id after the cursor ``after`` (a page's
        ``next``)."""
        args = (_u32(limit, "limit"), _opt_str(after, "after"))

        def check(p: Any) -> SchedulePage:
            schedules = [_schedule(r) for r in _at_most(p.schedules, limit, "list-schedules")]
            ids = [s.spec.id for s in schedules]
            # str order is code-point order, which is the UTF-8 byte order the component keeps.
            if any(a >= b for a, b in zip(ids, ids[1:])) or (after is not None and ids and ids[0] <= after):
                raise _malformed("list-schedules answered out of order")
            return SchedulePage(schedules=schedules, next=p.next)

        return self._call("list-schedules", *args, check=check)

    def tz_version(self) -> str:
        """The release of the IANA time-zone database the component carries
        (``2025b``, say): the one every schedule's instants come from."""

        def check(v: str) -> str:
            # As the Rust host checks it: five bytes, this century's.
            if len(v.encode("utf-8")) != 5 or not v.startswith("20"):
                raise _malformed(f"tz-version answered {v!r}")
            return v

        return self._call("tz-version", check=check)

    def add_subscription(
        self, id: str, url: str, filter: SubFilter, key: bytes, from_: str | None, now: int
    ) -> Subscription:
        """Adds a webhook subscription: active at revision 1, signing with
        ``key`` (24-64 bytes), its position ``from_`` (None: the feed's head
        now, so it is sent the changes from then on; ``"f"``: the feed's
        start). An id in use, a bad URL or filter, a key of the wrong
        length, a position past the head or trimmed, and more than 100
        subscriptions are a ``StoreError`` ``invalid`` naming the field. The
        component keeps it and sends nothing, nor does this package: sending
        is the Rust crate ``leasehold-webhooks``', or a loop of the
        embedder's own over ``feed``."""
        args = (
            _str(id, "id"),
            _str(url, "url"),
            _wit_filter(filter, "filter"),
            _bytes(key, "key"),
            _opt_str(from_, "from_"),
            _s64(now, "now"),
        )
        return self._call("add-subscription", *args, check=lambda r: _same_subscription(r, id, "add-subscription"))

    def get_subscription(self, id: str) -> Subscription | None:
        """One subscription, or None."""
        return self._call(
            "get-subscription",
            _str(id, "id"),
            check=lambda r: None if r is None else _same_subscription(r, id, "get-subscription"),
        )

    def list_subscriptions(self, limit: int, after: str | None = None) -> SubscriptionPage:
        """One page of subscriptions by id after the cursor ``after`` (a
        page's ``next``), at most ``limit`` (1-1000)."""
        args = (_u32(limit, "limit"), _opt_str(after, "after"))

        def check(p: Any) -> SubscriptionPage:
            subs = [_subscription(r) for r in _at_most(p.subscriptions, limit, "list-subscriptions")]
            ids = [s.id for s in subs]
            # str order is code-point order, which is the UTF-8 byte order the component keeps.
            if any(a >= b for a, b in zip(ids, ids[1:])) or (after is not None and ids and ids[0] <= after):
                raise _malformed("list-subscriptions answered out of order")
            return SubscriptionPage(subscriptions=subs, next=p.next)

        return self._call("list-subscriptions", *args, check=check)

    def change_subscription(
        self, id: str, url: str | None = None, filter: SubFilter | None = None, expected: int | None = None
    ) -> Subscription:
        """Changes the URL, the filter or both (None: as it is), if the
        subscription is at revision ``expected`` (when given; else
        ``StoreError`` ``stale`` whose ``current`` is its revision). The
        revision goes up; a change to what it is writes nothing."""
        args = (
            _str(id, "id"),
            _opt_str(url, "url"),
            None if filter is None else _wit_filter(filter, "filter"),
            _opt_u64(expected, "expected"),
        )
        return self._call(
            "change-subscription", *args, check=lambda r: _same_subscription(r, id, "change-subscription")
        )

    def set_subscription_state(
        self, id: str, state: SubState | str, note: str | None = None, expected: int | None = None
    ) -> Subscription:
        """Sets the state and its note (None clears it), if at revision
        ``expected`` (when given). Setting ``active`` keeps the position:
        deliveries go on from where they stopped."""
        wire = _enum(SubState, state, "state")
        args = (_str(id, "id"), wire, _opt_str(note, "note"), _opt_u64(expected, "expected"))

        def check(r: Any) -> Subscription:
            s = _same_subscription(r, id, "set-subscription-state")
            if s.state != wire:
                raise _malformed(f"set-subscription-state answered {id} {s.state}, not {wire}")
            return s

        return self._call("set-subscription-state", *args, check=check)

    def rotate_subscription_key(self, id: str, key: bytes, old_until: int, now: int) -> Subscription:
        """Makes ``key`` the current signing key; every earlier key still
        signing signs until ``old_until`` (at most 7 days after ``now``), and
        keys whose time ran out by ``now`` are dropped. The revision goes up."""
        new_key = _bytes(key, "key")
        args = (_str(id, "id"), new_key, _s64(old_until, "old_until"), _s64(now, "now"))

        def check(r: Any) -> Subscription:
            s = _same_subscription(r, id, "rotate-subscription-key")
            if not s.keys or s.keys[-1].key != new_key:
                raise _malformed(f"rotate-subscription-key answered {id} without the new key current")
            return s

        return self._call("rotate-subscription-key", *args, check=check)

    def remove_subscription(self, id: str) -> bool:
        """Removes a subscription; True if there was one. A worker's next
        ``advance_subscription`` of it is ``not-found``."""
        return self._call("remove-subscription", _str(id, "id"))

    def advance_subscription(self, id: str, revision: int, position: str) -> Subscription:
        """A delivery worker moves the position on to ``position`` (per slot
        the later of the two, never past the feed's head), if the
        subscription is at ``revision`` (else ``StoreError`` ``stale`` with
        the current one: stop). The revision does not change."""
        args = (_str(id, "id"), _u64(revision, "revision"), _str(position, "position"))

        def check(r: Any) -> Subscription:
            s = _same_subscription(r, id, "advance-subscription")
            if s.revision != revision:
                raise _malformed(
                    f"advance-subscription of {id} at revision {revision} answered revision {s.revision}"
                )
            return s

        return self._call("advance-subscription", *args, check=check)

    def rewind_subscription(self, id: str, position: str | None = None) -> Subscription:
        """Replays from ``position`` (back or forward; None or ``"f"``: the
        feed's start): active again, its note cleared, its revision one
        more. A position whose entries were trimmed is ``invalid``."""
        args = (_str(id, "id"), _opt_str(position, "position"))
        # The feed's start is spelt `f` or not at all.
        asked = None if position == "f" else position

        def check(r: Any) -> Subscription:
            s = _same_subscription(r, id, "rewind-subscription")
            if s.state != SubState.ACTIVE or s.position != asked:
                raise _malformed(f"rewind-subscription answered {id} not active at the position asked")
            return s

        return self._call("rewind-subscription", *args, check=check)

    def lease_subscription(self, id: str, holder: str, now: int, lease_ms: int) -> bool:
        """Takes or renews the delivery lease for ``holder`` until ``now +
        lease_ms`` (1 ms to an hour): True when ``holder`` holds it now,
        False when another does or there is no such subscription."""
        args = (_str(id, "id"), _str(holder, "holder"), _s64(now, "now"), _u32(lease_ms, "lease_ms"))
        return self._call("lease-subscription", *args)

    def release_subscription(self, id: str, holder: str) -> None:
        """Gives the delivery lease up, if ``holder`` holds it."""
        self._call("release-subscription", _str(id, "id"), _str(holder, "holder"), check=lambda _: None)

    def record_subscription_attempts(self, id: str, attempts: list[Attempt]) -> None:
        """Keeps ``attempts`` (at most 20 a call) among the last 20 recorded."""
        args = (_str(id, "id"), _wit_attempts(attempts, "attempts"))
        self._call("record-subscription-attempts", *args, check=lambda _: None)

    def search(self, query: SearchQuery) -> SearchPage:
        """One page of the tasks that match ``query.filter``, in
        ``query.sort``'s order; pass ``next`` back as ``after``, with the same
        filter, sort and viewer (a cursor of another search is a
        ``StoreError`` ``invalid`` naming ``after``). A viewer sees only
        what it holds or may take."""
        _of(SearchQuery, query, "query")
        limit = _u32(query.limit, "query.limit")
        q = _record(
            filter=_wit_task_filter(query.filter, "query.filter"),
            sort=_wit_sort(query.sort, "query.sort"),
            limit=limit,
            after=_opt_str(query.after, "query.after"),
            viewer=_wit_viewer(query.viewer, "query.viewer"),
        )

        def check(p: Any) -> SearchPage:
            tasks = _distinct([_task(t) for t in _at_most(p.tasks, limit, "search")], "search")
            return SearchPage(tasks=tasks, next=p.next, budget_spent=getattr(p, "budget-spent"), index=p.index)

        return self._call("search", q, check=check)

    def count(
        self, filter: TaskFilter | None = None, viewer: Viewer | None = None, after: str | None = None
    ) -> CountAnswer:
        """How many tasks match ``filter`` (as ``viewer`` sees them, when
        given). Not ``exact`` when the scan budget ran out first: add the
        counts of the calls that go on from ``next`` (as ``after``). A
        filter of states and kinds alone, with no viewer, is answered from
        counters."""
        args = (_wit_task_filter(filter, "filter"), _wit_viewer(viewer, "viewer"), _opt_str(after, "after"))

        def check(a: Any) -> CountAnswer:
            # The count is whole exactly when there is nowhere to go on from.
            if a.exact != (a.next is None):
                raise _malformed(f"count answered exact {a.exact} with next {a.next!r}")
            return CountAnswer(count=a.count, exact=a.exact, next=a.next, index=a.index)

        return self._call("count", *args, check=check)

    def build_search_index(self, limit: int) -> IndexProgress:
        """Gives the next ``limit`` (1-10000) tasks of a keyspace laid out
        before search their search entries; call it again until ``built``.
        Until then every search and count scans the tasks themselves."""
        n = _u32(limit, "limit")

        def check(a: Any) -> IndexProgress:
            if a.indexed > n:
                raise _malformed(f"build-search-index indexed {a.indexed} tasks for a limit of {n}")
            return IndexProgress(built=a.built, indexed=a.indexed)

        return self._call("build-search-index", n, check=check)

    def put_view(self, view: SavedView, expected: int | None = None) -> SavedView:
        """Makes a saved view (``expected`` None: ``StoreError`` ``invalid``
        naming ``name`` when one of that name exists) or changes it at
        revision ``expected`` (``not-found`` when there is none, ``stale``
        with the current revision at another). Answers the view as kept,
        its revision one more."""
        args = (_wit_view(view), _opt_u64(expected, "expected"))

        def check(r: Any) -> SavedView:
            kept = _same_view(r, view.name, "put-view")
            # 1 when made, one more with each change: anything else is no answer the rules give.
            if kept.revision != (expected or 0) + 1:
                raise _malformed(f"put-view of {view.name} at {expected} answered revision {kept.revision}")
            return kept

        return self._call("put-view", *args, check=check)

    def get_view(self, name: str) -> SavedView | None:
        """A saved view, or None."""
        return self._call(
            "get-view", _str(name, "name"), check=lambda r: None if r is None else _same_view(r, name, "get-view")
        )

    def list_views(self, limit: int, after: str | None = None) -> list[SavedView]:
        """Saved views in name order (bytewise), after ``after``, at most ``limit`` (1-1000)."""
        args = (_u32(limit, "limit"), _opt_str(after, "after"))

        def check(vs: list) -> list[SavedView]:
            views = [_saved_view(r) for r in _at_most(vs, limit, "list-views")]
            names = [v.name for v in views]
            # str order is code-point order, which is the UTF-8 byte order the component keeps.
            if any(a >= b for a, b in zip(names, names[1:])) or (after is not None and names and names[0] <= after):
                raise _malformed("list-views answered out of order")
            return views

        return self._call("list-views", *args, check=check)

    def delete_view(self, name: str, expected: int | None = None) -> bool:
        """Removes a saved view (at revision ``expected``, when given: else
        ``StoreError`` ``stale``); True if there was one."""
        return self._call("delete-view", _str(name, "name"), _opt_u64(expected, "expected"))

    def start_job(
        self, id: str, filter: TaskFilter | None, action: JobAction, by: str | None = None, now: int | None = None
    ) -> Job:
        """Starts job ``id``: ``action`` (a ``JobVerb``, a ``JobAssign``, or
        ``TaskChanges`` for an update) over the tasks matching ``filter``
        (as ``search`` takes it) created at or before ``now`` (default: the
        clock). It is ``counting``; ``step_job`` counts and runs it a step at
        a time (``run_job`` to its end). A bad id, an id in use, a bad filter
        or action: ``StoreError`` ``invalid`` naming the field. A filter that
        matches nothing makes a job of total 0, done after its first step."""
        at = _s64(now_ms() if now is None else now, "now")
        args = (_str(id, "id"), _wit_task_filter(filter, "filter"), _wit_job_action(action), _opt_str(by, "by"), at)

        def check(r: Any) -> Job:
            job = _same_job(r, id, "start-job")
            if job.total != 0 or job.state not in (JobState.COUNTING, JobState.DONE) or job.created_at != at:
                raise _malformed(f"start-job answered job {id} {job.state} with {job.total} found")
            return job

        return self._call("start-job", *args, check=check)

    def step_job(self, id: str) -> Job:
        """One step of job ``id``, its own transaction: the next stretch of
        its count, or its action on its next task (skipped with the reason if
        it no longer matches, failed with the reason if its verb refuses), or
        the next chunks a cancelled one drops. A job with no work left
        answers as it stands; an unknown id is ``StoreError`` ``not-found``."""
        return self._call("step-job", _str(id, "id"), check=lambda r: _same_job(r, id, "step-job"))

    def cancel_job(self, id: str) -> Job:
        """Stops job ``id`` at once (no task is changed by it after); a
        finished job answers as it stands."""

        def check(r: Any) -> Job:
            job = _same_job(r, id, "cancel-job")
            if job.state in (JobState.COUNTING, JobState.RUNNING):
                raise _malformed(f"cancel-job answered job {id} still {job.state}")
            return job

        return self._call("cancel-job", _str(id, "id"), check=check)

    def get_job(self, id: str) -> Job | None:
        """A job, or None."""
        return self._call(
            "get-job", _str(id, "id"), check=lambda r: None if r is None else _same_job(r, id, "get-job")
        )

    def list_jobs(self, limit: int = 100, after: str | None = None) -> list[Job]:
        """Jobs in id order (bytewise), after ``after``, at most ``limit`` (1-1000)."""
        args = (_u32(limit, "limit"), _opt_str(after, "after"))

        def check(js: list) -> list[Job]:
            _in_id_order([j.id for j in _at_most(js, limit, "list-jobs")], after, "list-jobs")
            return [_same_job(j, j.id, "list-jobs") for j in js]

        return self._call("list-jobs", *args, check=check)

    def runnable_jobs(self, limit: int = 100) -> list[str]:
        """The ids of jobs with work left, in id order, at most ``limit`` (1-1000): what a host steps."""

        def check(ids: list) -> list[str]:
            _in_id_order(list(_at_most(ids, limit, "runnable-jobs")), None, "runnable-jobs")
            return list(ids)

        return self._call("runnable-jobs", _u32(limit, "limit"), check=check)

    def run_job(self, id: str, on_progress: Callable[[Job], None] | None = None) -> Job:
        """Steps job ``id`` until it ends (done, or cancelled by another
        caller), a ``step_job`` per step, each its own transaction, calling
        ``on_progress(job)`` after each; answers the job as it ended. A
        process that dies half-way leaves the job durable: ``run_job`` again
        finishes it without changing any task twice."""
        while True:
            job = self.step_job(id)
            if on_progress is not None:
                on_progress(job)
            if job.state in (JobState.DONE, JobState.CANCELLED):
                return job

    def seal(self, run: str, awaited: list[str]) -> SealOutcome:
        """Seals `run`: retires its timers (its schedules end with them) and
        withdraws its pending tasks among `awaited`, in one transaction."""
        return self._call(
            "seal",
            _str(run, "run"),
            _strs(awaited, "awaited"),
            check=lambda o: SealOutcome(getattr(o, "timers-disarmed"), getattr(o, "tasks-withdrawn")),
        )

    def is_sealed(self, run: str) -> bool:
        return self._call("is-sealed", _str(run, "run"))

    def check(self) -> list[Discrepancy]:
        """Every discrepancy between the tenant's rows and its indexes and counters."""
        return self._call("check", check=lambda ds: [Discrepancy(d.structure, d.subject, d.detail) for d in ds])

    def history(self, id: str, after: int | None = None, limit: int = 100) -> list[HistoryEntry]:
        """Task ``id``'s history after entry ``after`` (a seq; from the first
        kept one without it), oldest first, at most ``limit``. A task written
        before history was kept answers first, without ``after``, an entry
        with seq 0 and verb ``before-history``."""
        args = (_str(id, "id"), _opt_u64(after, "after"), _u32(limit, "limit"))

        def check(es: list) -> list[HistoryEntry]:
            entries = [_history_entry(e) for e in _at_most(es, limit, "history")]
            last = after
            for i, e in enumerate(entries):
                # Entry 0 says the task predates its history: only first, from the start.
                opening = i == 0 and after is None and e.verb == "before-history"
                if (e.seq == 0 and not opening) or (last is not None and e.seq <= last):
                    raise _malformed(f"history answered entry {e.seq} of task {id} after {last}")
                last = e.seq
            return entries

        return self._call("history", *args, check=check)

    def feed(self, after: str | None = None, limit: int = 100) -> FeedPage | FeedGone:
        """The feed after position ``after`` (from the oldest entry kept
        without it): a ``FeedPage``, or ``FeedGone`` when what follows
        ``after`` was trimmed or ``after`` is not a position of this feed."""
        args = (_opt_str(after, "after"), _u32(limit, "limit"))

        def check(r: Any) -> FeedPage | FeedGone:
            # feed-read lifts untagged: a page is a record, gone its string.
            if isinstance(r, str):
                return FeedGone(head=r)
            entries = [FeedEntry(position=e.position, change=_change(e.change)) for e in _at_most(r.entries, limit, "feed")]
            return FeedPage(entries=entries, next=r.next, head=r.head)

        return self._call("feed", *args, check=check)

    def entry_place(self, id: str, seq: int) -> FeedPlace | None:
        """Where entry ``seq`` of task ``id``'s history sits in the feed: its
        writer slot and its number there; ``None`` when that entry is not
        kept. For a host that gives its own positions to readers who see
        part of the feed."""
        args = (_str(id, "id"), _int(seq, "seq", _U64, "unsigned 64 bits"))

        def check(o: Any) -> FeedPlace | None:
            return None if o is None else FeedPlace(o.slot, o.seq)

        return self._call("entry-place", *args, check=check)

    def trim(self, *, before: int | None = None, keep: int | None = None, limit: int = 1000) -> TrimOutcome:
        """Removes the oldest feed entries recorded before ``before``, or
        beyond the newest ``keep`` (at least one given), at most ``limit``,
        with the history they cover (never a task's last entry)."""
        args = (_opt_s64(before, "before"), _opt_u64(keep, "keep"), _u32(limit, "limit"))

        def check(o: Any) -> TrimOutcome:
            out = TrimOutcome(getattr(o, "feed-removed"), getattr(o, "history-removed"), o.more)
            if out.feed_removed > limit:
                raise _malformed(f"trim removed {out.feed_removed} entries for a limit of {limit}")
            return out

        return self._call("trim", *args, check=check)


def open(  # noqa: A001
    store: Store,
    *,
    limits: Limits | None = None,
    component: bytes | str | Path | None = None,
    clock: Callable[[], int] = now_ms,
) -> Engine:
    """The engine over ``store``: the packaged component unless ``component``
    (bytes or a path) names another build of the world. ``clock`` answers
    milliseconds since 1970; it is read once per call for the time the
    call's changes are recorded at (a test passes a fixed one)."""
    return Engine(store, limits=limits, component=component, clock=clock)
