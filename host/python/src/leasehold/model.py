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
class OutcomeRule:
    """One outcome a decision may have: its ``name`` (1-64 characters),
    whether it needs a reason, and a JSON Schema (text) its output must
    satisfy."""

    name: str
    needs_reason: bool = False
    output_schema: str | None = None


@dataclass
class Decision:
    """What ``decide`` is given: an ``outcome``, a ``reason`` (at most 4 KiB)
    and an ``output``, JSON text."""

    outcome: str
    reason: str | None = None
    output: str | None = None


@dataclass
class DecisionRecord:
    """A decision as the task keeps it: with who settled it (None for the
    service) and when the settling call ran."""

    outcome: str
    reason: str | None
    output: str | None
    by: str | None
    at: int


@dataclass
class StepEscalate:
    """A chain step that escalates the task as ``escalate`` does (unheld,
    ``escalated``), its candidate roles widened by ``roles`` (1 to 64
    names; a task open to anyone stays open to anyone)."""

    roles: list[str]


@dataclass
class StepExpire:
    """A chain step that settles the task ``expired`` (only as the last
    step); its ``on_expiry`` tells the workflow what expiry means."""


#: What a chain step does (the WIT's ``step-action``: ``escalate`` or ``expire``).
StepAction = StepEscalate | StepExpire


@dataclass
class EscalationStep:
    """One step of a task's escalation chain: it fires at the due time plus
    ``after_due_ms`` (0: at the due time)."""

    after_due_ms: int
    action: StepAction


@dataclass
class Reminder:
    """A reminder as it fired: ``before_ms`` milliseconds before the due time."""

    before_ms: int


#: The step a history entry fired (the WIT's ``task-step``): a ``Reminder``,
#: or a chain's ``EscalationStep`` as the task held it when it fired.
TaskStep = Reminder | EscalationStep


@dataclass
class Guard:
    """What ``Tenant.guarded`` takes: the ``revision`` the caller was shown
    (another one refuses the call ``stale``), and the bulk ``job`` making
    the change, recorded in its history entry."""

    revision: int | None = None
    job: str | None = None


class _Unchanged:
    """The value of a ``TaskChanges`` field left as it is."""

    _instance: _Unchanged | None = None

    def __new__(cls) -> _Unchanged:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED"


#: A ``TaskChanges.due_at`` that leaves the due time as it is (None clears it).
UNCHANGED = _Unchanged()


@dataclass
class TaskChanges:
    """What ``update`` changes: a field left None stays as it is, except
    ``due_at``, where None clears the due time and ``UNCHANGED`` (the
    default) leaves it. A change of the due time, the reminders or the
    chain re-arms the steps: what has not fired fires as its instant comes
    (at once, for one past)."""

    due_at: int | None | _Unchanged = UNCHANGED
    priority: Priority | None = None
    candidate_roles: list[str] | None = None
    escalate_to: list[str] | None = None
    excluded_actors: list[str] | None = None
    on_expiry: OnExpiry | None = None
    outcomes: list[OutcomeRule] | None = None
    remind_before: list[int] | None = None
    escalation: list[EscalationStep] | None = None


@dataclass
class FieldChange:
    """One field a change changed, its value before and after as JSON text."""

    field: str
    before: str
    after: str


@dataclass
class KindDefinition:
    """A kind's allowed outcomes; ``revision`` is 1 when first defined, one
    more with each definition after (what ``define_kind`` is given is
    ignored)."""

    kind: str
    outcomes: list[OutcomeRule] = field(default_factory=list)
    revision: int = 0


@dataclass
class Task:
    """A human task. To open one, ``id``, ``run`` and ``kind`` are enough: no
    case, justification ``{}``, open to anyone, normal priority, created now,
    no reminders and no escalation chain."""

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
    #: 1 when opened, one more with every recorded change; 0 for a task no
    #: 0.3.0 build has changed. ``open`` ignores it.
    revision: int = 0
    #: The decision the settle recorded, if it carried one. ``open`` ignores it.
    decision: DecisionRecord | None = None
    #: The outcomes a decision on the task may have; empty: its kind's, or any.
    outcomes: list[OutcomeRule] = field(default_factory=list)
    #: Reminders before the due time, each milliseconds before ``due_at``
    #: (1 or more, its reminder at or after ``created_at``; at most 8): kept
    #: largest first (earliest reminder first), duplicates dropped. Needs a
    #: due time.
    remind_before: list[int] = field(default_factory=list)
    #: The escalation chain after the due time, in firing order (strictly
    #: increasing ``after_due_ms``, ``StepExpire`` only last; at most 8).
    #: Needs a due time; a task with a chain is acted on by it instead of
    #: ``on_expiry`` (``overdue`` does not list it).
    escalation: list[EscalationStep] = field(default_factory=list)
    #: How many of its steps have fired: its reminders, earliest first, then
    #: its chain. ``open`` ignores it.
    steps_done: int = 0


@dataclass
class Lease:
    """A claim held until ``now + lease_ms``."""

    now: int
    lease_ms: int


@dataclass
class Finished:
    """A task a worker finished, for ``settle_and_claim``: how it settles,
    and the decision it carries (checked as ``decide`` checks it)."""

    id: str
    settlement: Settlement | str = Settlement.COMPLETED
    decision: Decision | None = None


@dataclass
class Settled:
    """``settle_and_claim`` settled the task, held by the caller until now."""


@dataclass
class AlreadySettled:
    """The task was already settled (by an earlier call, a sweep or an
    operator); it stays as it stands, in ``state``."""

    state: TaskState


@dataclass
class NotHeld:
    """The task is pending but not held by the caller: held by ``holder``,
    or by nobody (None: a lease that lapsed and was reclaimed). Unchanged."""

    holder: str | None


@dataclass
class NotFound:
    """No task has this id."""


@dataclass
class Refused:
    """The entry itself is refused (a malformed id, a decision its task's
    outcomes refuse), saying why as ``decide`` would; unchanged."""

    reason: str


#: What became of one finished task (WIT ``settle-answer``).
SettleAnswer = Settled | AlreadySettled | NotHeld | NotFound | Refused


@dataclass
class SettledAndClaimed:
    """What ``settle_and_claim`` did: one answer per finished task, in the
    order given, then the tasks it claimed."""

    settled: list[SettleAnswer]
    claimed: list[Task]


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
class TimerInfo:
    """An armed timer as a listing shows it: ``lease_until`` is the
    sweeper's lease end while it is claimed, None while it waits for its
    ``fire_at``."""

    timer: Timer
    lease_until: int | None


@dataclass
class TimerPage:
    """A page of timers; ``next`` is the cursor of the following page, or None."""

    timers: list[TimerInfo]
    next: str | None


@dataclass
class TimerMoved:
    """``reschedule`` moved the timer: ``info`` is it as it now waits, unclaimed."""

    info: TimerInfo


@dataclass
class TimerNotFound:
    """``reschedule`` found no timer armed under that run and effect; nothing written."""


@dataclass
class TimerHeld:
    """A sweeper holds the timer under a lease ending at ``lease_until``;
    nothing written. ``take_back=True`` moves it anyway."""

    lease_until: int


@dataclass
class TimerRunSealed:
    """The timer's run is sealed: it takes no wake-up, moved or new; nothing written."""


#: What ``reschedule`` answers, as ``feed`` answers ``FeedPage | FeedGone``:
#: the Rust host's ``Rescheduled``. Bad input is a ``StoreError``, as ever.
Rescheduled = TimerMoved | TimerNotFound | TimerHeld | TimerRunSealed


class GapPolicy(StrEnum):
    """A wall time the zone skips (clocks go forward)."""

    #: Fires at the first instant after the gap.
    SHIFT_FORWARD = "shift-forward"
    #: Does not fire that day.
    SKIP = "skip"


class RepeatPolicy(StrEnum):
    """A wall time the zone repeats (clocks go back)."""

    #: Fires once, at its first occurrence.
    FIRST = "first"
    #: Fires at both.
    BOTH = "both"


class OverlapPolicy(StrEnum):
    """What an occurrence due while the previous one is claimed and not
    done does: skipped, one kept waiting, or all kept waiting (a waiting one
    is armed, due at once, when the previous one is disarmed)."""

    SKIP = "skip"
    BUFFER_ONE = "buffer-one"
    BUFFER_ALL = "buffer-all"


@dataclass
class Cron:
    """A cron expression read in the schedule's zone: five fields (minute
    hour day-of-month month day-of-week) or six (seconds first); names,
    ranges, steps, lists, ``L`` and ``#``, and ``@yearly`` … ``@hourly``."""

    expr: str


@dataclass
class Interval:
    """Every ``every_ms`` milliseconds from ``anchor`` (the first
    occurrence): real time, which daylight saving never moves."""

    every_ms: int
    anchor: int


#: When a schedule fires (the WIT's ``recurrence``: ``cron`` or ``every``).
Recurrence = Cron | Interval


@dataclass
class CatchUpAllWithin:
    """After downtime, each missed occurrence within ``window_ms`` before
    now fires once, oldest first."""

    window_ms: int


@dataclass
class CatchUpLatestWithin:
    """After downtime, only the latest missed occurrence within
    ``window_ms`` before now fires."""

    window_ms: int


@dataclass
class CatchUpNone:
    """After downtime, no missed occurrence fires."""


#: Which missed occurrences fire after downtime (the WIT's ``catch-up``).
CatchUp = CatchUpAllWithin | CatchUpLatestWithin | CatchUpNone

#: One year: the catch-up window a spec gets when it names none, as the
#: component's own default.
YEAR_MS = 365 * 86_400_000


@dataclass
class ScheduleSpec:
    """What a schedule is. To add one, ``id``, ``run``, ``recurrence`` and
    ``zone`` (an IANA name, answered under its canonical one) are enough:
    no case, step 0, phase forward, no start or end, gap shift-forward,
    repeat first, overlap skip, catch-up all within a year, no jitter.
    Each occurrence is the timer ``(run, "schedule/<id>/<instant>")``
    carrying ``case``, ``step`` and ``phase``."""

    id: str
    run: str
    recurrence: Recurrence
    zone: str
    case: str | None = None
    step: int = 0
    phase: Phase = Phase.FORWARD
    #: No occurrence before ``start`` nor after ``end`` (both inclusive).
    start: int | None = None
    end: int | None = None
    gap: GapPolicy = GapPolicy.SHIFT_FORWARD
    repeat: RepeatPolicy = RepeatPolicy.FIRST
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    catch_up: CatchUp = field(default_factory=lambda: CatchUpAllWithin(YEAR_MS))
    #: Each occurrence fires up to this many milliseconds after its instant,
    #: by an amount fixed by the id and the instant, so every host agrees.
    jitter_ms: int = 0


@dataclass
class Schedule:
    """A schedule as the verbs answer it."""

    spec: ScheduleSpec
    #: The note it was paused with; None while it runs.
    paused: str | None
    #: The instant of the occurrence armed next (before jitter); None while
    #: paused or once the schedule has ended.
    next_at: int | None
    #: The instant of the last occurrence that fired.
    last_at: int | None
    #: Occurrences kept waiting by ``overlap``, oldest first.
    waiting: list[int]
    #: 1 when added, one more with each change.
    revision: int


@dataclass
class SchedulePage:
    """A page of schedules by id; ``next`` is the cursor of the following page, or None."""

    schedules: list[Schedule]
    next: str | None


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
    #: The task's revision after the change; 0 for one recorded before layout 10.
    revision: int = 0
    #: Each field the change changed, before and after.
    changes: list[FieldChange] = field(default_factory=list)
    #: The decision a settle recorded.
    decision: DecisionRecord | None = None
    #: A note's text.
    note: str | None = None
    #: The guard's job, when one made the change.
    job: str | None = None
    #: The reminder or chain step the change fired (``expire_overdue``).
    step: TaskStep | None = None


class TimerEvent(StrEnum):
    ARMED = "armed"
    CLAIMED = "claimed"
    RETIRED = "retired"
    #: ``reschedule`` moved it to a new ``fire_at``, unclaimed.
    RESCHEDULED = "rescheduled"


@dataclass
class TaskChange:
    """A change of a task, in the feed."""

    id: str
    entry: HistoryEntry
    #: The task's run and kind, so a reader can filter without reading the
    #: task; None for a change recorded before layout 10.
    run: str | None = None
    kind: str | None = None


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


class SubState(StrEnum):
    """A webhook subscription's state."""

    #: Delivering.
    ACTIVE = "active"
    #: Stopped by an operator, or by the receiver's ``410 Gone``.
    PAUSED = "paused"
    #: An entry went unacknowledged through the whole retry schedule; the
    #: position stays before it until an operator resumes.
    FAILING = "failing"
    #: The feed was trimmed past the position before its entries were
    #: delivered; the note says where.
    GONE = "gone"


@dataclass
class SubFilter:
    """What a subscription is sent. Empty lists place no condition; at least
    one of ``tasks`` and ``timers`` must be True."""

    #: Changes of tasks.
    tasks: bool = False
    #: Changes of timers.
    timers: bool = False
    #: Only changes made by these verbs (``claim``, ``settle``, ``arm``, ...).
    verbs: list[str] = field(default_factory=list)
    #: Only tasks of these kinds (timers have none: not restricted).
    kinds: list[str] = field(default_factory=list)
    #: Only tasks and timers of these runs.
    runs: list[str] = field(default_factory=list)
    #: Of tasks, only the change that settled each.
    settling_only: bool = False


@dataclass
class SigningKey:
    """A signing key (24 to 64 bytes). After a rotation the old key signs
    beside the new one until ``until``; None while it is current."""

    key: bytes
    until: int | None


@dataclass
class Attempt:
    """One delivery attempt, as kept for an operator (the last 20)."""

    #: The ``webhook-id`` sent.
    message_id: str
    at: int
    #: 1 for an entry's first attempt.
    attempt: int
    #: What happened, as the sender spells it (``200``, ``timeout``, ...).
    outcome: str
    latency_ms: int


@dataclass
class Subscription:
    """A webhook subscription as the component keeps it. The component
    sends nothing: sending is the Rust crate ``leasehold-webhooks``', or a
    loop of the embedder's own over ``feed``."""

    #: 1-256 characters, no control characters.
    id: str
    #: An absolute ``http`` or ``https`` URL of at most 2,048 bytes.
    url: str
    filter: SubFilter
    state: SubState
    #: Why it is in its state, when not active.
    note: str | None
    #: Every feed entry up to this position was delivered or matched
    #: nothing; None for the feed's start.
    position: str | None
    #: Oldest first; 1 to 4; the last is current.
    keys: list[SigningKey]
    created_at: int
    #: 1 when added; one more at each change by anyone but its deliveries
    #: (which move only the position).
    revision: int
    #: The last attempts recorded, oldest first.
    attempts: list[Attempt]
    #: Who delivers it, and until when.
    lease_holder: str | None
    lease_until: int | None


@dataclass
class SubscriptionPage:
    """A page of subscriptions by id; ``next`` is the cursor of the following page, or None."""

    subscriptions: list[Subscription]
    next: str | None


# ---- search, counts and saved views ------------------------------------------------


@dataclass
class AssigneeNobody:
    """In a filter: nobody holds or last held the task."""


@dataclass
class AssigneeActor:
    """In a filter: this actor holds the task (or, for a settled task, last held it)."""

    actor: str


#: Who holds a task, in a filter (the WIT ``assignee-filter``).
AssigneeFilter = AssigneeNobody | AssigneeActor


@dataclass
class TaskFilter:
    """What a task must be to match: every condition given must hold (and,
    in a list, one of its entries); None or an empty list places none. An
    empty filter matches every task."""

    #: At most 6, each once.
    states: list[TaskState] = field(default_factory=list)
    #: At most 32.
    kinds: list[str] = field(default_factory=list)
    #: Offered to this role (one of its candidate roles).
    role: str | None = None
    assignee: AssigneeFilter | None = None
    case: str | None = None
    run: str | None = None
    #: Priority at or above this one.
    priority_at_least: Priority | None = None
    #: Due strictly before (a task with no due time does not match).
    due_before: int | None = None
    #: Due at or after.
    due_after: int | None = None
    #: Created strictly before.
    created_before: int | None = None
    #: Created at or after.
    created_after: int | None = None
    #: Pending and due at or before.
    overdue_at: int | None = None


class SortKey(StrEnum):
    """The orders a search pages in; ties go by creation time, then id."""

    #: Higher priority first, then older first.
    QUEUE_ORDER = "queue-order"
    #: Due time, earliest first; tasks with none after every due one.
    DUE_AT = "due-at"
    #: Creation time, oldest first.
    CREATED_AT = "created-at"
    #: Priority, lowest first, then newer first: the queue's order reversed.
    PRIORITY = "priority"


@dataclass
class TaskSort:
    """A sort key and its direction; ``descending`` reverses the whole order, ties included."""

    key: SortKey = SortKey.QUEUE_ORDER
    descending: bool = False


@dataclass
class Viewer:
    """A reviewer asking: it sees only the tasks it holds and those it may
    take (offered to one of ``roles``, or to anyone, and not excluding ``actor``)."""

    actor: str
    roles: list[str] = field(default_factory=list)


@dataclass
class SearchQuery:
    """One page of a search: ``limit`` (1-1000) tasks matching ``filter`` in
    ``sort``'s order, after ``after`` (the ``next`` of the previous page of
    this same search), as ``viewer`` sees them (None: the whole tenant)."""

    limit: int
    filter: TaskFilter = field(default_factory=TaskFilter)
    sort: TaskSort = field(default_factory=TaskSort)
    after: str | None = None
    viewer: Viewer | None = None


@dataclass
class SearchPage:
    tasks: list[Task]
    #: Where the next page starts; None when the search is done.
    next: str | None
    #: The page stopped at the scan budget before it was full.
    budget_spent: bool
    #: The index that drove the page (``by-state``, ``by-due``, ...; ``tasks``
    #: while the index is being built).
    index: str


@dataclass
class CountAnswer:
    #: The tasks that match (from ``after`` on, when given).
    count: int
    #: ``count`` is the whole answer; otherwise add the counts of the calls
    #: that follow ``next``.
    exact: bool
    next: str | None
    #: ``counters`` when kept counts answered, otherwise the index scanned.
    index: str


@dataclass
class IndexProgress:
    #: Every task has its search entries and counts.
    built: bool
    #: Tasks given their entries by this call.
    indexed: int


@dataclass
class SavedView:
    """A tenant's named, shared search. ``revision`` and ``at`` are the
    engine's to set: what ``put_view`` is given is ignored."""

    #: 1-128 characters, no control characters.
    name: str
    filter: TaskFilter = field(default_factory=TaskFilter)
    sort: TaskSort = field(default_factory=TaskSort)
    #: 1 when made, one more with each change.
    revision: int = 0
    #: Who last changed it.
    by: str | None = None
    #: When it was last changed (the engine's clock).
    at: int = 0


# ---- bulk jobs -----------------------------------------------------------------------


class JobState(StrEnum):
    #: Finding the tasks of its set, a stretch per step.
    COUNTING = "counting"
    #: Applying its action, a task per step.
    RUNNING = "running"
    #: Stopped by ``cancel_job``; the rest of its set is dropped.
    CANCELLED = "cancelled"
    #: Every task of its set taken.
    DONE = "done"


class JobVerb(StrEnum):
    """The actions of a job that take no arguments."""

    #: ``unassign``: a claimed task goes back to its queue.
    RELEASE = "release"
    ESCALATE = "escalate"
    #: ``settle`` as withdrawn, by the service.
    WITHDRAW = "withdraw"


@dataclass
class JobAssign:
    """A job's ``assign``: each task handed to ``to`` (without a lease)."""

    to: str
    roles: list[str] = field(default_factory=list)
    override_roles: bool = False


#: What a job does to each task, through the task verb of that name: a
#: ``JobVerb`` (or its string), a ``JobAssign``, or ``TaskChanges`` for
#: ``update`` (answered with only the fields it changes).
JobAction = JobVerb | JobAssign | TaskChanges


@dataclass
class JobMiss:
    """A task a job did not change, and why."""

    id: str
    reason: str


@dataclass
class Job:
    """A bulk job: ``action`` over the tasks ``filter`` matched that were
    created at or before ``created_at``."""

    id: str
    filter: TaskFilter
    action: JobAction
    #: Who started it: ``by`` of each change where the verb takes one.
    by: str | None
    state: JobState
    #: The tasks of its set found so far (all of them once it runs).
    total: int
    #: Tasks the action was applied to.
    done: int
    #: Tasks that no longer matched when their turn came.
    skipped: int
    #: Tasks whose verb refused.
    failed: int
    #: The last 16 failures, oldest first.
    last_failures: list[JobMiss]
    #: The last 16 skips, oldest first.
    last_skipped: list[JobMiss]
    #: The ``now`` it started at.
    created_at: int
