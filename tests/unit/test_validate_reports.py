"""validate.yml's report writing, run by ansible-playbook on the controller alone: one managed_files run on the
controller writes every node's report and the results its diagnostics recorded, built from every node's hostvars. The
task is taken from playbooks/validate.yml as it is; the facts the checks before it set are given per host, in the
shapes the task files record (tasks/validate_dcgm.yml and the others)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("Write every node's report and its diagnostics' results on the controller",)
CHECK = {"name": "gpu_count", "status": "pass", "observed": 8, "expected": 8}


def _validate_play() -> dict:
    plays = yaml.safe_load((ROOT / "playbooks" / "validate.yml").read_text(encoding="utf-8"))
    return next(play for play in plays if play.get("name") == "Validate GPU nodes")


def _validate_tasks() -> list[dict]:
    tasks = {task["name"]: task for task in _validate_play()["tasks"]}
    return [tasks[name] for name in TASKS]


def _host_vars(name: str, with_dcgm: bool) -> dict:
    facts = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "gpuforge_expected_system": "dgx1-v100-edr",
        "gpuforge_node_healthy": name != "gpu02",
        "gpuforge_node_failed_all": [] if name != "gpu02" else ["gpu_count"],
        "gpuforge_node_checks_all": [CHECK],
        "gpuforge_nvbandwidth_result": {"host": name, "checked_at": "2026-11-27T04:00:00Z", "ran": True},
        "gpuforge_gdr_result": {"host": name, "checked_at": "2026-11-27T04:00:01Z", "applicable": False},
    }
    if with_dcgm:
        facts["gpuforge_dcgm_result"] = {"host": name, "checked_at": "2026-11-27T03:59:59Z", "level": 1}
    return facts


@pytest.fixture
def written(tmp_path):
    playbook = tmp_path / "reports.yml"
    validation = tmp_path / "artifacts" / "validation"
    play = {
        "name": "Reports",
        "hosts": "gpu_nodes",
        "gather_facts": False,
        # validate.yml's own gpuforge_validation_dir, from an artifacts folder given with ".." in it (the default is
        # <playbooks>/../artifacts): managed_files takes only normalised absolute paths.
        "vars": {
            **_validate_play()["vars"],
            "gpuforge_artifacts_dir": str(tmp_path / "elsewhere" / ".." / "artifacts"),
            "gpuforge_fleet_consistency": {"outliers": ["gpu02"]},
        },
        "tasks": _validate_tasks(),
    }
    playbook.write_text(yaml.safe_dump([play], sort_keys=False), encoding="utf-8")
    inventory = tmp_path / "hosts.yml"
    hosts = {name: _host_vars(name, with_dcgm=name != "gpu02") for name in ("gpu01", "gpu02")}
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}), encoding="utf-8")
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp_path / "facts"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    result = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(playbook)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return validation, result.stdout


def test_every_nodes_report_and_results_in_one_controller_module_run(written):
    validation, output = written
    files = sorted(str(path.relative_to(validation)) for path in validation.rglob("*") if path.is_file())
    assert files == [
        "dcgm/gpu01.json",
        "gdr/gpu01.json",
        "gdr/gpu02.json",
        "gpu01.json",
        "gpu02.json",
        "nvbandwidth/gpu01.json",
        "nvbandwidth/gpu02.json",
    ]
    # one run for both nodes: the write task reports on the first host only, delegated to the controller
    assert output.count("changed: [gpu01 -> localhost]") == 1 and "[gpu02 -> localhost]" not in output


def test_the_reports_hold_what_the_checks_recorded(written):
    validation, _ = written
    report = json.loads((validation / "gpu02.json").read_text(encoding="utf-8"))
    assert set(report) == {"host", "checked_at", "system", "healthy", "failed", "checks", "fleet_outlier", "fleet"}
    assert report["host"] == "gpu02" and report["system"] == "dgx1-v100-edr"
    assert report["healthy"] is False and report["failed"] == ["gpu_count"] and report["checks"] == [CHECK]
    assert report["fleet_outlier"] is True and report["fleet"] == {}
    assert json.loads((validation / "gpu01.json").read_text(encoding="utf-8"))["healthy"] is True
    dcgm = (validation / "dcgm" / "gpu01.json").read_text(encoding="utf-8")
    assert json.loads(dcgm) == {"host": "gpu01", "checked_at": "2026-11-27T03:59:59Z", "level": 1}
    assert dcgm.endswith("}\n")
    assert oct((validation / "gdr" / "gpu02.json").stat().st_mode & 0o777) == "0o644"
