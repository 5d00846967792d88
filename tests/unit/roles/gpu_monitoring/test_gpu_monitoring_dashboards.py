"""Grafana provisioning: the dashboards are JSON, every panel queries the provisioned datasource, every
panel's PromQL parses (`promtool check rules` over one recording rule per panel: promtool has no offline
query parser) and uses only metrics something in gpuforge's monitoring produces."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess

import yaml
from conftest import ROLE

DASHBOARDS = sorted((ROLE / "files" / "grafana").glob("*.json"))
DATASOURCE_UID = "gpuforge-prometheus"
# Not from the collector: Prometheus' own series.
PROMETHEUS_SERIES = {"up", "ALERTS"}
PROMQL_WORDS = {"sum", "count", "by", "or", "and", "unless", "without", "on", "ignoring", "rate", "max", "min", "avg"}


def _collector_metrics() -> set[str]:
    spec = importlib.util.spec_from_file_location("gpuforge_gpu_metrics", ROLE / "files" / "gpuforge_gpu_metrics.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = (ROLE / "files" / "gpuforge_gpu_metrics.py").read_text(encoding="utf-8")
    names = set(re.findall(r'"(gpuforge_[a-z_]+)"', source))
    names |= {"gpuforge_gpu_" + name for name, _fields, _help, _scale in module.GPU_FIELDS}
    return names


def _panels(dashboard: dict) -> list[dict]:
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))  # rows
    return panels


def _exprs():
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        for panel in _panels(dashboard):
            for target in panel.get("targets", []):
                yield path.name, panel["title"], target["expr"]


def test_dashboards_are_json_with_unique_ids():
    assert DASHBOARDS
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        assert dashboard["uid"] and dashboard["title"]
        ids = [panel["id"] for panel in _panels(dashboard)]
        assert len(ids) == len(set(ids)), path.name
        # The seed's four dashboards: utilization, memory, temperature, power.
        titles = " ".join(panel["title"].lower() for panel in _panels(dashboard))
        for word in ("utilization", "memory", "temperature", "power"):
            assert word in titles


def test_every_panel_uses_the_provisioned_datasource():
    template = (ROLE / "templates" / "grafana-datasource.yml.j2").read_text(encoding="utf-8")
    assert re.findall(r"^\s+uid: (\S+)$", template, re.MULTILINE) == [DATASOURCE_UID]
    for path in DASHBOARDS:
        for panel in _panels(json.loads(path.read_text(encoding="utf-8"))):
            if panel.get("targets"):
                assert panel["datasource"]["uid"] == DATASOURCE_UID, panel["title"]
                assert all(t["datasource"]["uid"] == DATASOURCE_UID for t in panel["targets"]), panel["title"]


def test_every_panel_query_parses(promtool, tmp_path):
    exprs = list(_exprs())
    assert len(exprs) >= 8
    rules = {
        "groups": [
            {
                "name": "dashboard-panels",
                "rules": [
                    {"record": f"gpuforge:dashboard_panel_{index}", "expr": expr}
                    for index, (_file, _title, expr) in enumerate(exprs)
                ],
            }
        ]
    }
    path = tmp_path / "panels.rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def test_a_broken_panel_query_is_caught(promtool, tmp_path):
    """The check above can fail: an unbalanced parenthesis does not pass promtool."""
    path = tmp_path / "broken.rules.yml"
    rules = {"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "sum by (instance (up)"}]}]}
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode != 0


def test_panels_use_only_metrics_that_exist():
    known = _collector_metrics() | PROMETHEUS_SERIES
    for _file, title, expr in _exprs():
        without_strings = re.sub(r'"[^"]*"', '""', expr)
        without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
        without_groupings = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", without_labels)
        names = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", without_groupings)) - PROMQL_WORDS
        assert names <= known, f"{title}: {sorted(names - known)}"
