"""Leasehold for Python: the Leasehold component under wasmtime-py over a
store this package supplies, one transaction per call, one tenant per
handle.

    import leasehold
    acme = leasehold.open(leasehold.SqliteStore("worklist.db")).tenant("acme")
    task = acme.claim("invoice-42", "alice", ["approver"])
"""

from .engine import VERBS, Engine, Tenant, open
from .errors import (
    LIMIT_KINDS,
    ClaimRefusal,
    InvalidArgument,
    LeaseholdError,
    LockTimeout,
    SandboxError,
    StorageFailure,
    StoreError,
    TenantError,
)
from .limits import Limits
from .model import (
    ArmOutcome,
    FeedEntry,
    FeedGone,
    FeedPage,
    HistoryEntry,
    Lease,
    Discrepancy,
    OnExpiry,
    Page,
    Phase,
    Priority,
    SealOutcome,
    Settlement,
    Task,
    TaskChange,
    TaskState,
    Timer,
    TimerChange,
    TimerEvent,
    TrimOutcome,
    FeedPlace,
)
from .stores import MemoryStore, SqliteStore

__all__ = [
    "VERBS",
    "Lease",
    "Engine",
    "Tenant",
    "open",
    "LIMIT_KINDS",
    "ClaimRefusal",
    "InvalidArgument",
    "LeaseholdError",
    "LockTimeout",
    "SandboxError",
    "StorageFailure",
    "StoreError",
    "TenantError",
    "Limits",
    "ArmOutcome",
    "Discrepancy",
    "OnExpiry",
    "Page",
    "Phase",
    "Priority",
    "SealOutcome",
    "Settlement",
    "Task",
    "TaskState",
    "Timer",
    "HistoryEntry",
    "TimerEvent",
    "TaskChange",
    "TimerChange",
    "FeedEntry",
    "FeedPage",
    "FeedGone",
    "TrimOutcome",
    "FeedPlace",
    "MemoryStore",
    "SqliteStore",
]
