"""Search, counts and saved views through the package: typed pages walked
by ``next`` to the end, a reviewer's view, counts that say how they were
answered, and views kept under compare-and-set across reopening the sqlite
file. The rules themselves are pinned by tests/scenarios/search.json."""

import pytest

import leasehold as lh


def tenant(store=None, clock=lambda: 1):
    """Ten tasks, two kinds, due 10 000 down to 1 000 in creation order; t3 and t6 held by alice."""
    engine = lh.open(store or lh.MemoryStore(), clock=clock)
    t = engine.tenant("acme")
    for i in range(10):
        t.open(
            lh.Task(
                id=f"t{i}",
                run=f"r{i % 3}",
                kind="review" if i % 2 else "approve",
                candidate_roles=["reviewer"] if i % 2 else ["approver"],
                created_at=100 + i,
                due_at=10_000 - i * 1000,
                priority=lh.Priority.URGENT if i == 7 else lh.Priority.NORMAL,
            )
        )
    t.claim("t3", "alice", ["reviewer"])
    t.claim("t6", "alice", ["approver"])
    return engine, t


def test_a_search_walks_by_next_to_the_end_in_its_order_and_a_cursor_of_another_search_is_refused_by_name():
    engine, t = tenant()
    by_due = lh.TaskSort(lh.SortKey.DUE_AT)
    seen = []
    page = t.search(lh.SearchQuery(4, sort=by_due))
    while True:
        assert (page.index, page.budget_spent) == ("by-due", False)
        seen += [x.id for x in page.tasks]
        if page.next is None:
            break
        page = t.search(lh.SearchQuery(4, sort=by_due, after=page.next))
    assert seen == ["t9", "t8", "t7", "t6", "t5", "t4", "t3", "t2", "t1", "t0"]
    first = t.search(lh.SearchQuery(2))
    assert [(x.id, x.priority, x.due_at) for x in first.tasks] == [("t7", "urgent", 3000), ("t0", "normal", 10_000)]
    with pytest.raises(lh.StoreError) as e:
        t.search(lh.SearchQuery(2, sort=lh.TaskSort(descending=True), after=first.next))
    assert e.value.case == "invalid" and e.value.detail.startswith("after ")
    engine.close()


def test_filters_and_a_reviewer_viewer_narrow_a_search_and_counts_say_whether_counters_answered():
    engine, t = tenant()

    def ids(filter=None, viewer=None):
        q = lh.SearchQuery(20, filter or lh.TaskFilter(), lh.TaskSort(lh.SortKey.CREATED_AT), viewer=viewer)
        return [x.id for x in t.search(q).tasks]

    assert ids(lh.TaskFilter(assignee=lh.AssigneeActor("alice"))) == ["t3", "t6"]
    assert ids(lh.TaskFilter(kinds=["review"], assignee=lh.AssigneeNobody())) == ["t1", "t5", "t7", "t9"]
    assert ids(lh.TaskFilter(run="r1", due_before=9000)) == ["t4", "t7"]
    # A reviewer sees what it holds and what it may take, nothing else.
    assert ids(viewer=lh.Viewer("alice", ["reviewer"])) == ["t1", "t3", "t5", "t6", "t7", "t9"]
    assert t.count(lh.TaskFilter(states=[lh.TaskState.CLAIMED])) == lh.CountAnswer(2, True, None, "counters")
    assert t.count() == lh.CountAnswer(10, True, None, "counters")
    assert t.count(lh.TaskFilter(run="r0")) == lh.CountAnswer(4, True, None, "by-run")
    assert t.count(viewer=lh.Viewer("bob", ["approver"])).count == 4
    assert t.build_search_index(100) == lh.IndexProgress(built=True, indexed=0)
    engine.close()


def test_saved_views_are_kept_under_compare_and_set_listed_by_name_and_survive_reopening_the_sqlite_file(tmp_path):
    path = str(tmp_path / "views.db")
    now = [5000]
    engine, t = tenant(lh.SqliteStore(path), clock=lambda: now[0])
    mine = lh.SavedView(
        "mine", lh.TaskFilter(assignee=lh.AssigneeActor("alice"), due_after=1), lh.TaskSort(lh.SortKey.DUE_AT), by="alice"
    )
    made = t.put_view(mine)
    assert made == lh.SavedView(
        name="mine",
        filter=lh.TaskFilter(assignee=lh.AssigneeActor("alice"), due_after=1),
        sort=lh.TaskSort(lh.SortKey.DUE_AT, False),
        revision=1,
        by="alice",
        at=5000,
    )
    assert made.sort.key is lh.SortKey.DUE_AT
    with pytest.raises(lh.StoreError) as e:
        t.put_view(lh.SavedView("mine"))
    assert e.value.case == "invalid" and e.value.detail.startswith("name")
    now[0] = 6000
    changed = t.put_view(lh.SavedView("mine", mine.filter, lh.TaskSort(lh.SortKey.CREATED_AT, True), by="bob"), 1)
    assert (changed.revision, changed.at, changed.by) == (2, 6000, "bob")
    with pytest.raises(lh.StoreError) as e:
        t.put_view(mine, 1)
    assert e.value.case == "stale" and e.value.current == 2
    with pytest.raises(lh.StoreError) as e:
        t.put_view(lh.SavedView("none"), 1)
    assert e.value.case == "not-found"
    t.put_view(lh.SavedView("all"))
    assert [v.name for v in t.list_views(10)] == ["all", "mine"]
    assert [v.name for v in t.list_views(10, "all")] == ["mine"]
    # A view's filter and sort search as they were kept.
    view = t.get_view("mine")
    assert [x.id for x in t.search(lh.SearchQuery(10, view.filter, view.sort)).tasks] == ["t6", "t3"]
    engine.close()

    engine = lh.open(lh.SqliteStore(path))
    t = engine.tenant("acme")
    assert t.get_view("mine") == view
    with pytest.raises(lh.StoreError) as e:
        t.delete_view("mine", 1)
    assert e.value.case == "stale" and e.value.current == 2
    assert t.delete_view("mine", 2) is True
    assert t.delete_view("mine") is False
    assert t.get_view("mine") is None
    engine.close()
