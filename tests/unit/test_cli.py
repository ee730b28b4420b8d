"""CLI: exit codes, messages, init scaffold, and no pyspark on the pure commands."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ticdc_sync.commands.cli import main

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "projects_example" / "shop"
# What `run` writes into the example (scripts/example.sh): a copy must start clean.
GENERATED = shutil.ignore_patterns("target", "warehouse")


def test_validate_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--project", str(SHOP)]) == 0
    assert "ok: project shop (target dev): 3 sources" in capsys.readouterr().out


def test_validate_reports_every_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "p"
    shutil.copytree(SHOP, root, ignore=GENERATED)
    (root / "ticdc_sync.yml").write_text(
        "name: shop\nprofile: shop\ndefaults:\n  ddl:\n    drop_colum: skip\n"
    )
    (root / "tables" / "shop.yml").write_text(
        "tables:\n  - upstream: shop.*\n    source: canal\n    keys: []\n"
        "  - upstream: shop.*\n    source: nope\n    name: x_{table}\n"
    )
    assert main(["validate", "--project", str(root)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "tables/shop.yml:4: tables[0].keys: must not be empty (hint: omit `keys` to use the upstream primary key)",
        "tables/shop.yml:6: tables[1].source: unknown source 'nope' (hint: sources: canal, debezium, open)",
        "ticdc_sync.yml:5: defaults.ddl.drop_colum: unknown key 'drop_colum' (hint: allowed keys: "
        "add_column, create_table, drop_column, drop_table, narrow_column, other, partition, "
        "primary_key, recover_table, rename_column, rename_table, set_default, truncate_table, "
        "unparsed, widen_column)",
        "3 problems found",
    ]
    assert "Traceback" not in "\n".join(err)


def test_usage_error_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--format", "yaml"]) == 1
    assert "invalid choice" in capsys.readouterr().err
    assert main([]) == 1


def test_plan_detailed_exitcode_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A clean copy: plan reads the state a previous example run left in target/.
    SHOP = tmp_path / "shop"  # noqa: N806
    shutil.copytree(REPO / "projects_example" / "shop", SHOP, ignore=GENERATED)
    assert main(["plan", "--project", str(SHOP)]) == 0
    first = capsys.readouterr().out
    assert main(["plan", "--project", str(SHOP), "--detailed-exitcode"]) == 2
    assert capsys.readouterr().out == first
    out = tmp_path / "plan.json"
    assert main(["plan", "--project", str(SHOP), "--format", "json", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert out.read_text().startswith("{\n")


def test_init_scaffold_validates_and_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "new_proj"
    assert main(["init", str(dest)]) == 0
    assert (dest / ".gitignore").read_text().split() == ["warehouse/", "target/"]
    assert (dest / "captures" / "README.md").is_file()
    assert main(["validate", "--project", str(dest)]) == 0
    assert main(["plan", "--project", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "Plan for project new_proj (target dev)" in out
    assert "users <- app.users via app" in out
    # No capture recorded yet: the plan says so (a typo in `topics:` would read nothing).
    assert "Warnings (1)" in out and "has no capture folder" in out
    # Refuses a non-empty folder.
    assert main(["init", str(dest)]) == 1
    assert "not empty" in capsys.readouterr().err


def test_crash_exits_3_with_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ticdc_sync.commands.cli as cli

    def boom(args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setitem(cli.COMMANDS, "validate", boom)
    assert main(["validate", "--project", str(SHOP)]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: boom" in err and "crashed" in err


def test_debug_shows_traceback_for_user_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--project", str(tmp_path)]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert main(["validate", "--project", str(tmp_path), "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_unreadable_warehouse_state_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "p"
    shutil.copytree(SHOP, root, ignore=GENERATED)
    log = root / "warehouse" / "_ticdc_sync" / "events" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("this is not a Delta log\n")
    # A broken state table is a user error naming it (exit 1), not a crash.
    assert main(["plan", "--project", str(root)]) == 1
    assert "_ticdc_sync/events" in capsys.readouterr().err


def test_pure_commands_never_import_pyspark(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from ticdc_sync.commands.cli import main
        rcs = [
            main(["init", {str(tmp_path / "p")!r}]),
            main(["validate", "--project", {str(tmp_path / "p")!r}]),
            main(["plan", "--project", {str(tmp_path / "p")!r}]),
        ]
        # No warehouse yet: nothing to read, so delta-rs and pyarrow stay unloaded too.
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("deltalake", "pyarrow"))
        assert not heavy, heavy
        rcs += [
            main(["validate", "--project", {str(SHOP)!r}]),
            main(["plan", "--project", {str(SHOP)!r}, "--format", "json"]),
        ]
        assert rcs == [0, 0, 0, 0, 0], rcs
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "delta", "py4j"))
        assert not loaded, loaded
        print("PURE-OK")
        """
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "PURE-OK" in res.stdout


def _schema(name: str) -> dict:
    import json

    return json.loads((REPO / "ticdc_sync" / "schemas" / f"{name}.schema.json").read_text())


def assert_valid(doc: object, name: str) -> None:
    """`doc` is valid against ticdc_sync/schemas/<name>.schema.json."""
    import jsonschema

    schema = _schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)
    ]
    assert not errors, errors


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader, the same parser
        import tomli as tomllib

    assert main(["--version"]) == 0
    want = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out == f"ticdc-sync {want}\n"


def test_every_flag_and_argument_has_help() -> None:
    import argparse

    from ticdc_sync.commands.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{cmd} {'/'.join(a.option_strings) or a.dest}"
        for cmd, p in [("ticdc-sync", parser), *sub.choices.items()]
        for a in p._actions
        if not isinstance(a, argparse._SubParsersAction)
        and (not a.help or a.help == argparse.SUPPRESS)
    ]
    assert missing == []


def test_init_hint_quotes_a_path_with_spaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    dest = tmp_path / "my projects" / "it's new"
    assert main(["init", str(dest)]) == 0
    hint = capsys.readouterr().out.splitlines()[-1]
    assert hint.startswith("next: ")
    first = hint.removeprefix("next: ").split(" && ")[0]
    assert shlex.split(first) == ["ticdc-sync", "validate", "--project", str(dest)]


def test_plan_out_into_a_missing_folder_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nonexistent" / "plan.txt"
    assert main(["plan", "--project", str(SHOP), "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        f"error: --out {out}: folder {out.parent} does not exist (hint: create it, or write "
        "the plan elsewhere)"
    )
    assert not out.parent.exists()


def test_plan_and_status_json_follow_their_schemas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without a warehouse (the run's own outputs are checked in tests/runtime).
    import json

    root = tmp_path / "shop"
    shutil.copytree(SHOP, root, ignore=GENERATED)
    assert main(["plan", "--project", str(root), "--format", "json"]) == 0
    assert_valid(json.loads(capsys.readouterr().out), "plan")
    assert main(["status", "--project", str(root), "--format", "json", "--quarantine"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert_valid(status, "status")
    assert status["quarantine"] == [] and status["targets"][0]["applied_ts"] is None


def test_profiles_dir_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "shop"
    shutil.copytree(SHOP, root, ignore=GENERATED)
    (tmp_path / "profiles").mkdir()
    (root / "profiles.yml").rename(tmp_path / "profiles" / "profiles.yml")
    assert main(["validate", "--project", str(root)]) == 1
    capsys.readouterr()
    args = ["validate", "--project", str(root), "--profiles-dir", str(tmp_path / "profiles")]
    assert main(args) == 0
    assert "ok: project shop (target dev)" in capsys.readouterr().out


def test_second_run_is_refused_before_spark_starts(tmp_path: Path) -> None:
    # This process holds the warehouse's run lease: a run says so at once; Spark's JVM
    # never starts (nothing of it in the log, and the error is the last line).
    import os

    from ticdc_sync.warehouse.lease import RunLease, read_lease

    root = tmp_path / "shop"
    shutil.copytree(SHOP, root, ignore=GENERATED)
    wh = str(root / "warehouse")
    with RunLease(wh, out=lambda s: None):
        res = subprocess.run(
            [sys.executable, "-m", "ticdc_sync.commands.cli", "run", "--project", str(root)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        held = read_lease(wh)
    assert res.returncode == 1, res.stderr
    assert res.stdout == ""
    last = res.stderr.splitlines()[-1]
    assert last.startswith("error: ") and f"pid {os.getpid()}" in last, res.stderr
    assert "is in use by another `ticdc-sync run`" in last, res.stderr
    log = (root / "target" / "logs" / "ticdc-sync.log").read_text()
    assert "log4j" not in log and "Spark" not in log
    assert held is not None and held.holder.endswith(f"pid {os.getpid()}")


def test_bad_metrics_options_fail_before_the_run_starts(tmp_path: Path) -> None:
    """A wrong --metrics-* flag is a user error (exit 1) naming the flag, before the run
    takes the lease or starts Spark."""
    root = tmp_path / "shop"
    shutil.copytree(SHOP, root, ignore=GENERATED)
    code = textwrap.dedent(
        f"""
        import sys
        from ticdc_sync.commands.cli import main
        rcs = [
            main(["run", "--project", {str(root)!r}, "--metrics-file", "m.txt"]),
            main(["run", "--project", {str(root)!r}, "--metrics-port", "99999"]),
            main(["run", "--project", {str(root)!r}, "--metrics-push", "ftp://gw"]),
        ]
        assert rcs == [1, 1, 1], rcs
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "delta", "py4j"))
        assert not loaded, loaded
        print("REFUSED-OK")
        """
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "REFUSED-OK" in res.stdout
    assert "error: --metrics-file m.txt: node exporter's textfile collector reads only" in (
        res.stderr
    )
    assert "error: --metrics-port 99999: not a TCP port" in res.stderr
    assert "error: --metrics-push ftp://gw: not a Pushgateway URL" in res.stderr
    assert not (root / "warehouse").exists()  # no lease taken
