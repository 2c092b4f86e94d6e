"""Schemathesis hooks for Leasehold's API run (tests/run).

Two things a schema cannot give a generator, and one answer it cannot
predict:

- Tasks that exist and are held. run.py opens and claims some through the
  API before the run; a positive case naming a task (`{id}`) is pointed at
  one of them about half the time, so claim, renew, release, settle and the
  rest answer as they do for real leases, not only 404.
- The event stream. It is asked for by `Accept: text/event-stream`, which
  the document cannot declare as a parameter; about half the cases of
  `GET /v1/events` ask for it, and schemathesis reads the stream's first
  events and holds them to the document's event schema.
- A request target the HTTP layer refuses. hyper answers 414 with no body,
  before the service sees the request, to a target over 64 KiB (the
  document's longest value, a reviewer's position, is about 17 KB of
  ASCII). A negative case whose over-long value is inflated past that by
  percent-encoding multi-byte characters keeps its length and its
  violation, spelled in ASCII, so it reaches the service and is held to
  the document's 400.
- A cursor or position only the service issues. The document says so on
  the parameter ("Only a value this service gave") and documents the 400;
  a positive case carrying a made-up one that is refused 400 with `field`
  naming that very parameter is what the document promises. Every other
  400 to a positive case still fails the run.

- A kind that exists. run.py defines one; a positive case naming a kind
  (`{kind}`) is pointed at it about half the time, so the kinds' routes
  answer more than 404.
- An output schema the rules compile. The document cannot restate the
  JSON Schema subset the rules accept, and says so on the field (a schema
  outside it is refused with 400, `field` naming `outcomes`); such a 400
  is what the document promises.
- Timers that exist. run.py arms some; a positive case of `reschedule`
  is pointed at one of them about half the time, so it answers more than
  404.
- A window of time. `GET /v1/timers/due` lists `[from, to)`, and a
  window that ends before it starts is refused with 400 naming `to`: the
  document says so on the parameter, but a schema cannot relate two
  parameters, so a positive case's ends are put in order.
- Schedules that exist. run.py adds some; a positive case naming a
  schedule (`/v1/schedules/{id}`) is pointed at one of them about half
  the time, and every positive case of pause, resume and trigger is, so
  those routes answer more than 404. A removal never names one (not even
  an id schemathesis learnt from a listing), which would empty the pool
  for the cases after it.
- A schedule spec the rules take. A zone is a name of the time-zone
  database, a cron expression one the rules parse, an end one after some
  occurrence, a jitter below an interval: none of which a schema can say,
  so the document says it in words (refused with 400, `field` naming
  `zone`, `recurrence.expr`, `end` or `jitter_ms`; `id` for an id in use,
  `run` for a sealed run), and such a 400 is what it promises. About half
  the positive cases of `add-schedule` are made into a spec the rules
  take (a daily cron in UTC, no bounds), so the route answers 201 too.
- A task's timeline. Reminders need a due time and must fall after the
  task's creation, chain steps before the year 9999, and a due time cleared
  or moved must still leave room for them: none of which a schema can
  relate, so the document says it in words (refused with 400, `field`
  naming `remind_before` or `escalation`), and such a 400 to `open` or
  `update` is what it promises.
- Subscriptions that exist. run.py adds some (the server makes their
  ids, passed here in LEASEHOLD_FUZZ_SUBSCRIPTIONS); every positive case
  naming one (`/v1/subscriptions/{id}`: read, change, pause, resume,
  rotate, replay) names one of them, as for a schedule's changes, and a
  removal never does.
- An endpoint, a filter and a position the server takes. Whether a URL
  may be an endpoint is the server's policy (https only, public addresses
  only: the document says so in words), a filter must name tasks or
  timers, a position must be one the feed holds, and a tenant has at most
  a hundred subscriptions: refused with 400 (`invalid`, `field` naming
  `url`, `filter`, `from` or `subscriptions`), which is what the document
  promises.
- Saved views that exist. run.py makes some; a positive case naming a
  view (`/v1/views/{name}`: read, change) is pointed at one of them about
  half the time, and a removal never is: half the removals take one of
  the spare views run.py makes for them. A view made under a name in use
  is refused with 400 naming `name`, as the document says.
- Jobs that exist, and jobs that touch nothing. run.py starts some over
  a run with no task; a positive case naming a job (`/v1/jobs/{id}`:
  read, cancel) names one of them about half the time. A job a positive
  case starts has its filter narrowed to that run, so the server's
  sweeper never changes the seeded tasks under the other cases. A job
  started under an id in use is refused with 400 naming `id`, as the
  document says.
- A search's ranges and cursors. A filter's `*_after` must come before
  its `*_before`, which a schema cannot relate: a positive case's ends are
  put in order. Its `after` is a cursor only the service issues (its
  schema says so); a made-up one refused 400 naming `after` is what the
  document promises.
- A wait on one task. `GET /v1/tasks/{id}?wait_ms` waits until the task
  settles or the wait ends; a positive case's wait is cut to a tenth of a
  second, so a run exercises the wait without sitting through 30 s ones.

The choices are made from the case itself (a hash), not a random source,
so a run with the same seed sends the same requests.
"""

import json
import os
import re
import urllib.parse
import zlib

import schemathesis

ISSUED_ONLY = "Only a value this service gave"
MAX_WAIT_MS = 100
ALWAYS_SEEDED = ("take-over", "entry-place", "update", "assign", "unassign", "delegate", "note",
                 "pause-schedule", "resume-schedule", "trigger-schedule",
                 "get-subscription", "change-subscription", "set-subscription-state",
                 "resume-subscription", "rotate-subscription-key", "rewind-subscription")
PROBLEM_INVALID = "urn:leasehold:problem:invalid"


def _positive(case):
    mode = getattr(getattr(getattr(case, "meta", None), "generation", None), "mode", None)
    return mode is None or getattr(mode, "is_positive", False)


def _pick(text, n):
    """A stable choice among n for a generated value."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass")) % n


# The schedule routes naming a schedule that are pointed at seeded ones;
# `remove-schedule` is not (see above).
SCHEDULE_VERBS = ("get-schedule", "pause-schedule", "resume-schedule", "trigger-schedule",
                  "next-occurrences")
# The subscription routes naming a subscription that are pointed at seeded
# ones; `remove-subscription` is not.
SUBSCRIPTION_VERBS = ("get-subscription", "change-subscription", "set-subscription-state",
                      "resume-subscription", "rotate-subscription-key", "rewind-subscription")
# What the server checks of a subscription beyond the document's shape, by
# operation: the document says so in words.
SUBSCRIPTION_CHECKED = {
    "add-subscription": ("url", "filter", "from", "subscriptions"),
    "change-subscription": ("url", "filter"),
    "rewind-subscription": ("from",),
}
# The fields of a schedule spec the rules check beyond the document's shape.
SCHEDULE_CHECKED = ("zone", "recurrence.expr", "end", "jitter_ms", "id", "run")
# A task's reminders and chain, which the rules hold to its due and
# creation times (and the due time to them): the document says so on the
# fields.
TIMELINE_CHECKED = ("remind_before", "escalation")


# The view routes naming a view that are pointed at seeded ones;
# `delete-view` is not.
VIEW_VERBS = ("get-view", "put-view")
# The operations whose body holds a search filter.
FILTERED = ("search", "count", "put-view", "start-job")
# The job routes naming a job that are pointed at seeded ones.
JOB_VERBS = ("get-job", "cancel-job")
# A fire time no claim-due of a test reaches (the year 9000).
FAR_OFF = 221845392000000
# The run of the seeded jobs, which holds no task (run.py).
JOB_RUN = "fuzz-jobs"


def _pool(verb):
    """The seeded tasks (run.py) a positive case of `verb` may name."""
    holder = os.environ.get("LEASEHOLD_FUZZ_HOLDER", "")
    per = int(os.environ.get("LEASEHOLD_FUZZ_PER_POOL", "0"))
    if verb in SUBSCRIPTION_VERBS:
        return _subscriptions()
    if per == 0 or verb in ("remove-schedule", "remove-subscription"):
        return []
    if verb in SCHEDULE_VERBS:
        return [f"sched-{i}" for i in range(per)]
    if verb in JOB_VERBS:
        return [f"job-{i}" for i in range(per)]
    if verb in ("renew", "release"):
        return [f"{verb}-{holder}-{i}" for i in range(per)]
    if verb == "entry-place":
        return [f"place-{i}" for i in range(per)]
    return [f"task-{i}" for i in range(per)]


def _subscriptions():
    """The seeded subscriptions' ids (run.py)."""
    return [s for s in os.environ.get("LEASEHOLD_FUZZ_SUBSCRIPTIONS", "").split(",") if s]


def _spare_the_pool(case):
    """A removal never names a seeded schedule.

    Schemathesis reuses ids it saw in earlier answers (a page of
    `list-schedules` names the seeded ones), and a removal of one emptied
    the pool for every case after it: the routes that need a schedule then
    only ever answered 404, which fails the run. Such a case is sent for an
    id nobody added instead, which is still a real removal's answer."""
    params = case.path_parameters or {}
    drawn = params.get("id")
    if _verb(case) == "remove-schedule" and isinstance(drawn, str) and drawn.startswith("sched-"):
        case.path_parameters = {**params, "id": "removed-" + drawn}
    if _verb(case) == "remove-subscription" and drawn in _subscriptions():
        case.path_parameters = {**params, "id": "removed-" + drawn}
    name = params.get("name")
    if _verb(case) == "delete-view" and isinstance(name, str):
        spare = int(os.environ.get("LEASEHOLD_FUZZ_SPARE_VIEWS", "0"))
        if name.startswith("view-"):
            case.path_parameters = {**params, "name": "removed-" + name}
        elif spare and _pick(name, 2) == 0:
            case.path_parameters = {**params, "name": f"spare-{_pick(name, spare)}"}


def _verb(case):
    return case.operation.definition.raw.get("operationId", "")


# Below hyper's bound on a request target (64 KiB), with room for the path.
MAX_QUERY = 60_000


def _fit_query(case):
    """A query whose encoding would pass hyper's bound, spelled in ASCII."""
    query = case.query or {}
    size = sum(len(urllib.parse.quote(str(v), safe="")) for v in query.values())
    if size > MAX_QUERY:
        case.query = {k: "x" * len(v) if isinstance(v, str) else v for k, v in query.items()}


def _header_pattern(case, name):
    for p in case.operation.definition.raw.get("parameters", []):
        if p.get("in") == "header" and p.get("name", "").lower() == name.lower():
            return (p.get("schema") or {}).get("pattern")
    return None


def _fit_if_match(case):
    """A positive case's `If-Match` as the document's pattern has it.

    The coverage phase sends the tag's digits without their quotes (`0`
    for `"0"`), which the document does not admit, so such a case is not
    the positive one it claims to be: its quotes are put back."""
    headers = case.headers or {}
    value = headers.get("If-Match")
    pattern = _header_pattern(case, "If-Match")
    if value is None or pattern is None or re.fullmatch(pattern, str(value)):
        return
    quoted = '"' + str(value).strip('"') + '"'
    case.headers = {**headers, "If-Match": quoted if re.fullmatch(pattern, quoted) else "*"}


@schemathesis.hook
def map_case(ctx, case):
    _spare_the_pool(case)
    if not _positive(case):
        _fit_query(case)
        return case
    _fit_if_match(case)
    params = case.path_parameters or {}
    if "kind" in params and os.environ.get("LEASEHOLD_FUZZ_KIND"):
        if _pick(str(params["kind"]), 2) == 0:
            case.path_parameters = {**params, "kind": os.environ["LEASEHOLD_FUZZ_KIND"]}
        params = case.path_parameters
    if _verb(case) == "get" and isinstance(case.query, dict):
        wait = case.query.get("wait_ms")
        if isinstance(wait, int) and wait > MAX_WAIT_MS:
            case.query = {**case.query, "wait_ms": MAX_WAIT_MS}
    if _verb(case) == "reschedule" and {"run", "effect"} <= set(params):
        per = int(os.environ.get("LEASEHOLD_FUZZ_PER_POOL", "0"))
        drawn = str(params["effect"])
        if per and _pick(drawn, 2) == 0:
            case.path_parameters = {**params, "run": "fuzz-timers",
                                    "effect": f"wake-{_pick(drawn, per)}"}
            # Moved to a time already due, a pool timer could be fired by
            # a later claim-due, as the wall clock has it, and every case
            # after would find it gone: it is kept far off.
            if isinstance(case.body, dict) and isinstance(case.body.get("fire_at"), (int, float)):
                case.body["fire_at"] = max(case.body["fire_at"], FAR_OFF)
        params = case.path_parameters
    if _verb(case) == "add-schedule" and isinstance(case.body, dict):
        drawn = json.dumps(case.body, sort_keys=True, default=str)
        if _pick(drawn, 2) == 0:
            body = {k: v for k, v in case.body.items() if k not in ("start", "end")}
            body.update(zone="UTC", recurrence={"kind": "cron", "expr": "@daily"})
            case.body = body
    if _verb(case) in FILTERED and isinstance(case.body, dict):
        _order_ranges(case.body)
    if _verb(case) == "start-job" and isinstance(case.body, dict) and \
            isinstance(case.body.get("filter"), dict):
        case.body["filter"]["run"] = JOB_RUN
    if _verb(case) in VIEW_VERBS and "name" in params:
        per = int(os.environ.get("LEASEHOLD_FUZZ_PER_POOL", "0"))
        drawn = str(params["name"])
        if per and _pick(drawn, 2) == 0:
            case.path_parameters = {**params, "name": f"view-{_pick(drawn, per)}"}
        params = case.path_parameters
    if case.operation.path == "/v1/timers/due" and isinstance(case.query, dict):
        start, end = case.query.get("from"), case.query.get("to")
        if _is_number(start) and _is_number(end) and end < start:
            case.query = {**case.query, "from": end, "to": start}
    if "id" in params:
        pool = _pool(_verb(case))
        drawn = str(params["id"])
        # take-over, entry-place, the changes after open and the changes of
        # a schedule have no other test data: a made-up id only ever
        # answers 404 (and their bodies' other refusals crowd out the
        # rest), and schemathesis fails the run when a phase's positive
        # cases of an operation never reach past it (a phase may draw only
        # one or two), so their positive cases always name a seeded task
        # or schedule; negative cases still send made-up ids.
        if pool and (_pick(drawn, 2) == 0 or _verb(case) in ALWAYS_SEEDED):
            case.path_parameters = {**params, "id": pool[_pick(drawn, len(pool))]}
            if "seq" in params:
                # Every seeded task has its opening entry, numbered 1.
                case.path_parameters["seq"] = 1
    if case.method.upper() == "GET" and case.operation.path == "/v1/events":
        key = json.dumps([case.query, case.headers], sort_keys=True, default=str)
        if _pick(key, 2) == 0:
            case.headers = {**(case.headers or {}), "Accept": "text/event-stream"}
    return case


def _is_number(value):
    """A JSON integer as schemathesis draws one: `541790.0` is one too."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _order_ranges(body):
    """A filter's ranges with each `*_after` before its `*_before`."""
    f = body.get("filter")
    if not isinstance(f, dict):
        return
    for what in ("due", "created"):
        start, end = f.get(f"{what}_after"), f.get(f"{what}_before")
        if _is_number(start) and _is_number(end) and start >= end:
            if start == end:
                f[f"{what}_after"] = None
            else:
                f[f"{what}_after"], f[f"{what}_before"] = end, start


def _issued_only(case):
    """The parameters the document says take only issued values, by name."""
    names = set()
    for p in case.operation.definition.raw.get("parameters", []):
        description = (p.get("schema") or {}).get("description") or ""
        if ISSUED_ONLY in description:
            names.add(p["name"].lower())
    return names


def _carried(case):
    sent = set()
    for part in (case.query, case.headers):
        for name in part or {}:
            sent.add(name.lower())
    return sent


@schemathesis.hook
def filter_failure(ctx, failure, case, response):
    # Only "a schema-valid request was refused", only as a 400.
    if type(failure).__name__ != "RejectedPositiveData" or response.status_code != 400:
        return True
    if "400" not in case.operation.definition.raw.get("responses", {}):
        return True
    try:
        problem = json.loads(response.content)
    except ValueError:
        return True
    field = problem.get("field") if isinstance(problem, dict) else None
    if problem.get("type") != PROBLEM_INVALID or not isinstance(field, str):
        return True
    # The operations whose bodies declare outcome rules, whose
    # `output_schema` says it is compiled when declared.
    if field == "outcomes" and _verb(case) in ("define-kind", "update"):
        return False
    # A schedule spec's fields the rules check, as the document says.
    if field in SCHEDULE_CHECKED and _verb(case) == "add-schedule":
        return False
    if field == "run" and _verb(case) == "trigger-schedule":
        return False
    if field in TIMELINE_CHECKED and _verb(case) in ("open", "update"):
        return False
    if field in SUBSCRIPTION_CHECKED.get(_verb(case), ()):
        return False
    # A search's or count's cursor, in its body, only the service issues.
    if field == "after" and _verb(case) in ("search", "count") and \
            isinstance(case.body, dict) and case.body.get("after") is not None:
        return False
    # A view made under a name in use, as the document says.
    if field == "name" and _verb(case) == "put-view":
        return False
    # A job started under an id in use, as the document says; its
    # changes' outcome rules, compiled when declared.
    if field in ("id", "action.changes.outcomes") and _verb(case) == "start-job":
        return False
    field = field.lower()
    return not (field in _issued_only(case) and field in _carried(case))
