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
