"""The operator runbooks pass ansible-playbook --syntax-check and start with the inventory validation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hang_guard import HANG_GUARD_S

from gpuforge.cli import RUNBOOKS

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", RUNBOOKS)
def test_syntax_check(name):
    playbook = ROOT / "playbooks" / "runbooks" / f"{name}.yml"
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    result = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "--syntax-check", "-i", "localhost,", str(playbook)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", RUNBOOKS)
def test_imports_validate_inventory_first(name):
    plays = yaml.safe_load((ROOT / "playbooks" / "runbooks" / f"{name}.yml").read_text())
    assert plays[0]["ansible.builtin.import_playbook"] == "../validate_inventory.yml"


def test_rolling_upgrade_is_one_node_at_a_time_and_stops_on_failure():
    plays = yaml.safe_load((ROOT / "playbooks" / "runbooks" / "rolling_upgrade.yml").read_text())
    play = plays[1]
    assert (play["serial"], play["max_fail_percentage"]) == (1, 0)
    names = [task["name"] for task in play["tasks"]]
    assert names.index("Drain the node in Slurm") < names.index("Upgrade MLNX_OFED")
    # OFED before the driver, as in site.yml (nvidia-peermem's DKMS build needs OFED's ib_core).
    assert names.index("Upgrade MLNX_OFED") < names.index("Upgrade the NVIDIA driver")
    assert names.index("Validate the node") < names.index("Keep an unhealthy node drained and stop the rollout")
    assert names.index("Keep an unhealthy node drained and stop the rollout") < names.index("Resume the node in Slurm")


def test_health_sweep_drains_only_when_asked():
    plays = yaml.safe_load((ROOT / "playbooks" / "runbooks" / "health_sweep.yml").read_text())
    assert plays[1]["vars"]["gpuforge_drain_failing"] is False
