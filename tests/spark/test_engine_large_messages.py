"""TiCDC's large messages through the engine: claim-checked histories (Canal-JSON, Open
Protocol; compressed or not; raw claim values; tiflow's and pingcap/ticdc's key markers)
land exactly; compressed Debezium lands exactly; a claim that cannot be read, and a
handle-key-only message, fail naming the record, then are quarantined.

Records and claim-check files come from `testkit.large_message`, which writes them as
TiCDC does; the claim-check storage is a local folder here (tests/s3 has S3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit.history import HistoryConfig, encode, generate
from testkit.large_message import LargeMessageConfig
from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.codecs.large_message import decompress
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Compression
from ticdc_sync.spark import runner
from ticdc_sync.warehouse.locations import warehouse_path

pytestmark = pytest.mark.spark


def _history(seed: int = 11):
    return generate(HistoryConfig(seed=seed, transactions=40, partitions=2, ddl_count=0))


def _options(config: LargeMessageConfig, uri: str) -> str:
    lines = [f"      large-message-handle-compression: {config.compression}\n"]
    if config.option != "none":
        lines.append(f"      large-message-handle-option: {config.option}\n")
    if config.option == "claim-check":
        lines.append(f"      claim-check-storage-uri: {json.dumps(uri)}\n")
    if config.raw_value:
        lines.append("      claim-check-raw-value: true\n")
    return "".join(lines)


def _setup(tmp_path: Path, protocol: str, config: LargeMessageConfig, history, defaults=""):
    """A project over the encoded history, its claims in a local folder; (root, encoded)."""
    claims = tmp_path / "claims"
    uri = f"file://{claims}"
    enc = encode(
        history, protocol, "cdc", large=config.__class__(**{**config.__dict__, "storage_uri": uri})
    )
    claims.mkdir()
    for name, data in enc.claims.items():
        (claims / name).write_bytes(data)
    root = make_project(
        tmp_path / "p",
        protocol=protocol,
        topic="cdc",
        schema_sql="".join(schema_sql(s) for s in history.initial.values()),
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
        options=_options(config, uri),
        defaults=defaults,
    )
    write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in enc.records])
    return root, enc


def _check(spark, project, enc, skip: set[str] = frozenset()):
    for qualified, truth in enc.truth.items():
        if qualified in skip:
            continue
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"{enc.protocol} {qualified}")


def _quarantine(spark, project) -> list:
    path = Path(warehouse_path(project)) / "_ticdc_sync" / "quarantine"
    return (
        spark.read.format("delta").load(str(path)).orderBy("partition", "offset", "idx").collect()
    )


@pytest.mark.parametrize(
    ("protocol", "compression", "raw", "flavour", "max_bytes"),
    [
        ("canal-json", "none", False, "tiflow", 1200),
        ("canal-json", "snappy", True, "ticdc", 900),
        ("open-protocol", "lz4", False, "tiflow", 700),
        ("open-protocol", "snappy", False, "ticdc", 700),
    ],
)
def test_a_claim_checked_history_lands_exactly(
    spark, tmp_path, protocol, compression, raw, flavour, max_bytes
):
    config = LargeMessageConfig(
        option="claim-check",
        compression=compression,
        raw_value=raw,
        max_message_bytes=max_bytes,
        flavour=flavour,
    )
    root, enc = _setup(tmp_path, protocol, config, _history())
    assert len(enc.claims) >= 20 and enc.replays > 0
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, lines
    _check(spark, project, enc)


def test_a_compressed_debezium_history_lands_exactly(spark, tmp_path):
    config = LargeMessageConfig(compression="lz4")
    root, enc = _setup(tmp_path, "debezium", config, _history(seed=5))
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    _check(spark, project, enc)


def _claim_records(
    enc, protocol: str, compression: str
) -> dict[str, list[tuple[int, int, int, str]]]:
    """Per claim-check file name, the records naming it: (partition, offset, idx, table)."""
    out: dict[str, list[tuple[int, int, int, str]]] = {}
    codec = Compression(compression)
    for r in enc.records:
        if protocol == "canal-json":
            msg = json.loads(decompress(r.value, codec))
            loc = (msg.get("_tidb") or {}).get("claimCheckLocation")
            if loc:
                out.setdefault(loc.rsplit("/", 1)[1], []).append(
                    (r.partition, r.offset, 0, f"{msg['database']}.{msg['table']}")
                )
            continue
        from ticdc_sync.codecs.open_framing import split_open_protocol

        for idx, key, _, _ in split_open_protocol(r.key, r.value):
            k = json.loads(key) if key else {}
            if k.get("ccl"):
                out.setdefault(k["ccl"].rsplit("/", 1)[1], []).append(
                    (r.partition, r.offset, idx, f"{k['scm']}.{k['tbl']}")
                )
    return out


@pytest.mark.parametrize(
    ("protocol", "compression", "max_bytes"),
    [("canal-json", "snappy", 900), ("open-protocol", "none", 900)],
)
def test_a_claim_that_cannot_be_read_fails_then_is_quarantined(
    spark, tmp_path, protocol, compression, max_bytes
):
    config = LargeMessageConfig(
        option="claim-check", compression=compression, max_message_bytes=max_bytes
    )
    root, enc = _setup(tmp_path, protocol, config, _history())
    named = _claim_records(enc, protocol, compression)
    # One file of app.accounts lost, another one's bytes damaged.
    lost, damaged = sorted(n for n, recs in named.items() if recs[0][3] == "app.accounts")[:2]
    claims = tmp_path / "claims"
    (claims / lost).unlink()
    (claims / damaged).write_bytes(b'{"key":null,"value":"%%%"}')
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 1
    text = "\n".join(lines)
    first = min(named[lost] + named[damaged])
    bad = lost if first in named[lost] else damaged
    assert f"error: cdc/{first[0]}/{first[1]} table app.accounts:" in text, text
    if bad == lost:
        assert f"claim-check file file://{claims}/{lost} cannot be read: no such file" in text
    else:
        assert f"claim-check file file://{claims}/{damaged} (location " in text
        assert "is not a claimed message: its key or value is not base64" in text

    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  on_bad_message: quarantine\n"
    )
    project = load(root)
    lines.clear()
    assert runner.run(project, spark=spark, out=lines.append) == 0, lines
    q = _quarantine(spark, project)
    assert sorted((r.partition, r.offset, r.idx) for r in q) == sorted(
        (p, o, i) for p, o, i, _ in named[lost] + named[damaged]
    )
    for r in q:
        assert (r.db, r.tbl) == ("app", "accounts")
        name = (
            lost if any((r.partition, r.offset) == (p, o) for p, o, *_ in named[lost]) else damaged
        )
        assert f"claim-check file file://{claims}/{name}" in r.reason, r.reason
    # The tables whose claims were all read land exactly.
    _check(spark, project, enc, skip={"app.accounts"})


@pytest.mark.parametrize("protocol", ["canal-json", "open-protocol"])
def test_handle_key_only_messages_fail_naming_the_option_then_are_quarantined(
    spark, tmp_path, protocol
):
    config = LargeMessageConfig(option="handle-key-only", max_message_bytes=1200)
    history = _history(seed=2)
    root, enc = _setup(tmp_path, protocol, config, history)
    if protocol == "open-protocol":
        # ticdc-sync refuses to declare it for open-protocol (pingcap/ticdc marks nothing);
        # tiflow's `ohk` marks are still caught on a source that does not declare it.
        text = (root / "sources" / "s.yml").read_text()
        (root / "sources" / "s.yml").write_text(
            text.replace("      large-message-handle-option: handle-key-only\n", "")
        )
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 1
    errors = [ln for ln in lines if ln.startswith("error: cdc/")]
    assert errors, lines
    assert (
        "message carries only the handle-key columns (TiCDC large-message-handle-option="
        in errors[0]
    )
    assert (
        "handle-key-only): the row would have to be re-read from TiDB at its commit_ts" in errors[0]
    )
    assert "update the changefeed with large-message-handle-option=claim-check" in errors[0]
    assert "(commit_ts " in errors[0] and " table app." in errors[0]

    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  on_bad_message: quarantine\n"
    )
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    q = _quarantine(spark, project)
    assert q and all("handle-key-only" in r.reason for r in q)
    # Nothing of a cut-down row landed: the tables none was cut from are exact.
    cut = {f"{r.db}.{r.tbl}" for r in q}
    assert cut != set(enc.truth)
    _check(spark, project, enc, skip=cut)


def test_a_claim_check_folder_that_is_not_there_stops_the_run(spark, tmp_path):
    """Not one bad message per claim-check record: the source's storage is wrong."""
    config = LargeMessageConfig(option="claim-check", max_message_bytes=1200)
    root, _ = _setup(tmp_path, "canal-json", config, _history())
    (tmp_path / "claims").rename(tmp_path / "elsewhere")
    project = load(root)
    with pytest.raises(UserError) as exc:
        runner.run(project, spark=spark, out=lambda s: None)
    assert str(exc.value).startswith(
        f"source src (sources/s.yml:2): claim-check-storage-uri file://{tmp_path}/claims "
        "names no folder here"
    )
    assert not (Path(warehouse_path(project)) / "_ticdc_sync" / "quarantine").exists()
