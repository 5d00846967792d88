"""Tasks of playbooks/validate.yml run by ansible-playbook on local hosts whose tools are the lab's simulators: what
the tests of validate.yml's fabric checks (subnet manager, RoCE QoS) share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records
from hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
WRITE_RECORDS = "Write every node's records and its diagnostics' results on the controller"


def validate_play() -> tuple[dict, dict]:
    """The "Validate GPU nodes" play's vars and its tasks by name, as they are in playbooks/validate.yml."""
    plays = yaml.safe_load((ROOT / "playbooks" / "validate.yml").read_text(encoding="utf-8"))
    validate = next(play for play in plays if play.get("name") == "Validate GPU nodes")
    return validate["vars"], {task["name"]: task for task in validate["tasks"]}


def sim_tool(directory: Path, tool: str, environment: str) -> Path:
    """directory/tool: the lab's simulator of that tool on this Python, with the shell environment assignments
    given (GPUFORGE_LAB_HARDWARE=..., GPUFORGE_LAB_RUN=...)."""
    script = directory / tool
    script.write_text(
        f"#!/bin/sh\n{environment} PYTHONPATH={ROOT / 'lab' / 'sim'} "
        f'exec {sys.executable} -m gpuforge_sim.{tool} "$@"\n',
        encoding="ascii",
    )
    script.chmod(0o755)
    return script


def local_host(name: str, system: str, checked_at: str, observed_gpus: int, **host_vars) -> dict:
    """A local host whose gpu_node_check result (gpuforge_node_check) holds one passing check, as validate.yml's
    earlier tasks leave it."""
    check = {"name": "gpu_count", "status": "PASS", "observed": observed_gpus, "expected": observed_gpus}
    return {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "gpuforge_node_check": {
            **records.node_report([check], name, system, checked_at),
            "system": system,
            "node": name,
            "checked_at": checked_at,
            "diagnostics": {},
        },
        **host_vars,
    }


def run_validate_tasks(tmp_path: Path, name: str, system: str, tasks: list, groups: dict):
    """Run tasks (then validate.yml's task that writes the records) on gpu_nodes with validate.yml's play vars;
    groups is the inventory's children ({group: {host: vars}}). Fails the test when ansible-playbook fails;
    returns its completed process and each node's written validation document."""
    play_vars, by_name = validate_play()
    play = {
        "name": name,
        "hosts": "gpu_nodes",
        "gather_facts": False,
        "vars": {
            **play_vars,
            "gpuforge_artifacts_dir": str(tmp_path / "artifacts"),
            "gpuforge_expected_system": system,
            "gpuforge_validate_dcgm": False,
            "gpuforge_dcgm_level": 1,
        },
        "tasks": [*tasks, by_name[WRITE_RECORDS]],
    }
    playbook = tmp_path / "validate-tasks.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False), encoding="utf-8")
    inventory = {"all": {"children": {group: {"hosts": hosts} for group, hosts in groups.items()}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(tmp_path / "hosts.yml"), str(playbook)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    written = {
        node: json.loads((tmp_path / "artifacts" / "validation" / f"{node}.json").read_text(encoding="utf-8"))
        for node in groups["gpu_nodes"]
    }
    return done, written


def check_records(written: dict, check: str) -> dict:
    """Each node's record of check, or None where the node has none."""
    return {
        node: next((r for r in document["records"] if r["check"] == check), None) for node, document in written.items()
    }
