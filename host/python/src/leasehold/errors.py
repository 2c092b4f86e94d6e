"""The errors a call can end in, one class per boundary: the engine refusing
a claim, the engine (or this host, before the guest runs) refusing input,
the sandbox failing, and the store under the engine failing. Refusals and
store errors carry the WIT variant the component answered, as ``case`` and
``detail``. The JavaScript package has the same classes with the same names
and fields; the Rust host's ``Error`` is the model. This module only
describes errors; it never decides one."""

from __future__ import annotations


class LeaseholdError(Exception):
    """Every error this package raises on purpose."""

    @property
    def retryable(self) -> bool:
        """Nothing was done and the same call may succeed if made again."""
        return False

    @property
    def invalid_input(self) -> bool:
        """The caller's input was refused: an argument or a tenant name."""
        return False


_REFUSALS = {
    "not-found": "no task {}",
    "excluded": "{} is excluded from this task",
    "wrong-role": "{} has none of the task's candidate roles",
    "not-pending": "the task is already {}",
    "already-claimed": "the task is held by {}",
    "not-held": "{} does not hold the task",
    "stale": "the task changed since it was read: its revision is now {}",
}


class ClaimRefusal(LeaseholdError):
    """A verb that changes one task (a claim, take-over, release, renewal,
    holder-checked settlement, escalation, update, assignment, delegation
    or note) that did not happen: a rung of the claim ladder, ``not-held``,
    or ``stale`` (a guarded call on a task whose revision moved; ``current``
    is the revision now). ``case`` is the WIT ``claim-error`` case, e.g.
    ``"excluded"``, and ``detail`` its payload (an actor, holder, id, task
    state or revision)."""

    def __init__(self, case: str, detail: str | int) -> None:
        super().__init__("refused: " + _REFUSALS.get(case, case + ": {}").format(detail))
        self.case = case
        self.detail = detail

    @property
    def tag(self) -> str:
        """``case``, as the JavaScript package also spells it."""
        return self.case

    @property
    def current(self) -> int | None:
        """For ``stale``, the task's revision now (read again, decide again)."""
        return self.detail if self.case == "stale" and isinstance(self.detail, int) else None

    @property
    def retryable(self) -> bool:
        """Only ``already-claimed`` may go differently if tried again."""
        return self.case == "already-claimed"


class StoreError(LeaseholdError):
    """The engine answered a WIT ``store-error``: ``not-found``, ``invalid``
    (the detail names the field), ``corrupt``, ``storage``,
    ``newer-layout`` (a newer build moved the tenant's layout; the detail
    names both layouts) or ``stale`` (``define_kind``'s expected revision
    is not the kind's, which ``current`` is). A claim verb's
    ``claim-error.store`` is raised as this too."""

    def __init__(self, case: str, detail: str | int) -> None:
        super().__init__(f"{case}: {detail}")
        self.case = case
        self.detail = detail

    @property
    def current(self) -> int | None:
        """For ``stale``, the current revision."""
        return self.detail if self.case == "stale" and isinstance(self.detail, int) else None

    @property
    def tag(self) -> str:
        """``case``, as the JavaScript package also spells it."""
        return self.case

    @property
    def invalid_input(self) -> bool:
        return self.case == "invalid"


class InvalidArgument(StoreError, TypeError, ValueError):
    """An argument this host refuses before the guest runs: a value of the
    wrong type, an integer outside its WIT type's range (never wrapped), an
    unknown enum case. A ``StoreError`` with case ``invalid``, as the engine
    answers bad input it sees itself; ``detail`` names the field. Also a
    ``TypeError`` and a ``ValueError``, which earlier versions raised."""

    def __init__(self, detail: str) -> None:
        super().__init__("invalid", detail)


LIMIT_KINDS = frozenset(
    {
        "deadline",
        "memory",
        "key-size",
        "value-size",
        "scan-length",
        "get-many-length",
        "scan-bytes",
        "read-bytes",
        "write-bytes",
    }
)


class SandboxError(LeaseholdError):
    """The guest broke the sandbox: a limit (``limit`` names it), a trap
    (``kind == "trap"``), writes it may not stage (``second-batch``,
    ``write-in-read-call``) or an answer the contract rules out
    (``malformed``). The call committed nothing, and its instance was
    replaced when it might hold broken state."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"sandbox: {message}")
        self.kind = kind
        self.limit = kind if kind in LIMIT_KINDS else None


class StorageFailure(LeaseholdError):
    """The store under the engine failed (sqlite3 could not read or commit,
    or the engine was closed). The call committed nothing."""


class LockTimeout(StorageFailure):
    """The call waited for its turn to write past the store's lock timeout
    (another connection holds SQLite's write lock). Nothing was done; try
    again."""

    @property
    def retryable(self) -> bool:
        return True


class TenantError(LeaseholdError, ValueError):
    """A tenant name this package will not scope keys by."""

    @property
    def invalid_input(self) -> bool:
        return True
