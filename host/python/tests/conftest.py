import hashlib
from importlib import resources


def pytest_report_header(config):
    # Every run says which bytes it tested, as the Rust and JS runners do.
    wasm = resources.files("leasehold").joinpath("leasehold.wasm").read_bytes()
    return f"scenarios: component sha256 {hashlib.sha256(wasm).hexdigest()}"
