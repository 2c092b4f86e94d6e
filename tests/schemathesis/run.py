"""Fuzzes a live `leasehold serve` from its own OpenAPI document.

Starts the server on a fresh redb file with three tokens (a reviewer, a
service and an operator), then runs schemathesis once per token with every
check on, a fixed seed and a bounded number of examples. A run passes when
schemathesis finds nothing: no 5xx, no answer outside the document, no
schema-valid request refused and no schema-violating one accepted.

    python run.py path/to/leasehold

Prints one line per token, `schemathesis <scope>: passed|failed`, and exits
non-zero if any failed. The seed and example count are in this file and in
schemathesis.toml beside it, so a failure reproduces.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
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
        server = subprocess.Popen(
            [leasehold, "--db", str(Path(work, "fuzz.redb")), "serve", "--listen", "127.0.0.1:0",
             "--tokens", str(Path(work, "tokens"))],
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
            for scope, _, _ in WHO:
                run = subprocess.run(
                    [st, "--config-file", str(HERE / "schemathesis.toml"), "run",
                     f"{base}/v1/openapi.json", "--checks", "all", "--seed", SEED,
                     "--workers", "1", "--no-color", "--suppress-health-check", "all",
                     "--generation-database", "none",
                     "-H", f"Authorization: Bearer {tokens[scope]}"],
                    cwd=work, env={**os.environ, "PYTHONPATH": str(HERE)},
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
