"""A source's large-message options (`large-message-handle-option`, `claim-check-storage-uri`,
`claim-check-raw-value`, `large-message-handle-compression`): parsed, checked as TiCDC
checks them and for what ticdc-sync can read, and shown by `plan`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ticdc_sync.core.errors import ProjectError
from ticdc_sync.core.model import Compression, LargeMessageHandle
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.project import load_project


def _project(tmp_path: Path, protocol: str, options: dict[str, object]) -> Path:
    root = tmp_path / "p"
    (root / "sources").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "ticdc_sync.yml").write_text("name: p\nprofile: p\n")
    (root / "profiles.yml").write_text(
        "p:\n  target: dev\n  outputs:\n    dev:\n      warehouse: warehouse\n"
        "      transport: {type: files, captures: captures}\n"
    )
    (root / "captures" / "t").mkdir(parents=True)
    lines = "".join(f"      {k}: {json.dumps(v)}\n" for k, v in options.items())
    (root / "sources" / "s.yml").write_text(
        f"sources:\n  - name: src\n    protocol: {protocol}\n    topics: [t]\n"
        + (f"    options:\n{lines}" if lines else "")
    )
    (root / "tables" / "t.yml").write_text("tables:\n  - upstream: shop.orders\n")
    return root


def _issues(root: Path) -> list[str]:
    with pytest.raises(ProjectError) as exc:
        load_project(root)
    return [i.render() for i in exc.value.issues]


def test_claim_check_options_are_read_and_shown_by_plan(tmp_path):
    root = _project(
        tmp_path,
        "canal-json",
        {
            "large-message-handle-option": "claim-check",
            "claim-check-storage-uri": "s3://claims/feed1",
            "claim-check-raw-value": True,
            "large-message-handle-compression": "lz4",
        },
    )
    project = load_project(root)
    o = project.sources[0].options
    assert o.large_message_handle_option is LargeMessageHandle.CLAIM_CHECK
    assert o.claim_check_storage_uri == "s3://claims/feed1"
    assert o.claim_check_raw_value is True
    assert o.large_message_handle_compression is Compression.LZ4
    plan = build_plan(project)
    src = json.loads(render_json(plan))["sources"][0]
    assert {k: v for k, v in src["options"].items() if "claim" in k or "large" in k} == {
        "claim-check-raw-value": True,
        "claim-check-storage-uri": "s3://claims/feed1",
        "large-message-handle-compression": "lz4",
        "large-message-handle-option": "claim-check",
    }
    text = render_text(plan)
    assert "large-message-handle-option=claim-check" in text
    assert (
        "note: claim-check: each claim-check record is replaced by the message TiCDC wrote to "
        "s3://claims/feed1/<file name of its location>"
    ) in text
    assert "note: every message's value is lz4-compressed" in text


def test_a_plan_without_large_message_options_shows_none(tmp_path):
    """Sources that do not set them keep their plans (and fingerprints) as they were."""
    project = load_project(_project(tmp_path, "open-protocol", {}))
    src = json.loads(render_json(build_plan(project)))["sources"][0]
    assert src["options"] == {"only-output-updated-columns": False, "time-zone": "UTC"}
    assert src["notes"] == []


def test_debezium_compression_decompresses_key_and_value(tmp_path):
    project = load_project(
        _project(tmp_path, "debezium", {"large-message-handle-compression": "snappy"})
    )
    assert project.sources[0].options.large_message_handle_compression is Compression.SNAPPY
    assert "note: every message's key and value is snappy-compressed" in render_text(
        build_plan(project)
    )


@pytest.mark.parametrize(
    ("protocol", "options", "expected"),
    [
        (
            "canal-json",
            {"large-message-handle-option": "claim-check"},
            "sources[0].options.large-message-handle-option: claim-check needs "
            "claim-check-storage-uri",
        ),
        (
            "open-protocol",
            {"claim-check-storage-uri": "file:///claims"},
            "sources[0].options.claim-check-storage-uri: claim-check-storage-uri applies only "
            "with large-message-handle-option: claim-check",
        ),
        (
            "canal-json",
            {"claim-check-raw-value": True},
            "sources[0].options.claim-check-raw-value: claim-check-raw-value applies only with",
        ),
        (
            "canal-json",
            {
                "enable-tidb-extension": False,
                "large-message-handle-option": "claim-check",
                "claim-check-storage-uri": "/claims",
            },
            "TiCDC handles large canal-json messages only with enable-tidb-extension",
        ),
        (
            "open-protocol",
            {"large-message-handle-option": "handle-key-only"},
            "handle-key-only messages cannot be read (the row would have to be re-read from "
            "TiDB at its commit_ts), and TiCDC's open-protocol encoder (pingcap/ticdc) does not "
            "mark them",
        ),
        (
            "open-protocol",
            {
                "large-message-handle-option": "claim-check",
                "claim-check-storage-uri": "file:///c",
                "claim-check-raw-value": True,
            },
            "option 'claim-check-raw-value' does not apply to open-protocol",
        ),
        (
            "debezium",
            {"large-message-handle-option": "claim-check"},
            "option 'large-message-handle-option' does not apply to debezium",
        ),
        (
            "canal-json",
            {
                "large-message-handle-option": "claim-check",
                "claim-check-storage-uri": "claims/here",
            },
            "cannot read claim-check files from claims/here: a local folder must be an "
            "absolute path",
        ),
        (
            "canal-json",
            {
                "large-message-handle-option": "claim-check",
                "claim-check-storage-uri": "s3://b/p?access-key=AK&secret-access-key=SK",
            },
            "the URI has a query string; ticdc-sync takes S3 credentials, region and endpoint "
            "from the environment",
        ),
        (
            "canal-json",
            {
                "large-message-handle-option": "claim-check",
                "claim-check-storage-uri": "gcs://b/p",
            },
            "scheme gcs:// is not supported",
        ),
        (
            "canal-json",
            {"large-message-handle-compression": "zstd"},
            "large-message-handle-compression",
        ),
    ],
)
def test_large_message_options_are_checked(tmp_path, protocol, options, expected):
    issues = _issues(_project(tmp_path, protocol, options))
    assert len(issues) == 1, issues
    assert expected in issues[0]
    assert issues[0].startswith("sources/s.yml:")


def test_only_the_option_that_does_not_apply_is_reported(tmp_path):
    """A debezium source's claim-check (TiCDC refuses it) is one issue, not also a missing
    storage URI."""
    issues = _issues(
        _project(
            tmp_path,
            "debezium",
            {
                "large-message-handle-option": "claim-check",
                "claim-check-raw-value": True,
            },
        )
    )
    assert len(issues) == 2
    assert all("does not apply to debezium" in i for i in issues)


def test_canal_handle_key_only_is_valid_with_a_warning(tmp_path):
    project = load_project(
        _project(tmp_path, "canal-json", {"large-message-handle-option": "handle-key-only"})
    )
    (warning,) = [w for w in project.warnings if "handle-key-only" in w]
    assert "warning: handle-key-only messages cannot be read" in warning
    assert "update the changefeed with large-message-handle-option=claim-check" in warning
    assert "note: handle-key-only: such messages cannot be read" in render_text(build_plan(project))


@pytest.mark.parametrize(
    "uri", ["file:///data/claims", "local:///data/claims", "/data/claims", "s3a://b/p"]
)
def test_storage_uris_ticdc_sync_can_read(tmp_path, uri):
    project = load_project(
        _project(
            tmp_path,
            "open-protocol",
            {"large-message-handle-option": "claim-check", "claim-check-storage-uri": uri},
        )
    )
    assert project.sources[0].options.claim_check_storage_uri == uri
