"""The scenario suite through the Python host, on both stores."""

import json

import pytest

import leasehold as lh
from scenarios import Clock, run_scenario, scenario_files

STORES = {
    "memory": lambda path: lh.MemoryStore(),
    "sqlite": lambda path: lh.SqliteStore(str(path), durability="none"),
}


@pytest.mark.parametrize("store_kind", sorted(STORES))
@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario_answers_as_written(path, store_kind, tmp_path):
    scenario = json.loads(path.read_text())
    store = STORES[store_kind](tmp_path / "scenario.db")
    clock = Clock()
    engine = lh.open(store, clock=clock)
    try:
        failures = run_scenario(scenario, engine, store, clock)
    finally:
        engine.close()
    assert failures == [], f"{scenario['name']} on {store_kind}:\n" + "\n".join(failures)
