"""roce_qos: its refusals, the boot script and unit it renders, and the role run by ansible-playbook on this host
against the lab's simulated mlnx_qos and RoCE sysfs/configfs tree (converge, second run changed=0, check mode
changed=0, the state read back)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from gpu_stack_render import OS_FACTS, RoleRender
from local_playbook import ROOT, run_local_playbook

REFUSAL = "Refuse unsupported systems and settings"
PORTS = [{"netdev": "ens224", "hca": "mlx5_0", "port": 1}]


def role(os_name="debian12", **extra):
    return RoleRender("roce_qos", os_name, **{"roce_qos_ports": PORTS, **extra})


# RHEL 8 is no claim: every host role refuses it (ansible-core 2.17+ cannot run its dnf bindings' Python 3.6).
@pytest.mark.parametrize("os_name", sorted(set(OS_FACTS) - {"rhel8"}))
def test_claimed_systems_are_not_refused(os_name):
    assert not role(os_name).refused("main.yml", REFUSAL)


def test_another_release_is_refused_naming_the_supported_ones():
    facts = {**OS_FACTS["debian12"], "distribution_major_version": "11", "distribution_version": "11.9"}
    role(ansible_facts=facts).assert_problems(
        "main.yml", REFUSAL, ["the roce_qos role supports Debian 12, Ubuntu 22.04 and 24.04, RHEL 9"]
    )


def test_a_tos_out_of_range_and_a_port_listed_twice_are_refused():
    role(roce_qos_tos=300).assert_problems("main.yml", REFUSAL, ["roce_qos_tos 300 is not one IP ToS byte"])
    role(roce_qos_ports=PORTS * 2).assert_problems("main.yml", REFUSAL, ["a netdev appears twice"])


def test_boot_script_applies_each_setting():
    script = role(roce_qos_pfc_priority=4, roce_qos_tos=138).template("gpuforge-roce-qos.sh.j2")
    assert "mlnx_qos -i ens224 --trust dscp >/dev/null" in script
    assert "mlnx_qos -i ens224 --pfc 0,0,0,0,1,0,0,0 >/dev/null" in script
    assert "mlnx_qos -i ens224 --dscp2prio set,34,4 >/dev/null" in script  # ToS 138 = DSCP 34
    assert 'echo 1 > "$SYSFS/class/net/ens224/ecn/roce_np/enable/4"' in script
    assert 'echo 1 > "$SYSFS/class/net/ens224/ecn/roce_rp/enable/4"' in script
    assert 'mkdir -p "$SYSFS/kernel/config/rdma_cm/mlx5_0"' in script
    assert 'echo 138 > "$SYSFS/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"' in script
    assert 'echo 138 > "$SYSFS/class/infiniband/mlx5_0/tc/1/traffic_class"' in script


def test_boot_unit_runs_after_openibd_and_the_netdev():
    unit = role().template("gpuforge-roce-qos.service.j2")
    assert "After=openibd.service sys-subsystem-net-devices-ens224.device\n" in unit
    assert "Requires=sys-subsystem-net-devices-ens224.device" in unit
    assert "Type=oneshot" in unit and "ExecStart=/usr/local/sbin/gpuforge-roce-qos" in unit


PLAYBOOK = """
- name: RoCE QoS on the lab's simulated RoCE port
  hosts: localhost
  gather_facts: true
  pre_tasks:
    - name: The lab node's operating system
      lab_os_facts:
        facts: %s
  roles:
    - role: gpuforge.cluster.roce_qos
"""

# The lab RoCE node runs Debian 12. This host may not: the newest ansible-core's unit lane runs in a Debian 13
# userland, which the role rightly refuses. The module below sets only the OS identity the role reads, as setup
# reports it on Debian 12; every other fact is this host's own.
LAB_OS_FACTS_MODULE = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={"facts": {"type": "dict", "required": True}}, supports_check_mode=True)
module.exit_json(changed=False, ansible_facts=module.params["facts"])
"""
LAB_OS = {
    key: OS_FACTS["debian12"][key]
    for key in ("os_family", "distribution", "distribution_major_version", "distribution_version")
}


def _recap(stdout: str) -> dict:
    match = re.search(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", stdout)
    assert match, stdout[-2000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, match.groups()), strict=True))


@pytest.fixture
def lab_node(tmp_path):
    """The vsphere-t4-vgpu-roce node's simulated mlnx_qos on PATH, its tree under tmp_path."""
    hw = yaml.safe_load((ROOT / "lab/profiles/vsphere-t4-vgpu-roce.yml").read_text(encoding="utf-8"))
    (tmp_path / "hardware.json").write_text(json.dumps({**hw, "faults": []}), encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "mlnx_qos"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m gpuforge_sim.mlnx_qos "$@"\n', encoding="ascii")
    shim.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": str(ROOT / "lab" / "sim"),
        "GPUFORGE_LAB_HARDWARE": str(tmp_path / "hardware.json"),
        "GPUFORGE_LAB_RUN": str(tmp_path / "run"),
        "GPUFORGE_LAB_SYSFS": str(tmp_path / "sys"),
    }
    library = tmp_path / "library"
    library.mkdir()
    (library / "lab_os_facts.py").write_text(LAB_OS_FACTS_MODULE, encoding="utf-8")
    env["ANSIBLE_LIBRARY"] = str(library)
    variables = {"roce_qos_ports": PORTS, "roce_qos_sysfs_root": str(tmp_path / "sys")}
    return tmp_path, env, ["-e", json.dumps(variables), "--skip-tags", "roce_qos_persist"]


def test_role_converges_then_changes_nothing(tmp_path, lab_node):
    root, env, args = lab_node
    playbook = tmp_path / "site.yml"
    playbook.write_text(PLAYBOOK % json.dumps(LAB_OS), encoding="utf-8")
    first = _recap(run_local_playbook(playbook, *args, **env).stdout)
    assert first["changed"] == 1 and first["failed"] == 0
    second = _recap(run_local_playbook(playbook, *args, **env).stdout)
    assert second["changed"] == 0
    checked = _recap(run_local_playbook(playbook, "--check", "--diff", *args, **env).stdout)
    assert checked["changed"] == 0
    sysfs = root / "sys"
    assert (sysfs / "class/net/ens224/qos/trust").read_text().strip() == "dscp"
    assert (sysfs / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text() == "106"
    assert json.loads((root / "run/mlnx_qos/ens224.json").read_text())["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]


def test_rhel8_is_refused_naming_the_supported_releases():
    rhel8 = role("rhel8")
    assert rhel8.refused("main.yml", REFUSAL)
    message = " ".join(rhel8.message("main.yml", REFUSAL).split())
    assert "supports Debian 12, Ubuntu 22.04 and 24.04, RHEL 9 (this is RedHat 8." in message, message
