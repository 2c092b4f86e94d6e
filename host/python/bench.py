"""calls/s of ``claim`` and ``queue`` through the Python host, on each store:
the workload host/js/bench.mjs and ``cargo run --release --example
polyglot_bench -p leasehold-host`` run too (BENCHMARKS.md, "Other hosts").
Then the cost of a call on a cached instance against one that must make its
instance (every call evicts).

    python bench.py [--tasks 1000] [--runs 3]
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import leasehold as lh


def once(store, tasks: int) -> dict:
    engine = lh.open(store)
    t = engine.tenant("bench")
    for i in range(tasks):
        t.open(lh.Task(id=f"t{i}", run="r", kind="k", candidate_roles=["approver"], created_at=i))
    t.queue(roles=["approver"], limit=50)  # warm the instance
    start = time.perf_counter()
    for _ in range(tasks):
        assert len(t.queue(roles=["approver"], actor="alice", limit=50).tasks) == 50
    queue = tasks / (time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(tasks):
        t.claim(f"t{i}", "bob", ["approver"])
    claim = tasks / (time.perf_counter() - start)
    engine.close()
    return {"claim": claim, "queue": queue}


def instances() -> dict:
    """µs per ``get`` on a cached instance, and on an instance made for the
    call (two tenants, room for one)."""
    calls = 100
    engine = lh.open(lh.MemoryStore(), limits=lh.Limits(cached_instances=1))
    a, b = engine.tenant("a"), engine.tenant("b")
    a.get("x")
    start = time.perf_counter()
    for _ in range(calls):
        a.get("x")
    cached = (time.perf_counter() - start) * 1e6 / calls
    start = time.perf_counter()
    for i in range(calls):
        (a if i % 2 else b).get("x")
    evicted = (time.perf_counter() - start) * 1e6 / calls
    engine.close()
    return {"cached": cached, "evicted": evicted}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    sha = lh.open(lh.MemoryStore()).component_sha256
    print(f"component sha256 {sha}; {a.tasks} tasks, median of {a.runs} runs, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as d:
        stores = {
            "memory": lambda r: lh.MemoryStore(),
            "sqlite": lambda r: lh.SqliteStore(str(Path(d) / f"bench-{r}.db"), durability="none"),
        }
        for name, make in stores.items():
            runs = [once(make(r), a.tasks) for r in range(a.runs)]
            med = {k: round(statistics.median(x[k] for x in runs)) for k in ("claim", "queue")}
            print(f"python {name}: claim {med['claim']} calls/s, queue (limit 50) {med['queue']} calls/s")
    runs = [instances() for _ in range(a.runs)]
    med = {k: round(statistics.median(x[k] for x in runs)) for k in ("cached", "evicted")}
    print(f"python get: cached instance {med['cached']} µs/call, evicted (instance made per call) {med['evicted']} µs/call")


if __name__ == "__main__":
    main()
