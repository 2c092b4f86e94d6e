import hashlib
from importlib import resources


def pytest_report_header(config):
    # Every run says which bytes it tested, as the Rust and JS runners do.
    wasm = resources.files("leasehold").joinpath("leasehold.wasm").read_bytes()
    return f"scenarios: component sha256 {hashlib.sha256(wasm).hexdigest()}"


import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def hostile_wasm() -> bytes:
    """The hostile fixture component: LEASEHOLD_HOSTILE_WASM (tests/run sets
    it), else built here with cargo."""
    given = os.environ.get("LEASEHOLD_HOSTILE_WASM")
    if given:
        return Path(given).read_bytes()
    # A target directory of its own: built alone, the fixture's std does not
    # meet the no_std guest's features.
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "hostile-wasm"
    subprocess.run(
        ["cargo", "build", "--quiet", "--release", "--target", "wasm32-wasip2", "-p", "leasehold-hostile"],
        cwd=REPO,
        env={**os.environ, "CARGO_TARGET_DIR": str(target)},
        check=True,
    )
    return (target / "wasm32-wasip2" / "release" / "leasehold_hostile.wasm").read_bytes()
