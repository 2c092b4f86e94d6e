"""The record of changes through the Python host, on both stores: a task's
life in its history with the actor, the states and the times the engine's
clock gave, every change once in the feed, read on from any position, and a
trimmed position answered gone."""

import pytest

import leasehold as lh


def task(id, **extra):
    return lh.Task(id=id, run="r1", kind="k", created_at=1, **extra)


class Clock:
    def __init__(self, at):
        self.at = at

    def __call__(self):
        return self.at


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_tasks_life_is_listed_in_its_history_with_actor_states_and_times(kind, tmp_path):
    store = lh.MemoryStore() if kind == "memory" else lh.SqliteStore(str(tmp_path / "db"), durability="none")
    clock = Clock(1_000)
    engine = lh.open(store, clock=clock)
    t = engine.tenant("acme")
    lease = lambda now: lh.Lease(now, 60_000)  # noqa: E731
    t.open(task("pay-1", candidate_roles=["approver"], excluded_actors=["eve"]))
    clock.at = 2_000
    t.claim("pay-1", "alice", ["approver"])
    clock.at = 3_000
    t.release("pay-1", "alice")
    clock.at = 4_000
    t.claim("pay-1", "bob", ["approver"], lease(4_000))
    clock.at = 4_500
    with pytest.raises(lh.ClaimRefusal):
        t.claim("pay-1", "eve", ["approver"])
    clock.at = 5_000
    t.take_over("pay-1", "bob", "carol", ["approver"], lease(5_000))
    clock.at = 6_000
    t.renew("pay-1", "carol", 6_000, 60_000)
    clock.at = 7_000
    assert t.settle("pay-1", lh.Settlement.COMPLETED, "carol") is True
    h = t.history("pay-1")
    S = lh.TaskState
    assert [(e.seq, e.at, e.verb, e.actor, e.before, e.after, e.assignee, e.lease_until) for e in h] == [
        (1, 1_000, "open", None, None, S.OPEN, None, None),
        (2, 2_000, "claim", "alice", S.OPEN, S.CLAIMED, "alice", None),
        (3, 3_000, "release", "alice", S.CLAIMED, S.OPEN, None, None),
        (4, 4_000, "claim", "bob", S.OPEN, S.CLAIMED, "bob", 64_000),
        (5, 5_000, "take-over", "carol", S.CLAIMED, S.CLAIMED, "carol", 65_000),
        (6, 6_000, "renew", "carol", S.CLAIMED, S.CLAIMED, "carol", 66_000),
        (7, 7_000, "settle", "carol", S.CLAIMED, S.COMPLETED, "carol", None),
    ]
    assert h[0].candidate_roles == ["approver"] and h[0].excluded_actors == ["eve"]
    assert [e.seq for e in t.history("pay-1", after=5, limit=1)] == [6]
    # Each entry sits in the feed in order, in the one slot one writer uses.
    places = [t.entry_place("pay-1", n) for n in range(1, 8)]
    assert [(p.slot, p.seq) for p in places] == [(0, n) for n in range(1, 8)]
    assert t.entry_place("pay-1", 8) is None

    clock.at = 8_000
    t.arm(lh.Timer(run="r1", effect="wake", fire_at=10))
    page = t.feed(limit=100)
    assert isinstance(page, lh.FeedPage)
    assert len(page.entries) == 8 and page.next == page.head
    assert [e.change.entry.seq for e in page.entries[:7]] == [1, 2, 3, 4, 5, 6, 7]
    assert page.entries[7].change == lh.TimerChange(
        run="r1", effect="wake", at=8_000, verb="arm", what=lh.TimerEvent.ARMED, fire_at=10, lease_until=None
    )
    rest = t.feed(page.entries[3].position, 100)
    assert rest.entries == page.entries[4:]

    assert t.trim(keep=2) == lh.TrimOutcome(feed_removed=6, history_removed=6, more=False)
    assert t.feed(page.entries[1].position, 10) == lh.FeedGone(head=page.head)
    assert [e.seq for e in t.history("pay-1")] == [7]
    assert t.check() == []
    with pytest.raises(lh.StoreError) as refused:
        t.trim()
    assert refused.value.case == "invalid"
    with pytest.raises(lh.InvalidArgument):
        t.history("pay-1", after=-1)
    engine.close()


def test_the_clock_must_answer_integer_milliseconds():
    with pytest.raises(TypeError):
        lh.open(lh.MemoryStore(), clock=5)
    engine = lh.open(lh.MemoryStore(), clock=lambda: 1.5)
    with pytest.raises(lh.StorageFailure, match="clock"):
        engine.tenant("acme").open(task("a"))
    engine.close()
