"""CLI: exit codes, messages, init scaffold, and no pyspark on the pure commands."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ticdc_sync.cli import main

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
    import ticdc_sync.cli as cli

    def boom(args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "cmd_validate", boom)
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
        from ticdc_sync.cli import main
        rcs = [
            main(["init", {str(tmp_path / "p")!r}]),
            main(["validate", "--project", {str(tmp_path / "p")!r}]),
            main(["plan", "--project", {str(tmp_path / "p")!r}]),
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
