"""roce_qos on the vSphere RoCE lab node, on each OS shape the role claims: the state mlnx_qos (DOCA's mlnx-tools from
the lab mirror) and the sysfs/configfs tree read back (parsed with the parser tested on real mlnx_qos outputs), the
boot unit that re-applies it, and the module's verify judgement of each RoCE QoS fault the lab can put on the node
(trust pcp, PFC off, a wrong ToS), which the role's settings then repair. Expected values are NVIDIA's lossless RoCE
settings (vendor_facts/mlnx-tools/roce-qos.yml: trust dscp, PFC on priority 3, ToS 106 = DSCP 26)."""

import json
import shlex
from pathlib import Path

import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_mlnx_qos as qos

MOLECULE_YML = Path(__file__).resolve().parents[1] / "molecule.yml"
SYS = "/run/gpuforge-lab/sys"
HARDWARE = "/etc/gpuforge-lab/hardware.json"
# The converge's port and the role's defaults (roles/roce_qos/defaults/main.yml), as validation passes them.
SETTINGS = {
    "ports": [{"netdev": "ens224", "hca": "mlx5_0", "port": 1}],
    "pfc_priority": 3,
    "tos": 106,
    "gid_index": 3,
    "sysfs_root": SYS,
}


def test_mlnx_qos_reads_trust_dscp_and_pfc_on_priority_3_only(host):
    state = qos.parse_mlnx_qos(host.check_output("mlnx_qos -i ens224"))
    assert state["trust"] == "dscp"
    assert state["pfc_priorities"] == [3]
    assert state["dscp2prio"][26] == 3


def test_ecn_tos_and_traffic_class(host):
    for point in ("roce_np", "roce_rp"):
        assert host.file(f"{SYS}/class/net/ens224/ecn/{point}/enable/3").content_string.strip() == "1"
    tos = host.file(f"{SYS}/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").content_string
    assert qos.read_number(tos, "default_roce_tos") == 106
    traffic_class = host.file(f"{SYS}/class/infiniband/mlx5_0/tc/1/traffic_class").content_string
    assert qos.read_traffic_class(traffic_class) == 106


def test_gid_index_3_is_roce_v2(host):
    assert (
        qos.read_gid_type(host.file(f"{SYS}/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3").content_string)
        == "RoCE v2"
    )


def test_boot_unit_enabled_after_openibd(host):
    unit = host.file("/etc/systemd/system/gpuforge-roce-qos.service")
    assert unit.user == "root" and unit.mode == 0o644
    assert "After=openibd.service sys-subsystem-net-devices-ens224.device" in unit.content_string
    assert host.check_output("systemctl is-enabled gpuforge-roce-qos.service") == "enabled"
    script = host.file("/usr/local/sbin/gpuforge-roce-qos")
    assert script.mode == 0o755
    assert "mlnx_qos -i ens224 --pfc 0,0,0,1,0,0,0,0" in script.content_string


def test_mlnx_qos_is_doca_mlnx_tools_from_the_mirror(host):
    """/usr/sbin/mlnx_qos belongs to the mlnx-tools package the OS's package manager installed from the lab's DOCA
    repository, not to a file copied in."""
    rhel = host.system_info.distribution == "rhel"
    owner = host.check_output("rpm -qf /usr/sbin/mlnx_qos" if rhel else "dpkg-query -S /usr/sbin/mlnx_qos")
    assert owner.startswith("mlnx-tools-24.10-0.2410068" if rhel else "mlnx-tools: /usr/sbin/mlnx_qos"), owner


def _judge(host, state="verify") -> dict:
    return host.ansible("gpuforge.cluster.roce_qos", json.dumps({**SETTINGS, "state": state}), check=False)


def test_verify_passes_the_converged_node(host):
    result = _judge(host)
    assert result["check"]["status"] == "PASS", result["check"]
    assert result["changed"] is False


# Each fault the lab simulator puts back over what was set (lab/sim/gpuforge_sim/mlnx_qos.py apply_faults), with the
# words of the problem the module names for it (module_utils/gpuforge_mlnx_qos.judge_roce_port).
FAULTS = {
    "roce_trust_pcp": ({}, "priority trust state pcp, expected dscp"),
    "roce_pfc_off": ({}, "PFC enabled on priority none, expected only 3"),
    "roce_tos_wrong": ({"tos": 0}, "RDMA-CM default ToS 0, expected 106"),
}


# The fault each platform takes: mlnx_qos and the ToS file behave the same on every OS shape, so each platform proves
# one fault and its repair (roce_tos_wrong on two), rather than every fault on every platform.
FAULT_OF_PLATFORM = {
    "gpuforge-mol-roce-debian12": "roce_trust_pcp",
    "gpuforge-mol-roce-rhel9": "roce_pfc_off",
    "gpuforge-mol-roce-ubuntu2204": "roce_tos_wrong",
    "gpuforge-mol-roce-ubuntu2404": "roce_tos_wrong",
}


def test_every_platform_takes_a_fault_and_every_fault_is_taken():
    platforms = [platform["name"] for platform in yaml.safe_load(MOLECULE_YML.read_text())["platforms"]]
    assert sorted(FAULT_OF_PLATFORM) == sorted(platforms)
    assert sorted(set(FAULT_OF_PLATFORM.values())) == sorted(FAULTS)


def test_verify_catches_its_fault_and_the_settings_repair_it(host):
    kind = FAULT_OF_PLATFORM[host.backend.host]
    extra, problem = FAULTS[kind]
    original = host.file(HARDWARE).content_string
    hardware = json.loads(original)
    fault = {"type": kind, "hca": "mlx5_0", "port": 1, **extra}
    faulty = json.dumps({**hardware, "faults": [*hardware.get("faults", []), fault]})
    host.run_expect([0], f"printf '%s' {shlex.quote(faulty)} > {HARDWARE}")
    try:
        result = _judge(host)
        assert result["check"]["status"] == "FAIL"
        assert problem in result["check"]["fault"], result["check"]
        others = [name for name, (_, words) in FAULTS.items() if name != kind and words in result["check"]["fault"]]
        assert not others, f"{kind} also reported as {others}"
    finally:
        host.run_expect([0], f"printf '%s' {shlex.quote(original)} > {HARDWARE}")
    repaired = _judge(host, state="present")
    assert repaired["changed"] is True and repaired["check"]["status"] == "PASS", repaired
    assert _judge(host)["check"]["status"] == "PASS"
