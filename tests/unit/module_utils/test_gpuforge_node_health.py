"""Node health judging on simulated lab nodes: no false alarms, every SCHEMA.md fault caught by name."""

from __future__ import annotations

import gpuforge_kernel as kernel
import gpuforge_nvidia_smi as nv
import pytest
from gpuforge_node_health import CHECK_NAMES, judge_node
from node_sim_helpers import GPU_PROFILES, LAB_DRIVER_RELEASE, SimNode, expected_for


def judge(tmp_path, monkeypatch, profile, faults=None, expected=None):
    node = SimNode(tmp_path, monkeypatch, profile, faults)
    return judge_node(
        node.nvidia_smi_facts(),
        node.infiniband_facts(),
        kernel.parse_lsmod(node.lsmod()),
        kernel.parse_xid_events(node.dmesg()),
        expected or expected_for(profile),
    )


def by_name(result):
    return {c["name"]: c for c in result["checks"]}


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_healthy_profile_has_no_false_alarm(tmp_path, monkeypatch, profile):
    result = judge(tmp_path, monkeypatch, profile)
    assert result["failed_checks"] == []
    assert result["healthy"] is True
    assert all(c["status"] == "ok" for c in result["checks"]), [c for c in result["checks"] if c["status"] != "ok"]
    assert {c["name"] for c in result["checks"]} <= set(CHECK_NAMES)


def test_healthy_dgx1_runs_every_check(tmp_path, monkeypatch):
    checks = by_name(judge(tmp_path, monkeypatch, "dgx1-v100-edr"))
    assert set(checks) == set(CHECK_NAMES)
    assert checks["gpu_count"]["observed"] == 8
    assert checks["gpu_model"]["observed"] == ["Tesla V100-SXM2-16GB"]
    # The lab's Debian 12 driver release (roles/gpuforge/defaults/main/gpu_stack.yml), as the lab mirror built it.
    assert checks["driver_branch"]["observed"] == LAB_DRIVER_RELEASE
    assert checks["peermem_loaded"]["observed"] == ["nvidia_peermem"]
    assert checks["hcas_present"]["observed"] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert checks["ib_port_rate"]["expected"]["mlx5_3/1"] == "100 Gb/s InfiniBand"


FAULTS = [
    ({"type": "gpu_missing", "gpu": 3}, "gpu_count"),
    ({"type": "gpu_fallen_off_bus", "gpu": 2}, "gpu_fallen_off_bus"),
    ({"type": "ecc_dbe", "gpu": 1, "count": 2}, "ecc_volatile_dbe"),
    ({"type": "row_remap_pending", "gpu": 0}, "row_remap"),
    ({"type": "xid", "gpu": 5, "code": 79, "message": "GPU has fallen off the bus."}, "xid"),
    ({"type": "ib_port_state", "hca": "mlx5_1", "port": 1, "state": "Down", "phys_state": "Polling"}, "ib_port_state"),
    ({"type": "ib_port_rate", "hca": "mlx5_2", "port": 1, "rate_gbps": 56}, "ib_port_rate"),
    ({"type": "hca_missing", "hca": "mlx5_3"}, "hcas_present"),
    ({"type": "pcie_width_degraded", "gpu": 4, "width": 8}, "pcie_link"),
    ({"type": "thermal_slowdown", "gpu": 6}, "throttle"),
    ({"type": "peermem_load_failure"}, "peermem_loaded"),
]


@pytest.mark.parametrize(("fault", "check"), FAULTS, ids=[f[0]["type"] for f in FAULTS])
def test_fault_fails_the_named_check(tmp_path, monkeypatch, fault, check):
    # row remapping exists from Ampere on: inject that fault on the H100 system.
    profile = "dgx-h100-ndr" if fault["type"] == "row_remap_pending" else "dgx1-v100-edr"
    result = judge(tmp_path, monkeypatch, profile, [fault])
    assert result["healthy"] is False
    assert check in result["failed_checks"]
    failing = by_name(result)[check]
    assert failing["fault"] and failing["remedy"]


def test_fault_details_name_the_component(tmp_path, monkeypatch):
    faults = [
        {"type": "ecc_dbe", "gpu": 1, "count": 2},
        {"type": "ib_port_rate", "hca": "mlx5_2", "port": 1, "rate_gbps": 56},
        {"type": "pcie_width_degraded", "gpu": 4, "width": 8},
        {"type": "thermal_slowdown", "gpu": 6},
        {"type": "xid", "gpu": 5, "code": 79, "message": "GPU has fallen off the bus."},
    ]
    checks = by_name(judge(tmp_path, monkeypatch, "dgx1-v100-edr", faults))
    assert checks["ecc_volatile_dbe"]["observed"] == {1: 2}
    assert checks["ib_port_rate"]["observed"] == {"mlx5_2/1": "56 Gb/s InfiniBand"}
    assert checks["pcie_link"]["observed"][4].startswith("Gen3 x8")
    assert checks["throttle"]["observed"] == {6: "hw_slowdown,hw_thermal_slowdown"}
    assert checks["xid"]["observed"] == [79]


def test_down_port_is_a_state_fault_only(tmp_path, monkeypatch):
    # The simulated ibstat, like the real one, shows a placeholder rate for a Down port: not a rate fault.
    fault = {"type": "ib_port_state", "hca": "mlx5_2", "port": 1, "state": "Down", "phys_state": "Polling"}
    result = judge(tmp_path, monkeypatch, "dgx1-v100-edr", [fault])
    assert result["failed_checks"] == ["ib_port_state"]
    assert by_name(result)["ib_port_state"]["observed"] == {"mlx5_2/1": "Down/Polling"}


def test_non_fatal_xid_is_a_warning(tmp_path, monkeypatch):
    fault = {"type": "xid", "gpu": 0, "code": 13, "message": "Graphics Exception"}
    result = judge(tmp_path, monkeypatch, "dgx1-v100-edr", [fault])
    assert result["healthy"] is True
    assert by_name(result)["xid"]["status"] == "warn"


def test_missing_hca_breaks_affinity_too(tmp_path, monkeypatch):
    result = judge(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "hca_missing", "hca": "mlx5_3"}])
    assert by_name(result)["hcas_present"]["observed"] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert "GPU4<->mlx5_3" in by_name(result)["gpu_hca_affinity"]["observed"]


def test_wrong_expected_affinity_fails(tmp_path, monkeypatch):
    expected = expected_for("dgx1-v100-edr")
    expected["numa_affinity"] = [{"gpus": [0], "hcas": ["mlx5_2"], "numa": 1}]
    checks = by_name(judge(tmp_path, monkeypatch, "dgx1-v100-edr", expected=expected))
    assert checks["gpu_hca_affinity"]["observed"] == {"GPU0": "NUMA 0", "GPU0<->mlx5_2": "SYS"}


def test_missing_and_malformed_facts_are_failed_checks():
    expected = expected_for("dgx1-v100-edr")
    result = judge_node(None, "garbage", None, None, expected, unreadable={"lsmod": "missing header"})
    checks = by_name(result)
    assert checks["nvidia_smi_readable"]["status"] == "fail"
    assert checks["nvidia_smi_readable"]["fault"] == "could not read the nvidia-smi facts: no facts were given"
    assert checks["infiniband_readable"]["fault"] == "could not read the InfiniBand facts: no facts were given"
    assert checks["lsmod_readable"]["fault"] == "could not read lsmod output: missing header"
    assert "peermem_loaded" not in checks
    assert checks["gpu_count"]["observed"] == 0
    assert result["healthy"] is False


def test_malformed_gpu_entries_do_not_raise():
    facts = {"driver_version": 535, "gpus": ["x", {"index": 0, "ecc": "bad", "pcie": None}], "errors": []}
    result = judge_node(facts, {"hcas": [{"name": "mlx5_0", "ports": None}]}, {}, [], expected_for("dgx1-v100-edr"))
    assert {"gpu_count", "ib_port_state", "pcie_link"} <= set(result["failed_checks"])


def test_truncated_nvidia_smi_reported(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr")
    xml = node.smi("-q", "-x")[1]
    with pytest.raises(nv.ParseError) as info:
        nv.parse_query_xml(xml[: len(xml) // 2])
    facts = {"gpus": [], "errors": [f"could not read nvidia-smi -q -x: {info.value}"]}
    checks = by_name(
        judge_node(
            facts, node.infiniband_facts(), {"modules": {"nvidia_peermem": {}}}, [], expected_for("dgx1-v100-edr")
        )
    )
    assert checks["nvidia_smi_readable"]["status"] == "fail"
    assert checks["nvidia_smi_readable"]["fault"].startswith("could not read all of the nvidia-smi facts: could not")
