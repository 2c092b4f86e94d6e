"""A worker killed mid-batch, for test_worker.py: it claims tasks of the
sqlite file given, starts handlers that never finish, prints the ids it
claimed once its handlers run, and waits to be killed with SIGKILL."""

import json
import sys
import threading

import leasehold as lh

path, lease_ms = sys.argv[1], int(sys.argv[2])
engine = lh.open(lh.SqliteStore(path))
claimed: list[str] = []
started = 0


def on_event(name, detail):
    global started
    if name == "claimed":
        claimed.append(detail["task"].id)
    if name == "started":
        started += 1
        if started == 2:
            print(json.dumps(claimed), flush=True)


never = threading.Event()
worker = lh.Worker(
    engine.tenant("acme"),
    actor="doomed",
    roles=["op"],
    concurrency=2,
    batch=3,
    lease_ms=lease_ms,
    handler=lambda task, cancelled: never.wait(),
    on_event=on_event,
)
worker.run()
