"""The benchmarks' project over a workload's capture (`make_project`), the captures a pass
reads (`point_captures`), and the live rows of each target (`target_counts`).

Shared by run.py and the measurements it drives (growth, as_of_read, sdp_peer, compare), so
that none of them imports run.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import workload as W  # noqa: E402


def make_project(
    root: Path,
    cap: W.Capture,
    deletion_vectors: bool = False,
    mode: str = "mirror",
    rewrite_below: str | None = None,
) -> Path:
    """A project over `cap`'s capture; `deletion_vectors`: its targets are created with
    them (`table_features.deletion_vectors: true`; the default is without); `mode`: every
    target's mode (`defaults.mode`); `rewrite_below`: `defaults.rewrite_below` (`0`: every
    segment MERGEs)."""
    root.mkdir(parents=True, exist_ok=True)
    defaults = ["defaults:"]
    if rewrite_below is not None:
        defaults.append(f"  rewrite_below: {rewrite_below}")
    if deletion_vectors:
        defaults.append("  table_features:\n    deletion_vectors: true")
    if mode != "mirror":
        defaults.append(f"  mode: {mode}")
    (root / "ticdc_sync.yml").write_text(
        "name: bench\nprofile: bench\n" + ("\n".join(defaults) + "\n" if defaults[1:] else "")
    )
    (root / "profiles.yml").write_text(
        "bench:\n  target: dev\n  outputs:\n    dev:\n"
        '      spark: {master: "local[2]"}\n'
        "      warehouse: warehouse\n      transport: {type: files, captures: captures}\n"
    )
    (root / "sources").mkdir(exist_ok=True)
    (root / "sources" / "s.yml").write_text(
        f"sources:\n  - name: src\n    protocol: {cap.params.protocol}\n    topics: [{W.TOPIC}]\n"
        "    options:\n      enable-tidb-extension: true\n"
    )
    (root / "tables").mkdir(exist_ok=True)
    (root / "tables" / "t.yml").write_text(
        f'tables:\n  - upstream: "{W.DB}.*"\n    name: "{{table}}"\n'
    )
    (root / "schema").mkdir(exist_ok=True)
    (root / "schema" / "bench.sql").write_text(cap.schema_sql())
    point_captures(root, cap, 1)
    return root


def point_captures(root: Path, cap: W.Capture, n: int) -> None:
    """captures/<topic> -> the pass's folder (a consumed pass is gone, as in Kafka)."""
    (root / "captures").mkdir(exist_ok=True)
    link = root / "captures" / W.TOPIC
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(cap.captures(n) / W.TOPIC, target_is_directory=True)


# The rows of a target of each mode that are the upstream table now.
LIVE = {"mirror": "true", "soft_delete": "NOT _is_deleted", "history": "_valid_to IS NULL"}


def target_counts(spark, wh: Path, tables: int = 3, mode: str = "mirror") -> dict[str, int]:
    from ticdc_sync.warehouse.locations import target_location

    return {
        t.table: spark.read.format("delta")
        .load(target_location(str(wh), t.table))
        .where(LIVE[mode])
        .count()
        for t in W.bench_tables(tables)
    }
