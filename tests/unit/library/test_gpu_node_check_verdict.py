"""One node verdict (issue 47): a node's records go through every consumer and get the same verdict everywhere.

Three lab nodes (the simulated DGX-1 of lab/profiles/dgx1-v100-edr.yml) judged by gpu_node_check: healthy; with one
InfiniBand link flap in its kernel log (warnings only); without nvidia-peermem (a failed check). Each module result
goes, as the playbooks hand it on, through:

- the module's own result (verdict, healthy, failed_checks), which health_sweep.yml and rolling_upgrade.yml read;
- validate.yml's files, summary lines and assert (filter_plugins/gpuforge_validation.py);
- the CLI run's summary.json (gpuforge.runner.load_validation);
- the report (ReportData.verdicts, the markdown node table, the HTML matrix) and the verdicts export (drain or not).

The verdict each gives must be the one gpuforge_records.node_verdicts gives; a WARN-only node is healthy everywhere
(nothing drains or fails it) and flagged WARN everywhere.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_validation import validation_documents
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records
from ansible_collections.gpuforge.cluster.plugins.modules import gpu_node_check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from node_sim_helpers import SimNode, expected_for

from gpuforge import runner
from gpuforge.report import export, html, markdown
from gpuforge.report.model import ReportData

ROOT = Path(__file__).resolve().parents[3]
SYSTEM = "dgx1-v100-edr"
NODES = {
    "gpu01": ([], "PASS", True),
    "gpu02": ([{"type": "ib_link_flap", "hca": "mlx5_0", "port": 1}], "WARN", True),
    "gpu03": ([{"type": "peermem_load_failure"}], "FAIL", False),
}


def _judged(tmp_path, monkeypatch, ansible_module) -> dict:
    """{node: gpu_node_check's result} for the three nodes (every input given: nothing is run)."""
    results = {}
    for name, (faults, _, _) in NODES.items():
        node = SimNode(tmp_path / name, monkeypatch, SYSTEM, faults)
        args = {
            "nvidia_smi": node.nvidia_smi_facts(),
            "infiniband": node.infiniband_facts(),
            "lsmod": node.lsmod(),
            "kernel_log": node.dmesg(),
            "pcie": False,
            "node": name,
            "system": SYSTEM,
            "expected": expected_for(SYSTEM),
        }
        results[name] = ansible_module(gpu_node_check, args, None, check_mode=True)
    return results


def _runbook_expression(path: str, task: str, key: str) -> str:
    """The Jinja expression of a runbook task's key (set_fact value or assert condition), as written there."""
    for play in yaml.safe_load((ROOT / "playbooks" / "runbooks" / path).read_text(encoding="utf-8")):
        for entry in play.get("tasks") or []:
            if entry.get("name") == task:
                module = entry.get("ansible.builtin.set_fact") or entry.get("ansible.builtin.assert")
                value = module[key]
                return value[0] if isinstance(value, list) else value
    raise AssertionError(f"{path}: no task {task!r}")


def _render(expression: str, variables: dict):
    """The expression templated by ansible-core, as a playbook's (trusted) text is."""
    from ansible.template import Templar, trust_as_template

    text = expression if "{{" in expression else "{{ " + expression + " }}"
    return Templar(loader=None, variables=variables).template(trust_as_template(text))


@pytest.fixture
def judged(tmp_path, monkeypatch, ansible_module):
    return _judged(tmp_path, monkeypatch, ansible_module)


def test_every_consumer_reads_the_one_verdict(tmp_path, judged):
    # 1. the module: its verdict is node_verdicts' over its own records
    for name, (_, verdict, healthy) in NODES.items():
        result = judged[name]
        assert (result["verdict"], result["healthy"]) == (verdict, healthy), result["reasons"]
        assert {key: result[key] for key in ("verdict", "healthy", "failed_checks", "caused_failures", "reasons")} == (
            records.node_verdicts(result["records"])[name]
        )
    assert judged["gpu02"]["reasons"][0]["what"] == "check ib_link_flaps"
    assert judged["gpu03"]["failed_checks"] == ["peermem_loaded"]

    # 2. validate.yml: the files it writes, the summary and the assert's rule (healthy)
    built = validation_documents(judged, fleet={}, dcgm={})
    expected = {name: verdict for name, (_, verdict, _) in NODES.items()}
    assert {name: entry["verdict"] for name, entry in built["verdicts"].items()} == expected
    assert [name for name, entry in built["verdicts"].items() if not entry["healthy"]] == ["gpu03"]
    run = tmp_path / "run"
    for path, document in built["documents"].items():
        (run / "validation" / path).parent.mkdir(parents=True, exist_ok=True)
        (run / "validation" / path).write_text(json.dumps(document), encoding="utf-8")

    # 3. the CLI run's summary.json
    summary = runner.load_validation(run / "validation")
    assert {name: entry["verdict"] for name, entry in summary.items()} == expected
    assert {name: entry["healthy"] for name, entry in summary.items()} == {n: h for n, (_, _, h) in NODES.items()}

    # 4. the report and the exports, from the same files
    loaded = export.load_records(run)
    data = ReportData(records=loaded)
    assert {name: entry["verdict"] for name, entry in data.verdicts.items()} == expected
    page = markdown.render(data)
    assert "| gpu02 | WARN | check ib_link_flaps |" in page and "| gpu03 | FAIL | check peermem_loaded |" in page
    rows = dict(re.findall(r'<tr data-node="([^"]+)" data-verdict="([A-Z]+)"><th class="node">', html.render(data)))
    assert rows == expected
    document = export.to_verdicts(loaded)
    by_node = {entry["node"]: entry for entry in document["nodes"]}
    assert {name: entry["verdict"] for name, entry in by_node.items()} == expected
    assert {name: entry["actions"]["slurm"]["state"] for name, entry in by_node.items()} == {
        "gpu01": "RESUME",
        "gpu02": "NONE",  # healthy for scheduling, flagged by its label
        "gpu03": "DRAIN",
    }
    assert by_node["gpu02"]["actions"]["kubernetes"]["labels"] == {"gpuforge/health": "warn"}


def test_the_runbooks_drain_by_the_module_s_verdict(judged):
    unhealthy = _runbook_expression("health_sweep.yml", "Name the failing checks", "gpuforge_sweep_unhealthy")
    keep_drained = _runbook_expression(
        "rolling_upgrade.yml", "Keep an unhealthy node drained and stop the rollout", "that"
    )
    for name, (_, _, healthy) in NODES.items():
        variables = {"gpuforge_node_check": judged[name]}
        assert _render(unhealthy, variables) is (not healthy), name
        assert _render(keep_drained, variables) is healthy, name
