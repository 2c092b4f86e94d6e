"""Runs one scenario through the installed wheel, from a directory outside
the repository (tests/run copies this file and tests/scenarios.py there
after installing the wheel into a fresh virtual environment). Exits
non-zero on any failing step.

    python smoke.py SCENARIO.json
"""

import json
import sys
from pathlib import Path

import leasehold as lh
from scenarios import Clock, run_scenario

scenario = json.loads(Path(sys.argv[1]).read_text())
failed = 0
for kind, store in [("memory", lh.MemoryStore()), ("sqlite", lh.SqliteStore(":memory:"))]:
    clock = Clock()
    engine = lh.open(store, clock=clock)
    failures = run_scenario(scenario, engine, store, clock)
    engine.close()
    state = "FAILED" if failures else "ok"
    print(f"installed leasehold {engine.component_sha256[:12]} from {Path(lh.__file__).parent}: scenario {scenario['name']} on {kind}: {state}")
    for f in failures:
        print(f"  {f}")
    failed += len(failures)
sys.exit(1 if failed else 0)
