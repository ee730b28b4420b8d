"""Tiny files-transport projects, and the CLI run in a child process (its own JVM).

The child imports this checkout's `ticdc_sync` (PYTHONPATH is set to the repository
root) unless a test builds its own interpreter; its output is kept for the assertions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.spark._encoders import open_frames
from tests.spark.engine_harness import canal_row, canal_watermark, make_project, write_captures

REPO = Path(__file__).resolve().parents[2]
# A bound for a child that hangs; generous, a cold start resolves jars from Maven.
CHILD_TIMEOUT_S = 900

SCHEMA = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10));\n"
ROWS = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
# Small, single-threaded children: the machine is shared.
CHILD_CONF = {
    "spark.sql.shuffle.partitions": 1,
    "spark.ui.enabled": False,
    "spark.databricks.delta.snapshotPartitions": 1,
}


def profiles(conf: dict[str, object] | None = None, master: str = "local[1]") -> str:
    items = {**CHILD_CONF, **(conf or {})}
    lines = "".join(
        f"          {k}: {str(v).lower() if isinstance(v, bool) else v}\n" for k, v in items.items()
    )
    return (
        "test:\n  target: dev\n  outputs:\n    dev:\n"
        f'      spark:\n        master: "{master}"\n        conf:\n{lines}'
        "      warehouse: warehouse\n"
        "      transport: {type: files, captures: captures}\n"
    )


def canal_project(root: Path, conf: dict[str, object] | None = None) -> Path:
    """Two Canal-JSON inserts into shop.t and a watermark: target `t` gets ROWS."""
    make_project(root, protocol="canal-json", schema_sql=SCHEMA)
    (root / "profiles.yml").write_text(profiles(conf))
    mt = {"id": "int", "v": "varchar"}
    recs = [
        (
            0,
            i,
            None,
            canal_row(
                "shop", "t", "INSERT", 100 + i, {k: str(v) for k, v in r.items()}, mt, ["id"]
            ),
        )
        for i, r in enumerate(ROWS)
    ]
    recs.append((0, len(ROWS), None, canal_watermark(200)))
    write_captures(root, "t", recs)
    return root


def open_project(root: Path, conf: dict[str, object] | None = None) -> Path:
    """The same two rows as Open Protocol (one framed batch, then a resolved event):
    decoding it runs Python workers (codec facts 2.1)."""
    make_project(root, protocol="open-protocol", schema_sql=SCHEMA)
    (root / "profiles.yml").write_text(profiles(conf))
    # Flags: id is the handle and primary key (0x02|0x08), v nullable (0x40) (codec facts 2.3).
    events = [
        (
            {"ts": 100 + i, "scm": "shop", "tbl": "t", "t": 1},
            {
                "u": {
                    "id": {"t": 3, "h": True, "f": 10, "v": r["id"]},
                    "v": {"t": 15, "f": 64, "v": r["v"]},
                }
            },
        )
        for i, r in enumerate(ROWS)
    ]
    rows_key, rows_value = open_frames(events)
    wm_key, wm_value = open_frames([({"ts": 200, "t": 3}, None)])
    write_captures(root, "t", [(0, 0, rows_key, rows_value), (0, 1, wm_key, wm_value)])
    return root


def child_env(**changes: str | None) -> dict[str, str]:
    """os.environ with this checkout first on PYTHONPATH; a None value removes the key."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


NOT_INSTALLED_SITECUSTOMIZE = '''\
"""This Python without some installed packages (tests/runtime/helpers.py, without_modules)."""
import sys

_GONE = {gone!r}


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if any(name == m or name.startswith(m + ".") for m in _GONE):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
'''


def without_modules(folder: Path, modules: Sequence[str]) -> dict[str, str]:
    """`child_env()` for a child Python in which `modules` (and their submodules) cannot be
    imported, as when the packages that bring them are not installed: a `sitecustomize`
    first on its path puts a finder in front of every other that refuses them."""
    folder.mkdir(parents=True)
    (folder / "sitecustomize.py").write_text(
        NOT_INSTALLED_SITECUSTOMIZE.format(gone=tuple(modules))
    )
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env["PYTHONPATH"]])
    return env


def run_child(
    argv: Sequence[str], *, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        list(argv),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    # Shown by pytest when the test fails.
    print(
        f"$ {' '.join(argv)}\n-- exit {proc.returncode}\n-- stdout\n{proc.stdout}\n-- stderr\n{proc.stderr}"
    )
    return proc


def cli(*args: str) -> list[str]:
    """`ticdc-sync ARGS` run by this interpreter from this checkout."""
    return [sys.executable, "-m", "ticdc_sync.commands.cli", *args]
