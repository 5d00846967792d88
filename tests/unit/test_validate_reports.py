"""validate.yml's report writing, run by ansible-playbook on the controller alone: one managed_files run on the
controller writes every node's records, its verdict and its diagnostics' results, built from every node's hostvars
(filter_plugins/gpuforge_validation.py). The tasks are taken from playbooks/validate.yml as they are; the result of
the check before them (gpu_node_check with diagnostics, tasks/validate_node.yml) is given per host in the module's
shape, built by the function the module builds it with (gpuforge_records.node_report)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records
from hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("Write every node's records and its diagnostics' results on the controller",)
CHECK = {"name": "gpu_count", "status": "PASS", "observed": 8, "expected": 8}
FAILED = {"name": "gpu_count", "status": "FAIL", "observed": 7, "expected": 8, "fault": "7 GPUs", "remedy": "reseat"}
DCGM_CHECK = {"name": "dcgm_diag", "status": "PASS"}
CHECKED_AT = "2026-11-27T03:59:00Z"
# fleet_consistency's result: gpu02 runs another kernel than the other nodes of its system.
FLEET = {
    "outliers": ["gpu02"],
    "checks": {
        "dgx1-v100-edr": {
            "status": "FAIL",
            "observed": {"kernel": {"gpu02": "6.1.0-13"}},
            "expected": {"kernel": "6.1.0-18"},
            "remedy": "upgrade the kernel",
        }
    },
}
# gpu_node_check's diagnostics results, as the module returns them (trimmed to what the documents take, plus a key
# they leave out).
DIAGNOSTICS = {
    "dcgm": {
        "ran": True,
        "healthy": True,
        "check": DCGM_CHECK,
        "dcgm": {"version": "3.3.5"},
        "cmd": ["dcgmi"],
        "checked_at": "2026-11-27T03:59:59Z",
    },
    "nvbandwidth": {
        "ran": True,
        "healthy": True,
        "check": None,
        "nvbandwidth": {"testcases": {}},
        "cmd": ["nvbandwidth"],
        "checked_at": "2026-11-27T04:00:00Z",
    },
    "gdr": {
        "applicable": False,
        "reason": "peermem: false",
        "ran": False,
        "healthy": True,
        "plan": [],
        "unplanned": [],
        "cmds": {},
        "checked_at": "2026-11-27T04:00:01Z",
    },
}


def _validate_play() -> dict:
    plays = yaml.safe_load((ROOT / "playbooks" / "validate.yml").read_text(encoding="utf-8"))
    return next(play for play in plays if play.get("name") == "Validate GPU nodes")


def _without(result: dict, *keys) -> dict:
    return {key: value for key, value in result.items() if key not in keys}


def _role_defaults() -> dict:
    return yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/acceptance_checks.yml").read_text(encoding="utf-8"))


def _host_vars(name: str) -> dict:
    """gpu01: healthy, every diagnostic ran. gpu02: unhealthy, DCGM turned off. gpu03: DCGM on but not run (its
    SKU is one DCGM does not support: validate.yml hands the module no dcgm). No host has gpuforge_expected_system in
    its hostvars, as when it is given as a play variable: the report takes the system from the check's result."""
    diagnostics = dict(DIAGNOSTICS)
    if name != "gpu01":
        del diagnostics["dcgm"]
    return {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        **({"gpuforge_validate_dcgm": False} if name == "gpu02" else {}),
        "gpuforge_node_check": {
            **records.node_report(
                [FAILED if name == "gpu02" else CHECK] + ([DCGM_CHECK] if name == "gpu01" else []),
                name,
                "dgx1-v100-edr",
                CHECKED_AT,
            ),
            "system": "dgx1-v100-edr",
            "node": name,
            "checked_at": CHECKED_AT,
            "diagnostics": diagnostics,
        },
    }


def _run_tasks(tmp_path: Path, names: tuple[str, ...], hosts: dict) -> tuple[subprocess.CompletedProcess, Path]:
    """validate.yml's tasks of these names, as they are, on local hosts with these variables."""
    playbook = tmp_path / "reports.yml"
    validation = tmp_path / "artifacts" / "validation"
    tasks = {task["name"]: task for task in _validate_play()["tasks"]}
    play = {
        "name": "Reports",
        "hosts": "gpu_nodes",
        "gather_facts": False,
        # validate.yml's own gpuforge_validation_dir, from an artifacts folder given with ".." in it (the default is
        # <playbooks>/../artifacts): managed_files takes only normalised absolute paths.
        # validate.yml's play vars, and the gpuforge role's defaults it reads as play-level values: neither is in
        # hostvars, which the write task reads each node's values from.
        "vars": {
            **_validate_play()["vars"],
            **{
                key: value
                for key, value in _role_defaults().items()
                if key.startswith(("gpuforge_dcgm", "gpuforge_validate"))
            },
            "gpuforge_artifacts_dir": str(tmp_path / "elsewhere" / ".." / "artifacts"),
            "gpuforge_fleet_consistency": FLEET,
        },
        "tasks": [tasks[name] for name in names],
    }
    playbook.write_text(yaml.safe_dump([play], sort_keys=False), encoding="utf-8")
    inventory = tmp_path / "hosts.yml"
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
        timeout=HANG_GUARD_S,
    )
    return result, validation


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One ansible-playbook run whose written documents the tests below only read."""
    hosts = {name: _host_vars(name) for name in ("gpu01", "gpu02", "gpu03")}
    result, validation = _run_tasks(tmp_path_factory.mktemp("written"), TASKS, hosts)
    assert result.returncode == 0, result.stdout + result.stderr
    return validation, result.stdout


def test_summary_and_verdict_name_unhealthy_and_unjudged_nodes(tmp_path):
    """gpu03's check task failed (a diagnostic could not run: its registered result has no verdict): neither
    healthy in the summary nor passed by the final assert."""
    hosts = {name: _host_vars(name) for name in ("gpu01", "gpu02", "gpu03")}
    hosts["gpu03"]["gpuforge_node_check"] = {
        "failed": True,
        "msg": "dcgmi was not found on gpu03",
        "diagnostics": {"dcgm": {"ran": False, "healthy": True}},
    }
    result, _ = _run_tasks(tmp_path, ("Cluster summary", "Fail when a node is unhealthy"), hosts)
    output = " ".join(result.stdout.split())  # the callback wraps long messages
    assert result.returncode != 0, output
    assert "gpu01 | PASS" in output and "gpu02 | FAIL: gpu_count, fleet_consistency" in output
    assert "gpu03 | no result (unreachable or aborted)" not in output  # here it is still a play host, with no verdict
    assert "Unhealthy GPU nodes: gpu02, gpu03 " in output


def test_a_warn_only_node_is_healthy_and_flagged(tmp_path):
    """The one meaning of WARN (gpuforge_records.node_verdicts): healthy for scheduling, flagged in the summary."""
    hosts = {name: _host_vars(name) for name in ("gpu01",)}
    warned = {"name": "throttle", "status": "WARN", "observed": {}, "expected": "", "fault": "hw", "remedy": "cool"}
    hosts["gpu01"]["gpuforge_node_check"].update(
        records.node_report([CHECK, warned], "gpu01", "dgx1-v100-edr", CHECKED_AT)
    )
    result, _ = _run_tasks(tmp_path, ("Cluster summary", "Fail when a node is unhealthy"), hosts)
    output = " ".join(result.stdout.split())
    assert result.returncode == 0, output
    assert "gpu01 | WARN: check throttle" in output


def test_every_nodes_report_and_results_in_one_controller_module_run(written):
    validation, output = written
    files = sorted(str(path.relative_to(validation)) for path in validation.rglob("*") if path.is_file())
    assert files == [
        "dcgm/gpu01.json",
        "dcgm/gpu03.json",
        "gdr/gpu01.json",
        "gdr/gpu02.json",
        "gdr/gpu03.json",
        "gpu01.json",
        "gpu02.json",
        "gpu03.json",
        "nvbandwidth/gpu01.json",
        "nvbandwidth/gpu02.json",
        "nvbandwidth/gpu03.json",
    ]
    # one run for all nodes: the write task reports on the first host only, delegated to the controller
    assert output.count("changed: [gpu01 -> localhost]") == 1 and "[gpu02 -> localhost]" not in output


def test_the_reports_hold_the_records_the_check_returned_and_their_verdict(written):
    validation, _ = written
    hosts = {name: _host_vars(name)["gpuforge_node_check"] for name in ("gpu01", "gpu02")}
    report = json.loads((validation / "gpu02.json").read_text(encoding="utf-8"))
    assert set(report) == {"schema_version", "host", "checked_at", "system", "verdict", "records"}
    assert (report["host"], report["system"], report["checked_at"]) == ("gpu02", "dgx1-v100-edr", CHECKED_AT)
    # The module's records as they are, then the node's fleet_consistency record (gpu02 is the outlier).
    assert report["records"][:-1] == hosts["gpu02"]["records"]
    fleet = report["records"][-1]
    assert (fleet["check"], fleet["verdict"], fleet["observed"]["kernel"]) == ("fleet_consistency", "FAIL", "6.1.0-13")
    assert report["verdict"] == records.node_verdicts(report["records"])["gpu02"]
    assert report["verdict"]["failed_checks"] == ["gpu_count", "fleet_consistency"]
    healthy = json.loads((validation / "gpu01.json").read_text(encoding="utf-8"))
    assert healthy["records"][:-1] == hosts["gpu01"]["records"]
    assert (healthy["verdict"]["verdict"], healthy["verdict"]["healthy"]) == ("PASS", True)
    assert [r["check"] for r in healthy["records"]] == ["gpu_count", "dcgm_diag", "fleet_consistency"]
    assert oct((validation / "gdr" / "gpu02.json").stat().st_mode & 0o777) == "0o644"


def test_each_diagnostic_document_holds_its_fields_and_its_own_time(written):
    validation, _ = written

    def read(path):
        text = (validation / path).read_text(encoding="utf-8")
        assert text.endswith("}\n")
        return json.loads(text)

    assert read("dcgm/gpu01.json") == {
        "host": "gpu01",
        "checked_at": "2026-11-27T03:59:59Z",
        "level": 1,
        "ran": True,
        "healthy": True,
        "check": DCGM_CHECK,
        "dcgm": {"version": "3.3.5"},
    }
    # the module's result, less what the document leaves out (the command lines), with the host (and gdr's check,
    # none when not applicable)
    assert read("nvbandwidth/gpu02.json") == {"host": "gpu02", **_without(DIAGNOSTICS["nvbandwidth"], "cmd")}
    assert read("gdr/gpu03.json") == {"host": "gpu03", "check": None, **_without(DIAGNOSTICS["gdr"], "cmds")}


def test_dcgm_on_but_not_run_is_recorded_as_not_run(written):
    validation, _ = written
    document = json.loads((validation / "dcgm" / "gpu03.json").read_text(encoding="utf-8"))
    report = json.loads((validation / "gpu03.json").read_text(encoding="utf-8"))
    assert document == {
        "host": "gpu03",
        "checked_at": report["checked_at"] == CHECKED_AT and CHECKED_AT,
        "level": 1,
        "ran": False,
        "healthy": True,
        "check": None,
        "dcgm": None,
    }
