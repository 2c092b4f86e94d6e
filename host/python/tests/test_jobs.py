"""Bulk jobs through the package, on both stores: a job started over a
filter and run to its end with progress, each task changed once with its
history naming the job; a job resumed on a reopened sqlite file after its
process stopped half-way; cancel, get, list and runnable; a job over no
task; bad input refused naming the field. The rules themselves are pinned
by tests/scenarios/jobs.json."""

import pytest

import leasehold as lh

STORES = {
    "memory": lambda path: lh.MemoryStore(),
    "sqlite": lambda path: lh.SqliteStore(path, durability="none"),
}


def fill(t, n):
    """``n`` open tasks ``t00``..., kind ``approve`` (even) or ``review`` (odd), created at 100 + i."""
    for i in range(n):
        t.open(lh.Task(id=f"t{i:02}", run="r", kind="review" if i % 2 else "approve", created_at=100 + i))


def by_job(t, id, job):
    """How many of a task's history entries name ``job``."""
    return sum(1 for e in t.history(id) if e.job == job)


@pytest.fixture(params=sorted(STORES))
def acme(request, tmp_path):
    engine = lh.open(STORES[request.param](tmp_path / "jobs.db"), clock=lambda: 1)
    yield engine.tenant("acme")
    engine.close()


def test_a_job_runs_to_its_end_with_progress_each_task_changed_once_and_its_history_naming_the_job(acme):
    t = acme
    fill(t, 10)
    started = t.start_job(
        "urgent", lh.TaskFilter(kinds=["approve"]), lh.TaskChanges(priority=lh.Priority.URGENT), "ops", 1000
    )
    assert started == lh.Job(
        id="urgent",
        filter=lh.TaskFilter(kinds=["approve"]),
        action=lh.TaskChanges(priority=lh.Priority.URGENT),
        by="ops",
        state=lh.JobState.COUNTING,
        total=0,
        done=0,
        skipped=0,
        failed=0,
        last_failures=[],
        last_skipped=[],
        created_at=1000,
    )
    assert t.runnable_jobs() == ["urgent"]
    seen = []
    ended = t.run_job("urgent", on_progress=lambda j: seen.append((j.state, j.done)))
    # One count, then one task a step.
    assert seen == [("running", 0), ("running", 1), ("running", 2), ("running", 3), ("running", 4), ("done", 5)]
    assert (ended.state, ended.total, ended.done, ended.skipped, ended.failed) == ("done", 5, 5, 0, 0)
    for i in range(10):
        assert t.get(f"t{i:02}").priority == ("normal" if i % 2 else "urgent")
        assert by_job(t, f"t{i:02}", "urgent") == (0 if i % 2 else 1)
    assert t.runnable_jobs() == []
    # A job with no work left answers as it stands.
    assert t.run_job("urgent") == ended


def test_cancel_get_list_and_runnable_a_job_over_no_task_and_bad_input_named(acme):
    t = acme
    fill(t, 6)
    t.claim("t01", "ann", [])
    t.claim("t03", "ann", [])
    assigned = t.run_job(t.start_job("to-bob", lh.TaskFilter(states=[lh.TaskState.OPEN]), lh.JobAssign("bob"), None, 1000).id)
    assert (assigned.done, assigned.action) == (4, lh.JobAssign(to="bob", roles=[], override_roles=False))

    def held_by_bob():
        return len(t.search(lh.SearchQuery(10, lh.TaskFilter(assignee=lh.AssigneeActor("bob")))).tasks)

    assert held_by_bob() == 4
    t.start_job("back", lh.TaskFilter(assignee=lh.AssigneeActor("bob")), lh.JobVerb.RELEASE, None, 1000)
    t.step_job("back")
    one = t.step_job("back")
    assert (one.state, one.total, one.done) == ("running", 4, 1)
    cancelled = t.cancel_job("back")
    assert (cancelled.state, cancelled.done) == ("cancelled", 1)
    assert t.run_job("back") == cancelled
    assert held_by_bob() == 3

    empty = t.start_job("none", lh.TaskFilter(kinds=["nothing"]), "withdraw", None, 1000)
    assert (empty.state, empty.total, empty.action) == ("counting", 0, lh.JobVerb.WITHDRAW)
    assert (t.step_job("none").state, t.get_job("none").total) == ("done", 0)

    t.start_job("later", None, lh.JobVerb.ESCALATE, None, 1000)
    assert t.runnable_jobs(10) == ["later"]
    assert [(j.id, j.state) for j in t.list_jobs()] == [
        ("back", "cancelled"),
        ("later", "counting"),
        ("none", "done"),
        ("to-bob", "done"),
    ]
    assert [j.id for j in t.list_jobs(2, "back")] == ["later", "none"]
    assert t.get_job("nope") is None

    refused = [
        (lambda: t.start_job("later", None, "release", None, 1000), 'id: a job "later" exists'),
        (lambda: t.start_job("x", None, lh.JobAssign(""), None, 1000), "action.assign.to"),
        (lambda: t.start_job("x", lh.TaskFilter(kinds=[""]), "release", None, 1000), "filter.kinds"),
        (lambda: t.start_job("x", None, "release", "", 1000), "by"),
        (lambda: t.list_jobs(0), "limit"),
    ]
    for call, field in refused:
        with pytest.raises(lh.StoreError) as e:
            call()
        assert e.value.case == "invalid" and e.value.detail.startswith(field), e.value.detail
    with pytest.raises(lh.StoreError) as e:
        t.step_job("nope")
    assert (e.value.case, e.value.detail) == ("not-found", "nope")
    with pytest.raises(lh.StoreError) as e:
        t.cancel_job("nope")
    assert e.value.case == "not-found"
    # Refused by this host before the guest runs, naming the argument.
    with pytest.raises(lh.InvalidArgument) as e:
        t.start_job("x", None, "unassign", None, 1000)
    assert e.value.detail.startswith("action ")
    assert t.get_job("x") is None


def test_a_job_its_process_left_half_way_is_finished_on_the_reopened_sqlite_file(tmp_path):
    path = tmp_path / "resume.db"
    engine = lh.open(lh.SqliteStore(path), clock=lambda: 1)
    t = engine.tenant("acme")
    fill(t, 8)
    t.start_job("wd", None, "withdraw", "ops", 1000)
    for _ in range(4):
        t.step_job("wd")
    assert (t.get_job("wd").done, t.get_job("wd").total) == (3, 8)
    engine.close()

    engine = lh.open(lh.SqliteStore(path), clock=lambda: 2)
    t = engine.tenant("acme")
    assert t.runnable_jobs() == ["wd"]
    ended = t.run_job("wd")
    assert (ended.state, ended.done, ended.skipped, ended.failed) == ("done", 8, 0, 0)
    for i in range(8):
        assert t.get(f"t{i:02}").state == "withdrawn"
        assert by_job(t, f"t{i:02}", "wd") == 1
    engine.close()
