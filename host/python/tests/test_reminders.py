"""A task's reminders and escalation chain through the Python host's own
API: the new task fields and history ``step`` as dataclasses, ``next_wake``,
one step fired per task per sweep, a change that re-arms the steps, and
timelines refused before the guest runs (bad types) or by the rules (bad
values), nothing written either way."""

import pytest

import leasehold as lh

CHAIN = [
    lh.EscalationStep(0, lh.StepEscalate(["leads"])),
    lh.EscalationStep(5_000, lh.StepEscalate(["directors"])),
    lh.EscalationStep(20_000, lh.StepExpire()),
]


def task(id, **extra):
    return lh.Task(**{"id": id, "run": "r1", "kind": "k", "created_at": 0, **extra})


class Clock:
    def __init__(self):
        self.at = 0

    def __call__(self):
        return self.at


@pytest.fixture(params=["memory", "sqlite"])
def tenant(request, tmp_path):
    store = lh.MemoryStore() if request.param == "memory" else lh.SqliteStore(str(tmp_path / "r.db"), durability="none")
    clock = Clock()
    engine = lh.open(store, clock=clock)
    yield store, engine, engine.tenant("acme"), clock
    engine.close()


def test_reminders_then_the_chain_fire_one_step_per_sweep_each_in_the_history_with_its_step(tenant):
    _, _, t, clock = tenant
    assert t.next_wake() is None
    opened = t.open(
        task("t", candidate_roles=["clerk"], due_at=10_000, remind_before=[1_000, 3_000, 1_000], escalation=CHAIN)
    )
    # Kept largest first, duplicates dropped; steps done is the engine's.
    assert opened.remind_before == [3_000, 1_000]
    assert opened.escalation == CHAIN
    assert opened.steps_done == 0
    assert t.get("t").escalation == CHAIN
    assert t.next_wake() == 7_000
    # A task with a chain is the chain's to act on, not overdue's.
    assert t.overdue(100_000, 10) == []
    t.claim("t", "alice", ["clerk"])

    def sweep(at):
        clock.at = at
        return [(x.id, x.state, x.assignee, x.steps_done) for x in t.expire_overdue(at, 10)]

    assert sweep(6_999) == []
    assert sweep(7_000) == [("t", lh.TaskState.CLAIMED, "alice", 1)]
    assert sweep(7_000) == []
    assert t.next_wake() == 9_000
    # Two steps due by 12 000: one per call.
    assert sweep(12_000) == [("t", lh.TaskState.CLAIMED, "alice", 2)]
    assert sweep(12_000) == [("t", lh.TaskState.ESCALATED, None, 3)]
    assert t.get("t").candidate_roles == ["clerk", "leads"]
    assert sweep(15_000) == [("t", lh.TaskState.ESCALATED, None, 4)]
    assert t.next_wake() == 30_000
    assert sweep(30_000) == [("t", lh.TaskState.EXPIRED, None, 5)]
    assert t.next_wake() is None
    assert sweep(100_000) == []

    fired = [e for e in t.history("t") if e.verb == "expire-overdue"]
    assert [(e.at, e.before, e.after, e.step) for e in fired] == [
        (7_000, "claimed", "claimed", lh.Reminder(3_000)),
        (12_000, "claimed", "claimed", lh.Reminder(1_000)),
        (12_000, "claimed", "escalated", CHAIN[0]),
        (15_000, "escalated", "escalated", CHAIN[1]),
        (30_000, "escalated", "expired", CHAIN[2]),
    ]
    assert fired[0].changes == [lh.FieldChange("steps-done", "0", "1")]
    # Every other change carries no step; the feed carries the same entries.
    assert all(e.step is None for e in t.history("t") if e.verb != "expire-overdue")
    page = t.feed(None, 100)
    in_feed = [e.change.entry.step for e in page.entries if isinstance(e.change, lh.TaskChange) and e.change.entry.step]
    assert in_feed == [e.step for e in fired]


def test_update_changes_the_reminders_and_the_chain_re_arming_what_has_not_fired(tenant):
    _, _, t, _ = tenant
    t.open(task("u", due_at=10_000, remind_before=[3_000]))
    assert [x.steps_done for x in t.expire_overdue(7_000, 10)] == [1]
    changed = t.update(
        "u", "olga", lh.TaskChanges(remind_before=[5_000, 2_000], escalation=[lh.EscalationStep(1_000, lh.StepExpire())])
    )
    assert changed.remind_before == [5_000, 2_000]
    assert changed.escalation == [lh.EscalationStep(1_000, lh.StepExpire())]
    # The reminder 5 000 before is at or before the one that fired: it counts as fired.
    assert changed.steps_done == 1
    assert t.next_wake() == 8_000
    fields = [c.field for c in t.history("u")[-1].changes]
    assert "remind-before" in fields and "escalation" in fields, fields
    assert [(x.state, x.steps_done) for x in t.expire_overdue(8_000, 10)] == [(lh.TaskState.OPEN, 2)]
    assert [(x.state, x.steps_done) for x in t.expire_overdue(11_000, 10)] == [(lh.TaskState.EXPIRED, 3)]
    assert t.history("u")[-1].step == lh.EscalationStep(1_000, lh.StepExpire())


def test_bad_timelines_are_refused_by_type_before_the_guest_runs_and_by_the_rules_after_writing_nothing(tenant):
    store, engine, t, _ = tenant
    t.open(task("r", due_at=500, remind_before=[100]))
    before = store.dump("acme")
    made = engine.instances_made
    expire = lh.StepExpire()
    by_type = [
        ("remind_before must be a list", lambda: t.open(task("x", due_at=500, remind_before=100))),
        ("remind_before[1]", lambda: t.open(task("x", due_at=500, remind_before=[100, -1]))),
        ("remind_before[0]", lambda: t.open(task("x", due_at=500, remind_before=["100"]))),
        ("escalation must be a list", lambda: t.open(task("x", due_at=500, escalation=lh.EscalationStep(0, expire)))),
        ("escalation[0] must be a EscalationStep", lambda: t.open(task("x", due_at=500, escalation=[0]))),
        ("escalation[0].after_due_ms", lambda: t.open(task("x", due_at=500, escalation=[lh.EscalationStep(2**64, expire)]))),
        ("escalation[0].action", lambda: t.open(task("x", due_at=500, escalation=[lh.EscalationStep(0, {"expire": None})]))),
        (
            "escalation[0].action.roles",
            lambda: t.open(task("x", due_at=500, escalation=[lh.EscalationStep(0, lh.StepEscalate(("leads",)[0]))])),
        ),
        ("changes.remind_before[0]", lambda: t.update("r", None, lh.TaskChanges(remind_before=[0.5]))),
        ("changes.escalation must be a list", lambda: t.update("r", None, lh.TaskChanges(escalation="none"))),
        (
            "changes.escalation[0].after_due_ms",
            lambda: t.update("r", None, lh.TaskChanges(escalation=[lh.EscalationStep(-5, expire)])),
        ),
    ]
    for field, f in by_type:
        with pytest.raises(lh.InvalidArgument) as e:
            f()
        assert field in e.value.detail, (field, e.value.detail)
    assert engine.instances_made == made, "a refused argument threw the instance away"
    # Values of the right types the rules refuse, naming the field.
    by_rules = [
        ("remind-before", lambda: t.open(task("x", due_at=500, remind_before=[501]))),
        ("escalation", lambda: t.open(task("x", escalation=[lh.EscalationStep(0, expire)]))),
        (
            "escalation",
            lambda: t.open(
                task("x", due_at=500, escalation=[lh.EscalationStep(0, expire), lh.EscalationStep(10, lh.StepEscalate(["x"]))])
            ),
        ),
        (
            "escalation",
            lambda: t.open(
                task(
                    "x",
                    due_at=500,
                    escalation=[lh.EscalationStep(10, lh.StepEscalate(["x"])), lh.EscalationStep(10, lh.StepEscalate(["y"]))],
                )
            ),
        ),
        ("remind-before", lambda: t.update("r", None, lh.TaskChanges(remind_before=[0]))),
    ]
    for field, f in by_rules:
        with pytest.raises(lh.StoreError) as e:
            f()
        assert not isinstance(e.value, lh.InvalidArgument)
        assert e.value.case == "invalid" and field in e.value.detail, (field, e.value.detail)
    assert store.dump("acme") == before
