"""Fuzzes a live `leasehold serve` from its own OpenAPI document.

Starts the server on a fresh redb file with three tokens (a reviewer, a
service and an operator), delivering no webhooks, seeds it through the API
with tasks the reviewer and the operator hold under leases, schedules,
webhook subscriptions, saved views and bulk jobs (hooks.py points some
cases at them), then runs schemathesis once per token with every check on, every
operation, a fixed seed and a bounded number of examples. A run passes when
schemathesis finds nothing: no 5xx, no answer outside the document, no
schema-valid request refused and no schema-violating one accepted, and no
operation answered only "not found".

    python run.py path/to/leasehold

Prints `openapi-spec-validator: passed|failed` for the served document,
then one line per token, `schemathesis <scope>: passed|failed`, and exits
non-zero if any failed. The seed and example count are in this file and in
schemathesis.toml beside it, so a failure reproduces.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = "20261202"
WHO = [
    ("reviewer", "alice", ["finance"]),
    ("service", "workflow", []),
    ("operator", "olga", ["finance"]),
]


def mint(leasehold, workdir, actor, scope, roles):
    cmd = [leasehold, "--json", "--tenant", "acme", "token", "new", "--actor", actor, "--scope", scope]
    if roles:
        cmd += ["--role", *roles]
    out = subprocess.run(cmd, cwd=workdir, check=True, capture_output=True, text=True)
    v = json.loads(out.stdout)
    return v["token"], v["line"]


# Tasks per pool: hooks.py names them for renew and release (one pool per
# holder each, so releasing one leaves the others to renew) and for every
# other operation on a task (one shared pool, half of it held).
PER_POOL = 8
# Views only removals are pointed at (hooks.py names them).
SPARE_VIEWS = 100
FUZZ_KIND = "fuzz-kind"
LEASE_MS = 7 * 24 * 3600 * 1000


def call(base, token, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as reply:
        return reply.status


def call_json(base, token, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as reply:
        return json.loads(reply.read())


def validate(base, work):
    """The served document, as a client generator fetches it, checked by a
    maintained OpenAPI validator."""
    validator = os.environ.get("OPENAPI_SPEC_VALIDATOR", "openapi-spec-validator")
    doc = Path(work, "openapi.json")
    with urllib.request.urlopen(f"{base}/v1/openapi.json", timeout=30) as reply:
        doc.write_bytes(reply.read())
    return subprocess.run([validator, str(doc)], cwd=work).returncode == 0


def seed(base, tokens):
    """Opens the pools' tasks as the service and claims them as their
    holders, through the API as any client would."""
    holders = {"alice": tokens["reviewer"], "olga": tokens["operator"]}
    held = []
    for holder in holders:
        for verb in ("renew", "release"):
            held += [(f"{verb}-{holder}-{i}", holder) for i in range(PER_POOL)]
    held += [(f"task-{i}", "alice" if i % 4 == 0 else "olga") for i in range(0, PER_POOL, 2)]
    opened = [t for t, _ in held] + [f"task-{i}" for i in range(1, PER_POOL, 2)]
    # Tasks no fuzzed verb changes (see below): their one history entry is
    # their last, which trimming keeps, so `entry-place` always has one to
    # find.
    opened += [f"place-{i}" for i in range(PER_POOL)]
    for id in opened:
        # The place tasks are offered to a role no caller here has, so no
        # fuzzed claim-next takes them: a change would make their opening
        # entry not their last, and a fuzzed trim would then remove it.
        role = "archive" if id.startswith("place-") else "finance"
        call(base, tokens["service"], "POST", "/v1/tasks", {
            "id": id, "run": "fuzz", "case": "fuzz", "kind": "review",
            "candidate_roles": [role], "escalate_to": [role],
        })
    for id, holder in held:
        call(base, holders[holder], "POST", f"/v1/tasks/{id}/claim", {"lease_ms": LEASE_MS})
    # Timers for `reschedule` to move (hooks.py names them): armed far off,
    # so a fuzzed claim-due seldom holds them, and one that does is a
    # documented 409.
    for i in range(PER_POOL):
        call(base, tokens["service"], "POST", "/v1/timers", {
            "run": "fuzz-timers", "effect": f"wake-{i}", "step": 1, "phase": "forward",
            "fire_at": 253402300799999 - i,
        })
    # Schedules for the schedule routes to find (hooks.py names them):
    # daily, so a trigger's timer is the only one of theirs due soon.
    for i in range(PER_POOL):
        call(base, tokens["operator"], "POST", "/v1/schedules", {
            "id": f"sched-{i}", "run": "fuzz-schedules", "zone": "Europe/London",
            "recurrence": {"kind": "cron", "expr": "0 3 * * *"},
        })
    # Subscriptions for the subscription routes to find (hooks.py names
    # them): the server makes their ids, so they are read from its answers.
    # The server runs with --no-webhooks, so nothing is ever sent to them.
    subscriptions = []
    for i in range(PER_POOL):
        subscriptions.append(call_json(base, tokens["operator"], "POST", "/v1/subscriptions", {
            "url": f"https://hooks.example.com/fuzz-{i}", "filter": {"timers": False},
        })["subscription"]["id"])
    # Saved views for the views' routes to find (hooks.py names them), and
    # spare ones for removals to take, so a removal is not only ever 404.
    for i in range(PER_POOL):
        call(base, tokens["operator"], "PUT", f"/v1/views/view-{i}", {
            "filter": {"states": ["open"]}, "sort": {"key": "due_at"},
        })
    for i in range(SPARE_VIEWS):
        call(base, tokens["operator"], "PUT", f"/v1/views/spare-{i}", {
            "filter": {"states": ["claimed"]},
        })
    # Jobs for the jobs' routes to find (hooks.py names them), over a run
    # with no task, so the server's sweeper changes nothing for them.
    for i in range(PER_POOL):
        call(base, tokens["operator"], "POST", "/v1/jobs", {
            "id": f"job-{i}", "filter": {"run": "fuzz-jobs"}, "action": {"kind": "escalate"},
        })
    # A kind with a definition, for the kinds' routes to find (the pools'
    # tasks are of another kind, so any decision on them goes).
    call(base, tokens["operator"], "PUT", f"/v1/kinds/{FUZZ_KIND}", {"outcomes": [
        {"name": "approved"},
        {"name": "rejected", "needs_reason": True},
        {"name": "amount", "output_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    ]})
    return subscriptions


def main():
    leasehold = os.path.abspath(sys.argv[1])
    st = os.environ.get("SCHEMATHESIS", "st")
    with tempfile.TemporaryDirectory() as work:
        tokens = {}
        lines = []
        for scope, actor, roles in WHO:
            token, line = mint(leasehold, work, actor, scope, roles)
            tokens[scope] = token
            lines.append(line)
        Path(work, "tokens").write_text("\n".join(lines) + "\n")
        # --no-webhooks: the fuzzer makes endpoint URLs up, and a server
        # that delivered would send to them.
        server = subprocess.Popen(
            [leasehold, "--db", str(Path(work, "fuzz.redb")), "serve", "--listen", "127.0.0.1:0",
             "--tokens", str(Path(work, "tokens")), "--no-webhooks"],
            cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "RUST_LOG": "warn"},
        )
        base = None
        for line in server.stderr:
            if "listening on " in line:
                base = line.split("listening on ", 1)[1].strip()
                break
        if base is None:
            print("schemathesis: the server did not start", file=sys.stderr)
            return 1
        # Keep the server's pipe drained.
        threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
        failed = 0
        try:
            ok = validate(base, work)
            failed += not ok
            print(f"openapi-spec-validator: {'passed' if ok else 'failed'}", flush=True)
            subscriptions = seed(base, tokens)
            for scope, actor, _ in WHO:
                run = subprocess.run(
                    [st, "--config-file", str(HERE / "schemathesis.toml"), "run",
                     f"{base}/v1/openapi.json", "--checks", "all", "--seed", SEED,
                     "--workers", "1", "--no-color", "--suppress-health-check", "all",
                     "--generation-database", "none",
                     "-H", f"Authorization: Bearer {tokens[scope]}"],
                    cwd=work,
                    env={**os.environ, "PYTHONPATH": str(HERE), "LEASEHOLD_FUZZ_HOLDER": actor,
                         "LEASEHOLD_FUZZ_PER_POOL": str(PER_POOL),
                         "LEASEHOLD_FUZZ_SPARE_VIEWS": str(SPARE_VIEWS),
                         "LEASEHOLD_FUZZ_KIND": FUZZ_KIND,
                         "LEASEHOLD_FUZZ_SUBSCRIPTIONS": ",".join(subscriptions)},
                )
                ok = run.returncode == 0
                failed += not ok
                print(f"schemathesis {scope}: {'passed' if ok else 'failed'}", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=60)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
