"""A task's whole life through the Python host's own API, beyond what the
scenarios pin down: the guarded handle and its stale refusal, decisions and
their records, update's changes (``UNCHANGED`` against ``None``), the new
fields of tasks and history entries as dataclasses, and the component's
package version checked when it is loaded."""

import json

import pytest

import leasehold as lh
from leasehold import engine as lh_engine


def task(id, **extra):
    return lh.Task(id=id, run="r1", kind="k", created_at=1, **extra)


@pytest.fixture
def acme():
    store = lh.MemoryStore()
    return store, lh.open(store, clock=lambda: 42).tenant("acme")


def test_a_guarded_handle_refuses_a_stale_revision_with_the_current_one_and_records_its_job(acme):
    store, t = acme
    assert t.open(task("t1")).revision == 1
    before = store.dump("acme")
    with pytest.raises(lh.ClaimRefusal) as e:
        t.guarded(lh.Guard(revision=5)).claim("t1", "ann", [])
    assert (e.value.case, e.value.detail, e.value.current) == ("stale", 1, 1)
    assert "revision is now 1" in str(e.value)
    assert not e.value.retryable
    assert store.dump("acme") == before
    assert t.guarded(lh.Guard(revision=1, job="bulk-7")).claim("t1", "ann", []).revision == 2
    last = t.history("t1")[-1]
    assert (last.job, last.revision) == ("bulk-7", 2)
    # The plain handle stays unguarded: a guard is for one call.
    assert t.note("t1", "ann", "looking").revision == 3
    with pytest.raises(lh.InvalidArgument):
        t.guarded(lh.Guard(revision=-1))
    with pytest.raises(lh.InvalidArgument):
        t.guarded({"revision": 1})


def test_decide_keeps_the_decision_with_who_and_when_and_refuses_a_bad_one_naming_the_field(acme):
    _, t = acme
    schema = {"type": "object", "properties": {"amount": {"type": "integer", "maximum": 1000}}}
    t.open(
        task(
            "pay",
            outcomes=[
                lh.OutcomeRule("approved", output_schema=json.dumps(schema)),
                lh.OutcomeRule("rejected", needs_reason=True),
            ],
        )
    )
    got = t.get("pay")
    assert [(o.name, o.needs_reason) for o in got.outcomes] == [("approved", False), ("rejected", True)]
    assert got.decision is None
    with pytest.raises(lh.StoreError) as e:
        t.decide("pay", "completed", None, lh.Decision("approved", output='{"amount": 1500}'))
    assert e.value.case == "invalid"
    assert e.value.detail.startswith("decision.output: /amount: maximum")
    with pytest.raises(lh.StoreError, match="reason"):
        t.decide("pay", "completed", None, lh.Decision("rejected"))
    with pytest.raises(lh.InvalidArgument):
        t.decide("pay", "completed", None, {"outcome": "approved"})
    assert t.decide("pay", lh.Settlement.COMPLETED, None, lh.Decision("approved", "fine", '{"amount": 900}'))
    record = t.get("pay").decision
    assert record == lh.DecisionRecord("approved", "fine", '{"amount": 900}', None, 42)
    assert t.history("pay")[-1].decision == record
    assert t.settle("pay", "withdrawn") is False


def test_update_leaves_unchanged_fields_none_clears_the_due_time_and_records_each_change(acme):
    store, t = acme
    t.open(task("u1", due_at=500))
    before = store.dump("acme")
    with pytest.raises(lh.StoreError) as e:
        t.update("u1", "boss", lh.TaskChanges())
    assert e.value.case == "invalid"
    with pytest.raises(lh.InvalidArgument, match="changes.priority"):
        t.update("u1", "boss", lh.TaskChanges(priority="highest"))
    with pytest.raises(lh.InvalidArgument, match="changes.due_at"):
        t.update("u1", "boss", lh.TaskChanges(due_at="soon"))
    assert store.dump("acme") == before
    assert t.update("u1", "boss", lh.TaskChanges(priority=lh.Priority.HIGH)).due_at == 500
    changed = t.update("u1", "boss", lh.TaskChanges(due_at=None))
    assert (changed.due_at, changed.priority, changed.revision) == (None, lh.Priority.HIGH, 3)
    last = t.history("u1")[-1]
    assert last.actor == "boss"
    assert last.changes == [lh.FieldChange("due-at", "500", "null")]


def test_held_assign_delegate_and_unassign_answer_typed_tasks_and_the_feed_names_run_and_kind(acme):
    _, t = acme
    t.open(task("a", candidate_roles=["clerk"]))
    assert t.assign("a", "ann", ["lead"], lh.Lease(0, 100), True, "boss").lease_until == 100
    with pytest.raises(lh.InvalidArgument):
        t.assign("a", "bob", [], None, "yes")
    assert [x.id for x in t.held("ann", 10).tasks] == ["a"]
    with pytest.raises(lh.ClaimRefusal) as e:
        t.delegate("a", "bob", "cy", ["clerk"])
    assert (e.value.case, e.value.detail) == ("not-held", "bob")
    assert t.delegate("a", "ann", "cy", ["clerk"]).assignee == "cy"
    assert t.unassign("a", "boss").state == lh.TaskState.OPEN
    assert t.held("cy", 10) == lh.Page([], None)
    first = t.feed(None, 100).entries[0].change
    assert (first.run, first.kind) == ("r1", "k")


def test_kinds_are_defined_under_compare_and_set_and_a_stale_one_names_the_current_revision(acme):
    _, t = acme
    k = t.define_kind(lh.KindDefinition("invoice", [lh.OutcomeRule("approved", output_schema='{"type": "object"}')]), 0)
    assert k == lh.KindDefinition("invoice", [lh.OutcomeRule("approved", False, '{"type": "object"}')], 1)
    with pytest.raises(lh.StoreError) as e:
        t.define_kind(lh.KindDefinition("invoice"), 0)
    assert (e.value.case, e.value.current) == ("stale", 1)
    assert t.get_kind("invoice") == k
    assert [d.kind for d in t.list_kinds(10)] == ["invoice"]
    assert t.remove_kind("invoice") is True
    assert t.get_kind("invoice") is None


def test_a_component_speaking_another_version_of_the_package_is_refused_naming_both(monkeypatch):
    assert lh.VERSION == "0.3.0"
    # This host, as one speaking 0.4.0 would be, meets the packaged 0.3.0 component.
    monkeypatch.setattr(lh_engine, "VERSION", "0.4.0")
    monkeypatch.setattr(lh_engine, "_COMPILED", {})
    with pytest.raises(lh.LeaseholdError, match=r"this component speaks leasehold:engine@0\.3\.0; this host speaks 0\.4\.0"):
        lh.open(lh.MemoryStore())
