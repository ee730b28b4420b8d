"""The initial-load benchmark (`run.py --only load`): a Dumpling CSV export of N rows loaded
by ticdc-sync, against plain `spark.read.csv(...).write.format("delta")` of the same files.

The export is one table, `bench.accounts` (8 columns: bigint, two varchar, decimal, varchar,
int, two datetime; some NULLs, some quotes and backslashes), written in Dumpling's layout
and CSV format (`--filetype csv -r`, 20 files) under `benchmarks/out/load-<N>/` (cached,
gitignored). Lines come from a fast formatter for this one schema; every run first checks it
byte for byte against `testkit.dumpling`'s general writer on a sample.

- ticdc-sync: `runner.run` on a project whose only source has `initial_load` (no changefeed
  records): plan, create, the load's one commit. Wall time of the run.
- plain: the same files with `spark.read.csv` (header, Dumpling's `\\N` null value and `\\`
  escape, the table's typed schema) written to a new Delta table. No exactness checks, no
  marker, no schema history: the floor a load cannot go below.

Both tables are counted back after the write. Not part of the test suite.
"""

from __future__ import annotations

import random
import shutil
import time
from decimal import Decimal
from pathlib import Path

import workload as W

from testkit.dumpling import DumplingFlags, csv_field, metadata_text, write_export
from testkit.values import zone

FILES = 20
SNAPSHOT_TS = 445644800004909736
PLAIN_SCHEMA = (
    "id BIGINT, name STRING, email STRING, balance DECIMAL(12,2), status STRING, "
    "visits INT, created TIMESTAMP_NTZ, updated TIMESTAMP_NTZ"
)


def _table():
    return next(t for t in W.bench_tables() if t.table == "accounts")


def _row(i: int, rng: random.Random) -> dict:
    return {
        "id": i,
        "name": f'name "{i % 1000}"',
        "email": None if i % 7 == 0 else f"user{i}@example.com",
        "balance": Decimal(rng.randrange(10**9)).scaleb(-2),
        "status": ("new", "active", "back\\slash")[i % 3],
        "visits": None if i % 5 == 0 else i % 10_000,
        "created": f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} 10:{i % 60:02d}:00",
        "updated": None if i % 3 == 0 else f"2024-06-{1 + i % 28:02d} 23:59:{i % 60:02d}",
    }


def _fast_line(r: dict) -> bytes:
    """Dumpling's CSV line for one row of this schema (strings quoted and escaped)."""

    def s(v: str | None) -> str:
        if v is None:
            return "\\N"
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def n(v) -> str:
        return "\\N" if v is None else str(v)

    return (
        f"{r['id']},{s(r['name'])},{s(r['email'])},{r['balance']},{s(r['status'])},"
        f"{n(r['visits'])},{s(r['created'])},{s(r['updated'])}"
    ).encode()


def verify_fast_path(sample: int = 2000) -> int:
    """The fast formatter writes what testkit's Dumpling writer writes, on `sample` rows."""
    t = _table()
    rng = random.Random(1)
    flags = DumplingFlags(filetype="csv")
    tz = zone("UTC")
    for i in range(sample):
        r = _row(i, rng)
        general = b",".join(csv_field(c, r[c.name], tz, flags) for c in t.columns)
        assert _fast_line(r) == general, (i, _fast_line(r), general)
    return sample


def ensure_export(rows: int) -> Path:
    """The export of `rows` rows (written once, then reused)."""
    folder = W.OUT / f"load-{rows}"
    done = folder / "metadata"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    t = _table()
    # The schema files and `metadata` from the general writer; the data files streamed.
    write_export(folder, [(t, [])], SNAPSHOT_TS, DumplingFlags(filetype="csv"))
    done.unlink()
    rng = random.Random(7)
    per = -(-rows // FILES)
    header = b",".join(b'"' + c.name.encode() + b'"' for c in t.columns) + b"\r\n"
    for f in range(FILES):
        lo, hi = f * per, min(rows, (f + 1) * per)
        with (folder / f"bench.accounts.{f:09d}.csv").open("wb") as out:
            out.write(header)
            buf = []
            for i in range(lo, hi):
                buf.append(_fast_line(_row(i, rng)))
                if len(buf) >= 100_000:
                    out.write(b"\r\n".join(buf) + b"\r\n")
                    buf = []
            if buf:
                out.write(b"\r\n".join(buf) + b"\r\n")
    # `metadata` last, as Dumpling does: a folder without it is an unfinished export.
    done.write_text(metadata_text(SNAPSHOT_TS))
    return folder


def _project(root: Path, export: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ticdc_sync.yml").write_text("name: bench\nprofile: bench\n")
    (root / "profiles.yml").write_text(
        "bench:\n  target: dev\n  outputs:\n    dev:\n"
        '      spark: {master: "local[2]"}\n'
        "      warehouse: warehouse\n      transport: {type: files, captures: captures}\n"
    )
    (root / "sources").mkdir(exist_ok=True)
    (root / "sources" / "s.yml").write_text(
        f"sources:\n  - name: src\n    protocol: canal-json\n    topics: [{W.TOPIC}]\n"
        f"    initial_load:\n      dumpling: {export}\n      options: {{filetype: csv}}\n"
    )
    (root / "tables").mkdir(exist_ok=True)
    (root / "tables" / "t.yml").write_text(
        f'tables:\n  - upstream: "{W.DB}.*"\n    name: "{{table}}"\n'
    )
    (root / "captures" / W.TOPIC).mkdir(parents=True, exist_ok=True)
    return root


def measure_load(spark, rows: int, repeat: int, tmp: Path) -> dict:
    """Best-of-`repeat` seconds of the ticdc-sync load and of the plain read+write, with
    the row counts read back."""
    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner
    from ticdc_sync.warehouse.locations import target_location

    export = ensure_export(rows)
    paths = sorted(str(p) for p in export.glob("bench.accounts.*.csv"))
    best = {"ticdc": float("inf"), "plain": float("inf")}
    counts = {}
    log: list[str] = []
    runs: dict[str, list[float]] = {"ticdc": [], "plain": []}

    def ticdc(i: int) -> float:
        nonlocal log
        root = _project(tmp / f"load-{i}", export)
        project = load_project(root)
        lines: list[str] = []
        t0 = time.perf_counter()
        code = runner.run(project, spark=spark, out=lines.append)
        dt = time.perf_counter() - t0
        assert code == 0, lines
        if dt < best["ticdc"]:
            log = lines
        loc = target_location(str(root / "warehouse"), "accounts")
        counts["ticdc"] = spark.read.format("delta").load(loc).count()
        shutil.rmtree(root, ignore_errors=True)
        return dt

    def plain(i: int) -> float:
        out = str(tmp / f"plain-{i}")
        t0 = time.perf_counter()
        (
            spark.read.schema(PLAIN_SCHEMA)
            .options(header="true", nullValue="\\N", escape="\\")
            .csv(paths)
            .write.format("delta")
            .save(out)
        )
        dt = time.perf_counter() - t0
        counts["plain"] = spark.read.format("delta").load(out).count()
        shutil.rmtree(out, ignore_errors=True)
        return dt

    # Alternating, the order flipping each round, so the JVM's warm-up and the host's load
    # fall on both.
    for i in range(repeat):
        for name, fn in (("ticdc", ticdc), ("plain", plain))[:: 1 if i % 2 == 0 else -1]:
            dt = fn(i)
            print(f"  load {name} #{i + 1}: {dt:.1f}s", flush=True)
            runs[name].append(dt)
            best[name] = min(best[name], dt)
    files = len(paths)
    size = sum(Path(p).stat().st_size for p in paths)
    return {
        **best,
        "runs": runs,
        "counts": counts,
        "files": files,
        "bytes": size,
        "rows": rows,
        "log": log,
    }
