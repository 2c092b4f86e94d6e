"""What the Python host itself promises, beyond the scenarios: limits by
name, a fresh instance after a trap, read calls that cannot write, tenants
kept apart by the store, commits that survive reopening the file, and the
untagged values of wasmtime-py mapped to typed ones."""

import re

import pytest

import leasehold as lh
from leasehold.engine import _Call, _Kv
from wasmtime import component as cm


def task(id, **extra):
    return lh.Task(id=id, run="r1", kind="k", created_at=1, **extra)


def test_a_limit_hit_fails_by_name_commits_nothing_and_the_next_call_gets_a_fresh_instance():
    store = lh.MemoryStore()
    engine = lh.open(store, limits=lh.Limits(key_bytes=48))
    acme = engine.tenant("acme")
    acme.open(task("short"))
    assert engine.instances_made == 1
    before = store.dump("acme")
    with pytest.raises(lh.SandboxError) as e:
        acme.open(task("an-id-long-enough-to-take-its-index-keys-past-the-cap"))
    assert e.value.limit == "key-size"
    assert store.dump("acme") == before
    assert acme.open_count() == 1
    assert engine.instances_made == 2, "the trapped instance was reused"
    assert acme.claim("short", "bob", []).assignee == "bob"
    assert engine.instances_made == 2, "a healthy instance was replaced"


def test_an_error_answer_discards_the_instance_and_commits_nothing():
    store = lh.MemoryStore()
    engine = lh.open(store)
    acme = engine.tenant("acme")
    acme.open(task("t1", excluded_actors=["alice"]))
    before = store.dump("acme")
    with pytest.raises(lh.ClaimRefusal) as refused:
        acme.claim("t1", "alice", [])
    assert (refused.value.case, refused.value.detail) == ("excluded", "alice")
    with pytest.raises(lh.ClaimRefusal) as missing:
        acme.settle("nope", lh.Settlement.COMPLETED)
    assert missing.value.case == "not-found"
    assert engine.instances_made == 2, "an instance went on after an error answer"
    with pytest.raises(lh.StoreError) as invalid:
        acme.claim("t1", "", [])
    assert invalid.value.case == "invalid"
    assert store.dump("acme") == before
    assert engine.instances_made == 3, "an instance went on after an error answer"
    # An ok answer keeps its instance for the next call.
    assert acme.open_count() == 1
    assert acme.open_count() == 1
    assert engine.instances_made == 4, "an instance was not kept after ok answers"


@pytest.mark.parametrize(
    "limits, limit, call",
    [
        (
            lh.Limits(value_bytes=64),
            "value-size",
            lambda t: t.open(task("t1", justification='{"pad":"' + "x" * 200 + '"}')),
        ),
        (lh.Limits(call_write_bytes=64), "write-bytes", lambda t: t.open(task("t1"))),
        (lh.Limits(scan_entries=2), "scan-length", lambda t: t.queue(roles=[], limit=10)),
        (lh.Limits(call_read_bytes=8), "read-bytes", lambda t: (t.open(task("t1")), t.get("t1"))),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_values_scans_and_writes_over_their_caps_are_refused_by_name(limits, limit, call):
    tenant = lh.open(lh.MemoryStore(), limits=limits).tenant("acme")
    with pytest.raises(lh.SandboxError) as e:
        call(tenant)
    assert e.value.limit == limit


def test_a_memory_cap_below_what_the_guest_needs_fails_the_call_not_the_host():
    tenant = lh.open(lh.MemoryStore(), limits=lh.Limits(memory_bytes=64 << 10)).tenant("acme")
    with pytest.raises(lh.SandboxError):
        tenant.open_count()


def test_a_read_only_call_that_stages_writes_traps_and_so_does_a_second_batch():
    kv = _Kv()
    put = cm.Record()
    put.key, put.value = b"k", b"v"
    kv.call = _Call(lh.MemoryStore().begin("acme", "read"), "read", lh.Limits(), False)
    kv.stage(None, [])
    kv.call = _Call(lh.MemoryStore().begin("acme", "read"), "read", lh.Limits(), False)
    with pytest.raises(Exception):
        kv.stage(None, [put])
    assert kv.call.violation.kind == "write-in-read-call"
    kv.call = _Call(lh.MemoryStore().begin("acme", "write"), "write", lh.Limits(), False)
    kv.stage(None, [put, b"gone"])
    assert kv.call.staged == [(b"k", b"v"), (b"gone", None)], "put is a bare Record, delete bare bytes"
    with pytest.raises(Exception):
        kv.stage(None, [put])
    assert kv.call.violation.kind == "second-batch"


def test_the_sqlite_store_keeps_tenants_apart_however_the_guest_spells_its_keys(tmp_path):
    store = lh.SqliteStore(str(tmp_path / "tenants.db"))
    store.put_raw("a", b"task\0t1", b"A")
    store.put_raw("ab", b"task\0t1", b"AB")
    txn = store.begin("a", "read")
    entries, over = txn.scan(b"", None, 10, False, 1 << 20)
    txn.commit([])
    assert (entries, over) == ([(b"task\0t1", b"A")], False)
    engine = lh.open(store)
    engine.tenant("a").open(task("t1"))
    assert engine.tenant("ab").get("t1") is None
    engine.close()


def test_a_committed_call_survives_reopening_the_sqlite_file_and_a_failed_one_left_nothing(tmp_path):
    path = str(tmp_path / "durable.db")
    engine = lh.open(lh.SqliteStore(path))
    engine.tenant("acme").open(task("t1", due_at=253402300799999))
    with pytest.raises(lh.StoreError):
        engine.tenant("acme").open(task("t2", state=lh.TaskState.CLAIMED, assignee="bob"))
    engine.close()
    engine = lh.open(lh.SqliteStore(path))
    acme = engine.tenant("acme")
    assert acme.get("t1").due_at == 253402300799999
    assert acme.get("t2") is None
    assert acme.open_count() == 1
    assert acme.check() == []
    engine.close()


def test_tenant_names_are_checked_with_a_clear_error():
    engine = lh.open(lh.MemoryStore())
    for bad in ["", "a b", "x" * 65, "ünï"]:
        with pytest.raises(lh.TenantError):
            engine.tenant(bad)
    with pytest.raises(TypeError):
        lh.open(object())


def test_answers_are_typed_values_with_none_where_absent():
    acme = lh.open(lh.MemoryStore()).tenant("acme")
    assert acme.next_due() is None
    assert acme.arm(lh.Timer(run="r", effect="e", fire_at=10)) is lh.ArmOutcome.ARMED
    (t,) = acme.claim_due(10, 1, 604800000)
    assert t.phase is lh.Phase.FORWARD and t.case is None
    assert acme.next_due() == 10 + 604800000


# ("meta", "layout") as the guest spells it: each string tagged 0x02 and ended by 0x00.
LAYOUT_KEY = bytes.fromhex("026d65746100026c61796f757400")


def test_reschedule_answers_what_it_did_as_a_value_writes_nothing_when_it_refuses_and_the_feed_says_rescheduled():
    store = lh.MemoryStore()
    # Whether a lease has ended is judged at the call's time, the engine's clock.
    acme = lh.open(store, clock=lambda: 60).tenant("acme")
    acme.arm(lh.Timer(run="r", effect="e", fire_at=10, step=2))
    moved = acme.reschedule("r", "e", 50)
    assert moved == lh.TimerMoved(lh.TimerInfo(lh.Timer(run="r", effect="e", fire_at=50, step=2), lease_until=None))
    acme.claim_due(50, 1, 1000)
    before = store.dump("acme")
    assert acme.reschedule("r", "e", 90) == lh.TimerHeld(lease_until=1050)
    assert acme.reschedule("r", "nothing", 90) == lh.TimerNotFound()
    assert store.dump("acme") == before
    taken = acme.reschedule("r", "e", 90, take_back=True)
    assert isinstance(taken, lh.TimerMoved) and taken.info.timer.fire_at == 90
    assert acme.timers_of("r", 10) == lh.TimerPage(timers=[taken.info], next=None)
    assert acme.due_between(0, 100, 10) == lh.TimerPage(timers=[taken.info], next=None)
    acme.seal("r", [])
    assert acme.reschedule("r", "e", 95) == lh.TimerRunSealed()
    whats = [e.change.what for e in acme.feed(None, 100).entries]
    assert whats == ["armed", "rescheduled", "claimed", "rescheduled", "retired"]
    assert whats[1] is lh.TimerEvent.RESCHEDULED


def test_a_schedule_comes_back_as_given_every_variant_case_and_policy_and_its_occurrences_are_timers_of_its_run():
    acme = lh.open(lh.MemoryStore()).tenant("acme")
    t = 1_709_942_400_000  # 2024-03-09T00:00Z: 19:00 the evening before in New York
    pulse_spec = lh.ScheduleSpec(
        id="pulse",
        run="r",
        recurrence=lh.Interval(every_ms=60_000, anchor=t),
        zone="UTC",
        case="c1",
        step=3,
        phase=lh.Phase.COMPENSATING,
        start=t,
        end=t + 3_600_000,
        gap=lh.GapPolicy.SKIP,
        repeat=lh.RepeatPolicy.BOTH,
        overlap=lh.OverlapPolicy.BUFFER_ALL,
        catch_up=lh.CatchUpNone(),
        jitter_ms=500,
    )
    pulse = acme.add_schedule(pulse_spec, t)
    assert pulse == lh.Schedule(spec=pulse_spec, paused=None, next_at=t, last_at=None, waiting=[], revision=1)
    assert pulse.spec.gap is lh.GapPolicy.SKIP and isinstance(pulse.spec.recurrence, lh.Interval)
    nightly = acme.add_schedule(
        lh.ScheduleSpec(
            id="nightly",
            run="r",
            recurrence=lh.Cron("30 2 * * *"),
            zone="america/new_york",
            catch_up=lh.CatchUpLatestWithin(600_000),
        ),
        t,
    )
    # Stored under the zone's canonical name, the defaults filled in.
    assert nightly.spec == lh.ScheduleSpec(
        id="nightly",
        run="r",
        recurrence=lh.Cron("30 2 * * *"),
        zone="America/New_York",
        catch_up=lh.CatchUpLatestWithin(600_000),
    )
    two_thirty = t + 7 * 3_600_000 + 1_800_000  # 02:30 in New York, 07:30Z
    assert nightly.next_at == two_thirty
    assert acme.get_schedule("nightly") == nightly
    assert acme.next_occurrences("pulse", t, 3) == [t + 60_000, t + 120_000, t + 180_000]

    # Each armed occurrence is an ordinary timer of the run, carrying case, step and phase.
    first, second = (i.timer for i in acme.timers_of("r", 10).timers)
    assert first == lh.Timer(run="r", effect=f"schedule/nightly/{two_thirty}", fire_at=two_thirty)
    assert (second.effect, second.case, second.step, second.phase) == (f"schedule/pulse/{t}", "c1", 3, "compensating")
    assert t <= second.fire_at <= t + 500, f"jittered within 500 ms: {second.fire_at}"
    assert acme.trigger_schedule("nightly", t + 5) == lh.Timer(run="r", effect=f"schedule/nightly/{t + 5}", fire_at=t + 5)

    paused = acme.pause_schedule("pulse", "maintenance")
    assert (paused.paused, paused.next_at, paused.revision) == ("maintenance", None, 2)
    resumed = acme.resume_schedule("pulse", t + 90_000)
    assert (resumed.paused, resumed.next_at) == (None, t + 120_000)
    page = acme.list_schedules(1)
    assert ([s.spec.id for s in page.schedules], page.next) == (["nightly"], "nightly")
    assert acme.list_schedules(1, page.next).schedules == [acme.get_schedule("pulse")]
    assert re.fullmatch(r"20\d\d[a-z]", acme.tz_version())
    assert acme.remove_schedule("pulse") is True
    assert acme.remove_schedule("pulse") is False
    assert acme.get_schedule("pulse") is None
    effects = [i.timer.effect for i in acme.timers_of("r", 10).timers]
    assert effects == [f"schedule/nightly/{t + 5}", f"schedule/nightly/{two_thirty}"]


def test_a_store_says_whether_other_processes_write_its_keys_and_a_fresh_keyspace_is_laid_out_by_it():
    class Unsaid:
        def begin(self, tenant, mode):
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="concurrent_writers"):
        lh.open(Unsaid())

    class SharedStore(lh.MemoryStore):
        concurrent_writers = True

    for store, mark in [(lh.MemoryStore(), b"10/1"), (SharedStore(), b"10/64")]:
        t = lh.open(store).tenant("acme")
        t.open(task("a"))
        t.open(task("b"))
        assert t.open_count() == 2
        assert dict(store.dump("acme"))[LAYOUT_KEY] == mark
        assert t.check() == []


# The first element of each key of the change record, as the guest spells it.
RECORD = [b"\x02" + n + b"\x00" for n in (b"task-log", b"history", b"feed", b"feed-head")]


def test_a_task_from_before_history_answers_entry_0_and_a_newer_layout_is_refused_by_name():
    # What an earlier build leaves in a layout-5 keyspace: the rows, no record, its own mark.
    first = lh.MemoryStore()
    first.put_raw("acme", LAYOUT_KEY, b"5/64")
    lh.open(first).tenant("acme").open(task("old", candidate_roles=["r"]))
    store = lh.MemoryStore()
    for k, v in first.dump("acme"):
        if not any(bytes(k).startswith(p) for p in RECORD):
            store.put_raw("acme", k, v)
    store.put_raw("acme", LAYOUT_KEY, b"5/64")
    acme = lh.open(store).tenant("acme")
    [start] = acme.history("old")
    assert (start.seq, start.verb, start.before, start.after, start.at) == (0, "before-history", None, "open", 1)
    assert acme.check() == []
    acme.claim("old", "ann", ["r"])
    assert [(e.seq, e.verb) for e in acme.history("old")] == [(0, "before-history"), (1, "claim")]
    assert [e.seq for e in acme.history("old", 0)] == [1]
    assert acme.check() == []
    assert dict(store.dump("acme"))[LAYOUT_KEY] == b"10/64/from-5"
    # A newer build's mark: every call is refused as newer-layout, naming both layouts.
    store.put_raw("acme", LAYOUT_KEY, b"11/64")
    before = store.dump("acme")
    for call in (lambda: acme.history("old"), lambda: acme.open(task("new")), lambda: acme.release("old", "ann")):
        with pytest.raises(lh.StoreError) as e:
            call()
        assert e.value.case == "newer-layout"
        assert "layout 11 " in e.value.detail and "writes layout 10" in e.value.detail
    assert store.dump("acme") == before


def test_a_justification_nested_10000_deep_is_invalid_and_stores_nothing():
    store = lh.MemoryStore()
    acme = lh.open(store).tenant("acme")
    deep = "[" * 10_000 + "1" + "]" * 10_000
    with pytest.raises(lh.StoreError) as e:
        acme.open(task("deep", justification=deep))
    assert e.value.case == "invalid"
    assert e.value.detail.startswith("justification nests 10000 levels")
    assert acme.get("deep") is None
    assert store.dump("acme") == lh.MemoryStore().dump("acme")
    ok = "[" * 64 + "1" + "]" * 64
    assert acme.open(task("ok", justification=ok)).justification == ok


def test_a_subscription_goes_through_every_verb_of_its_interface_and_survives_reopening_the_sqlite_file(tmp_path):
    path = str(tmp_path / "subscriptions.db")
    engine = lh.open(lh.SqliteStore(path))
    acme = engine.tenant("acme")
    key = bytes([7]) * 32
    added = acme.add_subscription("hooks", "https://hooks.example.com/in", lh.SubFilter(tasks=True, kinds=["k"]), key, None, 1000)
    assert added == lh.Subscription(
        id="hooks",
        url="https://hooks.example.com/in",
        filter=lh.SubFilter(tasks=True, timers=False, verbs=[], kinds=["k"], runs=[], settling_only=False),
        state=lh.SubState.ACTIVE,
        note=None,
        position=None,
        keys=[lh.SigningKey(key=key, until=None)],
        created_at=1000,
        revision=1,
        attempts=[],
        lease_holder=None,
        lease_until=None,
    )
    assert type(added.keys[0].key) is bytes and added.state is lh.SubState.ACTIVE
    # A bytearray is taken as the bytes it holds.
    acme.add_subscription("other", "http://10.0.0.7/hook", lh.SubFilter(timers=True), bytearray(24), "f", 2000)
    acme.open(task("t1"))
    head = acme.feed(None, 10).head

    # A delivery worker: lease, advance (the revision stays), record, release.
    assert acme.lease_subscription("hooks", "w1", 5000, 60_000) is True
    assert acme.lease_subscription("hooks", "w2", 5001, 60_000) is False
    moved = acme.advance_subscription("hooks", 1, head)
    assert (moved.position, moved.revision, moved.lease_holder, moved.lease_until) == (head, 1, "w1", 65_000)
    attempt = lh.Attempt(message_id="msg_1", at=5002, attempt=1, outcome="200", latency_ms=15)
    assert acme.record_subscription_attempts("hooks", [attempt]) is None
    assert acme.release_subscription("hooks", "w1") is None
    delivered = acme.get_subscription("hooks")
    assert delivered.attempts == [attempt]
    assert (delivered.lease_holder, delivered.lease_until) == (None, None)

    # An operator: change, pause, rotate; a worker at the old revision is told stale.
    changed = acme.change_subscription("hooks", "https://hooks.example.com/v2", lh.SubFilter(tasks=True, settling_only=True), 1)
    assert (changed.url, changed.filter.settling_only, changed.filter.kinds, changed.revision) == (
        "https://hooks.example.com/v2",
        True,
        [],
        2,
    )
    with pytest.raises(lh.StoreError) as e:
        acme.advance_subscription("hooks", 1, head)
    assert (e.value.case, e.value.current) == ("stale", 2)
    with pytest.raises(lh.StoreError) as e:
        acme.change_subscription("hooks", expected=1)
    assert (e.value.case, e.value.current) == ("stale", 2)
    paused = acme.set_subscription_state("hooks", lh.SubState.PAUSED, "by ann", 2)
    assert (paused.state, paused.note, paused.revision) == (lh.SubState.PAUSED, "by ann", 3)
    new_key = bytes([9]) * 40
    rotated = acme.rotate_subscription_key("hooks", new_key, 9000, 6000)
    assert rotated.keys == [lh.SigningKey(key, 9000), lh.SigningKey(new_key, None)]
    replay = acme.rewind_subscription("hooks", "f")
    assert (replay.state, replay.note, replay.position, replay.revision) == (lh.SubState.ACTIVE, None, None, 5)
    assert acme.rewind_subscription("hooks", head).position == head

    page = acme.list_subscriptions(1)
    assert ([s.id for s in page.subscriptions], page.next) == (["hooks"], "hooks")
    assert acme.list_subscriptions(1, page.next) == lh.SubscriptionPage([acme.get_subscription("other")], None)
    assert acme.check() == []
    kept = acme.get_subscription("hooks")
    engine.close()

    engine = lh.open(lh.SqliteStore(path))
    acme = engine.tenant("acme")
    assert acme.get_subscription("hooks") == kept
    assert acme.remove_subscription("hooks") is True
    assert acme.remove_subscription("hooks") is False
    assert acme.get_subscription("hooks") is None
    with pytest.raises(lh.StoreError) as e:
        acme.advance_subscription("hooks", 6, head)
    assert e.value.case == "not-found"
    assert acme.lease_subscription("hooks", "w1", 7000, 1000) is False
    engine.close()


def test_search_narrows_by_every_filter_field_pages_by_next_counts_agree_and_views_keep_their_revision():
    acme = lh.open(lh.MemoryStore()).tenant("acme")

    def item(id, **extra):
        return lh.Task(id=id, run="r1", **{"kind": "k", "created_at": 1, **extra})

    acme.open(item("a", kind="k1", candidate_roles=["x"], priority=lh.Priority.HIGH, case="c", due_at=50))
    acme.open(item("b", kind="k2", created_at=2, due_at=10))
    acme.open(item("c", kind="k2", created_at=3, priority=lh.Priority.LOW))
    acme.claim("a", "ann", ["x"])

    def ids(filter=None, sort=None):
        q = lh.SearchQuery(limit=10, filter=filter or lh.TaskFilter(), sort=sort or lh.TaskSort())
        return [t.id for t in acme.search(q).tasks]

    assert ids() == ["a", "b", "c"]
    assert ids(lh.TaskFilter(states=[lh.TaskState.OPEN], kinds=["k2"])) == ["b", "c"]
    assert ids(lh.TaskFilter(assignee=lh.AssigneeFilter())) == ["b", "c"]
    assert ids(lh.TaskFilter(assignee=lh.AssigneeFilter("ann"), role="x", case="c")) == ["a"]
    assert ids(lh.TaskFilter(priority_at_least=lh.Priority.NORMAL, due_before=60)) == ["a", "b"]
    assert ids(sort=lh.TaskSort(lh.SortKey.DUE_AT, descending=True)) == ["c", "a", "b"]
    first = acme.search(lh.SearchQuery(limit=2, sort=lh.TaskSort(lh.SortKey.CREATED_AT)))
    assert [t.id for t in first.tasks] == ["a", "b"]
    rest = acme.search(lh.SearchQuery(limit=2, sort=lh.TaskSort(lh.SortKey.CREATED_AT), after=first.next))
    assert ([t.id for t in rest.tasks], rest.next) == (["c"], None)
    assert acme.count(lh.TaskFilter(states=[lh.TaskState.OPEN])) == lh.CountAnswer(2, True, None, "counters")
    assert acme.count(lh.TaskFilter(kinds=["k2"])).count == 2
    assert acme.count(lh.TaskFilter(), lh.Viewer("bob")).count == 2
    assert acme.build_search_index(100) == lh.IndexProgress(built=True, indexed=0)

    made = acme.put_view(
        lh.SavedView("mine", lh.TaskFilter(assignee=lh.AssigneeFilter(), due_after=5), lh.TaskSort(lh.SortKey.PRIORITY), by="ann")
    )
    assert (made.revision, made.by, made.filter.assignee, made.filter.due_after, made.sort.key) == (
        1,
        "ann",
        lh.AssigneeFilter(None),
        5,
        lh.SortKey.PRIORITY,
    )
    assert acme.put_view(lh.SavedView("mine"), 1).revision == 2
    with pytest.raises(lh.StoreError) as e:
        acme.put_view(lh.SavedView("mine"), 1)
    assert (e.value.case, e.value.current) == ("stale", 2)
    acme.put_view(lh.SavedView("all"))
    assert [v.name for v in acme.list_views(10)] == ["all", "mine"]
    assert acme.get_view("mine").revision == 2
    assert acme.get_view("nope") is None
    assert acme.delete_view("mine", 2) is True
    assert acme.delete_view("mine") is False
    with pytest.raises(lh.InvalidArgument, match="states must be a list"):
        acme.search(lh.SearchQuery(limit=1, filter=lh.TaskFilter(states="open")))
