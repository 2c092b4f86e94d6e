"""Runs one scenario of tests/scenarios/*.json through a tenant of the Python
host: the format is in tests/scenarios/README.md. The Rust and JavaScript
runners implement the same rules, so the three hosts are held to the same
answers."""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from pathlib import Path
from typing import Any

import leasehold as lh

SCENARIO_DIR = Path(__file__).resolve().parents[3] / "tests" / "scenarios"
DEFAULT_TENANT = "acme"
TASK_DEFAULTS = {
    "case": None,
    "justification": "{}",
    "candidate-roles": [],
    "assignee": None,
    "lease-until": None,
    "priority": "normal",
    "state": "open",
    "on-expiry": "deny",
    "escalate-to": [],
    "excluded-actors": [],
    "created-at": 0,
    "due-at": None,
    "remind-before": [],
    "escalation": [],
}
TIMER_DEFAULTS = {"case": None, "step": 0, "phase": "forward"}
SCHEDULE_DEFAULTS = {
    "case": None,
    "step": 0,
    "phase": "forward",
    "start": None,
    "end": None,
    "gap": "shift-forward",
    "repeat": "first",
    "overlap": "skip",
    "catch-up": {"all-within": 31_536_000_000},
    "jitter-ms": 0,
}
CLAIM_VERBS = {
    "claim",
    "release",
    "take-over",
    "renew",
    "settle",
    "escalate",
    "update",
    "assign",
    "unassign",
    "delegate",
    "note",
    # reschedule's timer-error nests store errors under `store` too.
    "reschedule",
}


def lease(a: dict) -> lh.Lease | None:
    return lh.Lease(a["lease"]["now"], a["lease"]["lease-ms"]) if a.get("lease") else None


def scenario_files() -> list[Path]:
    return sorted(SCENARIO_DIR.glob("*.json"))


def snake(d: dict) -> dict:
    return {k.replace("-", "_"): v for k, v in d.items()}


def outcomes(rules: list[dict]) -> list[lh.OutcomeRule]:
    return [lh.OutcomeRule(**snake(r)) for r in rules]


def escalation(steps: list[dict]) -> list[lh.EscalationStep]:
    """A chain: each step's action ``{"escalate": [roles]}`` or ``{"expire": null}``."""
    out = []
    for s in steps:
        case, payload = one_case(s["action"])
        assert case in ("escalate", "expire"), f"no step action {case}"
        action = lh.StepEscalate(payload) if case == "escalate" else lh.StepExpire()
        out.append(lh.EscalationStep(after_due_ms=s["after-due-ms"], action=action))
    return out


def task(a: dict) -> lh.Task:
    fields = snake({**TASK_DEFAULTS, **a})
    fields["outcomes"] = outcomes(fields.get("outcomes", []))
    fields["escalation"] = escalation(fields["escalation"])
    return lh.Task(**fields)


def changes(c: dict) -> lh.TaskChanges:
    """``update``'s changes: a key left out is unchanged; ``"due-at": null`` clears the due time."""
    fields = snake(c)
    if "outcomes" in fields:
        fields["outcomes"] = outcomes(fields["outcomes"])
    if fields.get("escalation") is not None:
        fields["escalation"] = escalation(fields["escalation"])
    return lh.TaskChanges(**fields)


def decision(d: dict | None) -> lh.Decision | None:
    return None if d is None else lh.Decision(**d)


def finished(f: dict) -> lh.Finished:
    """A ``finished`` argument: ``decision`` may be left out."""
    return lh.Finished(id=f["id"], settlement=f["settlement"], decision=decision(f.get("decision")))


def kind(d: dict) -> lh.KindDefinition:
    return lh.KindDefinition(kind=d["kind"], outcomes=outcomes(d.get("outcomes", [])))


def one_case(v: dict) -> tuple[str, Any]:
    """A ``{CASE: PAYLOAD}`` variant's case and payload."""
    assert len(v) == 1, f"a variant has one case: {v}"
    return next(iter(v.items()))


def recurrence(v: dict) -> lh.Recurrence:
    case, payload = one_case(v)
    if case == "cron":
        return lh.Cron(payload)
    assert case == "every", f"no recurrence {case}"
    return lh.Interval(every_ms=payload["every-ms"], anchor=payload["anchor"])


def catch_up(v: dict) -> lh.CatchUp:
    case, payload = one_case(v)
    match case:
        case "all-within":
            return lh.CatchUpAllWithin(payload)
        case "latest-within":
            return lh.CatchUpLatestWithin(payload)
        case "none":
            return lh.CatchUpNone()
    raise AssertionError(f"no catch-up {case}")


def schedule_spec(a: dict) -> lh.ScheduleSpec:
    """A ``schedule-spec`` argument, with the README's defaults."""
    fields = snake({**SCHEDULE_DEFAULTS, **a})
    fields["recurrence"] = recurrence(fields["recurrence"])
    fields["catch_up"] = catch_up(fields["catch_up"])
    return lh.ScheduleSpec(**fields)


def sub_filter(f: dict | None) -> lh.SubFilter | None:
    """A ``sub-filter`` argument: the README's defaults are the dataclass's own."""
    return None if f is None else lh.SubFilter(**snake(f))


def attempts(items: list[dict]) -> list[lh.Attempt]:
    return [lh.Attempt(**snake(a)) for a in items]


def assignee(v: dict | None) -> lh.AssigneeFilter | None:
    if v is None:
        return None
    case, payload = one_case(v)
    if case == "nobody":
        return lh.AssigneeNobody()
    assert case == "actor", f"no assignee filter {case}"
    return lh.AssigneeActor(payload)


def task_filter(f: dict | None) -> lh.TaskFilter | None:
    """A ``task-filter`` argument: it names only what it sets; the rest are the dataclass's defaults."""
    if f is None:
        return None
    fields = snake(f)
    fields["assignee"] = assignee(fields.get("assignee"))
    return lh.TaskFilter(**fields)


def task_sort(s: dict) -> lh.TaskSort:
    return lh.TaskSort(**s)


def viewer(v: dict | None) -> lh.Viewer | None:
    return None if v is None else lh.Viewer(**v)


def search_query(q: dict) -> lh.SearchQuery:
    """A ``search-query`` argument: ``after`` and ``viewer`` may be left out."""
    return lh.SearchQuery(
        limit=q["limit"],
        filter=task_filter(q["filter"]),
        sort=task_sort(q["sort"]),
        after=q.get("after"),
        viewer=viewer(q.get("viewer")),
    )


def saved_view(v: dict) -> lh.SavedView:
    """A saved view argument: it names only what it sets (``revision`` and ``at`` are the engine's)."""
    fields = snake(v)
    if "filter" in fields:
        fields["filter"] = task_filter(fields["filter"])
    if "sort" in fields:
        fields["sort"] = task_sort(fields["sort"])
    return lh.SavedView(**fields)


def job_action(a: str | dict) -> lh.JobAction:
    """A ``job-action`` argument: ``"release"``, ``"escalate"``, ``"withdraw"``,
    ``{"assign": {...}}`` or ``{"update": CHANGES}``."""
    if isinstance(a, str):
        return lh.JobVerb(a)
    case, payload = one_case(a)
    if case == "update":
        return changes(payload)
    assert case == "assign", f"no job action {case}"
    return lh.JobAssign(**snake(payload))


def canonical(v: Any) -> Any:
    """A host value as the scenario files spell it: WIT names, kebab-case;
    a variant's case as a one-key object."""
    if isinstance(v, lh.FeedGone):
        return {"gone": v.head}
    if isinstance(v, lh.FeedPage):
        return {"page": {"entries": canonical(v.entries), "next": v.next, "head": v.head}}
    if isinstance(v, lh.FeedEntry):
        case = "task" if isinstance(v.change, lh.TaskChange) else "timer"
        return {"position": v.position, "change": {case: canonical(v.change)}}
    if isinstance(v, lh.Cron):
        return {"cron": v.expr}
    if isinstance(v, lh.Interval):
        return {"every": {"every-ms": v.every_ms, "anchor": v.anchor}}
    if isinstance(v, lh.CatchUpAllWithin):
        return {"all-within": v.window_ms}
    if isinstance(v, lh.CatchUpLatestWithin):
        return {"latest-within": v.window_ms}
    if isinstance(v, lh.CatchUpNone):
        return {"none": None}
    if isinstance(v, lh.StepEscalate):
        return {"escalate": v.roles}
    if isinstance(v, lh.StepExpire):
        return {"expire": None}
    if isinstance(v, lh.AssigneeNobody):
        return {"nobody": None}
    if isinstance(v, lh.JobAssign):
        return {"assign": {"to": v.to, "roles": v.roles, "override-roles": v.override_roles}}
    if isinstance(v, lh.TaskChanges):
        # A job's update: the fields it changes (a due time left as it is is no field).
        kept = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
        return {"update": {k.replace("_", "-"): canonical(x) for k, x in kept.items() if x is not None and x is not lh.UNCHANGED}}
    if isinstance(v, lh.AssigneeActor):
        return {"actor": v.actor}
    if isinstance(v, lh.Settled):
        return {"settled": None}
    if isinstance(v, lh.AlreadySettled):
        return {"already": v.state.value}
    if isinstance(v, lh.NotHeld):
        return {"not-held": v.holder}
    if isinstance(v, lh.NotFound):
        return {"not-found": None}
    if isinstance(v, lh.Refused):
        return {"refused": v.reason}
    if isinstance(v, lh.Reminder):
        return {"reminder": v.before_ms}
    if isinstance(v, lh.HistoryEntry) and isinstance(v.step, lh.EscalationStep):
        # A task-step's chain case is the step itself: its case named here.
        return {**canonical(dataclasses.replace(v, step=None)), "step": {"escalation": canonical(v.step)}}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name.replace("_", "-"): canonical(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, list):
        return [canonical(x) for x in v]
    if isinstance(v, bytes):
        # A list<u8> (a signing key) is a list of numbers in the suite's spelling.
        return list(v)
    if isinstance(v, Enum):
        return v.value
    return v


class TimerRefused(Exception):
    """A refusal ``reschedule`` answered as a value, in the WIT's spelling
    (``{"held": T}``), for ``error_variant``."""

    def __init__(self, variant: dict) -> None:
        super().__init__(variant)
        self.variant = variant


def rescheduled(r: lh.Rescheduled) -> lh.TimerInfo:
    """``reschedule``'s answer as the suite writes it: the timer info, or its refusal as an error."""
    match r:
        case lh.TimerMoved(info):
            return info
        case lh.TimerHeld(lease_until):
            raise TimerRefused({"held": lease_until})
        case lh.TimerNotFound():
            raise TimerRefused({"not-found": None})
        case lh.TimerRunSealed():
            raise TimerRefused({"run-sealed": None})
    raise AssertionError(f"reschedule answered {r!r}")


def error_variant(e: Exception, verb: str) -> dict:
    if isinstance(e, TimerRefused):
        return e.variant
    if isinstance(e, lh.ClaimRefusal):
        return {e.case: e.detail}
    if isinstance(e, lh.StoreError):
        return {"store": {e.case: e.detail}} if verb in CLAIM_VERBS else {e.case: e.detail}
    return {"host": repr(e)}


VERBS = {
    "open": lambda t, a: t.open(task(a["task"])),
    "get": lambda t, a: t.get(a["id"]),
    "claim": lambda t, a: t.claim(a["id"], a["actor"], a["roles"], lease(a)),
    "renew": lambda t, a: t.renew(a["id"], a["actor"], a["now"], a["lease-ms"]),
    "reclaim-lapsed": lambda t, a: t.reclaim_lapsed(a["now"], a["limit"]),
    "expire-overdue": lambda t, a: t.expire_overdue(a["now"], a["limit"]),
    "claim-next": lambda t, a: t.claim_next(
        roles=a["query"]["roles"],
        actor=a["query"].get("actor"),
        limit=a["query"].get("limit", 1),
        after=a["query"].get("after"),
        lease=lease(a),
    ),
    "claim-batch": lambda t, a: t.claim_batch(
        roles=a["query"]["roles"],
        actor=a["query"].get("actor"),
        count=a["count"],
        after=a["query"].get("after"),
        lease=lease(a),
    ),
    "settle-and-claim": lambda t, a: t.settle_and_claim(
        [finished(f) for f in a["done"]],
        roles=a["query"]["roles"],
        actor=a["query"].get("actor"),
        count=a["count"],
        after=a["query"].get("after"),
        lease=lease(a),
    ),
    "leased-count": lambda t, a: t.leased_count(),
    "next-lease-end": lambda t, a: t.next_lease_end(),
    "next-wake": lambda t, a: t.next_wake(),
    "release": lambda t, a: t.release(a["id"], a["actor"]),
    "take-over": lambda t, a: t.take_over(a["id"], a["from"], a["actor"], a["roles"], lease(a)),
    "settle": lambda t, a: t.decide(a["id"], a["settlement"], a.get("holder"), decision(a.get("decision"))),
    "withdraw-run": lambda t, a: t.withdraw_run(a["run"], a["awaited"]),
    "escalate": lambda t, a: t.escalate(a["id"]),
    "queue": lambda t, a: t.queue(
        roles=a["query"]["roles"],
        actor=a["query"].get("actor"),
        limit=a["query"]["limit"],
        after=a["query"].get("after"),
    ),
    "held": lambda t, a: t.held(a["actor"], a["limit"], a.get("after")),
    "update": lambda t, a: t.update(a["id"], a.get("by"), changes(a["changes"])),
    "assign": lambda t, a: t.assign(
        a["id"], a["to"], a["roles"], lease(a), a.get("override-roles", False), a.get("by")
    ),
    "unassign": lambda t, a: t.unassign(a["id"], a.get("by")),
    "delegate": lambda t, a: t.delegate(a["id"], a["from"], a["to"], a["roles"], lease(a)),
    "note": lambda t, a: t.note(a["id"], a["actor"], a["text"]),
    "define-kind": lambda t, a: t.define_kind(kind(a["definition"]), a.get("expected")),
    "get-kind": lambda t, a: t.get_kind(a["kind"]),
    "list-kinds": lambda t, a: t.list_kinds(a["limit"], a.get("after")),
    "remove-kind": lambda t, a: t.remove_kind(a["kind"]),
    "for-case": lambda t, a: t.for_case(a["case"], a["limit"], a.get("after")),
    "open-count": lambda t, a: t.open_count(),
    "overdue": lambda t, a: t.overdue(a["now"], a["limit"]),
    "arm": lambda t, a: t.arm(lh.Timer(**snake({**TIMER_DEFAULTS, **a["timer"]}))),
    "claim-due": lambda t, a: t.claim_due(a["now"], a["limit"], a["lease-ms"]),
    "disarm": lambda t, a: t.disarm(a["run"], a["effect"]),
    "disarm-run": lambda t, a: t.disarm_run(a["run"]),
    "pending-count": lambda t, a: t.pending_count(),
    "next-due": lambda t, a: t.next_due(),
    "reschedule": lambda t, a: rescheduled(
        t.reschedule(a["run"], a["effect"], a["fire-at"], take_back=a.get("take-back", False))
    ),
    "timers-of": lambda t, a: t.timers_of(a["run"], a["limit"], a.get("after")),
    "due-between": lambda t, a: t.due_between(a["from"], a["to"], a["limit"], a.get("after")),
    "add-schedule": lambda t, a: t.add_schedule(schedule_spec(a["spec"]), a["now"]),
    "remove-schedule": lambda t, a: t.remove_schedule(a["id"]),
    "pause-schedule": lambda t, a: t.pause_schedule(a["id"], a["note"]),
    "resume-schedule": lambda t, a: t.resume_schedule(a["id"], a["now"]),
    "trigger-schedule": lambda t, a: t.trigger_schedule(a["id"], a["now"]),
    "next-occurrences": lambda t, a: t.next_occurrences(a["id"], a["after"], a["n"]),
    "get-schedule": lambda t, a: t.get_schedule(a["id"]),
    "list-schedules": lambda t, a: t.list_schedules(a["limit"], a.get("after")),
    "tz-version": lambda t, a: t.tz_version(),
    "add-subscription": lambda t, a: t.add_subscription(
        a["id"], a["url"], sub_filter(a["filter"]), bytes(a["key"]), a.get("from"), a["now"]
    ),
    "get-subscription": lambda t, a: t.get_subscription(a["id"]),
    "list-subscriptions": lambda t, a: t.list_subscriptions(a["limit"], a.get("after")),
    "change-subscription": lambda t, a: t.change_subscription(
        a["id"], a.get("url"), sub_filter(a.get("filter")), a.get("expected")
    ),
    "set-subscription-state": lambda t, a: t.set_subscription_state(
        a["id"], a["state"], a.get("note"), a.get("expected")
    ),
    "rotate-subscription-key": lambda t, a: t.rotate_subscription_key(
        a["id"], bytes(a["key"]), a["old-until"], a["now"]
    ),
    "remove-subscription": lambda t, a: t.remove_subscription(a["id"]),
    "advance-subscription": lambda t, a: t.advance_subscription(a["id"], a["revision"], a["position"]),
    "rewind-subscription": lambda t, a: t.rewind_subscription(a["id"], a.get("position")),
    "lease-subscription": lambda t, a: t.lease_subscription(a["id"], a["holder"], a["now"], a["lease-ms"]),
    "release-subscription": lambda t, a: t.release_subscription(a["id"], a["holder"]),
    "record-subscription-attempts": lambda t, a: t.record_subscription_attempts(a["id"], attempts(a["attempts"])),
    "search": lambda t, a: t.search(search_query(a["query"])),
    "count": lambda t, a: t.count(task_filter(a["filter"]), viewer(a.get("viewer")), a.get("after")),
    "build-search-index": lambda t, a: t.build_search_index(a["limit"]),
    "put-view": lambda t, a: t.put_view(saved_view(a["view"]), a.get("expected")),
    "get-view": lambda t, a: t.get_view(a["name"]),
    "list-views": lambda t, a: t.list_views(a["limit"], a.get("after")),
    "delete-view": lambda t, a: t.delete_view(a["name"], a.get("expected")),
    "start-job": lambda t, a: t.start_job(
        a["id"], task_filter(a["filter"]), job_action(a["action"]), a.get("by"), a["now"]
    ),
    "step-job": lambda t, a: t.step_job(a["id"]),
    "cancel-job": lambda t, a: t.cancel_job(a["id"]),
    "get-job": lambda t, a: t.get_job(a["id"]),
    "list-jobs": lambda t, a: t.list_jobs(a["limit"], a.get("after")),
    "runnable-jobs": lambda t, a: t.runnable_jobs(a["limit"]),
    "seal": lambda t, a: t.seal(a["run"], a["awaited"]),
    "is-sealed": lambda t, a: t.is_sealed(a["run"]),
    "check": lambda t, a: t.check(),
    "history": lambda t, a: t.history(a["id"], a.get("after"), a["limit"]),
    "feed": lambda t, a: t.feed(a.get("after"), a["limit"]),
    "entry-place": lambda t, a: t.entry_place(a["id"], a["seq"]),
    "trim": lambda t, a: t.trim(before=a.get("before"), keep=a.get("keep"), limit=a["limit"]),
}


def matches(expected: Any, actual: Any) -> bool:
    """Objects match on the keys the expectation names, lists element by element."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and all(map(matches, expected, actual))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return expected == actual


def error_matches(expected: Any, actual: Any) -> bool:
    if not (isinstance(expected, dict) and isinstance(actual, dict) and expected and actual):
        return False
    (case, payload), (got_case, got) = next(iter(expected.items())), next(iter(actual.items()))
    if case != got_case:
        return False
    if payload is None:
        return True
    if isinstance(payload, dict) and isinstance(got, dict):
        return error_matches(payload, got)
    return matches(payload, got)


def resolve(v: Any, saved: dict) -> Any:
    if isinstance(v, dict):
        if list(v) == ["$var"]:
            return saved[v["$var"]]
        return {k: resolve(x, saved) for k, x in v.items()}
    if isinstance(v, list):
        return [resolve(x, saved) for x in v]
    return v


def at_path(v: Any, path: str) -> Any:
    for part in path.split("."):
        v = v[int(part)] if part.isdigit() else v[part]
    return v


class Clock:
    """The engine's clock in a scenario: what a clock step set it to."""

    def __init__(self) -> None:
        self.at = 0

    def __call__(self) -> int:
        return self.at


def run_scenario(scenario: dict, engine: lh.Engine, store: Any, clock: Clock) -> list[str]:
    failures: list[str] = []
    saved_values: dict = {}
    keyspaces: dict = {}
    for i, step in enumerate(scenario["steps"], start=1):
        tenant = step.get("tenant", DEFAULT_TENANT)
        at = f"step {i}"
        if "call" in step:
            verb = step["call"]
            args = resolve(step.get("args", {}), saved_values)
            handle = engine.tenant(tenant)
            if args.get("guard") is not None:
                # A `guard` argument guards the call, as the guarded handle does.
                handle = handle.guarded(lh.Guard(**args["guard"]))
            try:
                got = {"ok": canonical(VERBS[verb](handle, args))}
            except (lh.LeaseholdError, TimerRefused) as e:
                got = {"error": error_variant(e, verb)}
            expected = {k: resolve(step[k], saved_values) for k in ("ok", "error") if k in step}
            if "ok" in step:
                ok = "ok" in got and matches(expected["ok"], got["ok"])
            elif "error" in step:
                ok = "error" in got and error_matches(expected["error"], got["error"])
            else:
                ok = True
            if not ok:
                failures.append(f"{at} ({verb}): expected {json.dumps(expected)}, got {json.dumps(got)}")
            if "ok" in got:
                for name, path in step.get("save", {}).items():
                    saved_values[name] = at_path(got["ok"], path)
        elif "clock" in step:
            clock.at = step["clock"]
        elif "raw-put" in step:
            raw = step["raw-put"]
            store.put_raw(tenant, bytes.fromhex(raw["key"]), bytes.fromhex(raw["value"]))
        elif step.get("keyspace") == "save":
            keyspaces[tenant] = store.dump(tenant)
        elif step.get("keyspace") == "unchanged":
            if keyspaces.get(tenant) != store.dump(tenant):
                failures.append(f"{at}: tenant {tenant}'s keyspace changed")
        else:
            raise ValueError(f"{at}: no call, clock, raw-put or keyspace")
    return failures
