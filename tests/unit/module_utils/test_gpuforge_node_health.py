"""Node health judging on simulated lab nodes: no false alarms, every SCHEMA.md fault caught by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_kernel as kernel
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_nvidia_smi as nv
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_node_health import CHECK_NAMES, judge_node
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perfquery import parse_link_flaps
from ansible_collections.gpuforge.cluster.plugins.modules import nvidia_smi_facts
from node_sim_helpers import GPU_PROFILES, LAB_DRIVER_RELEASE, SimNode, expected_for
from pcie_sim_helpers import pcie_inputs

from gpuforge.lab.profiles import load_profile


def judge(tmp_path, monkeypatch, profile, faults=None, expected=None):
    node = SimNode(tmp_path, monkeypatch, profile, faults)
    fabric_manager = node.fabric_manager()
    log = node.dmesg()
    smi = node.nvidia_smi_facts()
    return judge_node(
        smi,
        node.infiniband_facts(),
        kernel.parse_lsmod(node.lsmod()),
        kernel.parse_xid_events(log),
        expected or expected_for(profile),
        link_flaps=parse_link_flaps(log),
        pcie=pcie_inputs(smi, log),
        sxid_events=kernel.parse_sxid_events(log),
        fabric_manager=fabric_manager,
    )


def by_name(result):
    return {c["name"]: c for c in result["checks"]}


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_healthy_profile_has_no_false_alarm(tmp_path, monkeypatch, profile):
    result = judge(tmp_path, monkeypatch, profile)
    assert result["failed_checks"] == []
    assert result["healthy"] is True
    assert all(c["status"] == "PASS" for c in result["checks"]), [c for c in result["checks"] if c["status"] != "PASS"]
    assert {c["name"] for c in result["checks"]} <= set(CHECK_NAMES)


NVSWITCH_CHECKS = {"sxid", "fabric_manager"}


def test_healthy_dgx1_runs_every_check(tmp_path, monkeypatch):
    checks = by_name(judge(tmp_path, monkeypatch, "dgx1-v100-edr"))
    # DGX-1 has no NVSwitch (NVLink between the GPUs directly): the NVSwitch checks are not emitted there.
    assert set(checks) == set(CHECK_NAMES) - NVSWITCH_CHECKS
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
    ({"type": "ib_port_rate", "hca": "mlx5_2", "port": 1, "rate_gbit_per_s": 56}, "ib_port_rate"),
    ({"type": "hca_missing", "hca": "mlx5_3"}, "hcas_present"),
    ({"type": "pcie_width_degraded", "gpu": 4, "width": 8}, "pcie_link"),
    ({"type": "thermal_slowdown", "gpu": 6}, "throttle"),
    ({"type": "peermem_load_failure"}, "peermem_loaded"),
    ({"type": "row_remap_failure", "gpu": 2}, "row_remap"),
    ({"type": "remapped_rows", "gpu": 3, "uncorrectable": 513}, "row_remap"),
    ({"type": "ecc_aggregate", "gpu": 4, "memory": "sram", "kind": "uncorrectable", "count": 1}, "ecc_aggregate"),
    ({"type": "ecc_aggregate", "gpu": 4, "memory": "sram", "kind": "correctable", "count": 10001}, "ecc_aggregate"),
    ({"type": "clock_events", "gpu": 1, "reason": "hw_power_brake_slowdown", "fraction": 0.5}, "throttle"),
    ({"type": "clock_events", "gpu": 1, "reason": "hw_thermal_slowdown", "fraction": 0.3}, "throttle"),
    ({"type": "nvlink_inactive", "gpu": 7, "links": [3, 5]}, "nvlink_active"),
    ({"type": "nvlink_errors", "gpu": 0, "link": 2, "crc": 50}, "nvlink_errors"),
    ({"type": "nvlink_errors", "gpu": 0, "link": 2, "replay": 5}, "nvlink_errors"),
    ({"type": "nvlink_errors", "gpu": 0, "link": 2, "recovery": 7}, "nvlink_errors"),
    ({"type": "xid", "gpu": 1, "code": 119, "message": "Timeout waiting for RPC from GSP!"}, "xid"),
    ({"type": "ib_link_flap", "hca": "mlx5_1", "port": 1, "count": 3}, "ib_link_flaps"),
    ({"type": "pcie_link_degraded", "gpu": 4, "width": 8}, "pcie_link"),
    ({"type": "pcie_link_degraded", "gpu": 2, "gen": 2}, "pcie_link_limited"),
    ({"type": "pcie_link_degraded", "hca": "mlx5_1", "width": 8}, "pcie_link_hca"),
    ({"type": "pcie_link_degraded", "hca": "mlx5_3", "gen": 2}, "pcie_link_hca"),
    ({"type": "pcie_aer_errors", "gpu": 3, "fatal": 1}, "pcie_aer"),
    ({"type": "pcie_aer_errors", "gpu": 6, "nonfatal": 2}, "pcie_aer"),
    ({"type": "pcie_aer_errors", "hca": "mlx5_0", "correctable": 101}, "pcie_aer"),
    ({"type": "acs_enabled", "gpu": 5}, "pcie_acs"),
    ({"type": "acs_enabled", "hca": "mlx5_2"}, "pcie_acs"),
]
# Faults of the row remapper and SRAM/DRAM counters exist from Ampere on: injected on the H100 system.
HOPPER_ONLY = {"row_remap_pending", "row_remap_failure", "remapped_rows", "ecc_aggregate"}


def _ids(faults):
    return [f"{f[0]['type']}-{i}" for i, f in enumerate(faults)]


@pytest.mark.parametrize(("fault", "check"), FAULTS, ids=_ids(FAULTS))
def test_fault_fails_the_named_check(tmp_path, monkeypatch, fault, check):
    profile = "dgx-h100-ndr" if fault["type"] in HOPPER_ONLY else "dgx1-v100-edr"
    result = judge(tmp_path, monkeypatch, profile, [fault])
    assert result["healthy"] is False
    assert check in result["failed_checks"]
    failing = by_name(result)[check]
    assert failing["fault"] and failing["remedy"]
    assert failing["caused_by"] is None


# ACS is a property of the bridge above the board: pcie_acs is keyed by bridge (test_acs_names_the_bridge_and_board).
GPU_FAULTS = [
    (f, c)
    for f, c in FAULTS
    if "gpu" in f and f["type"] not in ("gpu_missing", "xid", "gpu_fallen_off_bus", "acs_enabled")
]


@pytest.mark.parametrize(("fault", "check"), GPU_FAULTS, ids=_ids(GPU_FAULTS))
def test_gpu_verdict_names_the_board_by_bus_id_and_serial(tmp_path, monkeypatch, fault, check):
    profile = "dgx-h100-ndr" if fault["type"] in HOPPER_ONLY else "dgx1-v100-edr"
    node = SimNode(tmp_path, monkeypatch, profile, [fault])
    bus = node.nvidia_smi_facts()
    log = node.dmesg()
    judged = judge_node(
        bus, node.infiniband_facts(), kernel.parse_lsmod(node.lsmod()), kernel.parse_xid_events(log),
        expected_for(profile), pcie=pcie_inputs(bus, log),
    )  # fmt: skip
    failing = by_name(judged)[check]
    device = load_profile(profile)["gpu"]["devices"][fault["gpu"]]["bus_id"]
    assert device in failing["observed"]
    serial = load_profile(profile)["gpu"]["serial_prefix"] + str(fault["gpu"])
    assert f"{device} (GPU {fault['gpu']}, serial {serial})" in failing["fault"]


def test_fault_details_name_the_component(tmp_path, monkeypatch):
    faults = [
        {"type": "ecc_dbe", "gpu": 1, "count": 2},
        {"type": "ib_port_rate", "hca": "mlx5_2", "port": 1, "rate_gbit_per_s": 56},
        {"type": "pcie_width_degraded", "gpu": 4, "width": 8},
        {"type": "thermal_slowdown", "gpu": 6},
        {"type": "xid", "gpu": 5, "code": 79, "message": "GPU has fallen off the bus."},
    ]
    checks = by_name(judge(tmp_path, monkeypatch, "dgx1-v100-edr", faults))
    assert checks["ecc_volatile_dbe"]["observed"] == {"00000000:07:00.0": 2}
    assert checks["ib_port_rate"]["observed"] == {"mlx5_2/1": "56 Gb/s InfiniBand"}
    assert checks["pcie_link"]["observed"]["00000000:85:00.0"].startswith("Gen3 x8")
    assert checks["throttle"]["observed"] == {
        "00000000:89:00.0": "hw_slowdown 1.0 (10/10), hw_thermal_slowdown 1.0 (10/10)"
    }
    # The DBE logs Xid 48 on its GPU: that Xid is the ECC check's fault, the Xid 79 on GPU 5 is its own.
    xids = {(x["code"], x["gpu"].split()[0]): x["action"] for x in checks["xid"]["observed"]}
    assert xids == {(48, "00000000:07:00.0"): "reset_gpu", (79, "00000000:86:00.0"): "reboot"}
    assert checks["xid"]["caused_by"] is None


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
    xid = by_name(result)["xid"]
    assert xid["status"] == "WARN"
    assert xid["observed"][0]["catalogue_action"] == "RESTART_APP"
    assert "restart the application" in xid["remedy"]


@pytest.mark.parametrize(
    ("code", "status", "action"),
    [(63, "PASS", "ignore"), (31, "WARN", "restart_app"), (54, "FAIL", "check_mechanicals"), (78, "FAIL",
     "update_software"), (1, "FAIL", "contact_vendor"), (165, "WARN", "not_given"), (250, "WARN", "unknown")],
)  # fmt: skip
def test_every_xid_is_judged_by_its_catalogue_action(tmp_path, monkeypatch, code, status, action):
    result = judge(tmp_path, monkeypatch, "dgx-h100-ndr", [{"type": "xid", "gpu": 3, "code": code}])
    xid = by_name(result)["xid"]
    assert (xid["status"], xid["observed"][0]["action"]) == (status, action)
    assert xid["observed"][0]["gpu"].startswith("00000000:61:00.0 (GPU 3, serial ")
    if action == "unknown":
        assert "not in the catalogue" in xid["fault"]


def test_xid_fatal_inventory_list_still_fails_any_code(tmp_path, monkeypatch):
    expected = {**expected_for("dgx1-v100-edr"), "xid_fatal": [13]}
    result = judge(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "xid", "gpu": 0, "code": 13}], expected)
    assert by_name(result)["xid"]["status"] == "FAIL"


def test_fallen_gpu_others_still_judged_and_consequences_not_counted(tmp_path, monkeypatch):
    faults = [{"type": "gpu_fallen_off_bus", "gpu": 2}, {"type": "ecc_dbe", "gpu": 6, "count": 1}]
    result = judge(tmp_path, monkeypatch, "dgx1-v100-edr", faults)
    checks = by_name(result)
    assert checks["gpu_fallen_off_bus"]["observed"] == ["00000000:0A:00.0"]
    assert checks["nvidia_smi_readable"]["status"] == "PASS"
    # The 7 other GPUs were read and judged: GPU 6's DBE is found.
    assert checks["ecc_volatile_dbe"]["observed"] == {"00000000:89:00.0": 1}
    assert checks["persistence_mode"]["status"] == "PASS"
    # The count and the Xid 79 fail only because GPU 2 fell off: recorded, not counted again.
    assert (checks["gpu_count"]["status"], checks["gpu_count"]["caused_by"]) == ("FAIL", "gpu_fallen_off_bus")
    assert result["caused_failures"]["gpu_count"] == "gpu_fallen_off_bus"
    assert result["caused_failures"]["gpu_hca_affinity"] == "gpu_fallen_off_bus"
    assert result["failed_checks"] == ["gpu_fallen_off_bus", "ecc_volatile_dbe"]
    # Xid 48 on GPU 6 (the DBE) and 79 on GPU 2 are both explained by the checks above.
    assert set(checks["xid"]["caused_by"].split(",")) == {"ecc_volatile_dbe", "gpu_fallen_off_bus"}
    assert result["healthy"] is False


def test_clock_events_below_the_rate_warn_and_one_snapshot_never_fails(tmp_path, monkeypatch):
    fault = {"type": "clock_events", "gpu": 4, "reason": "hw_slowdown", "fraction": 0.1}
    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr", [fault])
    facts = node.nvidia_smi_facts(samples=20)
    throttle = by_name(judge_node(facts, None, None, [], expected_for("dgx-h100-ndr")))["throttle"]
    assert (throttle["status"], throttle["observed"]) == ("WARN", {"00000000:9D:00.0": "hw_slowdown 0.1 (2/20)"})
    # The same GPU with no samples: HW slowdown in the snapshot is only a warning, never a failure.
    for gpu in facts["gpus"]:
        gpu["clock_events"] = None
        gpu["throttle_reasons"]["hw_slowdown"] = gpu["bus_id"] == "00000000:9D:00.0"
    throttle = by_name(judge_node(facts, None, None, [], expected_for("dgx-h100-ndr")))["throttle"]
    assert throttle["status"] == "WARN" and "no samples" in throttle["fault"]


def test_all_new_faults_together_on_one_h100_node(tmp_path, monkeypatch):
    faults = [f for f, _ in FAULTS if f["type"] not in ("hca_missing",) and "hca" not in f]
    faults = [f for f in faults if f["type"] != "gpu_missing"]
    result = judge(tmp_path, monkeypatch, "dgx-h100-ndr", faults)
    wanted = {c for f, c in FAULTS if f in faults}
    assert wanted <= set(result["failed_checks"]) | set(result["caused_failures"])


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
    assert checks["nvidia_smi_readable"]["status"] == "FAIL"
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
    assert checks["nvidia_smi_readable"]["status"] == "FAIL"
    assert checks["nvidia_smi_readable"]["fault"].startswith("could not read all of the nvidia-smi facts: could not")


# PCIe: HCA links from lspci, the kernel's link-limited report, AER counters, ACS (issue 17 item 4).
@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_healthy_profile_runs_the_pcie_checks_and_passes(tmp_path, monkeypatch, profile):
    checks = by_name(judge(tmp_path, monkeypatch, profile))
    pcie = {"lspci_readable", "pcie_link_hca", "pcie_link_limited", "pcie_aer"}
    assert pcie <= set(checks)
    assert all(checks[name]["status"] == "PASS" for name in pcie)
    # ACS is judged on bare metal only: the vSphere guest's system is virtual.
    assert ("pcie_acs" in checks) is (profile != "vsphere-t4-vgpu-roce")


def test_degraded_hca_link_names_the_adapter_and_the_kernel_report_follows_from_it(tmp_path, monkeypatch):
    fault = {"type": "pcie_link_degraded", "hca": "mlx5_5", "width": 8, "gen": 4}
    result = judge(tmp_path, monkeypatch, "dgx-h100-ndr", [fault])
    checks = by_name(result)
    assert checks["pcie_link_hca"]["observed"] == {"0000:c0:00.0": "mlx5_5: width x8 of x16, speed 16 GT/s of 32 GT/s"}
    assert "mlx5_5" in checks["pcie_link_hca"]["fault"] and "Reseat" in checks["pcie_link_hca"]["remedy"]
    limited = checks["pcie_link_limited"]
    assert limited["status"] == "FAIL"
    assert limited["caused_by"] == "pcie_link_hca"
    assert "126.024 Gb/s available, limited by 16 GT/s x8" in limited["observed"]["0000:c0:00.0"]
    assert result["failed_checks"] == ["pcie_link_hca"]
    assert result["caused_failures"] == {"pcie_link_limited": "pcie_link_hca"}


def test_degraded_gpu_width_is_counted_once(tmp_path, monkeypatch):
    result = judge(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "pcie_link_degraded", "gpu": 4, "width": 8}])
    assert result["failed_checks"] == ["pcie_link"]
    assert result["caused_failures"] == {"pcie_link_limited": "pcie_link"}
    limited = by_name(result)["pcie_link_limited"]
    assert "00000000:85:00.0 (GPU 4, serial 0321618000104)" in limited["fault"]


def test_gpu_speed_downgrade_is_found_in_the_kernel_log_only(tmp_path, monkeypatch):
    # nvidia-smi shows the current generation lower (idle GPUs do that too): the kernel's report at
    # enumeration is the evidence, and it is the root cause.
    result = judge(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "pcie_link_degraded", "gpu": 2, "gen": 2}])
    assert result["failed_checks"] == ["pcie_link_limited"]
    limited = by_name(result)["pcie_link_limited"]
    assert limited["observed"] == {
        "00000000:0A:00.0": "00000000:0A:00.0 (GPU 2, serial 0321618000102): 64.0 Gb/s available, limited by "
        "5 GT/s x16 at 0000:00:04.0 (capable of 126.016 Gb/s, 8 GT/s x16)"
    }


def test_correctable_aer_below_the_limit_warns(tmp_path, monkeypatch):
    few = judge(
        tmp_path, monkeypatch, "poweredge-c4140-v100", [{"type": "pcie_aer_errors", "gpu": 1, "correctable": 3}]
    )
    aer = by_name(few)["pcie_aer"]
    assert (aer["status"], few["healthy"]) == ("WARN", True)
    assert aer["observed"] == {"00000000:1C:00.0": "00000000:1C:00.0 (GPU 1, serial 0321718003001): correctable 3"}


def test_uncorrectable_aer_on_an_hca_fails_naming_it(tmp_path, monkeypatch):
    result = judge(
        tmp_path, monkeypatch, "supermicro-4029gp-v100", [{"type": "pcie_aer_errors", "hca": "mlx5_1", "fatal": 1}]
    )
    aer = by_name(result)["pcie_aer"]
    assert aer["observed"] == {"0000:18:00.1": "mlx5_1: fatal 1"}
    assert "mlx5_1: fatal 1" in aer["fault"] and "RMA" in aer["remedy"]
    assert result["failed_checks"] == ["pcie_aer"]


def test_acs_names_the_bridge_and_board(tmp_path, monkeypatch):
    result = judge(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "acs_enabled", "gpu": 5}])
    acs = by_name(result)["pcie_acs"]
    ((bridge, text),) = acs["observed"].items()
    assert bridge.startswith("0000:00:")
    assert text.startswith("SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+ (above 00000000:86:00.0 (GPU 5, serial ")
    assert "ECAP_ACS" in acs["remedy"] and "troubleshooting" in acs["remedy"]
    assert result["failed_checks"] == ["pcie_acs"]


def test_acs_is_not_judged_on_a_virtual_machine(tmp_path, monkeypatch):
    result = judge(tmp_path, monkeypatch, "vsphere-t4-vgpu-roce", [{"type": "acs_enabled", "hca": "mlx5_0"}])
    assert "pcie_acs" not in by_name(result)
    assert result["healthy"] is True
    # The same node judged as bare metal would fail it: the skip is the spec's `virtual`, not a blind check.
    bare = {**expected_for("vsphere-t4-vgpu-roce"), "virtual": False}
    result = judge(
        tmp_path / "bare", monkeypatch, "vsphere-t4-vgpu-roce", [{"type": "acs_enabled", "hca": "mlx5_0"}], bare
    )
    assert result["failed_checks"] == ["pcie_acs"]


def test_unreadable_lspci_fails_its_own_check_and_keeps_the_rest(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr")
    smi, log = node.nvidia_smi_facts(), node.dmesg()
    result = judge_node(
        smi, node.infiniband_facts(), kernel.parse_lsmod(node.lsmod()), [], expected_for("dgx1-v100-edr"),
        unreadable={"lspci": "lspci shows 'Capabilities: <access denied>'"}, pcie=pcie_inputs(smi, log),
    )  # fmt: skip
    checks = by_name(result)
    assert result["failed_checks"] == ["lspci_readable"]
    assert "pcie_link_hca" not in checks and "pcie_acs" not in checks
    assert checks["pcie_aer"]["status"] == "PASS"


def _first_hca(profile):
    return load_profile(profile)["hcas"][0]["name"]


PCIE_FAULTS_EVERY_PROFILE = [
    (lambda p: {"type": "pcie_link_degraded", "hca": _first_hca(p), "width": 4}, "pcie_link_hca"),
    (lambda p: {"type": "pcie_link_degraded", "gpu": 0, "width": 8}, "pcie_link"),
    (lambda p: {"type": "pcie_aer_errors", "gpu": 0, "nonfatal": 1}, "pcie_aer"),
    (lambda p: {"type": "pcie_aer_errors", "hca": _first_hca(p), "correctable": 500}, "pcie_aer"),
    (lambda p: {"type": "acs_enabled", "hca": _first_hca(p)}, "pcie_acs"),
]


@pytest.mark.parametrize("profile", GPU_PROFILES)
@pytest.mark.parametrize(("make", "check"), PCIE_FAULTS_EVERY_PROFILE, ids=[c for _m, c in PCIE_FAULTS_EVERY_PROFILE])
def test_pcie_fault_fails_its_check_on_every_gpu_profile(tmp_path, monkeypatch, profile, make, check):
    fault = make(profile)
    result = judge(tmp_path, monkeypatch, profile, [fault])
    if check == "pcie_acs" and profile == "vsphere-t4-vgpu-roce":
        assert result["healthy"] is True  # ACS is the hypervisor's in a VM: not judged there
        return
    assert result["failed_checks"] == [check]
    failing = by_name(result)[check]
    assert failing["fault"] and failing["remedy"] and failing["caused_by"] is None
    # Everything else that failed follows from it (the kernel's report of the same downtrained link).
    assert set(result["caused_failures"]) <= {"pcie_link_limited"}


# NVSwitch: SXid errors and the fabric manager, on the system whose expected entry has nvswitch: true.
@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_nvswitch_checks_only_where_the_expected_system_has_nvswitch(tmp_path, monkeypatch, profile):
    checks = by_name(judge(tmp_path, monkeypatch, profile))
    if profile == "dgx-h100-ndr":
        assert expected_for(profile)["nvswitch"] is True
        assert checks["sxid"]["status"] == "PASS" and checks["sxid"]["observed"] == []
        assert checks["fabric_manager"]["status"] == "PASS"
        assert checks["fabric_manager"]["observed"] == {"nvidia-fabricmanager": "active"}
    else:
        assert not expected_for(profile).get("nvswitch")
        assert NVSWITCH_CHECKS.isdisjoint(checks)


def test_fatal_sxid_fails_and_names_switch_code_and_link(tmp_path, monkeypatch):
    fault = {"type": "sxid", "switch": 3, "pci": "0000:c1:00.0", "code": 20034, "fatal": True, "link": 28}
    result = judge(tmp_path, monkeypatch, "dgx-h100-ndr", [fault])
    assert result["failed_checks"] == ["sxid"]
    sxid = by_name(result)["sxid"]
    assert sxid["observed"] == [
        {
            "switch": "nvidia-nvswitch3 (PCI 0000:c1:00.0)",
            "code": 20034,
            "severity": "fatal",
            "links": [28],
            "message": "LTSSM Fault Up",
            "count": 1,
        }
    ]
    assert "nvidia-nvswitch3 (PCI 0000:c1:00.0) on link(s) 28" in sxid["fault"]
    assert "nvidia-smi -r" in sxid["remedy"] and "nvidia-fabricmanager" in sxid["remedy"]
    assert "reboot or power-cycle" in sxid["remedy"]


def test_non_fatal_sxid_only_warns(tmp_path, monkeypatch):
    fault = {"type": "sxid", "switch": 0, "pci": "0000:c2:00.0", "code": 22013, "fatal": False, "link": 44}
    result = judge(tmp_path, monkeypatch, "dgx-h100-ndr", [fault])
    assert result["healthy"] is True
    sxid = by_name(result)["sxid"]
    assert sxid["status"] == "WARN"
    assert [(e["code"], e["severity"], e["links"]) for e in sxid["observed"]] == [(22013, "non-fatal", [44])]
    assert "informational" in sxid["remedy"]


def test_sxid_on_a_system_without_nvswitch_in_its_spec_is_not_judged():
    event = kernel.parse_sxid_events("nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up")
    assert event and event[0]["fatal"] is True
    result = judge_node(None, None, None, [], {}, sxid_events=event, fabric_manager="failed")
    assert NVSWITCH_CHECKS.isdisjoint(by_name(result))
    judged = by_name(judge_node(None, None, None, [], {"nvswitch": True}, sxid_events=event, fabric_manager="active"))
    assert judged["sxid"]["status"] == "FAIL"


def test_unclassified_sxid_warns_and_an_unreadable_kernel_log_leaves_the_check_out():
    raw = kernel.parse_sxid_events(
        "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a}\n"
        "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Severity 0 Engine instance 04 Sub-engine instance 00\n"
    )
    checks = by_name(judge_node(None, None, None, [], {"nvswitch": True}, sxid_events=raw))
    assert checks["sxid"]["status"] == "WARN"
    assert checks["sxid"]["observed"][0]["severity"] == "unclassified"
    assert checks["sxid"]["observed"][0]["count"] == 2
    gone = by_name(
        judge_node(None, None, None, [], {"nvswitch": True}, unreadable={"kernel_log": "dmesg: x"}, sxid_events=raw)
    )
    assert "sxid" not in gone and gone["kernel_log_readable"]["status"] == "FAIL"


def test_fabric_manager_down_fails_with_the_service_and_each_gpus_fabric_state(tmp_path, monkeypatch):
    result = judge(tmp_path, monkeypatch, "dgx-h100-ndr", [{"type": "fabric_manager_down"}])
    assert result["failed_checks"] == ["fabric_manager"]
    check = by_name(result)["fabric_manager"]
    devices = load_profile("dgx-h100-ndr")["gpu"]["devices"]
    assert check["observed"] == {
        "nvidia-fabricmanager": "failed",
        **{device["bus_id"]: "In Progress/N/A" for device in devices},
    }
    assert "nvidia-fabricmanager service is failed" in check["fault"]
    assert f"{devices[0]['bus_id']} (GPU 0, serial 1655022005400): In Progress/N/A" in check["fault"]
    assert "systemctl enable --now nvidia-fabricmanager" in check["remedy"]
    assert "driver's release" in check["remedy"]


GPU_FABRIC = [{"bus_id": "00000000:1B:00.0", "index": 0, "fabric_state": "Completed"}]


@pytest.mark.parametrize(
    ("service", "gpus", "status"),
    [
        ("active", GPU_FABRIC, "PASS"),
        ("inactive", GPU_FABRIC, "FAIL"),  # the service stopped after the fabric came up: errors go unhandled
        ("active", [{**GPU_FABRIC[0], "fabric_state": "In Progress"}], "FAIL"),
        ("active", [{**GPU_FABRIC[0], "fabric_status": "Failure"}], "FAIL"),  # Completed with an error status
        ("active", [{**GPU_FABRIC[0], "fabric_state": None}], "PASS"),  # A100: N/A although the service runs
        (None, GPU_FABRIC, "PASS"),  # service not read (judge_node called without it): the fabric state alone
    ],
)
def test_fabric_manager_verdicts(service, gpus, status):
    smi = {"driver_version": "535.183.01", "gpus": gpus}
    check = by_name(judge_node(smi, None, None, [], {"nvswitch": True}, fabric_manager=service))["fabric_manager"]
    assert check["status"] == status
    assert bool(check["fault"]) is (status == "FAIL")


def test_fabric_manager_unreadable_fails_and_nothing_read_leaves_it_out():
    smi = {"driver_version": "535.183.01", "gpus": GPU_FABRIC}
    unreadable = {"fabric_manager": "systemctl not found in PATH on node01: run the check on a systemd host"}
    check = by_name(judge_node(smi, None, None, [], {"nvswitch": True}, unreadable=unreadable))["fabric_manager"]
    assert check["status"] == "FAIL"
    assert check["observed"]["nvidia-fabricmanager"] == "unknown"
    assert "could not be read (systemctl not found" in check["fault"]
    bare = {"driver_version": "535.183.01", "gpus": [{"bus_id": "00000000:1B:00.0", "index": 0}]}
    assert "fabric_manager" not in by_name(judge_node(bare, None, None, [], {"nvswitch": True}))


# A real single-GPU H200 VM (driver 580.159.04): nvlink --status and -e print nothing and exit 0 (SOURCES.md).
H200_VM = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi" / "gpuforge-device_1xh200_drv580.159.04_{}"


class _CapturedSmi:
    """The AnsibleModule methods nvidia_smi_facts uses, answered by the H200 VM's captured outputs."""

    answers = {
        ("-q", "-x"): "q_x_18-15.xml",
        ("topo", "-m"): "topo_m.txt",
        ("nvlink", "--status"): "nvlink_status_no_links.txt",
        ("nvlink", "-e"): "nvlink_e_no_links.txt",
    }

    def __init__(self, nvlink=True):
        self.params = {
            "executable": "nvidia-smi",
            "topology": True,
            "nvlink": nvlink,
            "clock_event_samples": 0,
            "clock_event_interval_ms": 0,
            "fail_on_error": False,
        }

    def get_bin_path(self, name):
        return "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None

    def run_command(self, argv, **_kwargs):
        name = self.answers[tuple(argv[1:])]
        return 0, Path(str(H200_VM).format(name)).read_text(encoding="utf-8"), ""


def h200_vm_expected(links):
    return {"gpu_count": 1, "gpu_model": "NVIDIA H200", "driver_branch": "580", "nvlink_links": links, "peermem": False}


@pytest.mark.parametrize("links", [0, 18])
def test_gpu_without_nvlink_has_zero_links_not_unreadable_facts(links):
    """An empty nvlink view (the real H200 VM) reads as no links: ok where the spec has 0 links, and the link
    count fails (expected 18, observed 0 on the one GPU) where it has 18; the facts are readable either way."""
    facts = nvidia_smi_facts.NvidiaSmiFacts(_CapturedSmi()).gather()
    assert facts["errors"] == []
    assert facts["nvlink"] == facts["nvlink_errors"] == {"gpu_count": 0, "gpus": [], "errors": []}
    assert facts["gpus"][0]["nvlink"] is None  # absent from the view
    checks = by_name(judge_node(facts, None, {"modules": {}}, [], h200_vm_expected(links)))
    assert checks["nvidia_smi_readable"]["status"] == "PASS"
    assert checks["gpu_count"]["status"] == checks["gpu_model"]["status"] == "PASS"
    if links == 0:
        assert "nvlink_active" not in checks and "nvlink_errors" not in checks
    else:
        nvlink = checks["nvlink_active"]
        assert (nvlink["status"], nvlink["expected"]) == ("FAIL", 18)
        assert nvlink["observed"] == {"00000000:00:06.0": "0 of 18 active"}
        assert nvlink["fault"] == "00000000:00:06.0 (GPU 0, serial 1654524125085) do not have 18 active NVLinks"
        assert checks["nvlink_errors"]["status"] == "PASS"


def test_nvlink_view_not_gathered_is_not_read_as_zero_links():
    facts = nvidia_smi_facts.NvidiaSmiFacts(_CapturedSmi(nvlink=False)).gather()
    assert facts["nvlink"] is None
    checks = by_name(judge_node(facts, None, {"modules": {}}, [], h200_vm_expected(18)))
    assert checks["nvlink_active"]["status"] == "FAIL"
    assert checks["nvlink_active"]["observed"] == {
        "00000000:00:06.0": "NVLink state not read (no nvidia-smi nvlink --status view)"
    }


def test_xid_45_naming_its_cause_is_judged_as_that_cause_on_the_same_gpu(tmp_path, monkeypatch):
    """Real Xid 45 lines (tests/fixtures/kernel/SOURCES.md, open-gpu-kernel-modules issue 1150) whose causing
    NVLink5 Xids (145, 149) are not in the log any more: the node fails for those causes, not passes for Xid 45."""
    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr")
    smi = node.nvidia_smi_facts()
    log = (
        Path(__file__).resolve().parents[2] / "fixtures/kernel/xid_open-gpu-kernel-modules-issue1150_xid45_EXCERPT.txt"
    )
    events = kernel.parse_xid_events(log.read_text(encoding="utf-8"))
    result = judge_node(
        smi, node.infiniband_facts(), kernel.parse_lsmod(node.lsmod()), events, expected_for("dgx-h100-ndr")
    )
    xid = by_name(result)["xid"]
    assert xid["status"] == "FAIL"
    seen = {(e["gpu"].split()[0], e["code"]): (e["action"], e["count"], e["named_by_xid_45"]) for e in xid["observed"]}
    assert seen == {
        ("0000:dc:00", 149): ("reset_gpu", 0, 2),
        ("0000:ed:00", 145): ("reset_gpu", 0, 2),
        ("0000:ba:00", 145): ("reset_gpu", 0, 2),
        ("0000:97:00", 145): ("reset_gpu", 0, 1),
    }
    assert "149 NVLink5 error (decode the interrupt info) on 0000:dc:00 (named by 2 Xid 45 line(s))" in xid["fault"]
    # Without the cause named, Xid 45 alone is what the catalogue says: no action.
    bare = [dict(event, caused_by_code=None) for event in events]
    plain = judge_node(
        smi, node.infiniband_facts(), kernel.parse_lsmod(node.lsmod()), bare, expected_for("dgx-h100-ndr")
    )
    assert by_name(plain)["xid"]["status"] == "PASS"
