"""Arguments are refused before the guest runs, never wrapped or coerced:
every integer argument of every verb past its WIT type's range, enums with
a typo, a str where a list belongs. The refusal is an InvalidArgument (a
StoreError with case ``invalid``, also a TypeError and a ValueError) naming
the field; the store is unchanged and the tenant's instance is kept."""

import pytest

import leasehold as lh

T = 1_700_000_000_000
S64_OUT = [2**63, -(2**63) - 1, 2**64 + T, 2**64, 1.5, "1700000000000", True, None]
U32_OUT = [-1, 2**32, 2**32 + 2, 2**32 + 60_000, 0.5, "5", True, None]
U64_OUT = [-1, 2**64, 2**64 + 5, 0.5, "5", True, None]
OUT = {"s64": S64_OUT, "u32": U32_OUT, "u64": U64_OUT}


def task(**extra):
    return lh.Task(**{"id": "t1", "run": "r", "kind": "k", "created_at": T, **extra})


def lease(**extra):
    return lh.Lease(**{"now": T, "lease_ms": 60_000, **extra})


def spec(**extra):
    return lh.ScheduleSpec(**{"id": "s", "run": "r", "recurrence": lh.Cron("* * * * *"), "zone": "UTC", **extra})


KEY = bytes([7]) * 32
URL = "https://a.example"


def attempt(**extra):
    return lh.Attempt(**{"message_id": "msg_1", "at": T, "attempt": 1, "outcome": "200", "latency_ms": 12, **extra})


def every(**extra):
    return spec(recurrence=lh.Interval(**{"every_ms": 60_000, "anchor": T, **extra}))


#: Every integer argument of every verb: (verb and field, WIT type, a call passing v there).
INTEGER_ARGUMENTS = [
    ("open task.created_at", "s64", lambda t, v: t.open(task(created_at=v))),
    ("open task.due_at", "s64", lambda t, v: t.open(task(due_at=v))),
    ("open task.lease_until", "s64", lambda t, v: t.open(task(state="claimed", assignee="bob", lease_until=v))),
    ("open task.remind_before[0]", "u64", lambda t, v: t.open(task(due_at=T + 10, remind_before=[v]))),
    (
        "open task.escalation[0].after_due_ms",
        "u64",
        lambda t, v: t.open(task(due_at=T, escalation=[lh.EscalationStep(v, lh.StepExpire())])),
    ),
    ("update changes.remind_before[0]", "u64", lambda t, v: t.update("t0", None, lh.TaskChanges(remind_before=[v]))),
    (
        "update changes.escalation[0].after_due_ms",
        "u64",
        lambda t, v: t.update("t0", None, lh.TaskChanges(escalation=[lh.EscalationStep(v, lh.StepExpire())])),
    ),
    ("claim lease.now", "s64", lambda t, v: t.claim("t1", "bob", [], lease(now=v))),
    ("claim lease.lease_ms", "u32", lambda t, v: t.claim("t1", "bob", [], lease(lease_ms=v))),
    ("take-over lease.now", "s64", lambda t, v: t.take_over("t1", "bob", "carol", [], lease(now=v))),
    ("take-over lease.lease_ms", "u32", lambda t, v: t.take_over("t1", "bob", "carol", [], lease(lease_ms=v))),
    ("renew now", "s64", lambda t, v: t.renew("t1", "bob", v, 60_000)),
    ("renew lease_ms", "u32", lambda t, v: t.renew("t1", "bob", T, v)),
    ("reclaim-lapsed now", "s64", lambda t, v: t.reclaim_lapsed(v, 10)),
    ("reclaim-lapsed limit", "u32", lambda t, v: t.reclaim_lapsed(T, v)),
    ("claim-next limit", "u32", lambda t, v: t.claim_next(roles=[], actor="bob", limit=v)),
    ("claim-next lease.now", "s64", lambda t, v: t.claim_next(roles=[], actor="bob", lease=lease(now=v))),
    ("claim-next lease.lease_ms", "u32", lambda t, v: t.claim_next(roles=[], actor="bob", lease=lease(lease_ms=v))),
    ("claim-batch count", "u32", lambda t, v: t.claim_batch(roles=[], actor="bob", count=v)),
    ("claim-batch lease.now", "s64", lambda t, v: t.claim_batch(roles=[], actor="bob", count=1, lease=lease(now=v))),
    ("settle-and-claim count", "u32", lambda t, v: t.settle_and_claim([], roles=[], actor="bob", count=v)),
    (
        "settle-and-claim lease.lease_ms",
        "u32",
        lambda t, v: t.settle_and_claim([], roles=[], actor="bob", count=1, lease=lease(lease_ms=v)),
    ),
    ("queue limit", "u32", lambda t, v: t.queue(roles=[], limit=v)),
    ("for-case limit", "u32", lambda t, v: t.for_case("c", v)),
    ("overdue now", "s64", lambda t, v: t.overdue(v, 10)),
    ("overdue limit", "u32", lambda t, v: t.overdue(T, v)),
    ("arm timer.fire_at", "s64", lambda t, v: t.arm(lh.Timer(run="r", effect="e", fire_at=v))),
    ("arm timer.step", "u32", lambda t, v: t.arm(lh.Timer(run="r", effect="e", fire_at=T, step=v))),
    ("claim-due now", "s64", lambda t, v: t.claim_due(v, 10, 60_000)),
    ("claim-due limit", "u32", lambda t, v: t.claim_due(T, v, 60_000)),
    ("claim-due lease_ms", "u32", lambda t, v: t.claim_due(T, 10, v)),
    ("reschedule fire_at", "s64", lambda t, v: t.reschedule("r0", "e0", v)),
    ("timers-of limit", "u32", lambda t, v: t.timers_of("r0", v)),
    ("due-between from_", "s64", lambda t, v: t.due_between(v, T, 10)),
    ("due-between to", "s64", lambda t, v: t.due_between(T, v, 10)),
    ("due-between limit", "u32", lambda t, v: t.due_between(T, T + 1, v)),
    ("add-schedule now", "s64", lambda t, v: t.add_schedule(spec(), v)),
    ("add-schedule spec.step", "u32", lambda t, v: t.add_schedule(spec(step=v), T)),
    ("add-schedule spec.start", "s64", lambda t, v: t.add_schedule(spec(start=v), T)),
    ("add-schedule spec.end", "s64", lambda t, v: t.add_schedule(spec(end=v), T)),
    ("add-schedule spec.jitter_ms", "u32", lambda t, v: t.add_schedule(spec(jitter_ms=v), T)),
    ("add-schedule spec.recurrence.every_ms", "u64", lambda t, v: t.add_schedule(every(every_ms=v), T)),
    ("add-schedule spec.recurrence.anchor", "s64", lambda t, v: t.add_schedule(every(anchor=v), T)),
    (
        "add-schedule spec.catch_up.window_ms",
        "u64",
        lambda t, v: t.add_schedule(spec(catch_up=lh.CatchUpAllWithin(v)), T),
    ),
    (
        "add-schedule spec.catch_up.window_ms",
        "u64",
        lambda t, v: t.add_schedule(spec(catch_up=lh.CatchUpLatestWithin(v)), T),
    ),
    ("resume-schedule now", "s64", lambda t, v: t.resume_schedule("s", v)),
    ("trigger-schedule now", "s64", lambda t, v: t.trigger_schedule("s", v)),
    ("next-occurrences after", "s64", lambda t, v: t.next_occurrences("s", v, 10)),
    ("next-occurrences n", "u32", lambda t, v: t.next_occurrences("s", T, v)),
    ("list-schedules limit", "u32", lambda t, v: t.list_schedules(v)),
    ("add-subscription now", "s64", lambda t, v: t.add_subscription("s", URL, lh.SubFilter(tasks=True), KEY, None, v)),
    ("list-subscriptions limit", "u32", lambda t, v: t.list_subscriptions(v)),
    ("change-subscription expected", "u64", lambda t, v: t.change_subscription("s", URL, None, v)),
    ("set-subscription-state expected", "u64", lambda t, v: t.set_subscription_state("s", "paused", "x", v)),
    ("rotate-subscription-key old_until", "s64", lambda t, v: t.rotate_subscription_key("s", KEY, v, T)),
    ("rotate-subscription-key now", "s64", lambda t, v: t.rotate_subscription_key("s", KEY, T, v)),
    ("advance-subscription revision", "u64", lambda t, v: t.advance_subscription("s", v, "f")),
    ("lease-subscription now", "s64", lambda t, v: t.lease_subscription("s", "w1", v, 60_000)),
    ("lease-subscription lease_ms", "u32", lambda t, v: t.lease_subscription("s", "w1", T, v)),
    ("record-subscription-attempts attempts[0].at", "s64", lambda t, v: t.record_subscription_attempts("s", [attempt(at=v)])),
    (
        "record-subscription-attempts attempts[0].attempt",
        "u32",
        lambda t, v: t.record_subscription_attempts("s", [attempt(attempt=v)]),
    ),
    (
        "record-subscription-attempts attempts[0].latency_ms",
        "u64",
        lambda t, v: t.record_subscription_attempts("s", [attempt(latency_ms=v)]),
    ),
    ("search query.limit", "u32", lambda t, v: t.search(lh.SearchQuery(limit=v))),
    ("search query.filter.due_before", "s64", lambda t, v: t.search(lh.SearchQuery(10, lh.TaskFilter(due_before=v)))),
    ("search query.filter.due_after", "s64", lambda t, v: t.search(lh.SearchQuery(10, lh.TaskFilter(due_after=v)))),
    (
        "search query.filter.created_before",
        "s64",
        lambda t, v: t.search(lh.SearchQuery(10, lh.TaskFilter(created_before=v))),
    ),
    ("search query.filter.created_after", "s64", lambda t, v: t.search(lh.SearchQuery(10, lh.TaskFilter(created_after=v)))),
    ("search query.filter.overdue_at", "s64", lambda t, v: t.search(lh.SearchQuery(10, lh.TaskFilter(overdue_at=v)))),
    ("count filter.due_before", "s64", lambda t, v: t.count(lh.TaskFilter(due_before=v))),
    ("build-search-index limit", "u32", lambda t, v: t.build_search_index(v)),
    ("put-view expected", "u64", lambda t, v: t.put_view(lh.SavedView("v"), v)),
    ("put-view view.filter.overdue_at", "s64", lambda t, v: t.put_view(lh.SavedView("v", lh.TaskFilter(overdue_at=v)))),
    ("list-views limit", "u32", lambda t, v: t.list_views(v)),
    ("delete-view expected", "u64", lambda t, v: t.delete_view("v", v)),
]

CASES = [
    pytest.param(call, field, v, id=f"{what}={v!r}")
    for what, kind, call in INTEGER_ARGUMENTS
    for field in [what.split(" ")[1].split(".")[-1]]
    for v in OUT[kind]
    # An optional timestamp takes None as absent.
    if not (
        v is None
        and field
        in ("due_at", "lease_until", "start", "end", "expected", "due_before", "due_after", "created_before")
        + ("created_after", "overdue_at")
    )
]


@pytest.fixture
def fixture():
    """A tenant with one open task and one armed timer, and a check that nothing changed."""
    store = lh.MemoryStore()
    engine = lh.open(store)
    t = engine.tenant("acme")
    t.open(task(id="t0"))
    t.arm(lh.Timer(run="r0", effect="e0", fire_at=T))
    before = store.dump("acme")
    made = engine.instances_made

    def unchanged():
        assert store.dump("acme") == before
        assert engine.instances_made == made, "a refused argument cost an instance"

    return t, unchanged


def refused(f, field):
    with pytest.raises(lh.InvalidArgument) as e:
        f()
    err = e.value
    assert isinstance(err, lh.StoreError) and isinstance(err, TypeError) and isinstance(err, ValueError)
    assert err.case == "invalid" and err.invalid_input
    assert field in err.detail, err.detail


@pytest.mark.parametrize("call, field, v", CASES)
def test_every_integer_argument_of_every_verb_is_refused_out_of_range_never_wrapped(fixture, call, field, v):
    t, unchanged = fixture
    refused(lambda: call(t, v), field)
    unchanged()


def test_the_edges_of_each_integer_type_reach_the_guest_unchanged(fixture):
    t, _ = fixture
    assert t.arm(lh.Timer(run="r", effect="max", fire_at=T, step=2**32 - 1)) is lh.ArmOutcome.ARMED
    # The rules refuse what they do not serve themselves, naming the value they got.
    for f, v in [
        (lambda: t.reclaim_lapsed(T, 2**32 - 1), 2**32 - 1),
        (lambda: t.arm(lh.Timer(run="r", effect="e", fire_at=2**63 - 1)), 2**63 - 1),
        (lambda: t.arm(lh.Timer(run="r", effect="e", fire_at=-(2**63))), -(2**63)),
    ]:
        with pytest.raises(lh.StoreError) as e:
            f()
        assert not isinstance(e.value, lh.InvalidArgument)
        assert e.value.case == "invalid" and str(v) in e.value.detail


@pytest.mark.parametrize(
    "field, call",
    [
        ("priority", lambda t: t.open(task(priority="hgih"))),
        ("state", lambda t: t.open(task(state="Open"))),
        ("on_expiry", lambda t: t.open(task(on_expiry="never"))),
        ("settlement", lambda t: t.settle("t0", "done")),
        ("phase", lambda t: t.arm(lh.Timer(run="r", effect="e", fire_at=T, phase="back"))),
        ("candidate_roles", lambda t: t.open(task(candidate_roles="approver"))),
        ("roles", lambda t: t.claim("t0", "bob", "approver")),
        ("excluded_actors[0]", lambda t: t.open(task(excluded_actors=[7]))),
        ("id", lambda t: t.get(7)),
        ("actor", lambda t: t.claim("t0", None, [])),
        ("id", lambda t: t.open(task(id="bad\ud800"))),
        ("task", lambda t: t.open({"id": "t1"})),
        ("lease", lambda t: t.claim("t0", "bob", [], (T, 60_000))),
        ("take_back", lambda t: t.reschedule("r0", "e0", T, take_back=1)),
        ("effect", lambda t: t.reschedule("r0", 7, T)),
        ("run", lambda t: t.timers_of(["r0"], 10)),
        ("after", lambda t: t.due_between(T, T + 1, 10, 3)),
        ("spec.gap", lambda t: t.add_schedule(spec(gap="skip-it"), T)),
        ("spec.repeat", lambda t: t.add_schedule(spec(repeat="twice"), T)),
        ("spec.overlap", lambda t: t.add_schedule(spec(overlap="buffer"), T)),
        ("spec.phase", lambda t: t.add_schedule(spec(phase="back"), T)),
        ("spec.zone", lambda t: t.add_schedule(spec(zone=7), T)),
        ("spec.recurrence", lambda t: t.add_schedule(spec(recurrence="* * * * *"), T)),
        ("spec.recurrence.expr", lambda t: t.add_schedule(spec(recurrence=lh.Cron(5)), T)),
        ("spec.catch_up", lambda t: t.add_schedule(spec(catch_up=None), T)),
        ("spec.catch_up", lambda t: t.add_schedule(spec(catch_up=600_000), T)),
        ("spec", lambda t: t.add_schedule({"id": "s"}, T)),
        ("id", lambda t: t.remove_schedule(7)),
        ("note", lambda t: t.pause_schedule("s", 5)),
        ("id", lambda t: t.get_schedule(["s"])),
        ("after", lambda t: t.list_schedules(10, 3)),
        ("remind_before", lambda t: t.open(task(due_at=T, remind_before=5))),
        ("remind_before", lambda t: t.open(task(due_at=T, remind_before="5"))),
        ("escalation", lambda t: t.open(task(due_at=T, escalation=lh.EscalationStep(0, lh.StepExpire())))),
        ("escalation[0]", lambda t: t.open(task(due_at=T, escalation=[{"after_due_ms": 0, "action": None}]))),
        ("escalation[0].action", lambda t: t.open(task(due_at=T, escalation=[lh.EscalationStep(0, None)]))),
        ("escalation[0].action", lambda t: t.open(task(due_at=T, escalation=[lh.EscalationStep(0, "expire")]))),
        (
            "escalation[0].action.roles",
            lambda t: t.open(task(due_at=T, escalation=[lh.EscalationStep(0, lh.StepEscalate("leads"))])),
        ),
        (
            "changes.escalation[0].action.roles[0]",
            lambda t: t.update("t0", None, lh.TaskChanges(escalation=[lh.EscalationStep(0, lh.StepEscalate([7]))])),
        ),
        ("changes.remind_before", lambda t: t.update("t0", None, lh.TaskChanges(remind_before=(x for x in [1])))),
        ("id", lambda t: t.add_subscription(7, URL, lh.SubFilter(tasks=True), KEY, None, T)),
        ("url", lambda t: t.add_subscription("s", None, lh.SubFilter(tasks=True), KEY, None, T)),
        ("filter", lambda t: t.add_subscription("s", URL, {"tasks": True}, KEY, None, T)),
        ("filter.tasks", lambda t: t.add_subscription("s", URL, lh.SubFilter(tasks=1), KEY, None, T)),
        ("filter.verbs", lambda t: t.add_subscription("s", URL, lh.SubFilter(tasks=True, verbs="settle"), KEY, None, T)),
        ("filter.kinds[0]", lambda t: t.add_subscription("s", URL, lh.SubFilter(tasks=True, kinds=[7]), KEY, None, T)),
        ("filter.settling_only", lambda t: t.add_subscription("s", URL, lh.SubFilter(tasks=True, settling_only=None), KEY, None, T)),
        ("key", lambda t: t.add_subscription("s", URL, lh.SubFilter(tasks=True), list(KEY), None, T)),
        ("key", lambda t: t.add_subscription("s", URL, lh.SubFilter(tasks=True), "a key of thirty-two characters!", None, T)),
        ("from_", lambda t: t.add_subscription("s", URL, lh.SubFilter(tasks=True), KEY, 7, T)),
        ("id", lambda t: t.get_subscription(None)),
        ("after", lambda t: t.list_subscriptions(10, 3)),
        ("url", lambda t: t.change_subscription("s", 7)),
        ("filter.runs", lambda t: t.change_subscription("s", None, lh.SubFilter(timers=True, runs="r1"))),
        ("state", lambda t: t.set_subscription_state("s", "Paused")),
        ("state", lambda t: t.set_subscription_state("s", "stopped", "x")),
        ("note", lambda t: t.set_subscription_state("s", "paused", ["x"])),
        ("key", lambda t: t.rotate_subscription_key("s", None, T, T)),
        ("id", lambda t: t.remove_subscription(["s"])),
        ("position", lambda t: t.advance_subscription("s", 1, None)),
        ("position", lambda t: t.rewind_subscription("s", 5)),
        ("holder", lambda t: t.lease_subscription("s", None, T, 60_000)),
        ("holder", lambda t: t.release_subscription("s", 7)),
        ("attempts", lambda t: t.record_subscription_attempts("s", attempt())),
        ("attempts[0]", lambda t: t.record_subscription_attempts("s", [{"message_id": "m"}])),
        ("attempts[0].outcome", lambda t: t.record_subscription_attempts("s", [attempt(outcome=200)])),
        ("attempts[0].message_id", lambda t: t.record_subscription_attempts("s", [attempt(message_id=None)])),
        ("query", lambda t: t.search({"limit": 10})),
        ("query.filter", lambda t: t.search(lh.SearchQuery(10, {"states": ["open"]}))),
        ("query.filter.states", lambda t: t.search(lh.SearchQuery(10, lh.TaskFilter(states="open")))),
        ("query.filter.states[0]", lambda t: t.search(lh.SearchQuery(10, lh.TaskFilter(states=["Open"])))),
        ("query.filter.kinds", lambda t: t.search(lh.SearchQuery(10, lh.TaskFilter(kinds="k")))),
        ("query.filter.role", lambda t: t.search(lh.SearchQuery(10, lh.TaskFilter(role=["r"])))),
        ("query.filter.priority_at_least", lambda t: t.search(lh.SearchQuery(10, lh.TaskFilter(priority_at_least="hi")))),
        ("query.filter.assignee", lambda t: t.search(lh.SearchQuery(10, lh.TaskFilter(assignee="alice")))),
        (
            "query.filter.assignee.actor",
            lambda t: t.search(lh.SearchQuery(10, lh.TaskFilter(assignee=lh.AssigneeActor(7)))),
        ),
        ("query.sort", lambda t: t.search(lh.SearchQuery(10, sort="due-at"))),
        ("query.sort.key", lambda t: t.search(lh.SearchQuery(10, sort=lh.TaskSort("due")))),
        ("query.sort.descending", lambda t: t.search(lh.SearchQuery(10, sort=lh.TaskSort("due-at", 1)))),
        ("query.after", lambda t: t.search(lh.SearchQuery(10, after=7))),
        ("query.viewer", lambda t: t.search(lh.SearchQuery(10, viewer="alice"))),
        ("query.viewer.roles", lambda t: t.search(lh.SearchQuery(10, viewer=lh.Viewer("alice", "r")))),
        ("filter.case", lambda t: t.count(lh.TaskFilter(case=7))),
        ("viewer.actor", lambda t: t.count(None, lh.Viewer(None))),
        ("after", lambda t: t.count(None, None, 7)),
        ("view", lambda t: t.put_view("v")),
        ("view.name", lambda t: t.put_view(lh.SavedView(7))),
        ("view.sort.key", lambda t: t.put_view(lh.SavedView("v", sort=lh.TaskSort("queue")))),
        ("view.by", lambda t: t.put_view(lh.SavedView("v", by=7))),
        ("name", lambda t: t.get_view(None)),
        ("after", lambda t: t.list_views(10, 3)),
        ("name", lambda t: t.delete_view(["v"])),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_enum_typos_strs_for_lists_and_wrong_types_are_refused_by_field_and_keep_the_instance(fixture, field, call):
    t, unchanged = fixture
    refused(lambda: call(t), field)
    unchanged()
