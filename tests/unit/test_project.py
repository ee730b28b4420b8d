"""Project loading: the example, line-aware errors, duplicate keys, env values, semantic checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from ticdc_sync.core.errors import ProjectError
from ticdc_sync.core.model import Action, DdlKind, Protocol, TransportKind
from ticdc_sync.project import json_schema, load_project, load_yaml

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "projects_example" / "shop"


def copy_shop(tmp_path: Path) -> Path:
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=shutil.ignore_patterns("warehouse", "target", "captures"))
    return dest


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


def issues_of(root: Path, target: str | None = None) -> list[str]:
    with pytest.raises(ProjectError) as exc:
        load_project(root, target)
    return [i.render() for i in exc.value.issues]


def test_example_project_loads() -> None:
    p = load_project(SHOP)
    assert p.name == "shop"
    assert p.output.name == "dev"
    assert p.output.transport.kind is TransportKind.FILES
    assert p.output.transport.captures == "captures"
    assert p.output.warehouse == "warehouse"
    assert p.output.spark_conf["spark.ui.enabled"] == "false"
    assert [s.name for s in p.sources] == ["canal", "debezium", "open"]
    assert [s.protocol for s in p.sources] == [
        Protocol.CANAL_JSON,
        Protocol.DEBEZIUM,
        Protocol.OPEN_PROTOCOL,
    ]
    assert sorted(p.seed_schemas) == [("shop", "customers"), ("shop", "items"), ("shop", "orders")]
    assert p.route("debezium", "shop", "orders").target_name("shop", "orders") == "debezium_orders"
    assert p.route("canal", "shop", "items").origin.render() == "tables/shop.yml:4"
    assert p.defaults.ddl[DdlKind.NARROW_COLUMN] is Action.FAIL
    assert p.warnings == ()


def test_kafka_target_uses_env_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    p = load_project(SHOP, "kafka")
    assert p.output.transport.kind is TransportKind.KAFKA
    assert p.output.transport.bootstrap_servers == "127.0.0.1:9092"
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "broker:19092")
    assert load_project(SHOP, "kafka").output.transport.bootstrap_servers == "broker:19092"


def test_unknown_target_is_reported(tmp_path: Path) -> None:
    msgs = issues_of(copy_shop(tmp_path), "staging")
    assert len(msgs) == 1
    assert msgs[0].startswith("profiles.yml:5: shop.outputs: target 'staging' not found")
    assert "dev, kafka" in msgs[0]


def test_missing_profile_is_reported_where_it_is_named(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    text = (root / "ticdc_sync.yml").read_text().replace("profile: shop", "profile: nope")
    (root / "ticdc_sync.yml").write_text(text)
    line = text.splitlines().index("profile: nope") + 1
    msgs = issues_of(root)
    assert msgs == [
        f"ticdc_sync.yml:{line}: profile: profile 'nope' not found in profiles.yml (hint: "
        "profiles there: shop; set `profile:` in ticdc_sync.yml to one of them, or add the "
        "profile)"
    ]
    # Without `profile:` the project name is the profile: the message says so, at `name:`.
    (root / "ticdc_sync.yml").write_text("name: other\n")
    assert issues_of(root)[0].startswith(
        "ticdc_sync.yml:1: name: profile 'other' not found in profiles.yml "
        "(`profile:` is not set, so the project name is used)"
    )


def test_profiles_dir_is_read_instead_of_the_projects(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    elsewhere = tmp_path / "profiles"
    elsewhere.mkdir()
    text = (root / "profiles.yml").read_text().replace("target: dev", "target: kafka")
    (elsewhere / "profiles.yml").write_text(text)
    assert load_project(root).output.name == "dev"
    assert load_project(root, profiles_dir=elsewhere).output.name == "kafka"
    with pytest.raises(ProjectError) as exc:
        load_project(root, profiles_dir=tmp_path / "nowhere")
    assert (
        exc.value.issues[0]
        .render()
        .endswith(
            "--profiles-dir " + str(tmp_path / "nowhere") + ": no profiles.yml there "
            "(hint: point --profiles-dir at the folder holding profiles.yml)"
        )
    )


def test_three_planted_mistakes_in_two_files(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    src = (root / "sources" / "ticdc.yml").read_text()
    # 1: a misspelled protocol.
    src = src.replace("protocol: open-protocol", "protocol: open-protocl")
    write(root / "sources" / "ticdc.yml", src)
    tables = """tables:
  - upstream: shop.*
    source: canal
    name: "canal_{table}"
    partiton_by: day
  - upstream: shop.*
    source: debezum
    name: "debezium_{table}"
"""
    write(root / "tables" / "shop.yml", tables)
    msgs = issues_of(root)
    assert msgs == [
        "sources/ticdc.yml:31: sources[2].protocol: 'open-protocl' is not one of the allowed "
        "values (hint: use one of: canal-json, debezium, open-protocol)",
        "tables/shop.yml:5: tables[0].partiton_by: unknown key 'partiton_by' (hint: allowed keys: "
        "accept_reader_loss, catalog_on_drop, cluster_by, comment, ddl, description, "
        "ignore_columns, initial_load, "
        "keys, maintenance, mode, name, on_bad_message, partition_by, properties, rewrite_below, "
        "schema, source, table, table_features, target_lag, upstream)",
        "tables/shop.yml:7: tables[1].source: unknown source 'debezum' "
        "(hint: sources: canal, debezium, open)",
    ]


def test_duplicate_keys_are_rejected(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    write(
        root / "tables" / "shop.yml",
        "tables:\n  - upstream: shop.orders\n    keys: [id]\n    keys: [id, item_id]\n",
    )
    msgs = issues_of(root)
    assert msgs == [
        "tables/shop.yml:4: tables[0].keys: duplicate key 'keys' (first at line 3) "
        "(hint: keep one of them)"
    ]


def test_yaml_loader_keeps_lines() -> None:
    data, issues = load_yaml("a:\n  b: 1\n  c:\n    - x\n    - y\n", "f.yml")
    assert issues == []
    assert data == {"a": {"b": 1, "c": ["x", "y"]}}
    assert data.key_lines["a"] == 1
    assert data["a"].key_lines["c"] == 3
    assert data["a"]["c"].item_lines == [4, 5]


def test_invalid_yaml_names_the_line() -> None:
    _, issues = load_yaml("a: [1, 2\nb: 3\n", "f.yml")
    assert len(issues) == 1 and issues[0].file == "f.yml" and issues[0].line is not None


def test_env_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_shop(tmp_path)
    prof = (
        (root / "profiles.yml")
        .read_text()
        .replace(
            "warehouse: warehouse\n      transport:\n        type: files",
            "warehouse: ${WH}\n      transport:\n        type: files",
            1,
        )
    )
    write(root / "profiles.yml", prof)
    monkeypatch.delenv("WH", raising=False)
    msgs = issues_of(root)
    assert msgs == [
        "profiles.yml:12: shop.outputs.dev.warehouse: environment variable WH is not set "
        "(hint: export WH=... or write ${WH:-default})"
    ]
    monkeypatch.setenv("WH", "/data/wh")
    monkeypatch.setenv("SPARK_MASTER", "spark://h:7077")
    p = load_project(root)
    assert p.output.warehouse == "/data/wh"
    assert p.output.spark_master == "spark://h:7077"


def test_s3_target_and_run_lease_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHOP_S3_BUCKET", raising=False)
    p = load_project(SHOP, "s3")
    assert p.output.warehouse == "s3a://shop/warehouse"
    assert (p.output.run_lease_ttl, p.output.run_lease_wait) == (120.0, 0.0)
    assert load_project(SHOP).output.run_lease_ttl == 120.0  # the default
    root = copy_shop(tmp_path)
    prof = (root / "profiles.yml").read_text()
    write(
        root / "profiles.yml",
        prof.replace("{ttl_seconds: 120}", "{ttl_seconds: 30, wait_seconds: 600}"),
    )
    p = load_project(root, "s3")
    assert (p.output.run_lease_ttl, p.output.run_lease_wait) == (30.0, 600.0)
    write(
        root / "profiles.yml", prof.replace("{ttl_seconds: 120}", "{ttl_seconds: 0, forever: true}")
    )
    msgs = issues_of(root, "s3")
    assert len(msgs) == 2 and all(m.startswith("profiles.yml:") for m in msgs), msgs
    assert any("run_lease" in m and "forever" in m for m in msgs), msgs
    assert any("run_lease.ttl_seconds" in m for m in msgs), msgs


def test_env_missing_in_unselected_target_is_fine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_shop(tmp_path)
    prof = (
        (root / "profiles.yml")
        .read_text()
        .replace('"${KAFKA_BOOTSTRAP:-127.0.0.1:9092}"', '"${KAFKA_BOOTSTRAP}"')
    )
    write(root / "profiles.yml", prof)
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    assert load_project(root).output.name == "dev"
    assert "KAFKA_BOOTSTRAP is not set" in issues_of(root, "kafka")[0]


def test_profiles_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_shop(tmp_path)
    elsewhere = tmp_path / "profiles"
    elsewhere.mkdir()
    (root / "profiles.yml").rename(elsewhere / "profiles.yml")
    with pytest.raises(ProjectError):
        load_project(root)
    monkeypatch.setenv("TICDC_SYNC_PROFILES_DIR", str(elsewhere))
    assert load_project(root).output.name == "dev"


SEMANTIC_CASES = {
    "empty keys": (
        "tables:\n  - upstream: shop.orders\n    keys: []\n",
        "tables/t.yml:3: tables[0].keys: must not be empty",
    ),
    "same upstream twice": (
        "tables:\n  - upstream: shop.orders\n    name: a\n  - upstream: shop.orders\n    name: b\n",
        "tables/t.yml:4: tables[1].upstream: shop.orders is already claimed by the entry at tables/t.yml:2",
    ),
    "db glob without {db}": (
        "tables:\n  - upstream: '*.orders'\n    name: orders\n",
        "tables/t.yml:3: tables[0].name: '*.orders' spans databases but name 'orders' has no {db}",
    ),
    "db glob with {table} only": (
        "tables:\n  - upstream: 'shop_*.*'\n",
        "tables/t.yml:2: tables[0].name: 'shop_*.*' spans databases but name '{table}' has no {db}",
    ),
    "target collision": (
        "tables:\n  - upstream: shop.*\n    source: canal\n  - upstream: shop.*\n    source: open\n",
        "tables/t.yml:4: tables[1].name: target '{table}' of shop.* can collide with target '{table}' of shop.* at tables/t.yml:2",
    ),
    "fixed name inside a template's range": (
        "tables:\n  - upstream: shop.*\n    source: canal\n  - upstream: crm.orders\n    source: canal\n",
        "tables/t.yml:4: tables[1].name: target '{table}' of crm.orders can collide",
    ),
    "unknown placeholder": (
        "tables:\n  - upstream: shop.orders\n    name: '{schema}_{table}'\n",
        "tables/t.yml:3: tables[0].name: unknown placeholder {schema}",
    ),
    "key not a column": (
        "tables:\n  - upstream: shop.orders\n    keys: [order_no]\n",
        # At the `keys:` line, not the entry's first line.
        "tables/t.yml:3: tables[0].keys: shop.orders has no column 'order_no'",
    ),
    "exact after pattern": (
        "tables:\n  - upstream: shop.*\n    name: all_{table}\n  - upstream: shop.orders\n    name: o\n",
        "tables/t.yml:4: tables[1].upstream: shop.orders is already claimed by pattern 'shop.*'",
    ),
    "rebuild outside narrow_column": (
        "tables:\n  - upstream: shop.orders\n    ddl: {drop_column: rebuild}\n",
        "tables/t.yml:3: tables[0].ddl.drop_column: 'rebuild' is not one of the allowed values",
    ),
}


@pytest.mark.parametrize("case", sorted(SEMANTIC_CASES))
def test_semantic_checks(tmp_path: Path, case: str) -> None:
    root = copy_shop(tmp_path)
    (root / "tables" / "shop.yml").unlink()
    text, expected = SEMANTIC_CASES[case]
    write(root / "tables" / "t.yml", text)
    msgs = issues_of(root)
    assert any(m.startswith(expected) for m in msgs), msgs


def test_shard_merge_in_one_db_is_allowed(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    write(
        root / "tables" / "shop.yml",
        "tables:\n  - upstream: shop.orders_*\n    name: orders\n    source: canal\n",
    )
    assert load_project(root).tables[0].name == "orders"


def test_option_that_does_not_apply_is_an_error(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    src = (root / "sources" / "ticdc.yml").read_text()
    src = src.replace(
        "      time-zone: UTC\n    initial_load:",
        "      time-zone: UTC\n      debezium-disable-schema: true\n    initial_load:",
        1,
    )
    write(root / "sources" / "ticdc.yml", src)
    msgs = issues_of(root)
    assert msgs == [
        "sources/ticdc.yml:19: sources[0].options.debezium-disable-schema: option "
        "'debezium-disable-schema' does not apply to canal-json (hint: it applies to debezium; remove it)"
    ]


def test_canal_without_tidb_extension_is_a_warning(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    src = (root / "sources" / "ticdc.yml").read_text()
    src = src.replace("enable-tidb-extension: true", "enable-tidb-extension: false", 1)
    # Without commit_ts a source cannot join the stream at an export's snapshot (an error,
    # tests/unit/test_initial_load_config.py): this one starts from the changefeed alone.
    src = src.replace("    initial_load: {dumpling: dumpling, options: {filetype: csv}}\n", "", 1)
    write(root / "sources" / "ticdc.yml", src)
    p = load_project(root)
    found = [w for w in p.warnings if "enable-tidb-extension" in w]
    assert len(found) == 1
    assert found[0].startswith(
        "sources/ticdc.yml:12: sources[0]: warning: canal-json without enable-tidb-extension"
    )


def test_a_files_topic_without_captures_is_a_warning(tmp_path: Path) -> None:
    """A typo in `topics:` with the files transport would read nothing, ever, silently."""
    root = tmp_path / "shop"
    shutil.copytree(SHOP, root, ignore=shutil.ignore_patterns("warehouse", "target"))
    assert load_project(root).warnings == ()
    src = (root / "sources" / "ticdc.yml").read_text()
    write(root / "sources" / "ticdc.yml", src.replace("[shop_canal]", "[shop_canall]", 1))
    (warning,) = load_project(root).warnings
    assert warning.startswith("sources/ticdc.yml:")
    assert "topic shop_canall has no capture folder captures/shop_canall" in warning


def test_bad_schema_sql_is_an_issue(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    write(root / "schema" / "broken.sql", "CREATE TABLE t (id INT,\n")
    msgs = issues_of(root)
    assert len(msgs) == 1 and msgs[0].startswith("schema/broken.sql")


def test_not_a_project(tmp_path: Path) -> None:
    msgs = issues_of(tmp_path)
    assert "no ticdc-sync project here" in msgs[0] and "ticdc-sync init" in msgs[0]


def test_json_schema_is_valid_and_strict() -> None:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("2020-12/schema")

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, json.dumps(node)[:120]
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    ddl_keys = set(schema["$defs"]["ddl_policy"]["properties"])
    assert ddl_keys == {k.value for k in DdlKind}


# --------------------------------------------------------------------------- target_lag


def _with_lags(root: Path, default: str | None, entry: str | None) -> None:
    """The shop project with `defaults.target_lag` and the canal entry's `target_lag` set."""
    proj = (root / "ticdc_sync.yml").read_text()
    if default is not None:
        proj = proj.replace("defaults:\n", f"defaults:\n  target_lag: {default}\n")
    write(root / "ticdc_sync.yml", proj)
    tables = (root / "tables" / "shop.yml").read_text()
    if entry is not None:
        tables = tables.replace(
            '    name: "canal_{table}"\n', f'    name: "canal_{{table}}"\n    target_lag: {entry}\n'
        )
    write(root / "tables" / "shop.yml", tables)


def test_target_lag_comes_from_the_entry_the_defaults_or_the_built_in(tmp_path: Path) -> None:
    from ticdc_sync.plan import build_plan, plan_dict, render_text

    root = copy_shop(tmp_path)
    plan = build_plan(load_project(root))
    assert {(t.lag_ms, t.lag_from) for t in plan.targets} == {(60_000, "built-in default")}

    _with_lags(root, default="0", entry="30s")
    p = load_project(root)
    assert p.defaults.target_lag_ms == 0
    assert p.route("canal", "shop", "orders").target_lag_ms == 30_000
    assert p.route("open", "shop", "orders").target_lag_ms is None
    plan = build_plan(p)
    lags = {t.name: (t.lag_ms, t.lag_from) for t in plan.targets}
    assert lags["canal_orders"] == (30_000, "tables/shop.yml:4")
    assert lags["open_orders"] == (0, "ticdc_sync.yml defaults")
    d = plan_dict(plan)
    assert d["defaults"]["target_lag"] == "0"
    assert [r["target_lag"] for r in d["routes"]] == ["30s", None, None]
    t = next(t for t in d["targets"] if t["name"] == "canal_items")
    assert (t["target_lag"], t["target_lag_ms"], t["target_lag_from"]) == (
        "30s",
        30_000,
        "tables/shop.yml:4",
    )
    text = render_text(plan)
    assert "  target_lag: 0  (ticdc_sync.yml defaults)\n" in text
    assert "    target lag: 30s  (tables/shop.yml:4)\n" in text
    assert "    target lag: 0  (ticdc_sync.yml defaults)\n" in text


@pytest.mark.parametrize(
    ("value", "shown"),
    [("30", "30"), ("'30'", "'30'"), ("1 m", "'1 m'"), ("5min", "'5min'"), ("-1s", "'-1s'")],
)
def test_a_target_lag_that_is_not_a_duration_is_an_error_at_its_line(
    tmp_path: Path, value: str, shown: str
) -> None:
    root = copy_shop(tmp_path)
    _with_lags(root, default=None, entry=value)
    assert issues_of(root) == [
        f"tables/shop.yml:7: tables[0].target_lag: {shown} is not a valid duration (hint: a "
        "whole number with its unit (ms, s, m, h, d), e.g. 500ms, 30s, 1m, 2h, 1d; or 0)"
    ]


def test_a_default_target_lag_that_is_not_a_duration_is_an_error_at_its_line(
    tmp_path: Path,
) -> None:
    root = copy_shop(tmp_path)
    _with_lags(root, default="true", entry=None)
    lines = (root / "ticdc_sync.yml").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines, 1) if ln.strip().startswith("target_lag:"))
    assert issues_of(root) == [
        f"ticdc_sync.yml:{at}: defaults.target_lag: expected string or integer, got boolean"
    ]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        (0, 0),
        ("0", 0),
        ("0s", 0),
        ("500ms", 500),
        ("30s", 30_000),
        ("1m", 60_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("7d", 604_800_000),
    ],
)
def test_durations_read_and_shown(tmp_path: Path, text: str | int, ms: int) -> None:
    from ticdc_sync.core.durations import parse_ms, render_ms

    assert parse_ms(text) == ms
    assert parse_ms(render_ms(ms)) == ms
    # staging.retention reads durations the same way (and now takes 0 and ms as well).
    root = copy_shop(tmp_path)
    proj = (root / "ticdc_sync.yml").read_text() + f"staging:\n  retention: {text}\n"
    write(root / "ticdc_sync.yml", proj)
    assert load_project(root).staging_retention_ms == ms


def test_durations_are_shown_in_their_largest_whole_unit() -> None:
    from ticdc_sync.core.durations import render_ms

    assert [render_ms(ms) for ms in (0, 1, 500, 1000, 90_000, 60_000, 5_400_000, 86_400_000)] == [
        "0",
        "1ms",
        "500ms",
        "1s",
        "90s",
        "1m",
        "90m",
        "1d",
    ]


def test_apply_workers_setting(tmp_path: Path) -> None:
    from ticdc_sync.plan import build_plan

    root = copy_shop(tmp_path)
    assert load_project(root).output.apply_workers is None
    out = build_plan(load_project(root)).output
    assert (out["apply_workers"], out["apply_workers_from"]) == (
        2,
        "local[2]: 2 core(s), at most 4",
    )
    prof = (root / "profiles.yml").read_text()
    write(
        root / "profiles.yml",
        prof.replace(
            "      warehouse: warehouse\n",
            "      warehouse: warehouse\n      run: {apply_workers: 3}\n",
            1,
        ),
    )
    p = load_project(root)
    assert p.output.apply_workers == 3
    out = build_plan(p).output
    assert (out["apply_workers"], out["apply_workers_from"]) == (
        3,
        "run.apply_workers in the profile",
    )
    write(
        root / "profiles.yml",
        prof.replace(
            "      warehouse: warehouse\n",
            "      warehouse: warehouse\n      run: {apply_workers: 0, threads: 2}\n",
            1,
        ),
    )
    msgs = issues_of(root)
    assert msgs == [
        "profiles.yml:13: shop.outputs.dev.run.apply_workers: 0 is less than the minimum of 1",
        "profiles.yml:13: shop.outputs.dev.run.threads: unknown key 'threads' (hint: allowed "
        "keys: apply_workers, metrics_address, metrics_port)",
    ], msgs


def test_metrics_settings(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    assert (load_project(root).output.metrics_port, load_project(root).output.metrics_address) == (
        None,
        None,
    )
    prof = (root / "profiles.yml").read_text()
    keys = "      run: {metrics_port: 9400, metrics_address: 0.0.0.0}\n"
    write(
        root / "profiles.yml",
        prof.replace("      warehouse: warehouse\n", "      warehouse: warehouse\n" + keys, 1),
    )
    out = load_project(root).output
    assert (out.metrics_port, out.metrics_address) == (9400, "0.0.0.0")
    write(
        root / "profiles.yml",
        prof.replace(
            "      warehouse: warehouse\n",
            "      warehouse: warehouse\n      run: {metrics_port: 70000}\n",
            1,
        ),
    )
    assert issues_of(root) == [
        "profiles.yml:13: shop.outputs.dev.run.metrics_port: 70000 is greater than the maximum "
        "of 65535"
    ]


def test_sync_points_every(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    # The example records one every 10m; without the key, none.
    assert load_project(root).sync_every_ms == 600_000
    base = "\n".join(
        ln
        for ln in (root / "ticdc_sync.yml").read_text().splitlines()
        if not ln.startswith("sync_points:")
    )
    write(root / "ticdc_sync.yml", base + "\n")
    assert load_project(root).sync_every_ms is None
    write(root / "ticdc_sync.yml", base + "\nsync_points: every 90s\n")
    assert load_project(root).sync_every_ms == 90_000
    write(root / "ticdc_sync.yml", base + "\nsync_points: 10m\n")
    with pytest.raises(ProjectError, match="sync_points"):
        load_project(root)


def test_maintenance_is_read_from_defaults_and_entries_key_by_key(tmp_path: Path) -> None:
    root = copy_shop(tmp_path)
    text = (
        (root / "ticdc_sync.yml")
        .read_text()
        .replace(
            "defaults:\n", "defaults:\n  maintenance:\n    retain: 2d\n    vacuum_every: 6h\n", 1
        )
    )
    write(root / "ticdc_sync.yml", text)
    tables = next((root / "tables").glob("*.yml"))
    write(
        tables,
        tables.read_text().replace(
            '    name: "canal_{table}"\n',
            '    name: "canal_{table}"\n    maintenance:\n      compact_small_files: 0\n',
            1,
        ),
    )
    project = load_project(root)
    canal = next(t for t in project.tables if t.source == "canal")
    other = next(t for t in project.tables if t.source != "canal")
    m = project.maintenance(canal)
    assert (m.enabled, m.compact_small_files, m.retain_ms, m.vacuum_every_ms) == (
        True,
        0,
        2 * 86_400_000,
        6 * 3_600_000,
    )
    assert m.retain_from == "ticdc_sync.yml defaults" and m.origin == canal.origin.render()
    o = project.maintenance(other)
    assert (o.compact_small_files, o.origin) == (32, "ticdc_sync.yml defaults")
