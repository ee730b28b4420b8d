"""The scenario of the crash point tests (`test_crash_points_paths.py`,
`test_crash_points_merge.py`): crash safety at every named commit point
(`ticdc_sync.core.crash_points`), in the shared session. A run stopped at a point as a process
death would stop it, then resumed, leaves what an uninterrupted run leaves (every row, every
marker, the sync points read back at their versions, every target read as of the latest
TSO, the quarantine, the staged positions), with no file of the crash visible.

The scenario is the simulated upstream of `test_engine_modes` (three tables, one target per
mode, mirror, soft_delete and history, and a second mirror so that a round lands two
targets; ADD, RENAME, DROP COLUMN and TRUNCATE; redelivered messages; a row that does not
fit, quarantined), every target first loaded from a Dumpling export, fed in three chunks of
one run each, with sync points, a short staging retention (trims) and a compaction of the
staging table at each trim. Its `paths` variant lands every segment by the rewrite and the
round (the default for small targets) and re-sets a staging table property a run finds
missing; its `merge` variant lands them by the MERGE (`rewrite_below: 0`) and stages each
poll as a catch-up does (written, then counted back) from capture files that overlap.

An uninterrupted play of each variant (`reference`) keeps, after each chunk, a copy of the
project and its facts (`crash_harness.facts`). A crash case starts from the copy before the
chunk in which its point is reached, runs that chunk with the point armed, resumes after
the crash in the same session, and compares the facts with the reference's after that
chunk. `CASES` names the points each variant reaches; a test fails on a point no case
covers (`tests/spark/test_crash_points_paths.py`).
"""

from __future__ import annotations

import json
import random
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from testkit.dumpling import write_export
from tests.spark.crash_harness import assert_same_facts, facts, run_resuming
from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from tests.spark.test_engine_modes import (
    BASE,
    SCHEMA,
    STEP,
    TABLES,
    check,
    messages,
    simulate,
)
from ticdc_sync.ddl.schema_files import parse_schema_sql

# A second mirror target, fed the same changes as t_mirror: a round lands two targets.
MIRROR2 = "t_mirror2"
TARGETS = sorted([*TABLES, MIRROR2])
DEFAULTS = """\
sync_points: every 10s
defaults:
  on_bad_message: quarantine
staging:
  retention: 5s
"""
# Renewals every 1.7 s: a run renews its lease while it works.
PROFILE_TTL = "      run_lease: {ttl_seconds: 10}\n"
# Rows every target is first loaded with (a Dumpling export at BASE, before the first
# change); ids the simulated upstream never uses, which `check` leaves out.
LOADED = [{"id": 100 + i, "v": f"loaded{i}", "n": i} for i in range(3)]
# The staging table property the `paths` variant unsets before its second chunk.
UNSET = "parquet.page.row.count.limit"

# (variant, point, chunk, nth within that chunk's run, target): the point reached the nth
# time in the run of that chunk (for that target) is where the run stops.
CASES = [
    ("paths", "lease.acquire", 0, 1, None),
    ("paths", "state.create", 0, 1, None),
    ("paths", "staging.append", 0, 1, None),
    ("paths", "schema_history.append", 0, 1, None),
    ("paths", "quarantine.append", 0, 1, None),
    ("paths", "create", 0, 1, "t_hist"),
    ("paths", "load", 0, 1, "t_soft"),
    ("paths", "ddl.part", 0, 1, "t_hist"),
    ("paths", "round.files", 0, 1, None),
    ("paths", "round.commit", 0, 1, None),
    ("paths", "round.commit", 0, 2, None),  # between the two mirrors' commits
    ("paths", "rewrite.files", 0, 1, "t_soft"),
    ("paths", "rewrite.commit", 0, 1, "t_hist"),
    ("paths", "sync_point", 0, 1, None),
    ("paths", "staging.tallies", 0, 1, None),
    ("paths", "staging.trim", 0, 1, None),
    ("paths", "staging.compact", 0, 1, None),
    ("paths", "staging.vacuum", 0, 1, None),
    ("paths", "lease.renew", 0, 1, None),
    ("paths", "lease.release", 0, 1, None),
    ("paths", "staging.layout", 1, 1, None),
    ("paths", "ddl.part", 1, 1, "t_soft"),  # RENAME / DROP COLUMN of a populated target
    ("paths", "rewrite.commit", 1, 1, "t_soft"),
    ("paths", "round.commit", 1, 1, None),
    ("paths", "marker", 2, 1, None),
    ("merge", "staging.append", 0, 1, None),
    ("merge", "staging.dedupe", 0, 1, None),
    ("merge", "merge", 0, 1, "t_soft"),
    ("merge", "merge", 0, 1, "t_hist"),
    ("merge", "merge", 1, 1, "t_mirror"),
    ("merge", "ddl.part", 1, 1, "t_hist"),
    ("merge", "marker", 2, 1, "t_soft"),
]

# Points whose stop-and-resume test lives beside the feature that reaches them (a scenario
# of its own is cheaper there than making this one reach them): the file that arms each.
ELSEWHERE = {
    "maintenance.compact": "tests/spark/test_target_maintenance.py",
    "maintenance.vacuum": "tests/spark/test_target_maintenance.py",
    "maintenance.checkpoint": "tests/spark/test_target_maintenance.py",
    "catalog.register": "tests/catalog/test_hive_metastore.py",
    "catalog.drop": "tests/spark/test_catalog_session.py",
    "catalog.record": "tests/spark/test_catalog_session.py",
    "layout.rebuild": "tests/spark/test_layout.py",
    "layout.cluster": "tests/spark/test_layout.py",
    "layout.properties": "tests/spark/test_entry_properties.py",
}


def _entries(variant: str) -> str:
    extra = "    rewrite_below: 0\n" if variant == "merge" else ""
    modes = {**TABLES, MIRROR2: "mirror"}
    return "".join(
        f"  - upstream: shop.{t}\n    name: {t}\n    mode: {m}\n{extra}" for t, m in modes.items()
    )


def _with_mirror2(msg: bytes) -> list[bytes]:
    """`msg`, and for t_mirror's messages the same one for t_mirror2."""
    body = json.loads(msg)
    if body.get("table") != "t_mirror":
        return [msg]
    twin = dict(body, table=MIRROR2)
    if body.get("isDdl"):
        twin["sql"] = body["sql"].replace("t_mirror", MIRROR2)
    return [msg, json.dumps(twin).encode()]


def _scenario(root, variant: str):
    m = simulate(seed=31, steps=40)
    batches = messages(m, random.Random(5))
    schema_sql = SCHEMA + SCHEMA.split("\n")[0].replace("t_mirror", MIRROR2) + "\n"
    make_project(
        root,
        protocol="canal-json",
        schema_sql=schema_sql,
        tables=_entries(variant),
        defaults=DEFAULTS,
    )
    profiles = root / "profiles.yml"
    profiles.write_text(profiles.read_text() + PROFILE_TTL)
    schemas = {s.table: s for s in parse_schema_sql(schema_sql, None, "schema/shop.sql")}
    write_export(root / "export", [(schemas[t], LOADED) for t in TARGETS], BASE)
    src = root / "sources" / "s.yml"
    src.write_text(src.read_text() + "    initial_load:\n      dumpling: export\n")
    chunks, offset, half = [], 0, len(batches) // 2
    for lo, hi in ((0, half), (half, len(batches))):
        chunk = []
        for _ts, batch in batches[lo:hi]:
            for msg in batch:
                for each in _with_mirror2(msg):
                    chunk.append((0, offset, None, each))
                    offset += 1
        if lo == 0:
            # A row whose value does not fit its column: quarantined, not applied.
            bad = canal_row(
                "shop",
                "t_soft",
                "INSERT",
                batches[1][0],
                {"id": "99", "v": "x", "n": "NaN?"},
                {"id": "int", "v": "varchar", "n": "int"},
                ["id"],
            )
            chunk.append((0, offset, None, bad))
            offset += 1
        chunk.append((0, offset, None, wm(batches[hi - 1][0])))
        offset += 1
        chunks.append(chunk)
    # A last chunk that changes no row: a DELETE of a key no table has, then a watermark.
    # Each target's segment lands nothing and commits its marker alone.
    after = batches[-1][0] + STEP
    gone = []
    for t in TARGETS:
        row = canal_row(
            "shop", t, "DELETE", after, {"id": "77"}, {"id": "int", "v2": "varchar"}, ["id"]
        )
        gone.append((0, offset, None, row))
        offset += 1
    chunks.append([*gone, (0, offset, None, wm(after + STEP))])
    return m, batches[-1][0], chunks


@contextmanager
def staging_settings():
    """The staging table compacted at each trim (its commit points reached in a short play)
    in place of once it has gathered many files; `Settings.catch_up` stages every poll as a
    large one is (written, then counted back)."""
    import ticdc_sync.spark.engine as engine
    import ticdc_sync.spark.staging.batch as batch

    before = engine.COMPACT_ABOVE_FILES, batch.KEEP_POLL_RECORDS, batch.KEEP_POLL_BYTES
    engine.COMPACT_ABOVE_FILES = 0
    try:
        yield batch
    finally:
        engine.COMPACT_ABOVE_FILES, batch.KEEP_POLL_RECORDS, batch.KEEP_POLL_BYTES = before


def _prepare(spark, settings, variant: str, root, chunk: int, again: bool = False) -> None:
    """What the variant does before a chunk's run: the `merge` variant stages as a
    catch-up, with its first chunk's captures also in a second, overlapping file; the
    `paths` variant unsets a staging table property before its second chunk. `again`: on
    a copy made after the captures were written (the settings only)."""
    if variant == "merge":
        settings.KEEP_POLL_RECORDS = settings.KEEP_POLL_BYTES = -1
    else:
        settings.KEEP_POLL_RECORDS = 100_000
        settings.KEEP_POLL_BYTES = 64 << 20
    if again:
        return
    if variant == "merge" and chunk == 0:
        part = root / "captures" / "t" / "part-0.jsonl"
        (part.parent / "overlap.jsonl").write_text(part.read_text())
    if variant == "paths" and chunk == 1:
        from ticdc_sync.core.sqlgen import table_ref
        from ticdc_sync.warehouse.locations import state_location, warehouse_path

        events = state_location(warehouse_path(load(root)), "events")
        spark.sql(f"ALTER TABLE {table_ref(events)} UNSET TBLPROPERTIES ('{UNSET}')")


def reference(spark, settings, base: Path, variant: str) -> dict:
    """The uninterrupted play of `variant` under `base`: per chunk, a copy of the project
    before its run (captures written), the points the run reached, and the facts after it."""
    root = base / "p"
    m, resolved, chunks = _scenario(root, variant)
    before, reached, after = [], [], []
    for i, chunk in enumerate(chunks):
        write_captures(root, "t", chunk)
        _prepare(spark, settings, variant, root, i)
        copy = base / f"before-{i}"
        shutil.copytree(root, copy)
        before.append(copy)
        reached.append(run_resuming(spark, root).reached)
        after.append(facts(spark, root, TARGETS))

    def read(name: str, order: str) -> list[dict]:
        return [r for r in read_target(spark, load(root), name, order) if r["id"] < 100]

    check(spark, load(root), m, resolved, read)
    return {"variant": variant, "before": before, "reached": reached, "after": after}


def cases(variant: str) -> list:
    """The `CASES` of `variant` as pytest parameters, each with an id."""
    return [
        pytest.param(*c[1:], id=f"{c[1]}-chunk{c[2]}-{c[3]}" + (f"-{c[4]}" if c[4] else ""))
        for c in CASES
        if c[0] == variant
    ]


def assert_each_case_reached(ref: dict) -> None:
    """Every case of the reference's variant is reached by its uninterrupted play."""
    for variant, point, chunk, nth, target in CASES:
        if variant != ref["variant"]:
            continue
        hits = [t for p, t in ref["reached"][chunk] if p == point and target in (None, t)]
        assert len(hits) >= nth, (point, chunk, nth, target, ref["reached"][chunk])


def crash_and_compare(spark, settings, ref: dict, tmp: Path, point, chunk, nth, target) -> None:
    """Play the case's chunk from the reference's copy before it, stopped at the point and
    resumed; the facts after it equal the reference's."""
    variant = ref["variant"]
    root = tmp / "p"
    shutil.copytree(ref["before"][chunk], root)
    _prepare(spark, settings, variant, root, chunk, again=True)
    play = run_resuming(spark, root, point, nth=nth, target=target)
    assert play.fired, f"{point} was not reached: {play.outcomes}"
    assert_same_facts(facts(spark, root, TARGETS), ref["after"][chunk], play.outcomes)
