"""The Grafana dashboard and the Prometheus alert rules in docs/monitoring/: they parse, every
metric their expressions name is one `run` exports (`RunMetrics.names()`), with the labels
they select by; the alerts cover what an operator must hear of (a target past its lag,
staging behind, a blocked target, quarantine growing, the run down or absent); and, where
Prometheus's `promtool` is installed, the rules check and their unit tests pass
(tests/unit/monitoring/alerts_test.yml). docs/operations.md lists every metric."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ticdc_sync.run.metrics import RunMetrics

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docs" / "monitoring" / "ticdc-sync-dashboard.json"
ALERTS = REPO / "docs" / "monitoring" / "alerts.yml"
ALERT_TESTS = REPO / "tests" / "unit" / "monitoring" / "alerts_test.yml"
OPERATIONS = REPO / "docs" / "operations.md"
NAME = re.compile(r"\bticdc_sync_[a-z0-9_]+\b")
# A selector's label names: `{a="x", b=~"y"}`.
SELECTOR = re.compile(r"(ticdc_sync_[a-z0-9_]+)\{([^}]*)\}")
# Labels Prometheus adds to every scraped series.
SCRAPE_LABELS = {"job", "instance"}


def exported() -> tuple[set[str], dict[str, tuple[str, ...]]]:
    """The sample names `run` exports, and the label names of each."""
    labels = RunMetrics("p", follow=True).labels()
    return set(labels), labels


def dashboard_exprs(d: dict) -> list[str]:
    out = []
    for p in d["panels"]:
        out += [t["expr"] for t in p.get("targets", [])]
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            out.append(v["query"]["query"] if isinstance(v["query"], dict) else v["query"])
    return out


def alert_rules() -> list[dict]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def check_names_and_labels(exprs: list[str], where: str) -> None:
    names, labels = exported()
    for expr in exprs:
        for used in NAME.findall(expr):
            assert used in names, f"{where}: {used} is not exported ({expr})"
        for used, sel in SELECTOR.findall(expr):
            keys = set(re.findall(r"([a-z_]+)\s*[=!]~?", sel))
            unknown = keys - set(labels[used]) - SCRAPE_LABELS
            assert not unknown, f"{where}: {used} has no label {unknown} ({expr})"


def test_the_dashboard_parses_and_names_only_exported_metrics() -> None:
    d = json.loads(DASHBOARD.read_text())
    panels = d["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    defined = {v["name"] for v in d["templating"]["list"]}
    assert defined == {"datasource", "job", "source", "target"}
    exprs = dashboard_exprs(d)
    assert exprs
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and p["description"], p["title"]
        for t in p["targets"]:
            for var in re.findall(r"\$(\w+)", t["expr"]):
                assert var in defined, f"{p['title']}: ${var} is not a variable"
    check_names_and_labels(exprs, "dashboard")
    # The panels that answer the questions of the issue.
    text = "\n".join(exprs)
    for name in (
        "ticdc_sync_source_resolved_timestamp_seconds",
        "ticdc_sync_target_staleness_seconds",
        "ticdc_sync_target_lag_budget_seconds",
        "ticdc_sync_target_apply_duration_seconds_bucket",
        "ticdc_sync_source_poll_duration_seconds_bucket",
        "ticdc_sync_target_blocked",
        "ticdc_sync_run_lease_held",
    ):
        assert name in text, name


def test_the_alerts_parse_name_only_exported_metrics_and_cover_what_matters() -> None:
    rules = alert_rules()
    for r in rules:
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}, r
        assert r["labels"]["severity"] in ("warning", "critical"), r["alert"]
        assert r["annotations"]["summary"] and r["annotations"]["description"], r["alert"]
    assert len({r["alert"] for r in rules}) == len(rules)
    check_names_and_labels([r["expr"] for r in rules], "alerts")

    def alerting_on(name: str) -> list[str]:
        return [r["alert"] for r in rules if re.search(rf"\b{name}\b", r["expr"])]

    assert alerting_on("ticdc_sync_target_over_lag")  # a target past its lag
    assert alerting_on("ticdc_sync_source_resolved_timestamp_seconds")  # staging behind
    assert alerting_on("ticdc_sync_target_blocked")
    assert alerting_on("ticdc_sync_source_records_quarantined_total")
    assert alerting_on("ticdc_sync_target_rows_quarantined_total")
    assert alerting_on("up") and any("absent(" in r["expr"] for r in rules)  # down, absent
    assert alerting_on("ticdc_sync_last_poll_timestamp_seconds")  # a run that stopped polling


def test_the_rule_tests_name_exported_series_with_their_labels() -> None:
    doc = yaml.safe_load(ALERT_TESTS.read_text())
    series = [s["series"] for t in doc["tests"] for s in t["input_series"]]
    assert series
    check_names_and_labels(series, ALERT_TESTS.name)
    tested = {a["alertname"] for t in doc["tests"] for a in t["alert_rule_test"]}
    assert tested == {r["alert"] for r in alert_rules()}


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="needs Prometheus's promtool on PATH (e.g. `apt-get install prometheus`, or the "
    "release tarball from prometheus.io) to check the rules and run their unit tests",
)
def test_promtool_checks_the_rules_and_their_unit_tests_pass() -> None:
    check = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run(
        ["promtool", "test", "rules", ALERT_TESTS.name],
        cwd=ALERT_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_operations_md_lists_every_metric() -> None:
    text = OPERATIONS.read_text()
    m = RunMetrics("p", follow=True)
    # As a user reads them: counters with _total, a histogram by its own name.
    shown = {re.sub(r"_(bucket|sum|count)$", "", n) for n in m.names()}
    missing = sorted(n for n in shown if not re.search(rf"`{n}`", text))
    assert missing == [], f"describe these in {OPERATIONS.relative_to(REPO)} (Monitoring)"
