"""A process that takes a warehouse's run lease, for the tests that race several of them.

    python -m tests.lease_child WAREHOUSE DIR [TTL] [WAIT]

`start` and `result` are how tests drive it. Waits until DIR/go exists (so that every racer starts at once), then takes the lease
(`ticdc_sync.warehouse.lease.RunLease`) and prints one line: `WON <holder>` or `REFUSED <message>`.
The winner holds the lease (renewing it, and checking it as a run does before each commit)
until DIR/release exists, then releases it and exits 0; if it finds the lease lost it
prints `LOST <message>` and exits 3. A refused racer exits 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ticdc_sync.warehouse.lease import LeaseHeld, LeaseLost, RunLease

DEADLINE_SECONDS = 300
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ("WON ", "REFUSED ", "LOST ")


def start(
    warehouse: str,
    folder: Path,
    *,
    ttl: float = 120.0,
    wait: float = 0.0,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start one racer (it waits for `folder/go`), in `folder` as its working directory."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.lease_child", warehouse, str(folder), str(ttl), str(wait)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def result(proc: subprocess.Popen) -> tuple[str, list[str]]:
    """The racer's result line (`WON ...`, `REFUSED ...`, `LOST ...`) and the lines before
    it; ('', lines) if it exited without one."""
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        if line.startswith(RESULTS):
            return line.rstrip("\n"), lines
        lines.append(line.rstrip("\n"))
    return "", lines


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no {path} within {DEADLINE_SECONDS}s")
        time.sleep(0.01)


def main(argv: list[str]) -> int:
    warehouse, folder = argv[0], Path(argv[1])
    ttl = float(argv[2]) if len(argv) > 2 else 120.0
    wait = float(argv[3]) if len(argv) > 3 else 0.0
    _wait_for(folder / "go")
    lease = RunLease(warehouse, ttl=ttl, wait=wait, out=lambda s: print(s, flush=True))
    try:
        with lease:
            print(f"WON {lease.holder}", flush=True)
            deadline = time.monotonic() + DEADLINE_SECONDS
            while not (folder / "release").exists() and time.monotonic() < deadline:
                lease.check()
                time.sleep(0.05)
    except LeaseHeld as e:
        print(f"REFUSED {e}", flush=True)
        return 1
    except LeaseLost as e:
        print(f"LOST {e}", flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
