"""The values the verbs take and answer: dataclasses with snake_case fields
mirroring the WIT ``types`` interface, and string enums whose values are the
WIT names (``TaskState.OPEN == "open"``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum


class Priority(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    URGENT = "urgent"


class TaskState(StrEnum):
    OPEN = "open"
    CLAIMED = "claimed"
    ESCALATED = "escalated"
    COMPLETED = "completed"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"


class OnExpiry(StrEnum):
    DENY = "deny"
    ESCALATE = "escalate"
    PROCEED = "proceed"


class Settlement(StrEnum):
    COMPLETED = "completed"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"


class Phase(StrEnum):
    FORWARD = "forward"
    COMPENSATING = "compensating"


class ArmOutcome(StrEnum):
    ARMED = "armed"
    ALREADY_ARMED = "already-armed"
    RUN_SEALED = "run-sealed"


def now_ms() -> int:
    """The clock, in milliseconds since the epoch: the default ``created_at``."""
    return time.time_ns() // 1_000_000


@dataclass
class Task:
    """A human task. To open one, ``id``, ``run`` and ``kind`` are enough: no
    case, justification ``{}``, open to anyone, normal priority, created now."""

    id: str
    run: str
    kind: str
    case: str | None = None
    justification: str = "{}"
    candidate_roles: list[str] = field(default_factory=list)
    assignee: str | None = None
    #: When the holder's lease ends, for a claim under one.
    lease_until: int | None = None
    priority: Priority = Priority.NORMAL
    state: TaskState = TaskState.OPEN
    on_expiry: OnExpiry = OnExpiry.DENY
    escalate_to: list[str] = field(default_factory=list)
    excluded_actors: list[str] = field(default_factory=list)
    created_at: int = field(default_factory=now_ms)
    due_at: int | None = None


@dataclass
class Lease:
    """A claim held until ``now + lease_ms``."""

    now: int
    lease_ms: int


@dataclass
class Timer:
    """A durable wake-up; identity is ``(run, effect)``."""

    run: str
    effect: str
    fire_at: int
    case: str | None = None
    step: int = 0
    phase: Phase = Phase.FORWARD


@dataclass
class Page:
    """A page of tasks; ``next`` is the cursor of the following page, or None."""

    tasks: list[Task]
    next: str | None


@dataclass
class SealOutcome:
    timers_disarmed: int
    tasks_withdrawn: int


@dataclass
class Discrepancy:
    structure: str
    subject: str
    detail: str


@dataclass
class HistoryEntry:
    """One change of a task, as its history keeps it: ``at`` is when the host
    ran the call, ``actor`` None for the service, ``before`` None for the
    change that opened the task; the rest is the task after the change."""

    seq: int
    at: int
    verb: str
    actor: str | None
    before: TaskState | None
    after: TaskState
    assignee: str | None
    lease_until: int | None
    candidate_roles: list[str]
    excluded_actors: list[str]


class TimerEvent(StrEnum):
    ARMED = "armed"
    CLAIMED = "claimed"
    RETIRED = "retired"


@dataclass
class TaskChange:
    """A change of a task, in the feed."""

    id: str
    entry: HistoryEntry


@dataclass
class TimerChange:
    """A change of a timer, in the feed."""

    run: str
    effect: str
    at: int
    verb: str
    what: TimerEvent
    fire_at: int
    lease_until: int | None


@dataclass
class FeedEntry:
    """One committed change; ``position`` is where to read on after it."""

    position: str
    change: TaskChange | TimerChange


@dataclass
class FeedPage:
    """A read of the feed: ``next`` is where to read on, ``head`` the end of
    the feed as the read saw it (``next == head``: caught up)."""

    entries: list[FeedEntry]
    next: str
    head: str


@dataclass
class FeedGone:
    """What follows the position asked for was trimmed (or the position is
    not this feed's): refresh what you know, then follow on from ``head``."""

    head: str


@dataclass
class FeedPlace:
    """Where one history entry sits in the feed."""

    slot: int
    #: Its number in that slot: within a slot, a higher number committed later.
    seq: int


@dataclass
class TrimOutcome:
    feed_removed: int
    history_removed: int
    #: Whether the same rule would remove more: call again.
    more: bool
