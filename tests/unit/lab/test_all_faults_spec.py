"""lab/specs/all-faults.yml: every node-health fault type at once, several per node, on every GPU profile.

Each node's simulators (nvidia-smi, ibstat, the simulated kernel) are booted in-process from the hardware
document `gpuforge lab up` would write for it, and judged by gpu_node_check's own judge, joined (as its
diagnostics fold it in for playbooks/validate.yml) by the gdr_ib_write_bw check of library/gdr_loopback_bw.py, which
runs the lab's ib_write_bw as real server and client processes on the node's HCA ports (gdr_sim_helpers.py). Every
fault must be failed by the check that names it, as a root cause (no caused_by), with a remedy; every other failed
or warning check must be a consequence that names its root cause; healthy nodes of all five GPU profiles pass with
zero warnings.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_kernel as kernel
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_registry as registry
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_sminfo
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_node_health import judge_node
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perfquery import parse_link_flaps
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_records import node_report
from gpuforge_sim import sminfo as sminfo_sim

from gpuforge.lab.spec import from_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
import pcie_sim_helpers
from gdr_sim_helpers import lab_args, run_module
from node_sim_helpers import GPU_PROFILES, SimNode, expected_for
from roce_qos_sim_helpers import roce_qos_checks

ROOT = Path(__file__).resolve().parents[3]
SPEC = from_file(ROOT / "lab/specs/all-faults.yml")

# The check that names each fault type (lab/profiles/SCHEMA.md, "Which check fails for each fault").
CHECK_OF_FAULT = {
    "gpu_missing": "gpu_count",
    "gpu_fallen_off_bus": "gpu_fallen_off_bus",
    # A vGPU guest sees no ECC counters (the lab's T4-16C profile, as NVIDIA vGPU reports them): there the
    # Xid 48 the fault logs is what names it.
    "ecc_dbe": ("ecc_volatile_dbe", "xid"),
    "row_remap_pending": "row_remap",
    "row_remap_failure": "row_remap",
    "remapped_rows": "row_remap",
    "ecc_aggregate": "ecc_aggregate",
    "clock_events": "throttle",
    "thermal_slowdown": "throttle",
    "nvlink_inactive": "nvlink_active",
    "nvlink_errors": "nvlink_errors",
    "xid": "xid",
    "ib_port_state": "ib_port_state",
    "ib_port_rate": "ib_port_rate",
    "hca_missing": "hcas_present",
    "pcie_width_degraded": "pcie_link",
    # a GPU's width: nvidia-smi's link (pcie_link); an HCA's: lspci's (pcie_link_hca)
    "pcie_link_degraded": "pcie_link",
    "pcie_aer_errors": "pcie_aer",
    "acs_enabled": "pcie_acs",
    "peermem_load_failure": "peermem_loaded",
    "ib_link_flap": "ib_link_flaps",
    "gdr_slow": "gdr_ib_write_bw",
    "gdr_unavailable": "gdr_ib_write_bw",
    # NVSwitch systems only (expected system nvswitch: true)
    "sxid": "sxid",
    "fabric_manager_down": "fabric_manager",
    # vGPU guests only (expected system vgpu_guest: true): a standalone registry check over the nvidia_smi facts
    "vgpu_unlicensed": "vgpu_license",
    # InfiniBand nodes: sminfo and sminfo -G of each configured SM (module_utils/gpuforge_sminfo.py)
    "sm_missing": "subnet_manager",
    "sm_duplicate_master": "subnet_manager",
    # RoCE ports: library/roce_qos.py state verify after the role's settings (roce_qos_sim_helpers.py)
    "roce_trust_pcp": "roce_qos",
    "roce_pfc_off": "roce_qos",
    "roce_tos_wrong": "roce_qos",
}
# Judged by other modules than gpu_node_check (ib_port_counters around the benchmarks, fleet_consistency
# across nodes): not part of this spec.
OTHER_MODULES = {"ib_port_errors", "hca_firmware", "pkey_mismatch", "dcgm_diag_failure", "host_bandwidth_degraded"}
# The lab faults of the check registry's standalone checks: each is proven by its own check's test through
# gpu_node_check on a lab node (tests/unit/library/test_gpu_node_check_<check>.py), not by this spec's judge_node run.
STANDALONE_FAULTS = {check.lab_fault[0] for check in registry.standalone() if check.lab_fault}
# The lab faults only gpuforge-health's checks judge (the registry's HEALTH_CHECKS, e.g. gpu_process_left: a process
# left after a job, which only the Epilog profile looks for): proven by tests/unit/node_health/test_gpuforge_health.py
# and molecule/slurm_health, not by validation's judge. A fault a health check shares with validation (gpu_missing)
# stays in CHECK_OF_FAULT.
HEALTH_ONLY_FAULTS = {check.lab_fault[0] for check in registry.HEALTH_CHECKS if check.lab_fault} - set(CHECK_OF_FAULT)
GPU_NODES = [node for node in SPEC.nodes if node.profile in GPU_PROFILES]
# Systems the GPUDirect RDMA loopback does not apply to: peermem: false (the vGPU guest), no InfiniBand port (25 GbE).
NO_GDR_PROFILES = {"vsphere-t4-vgpu-roce", "supermicro-4029gp-v100"}


def _judge(tmp_path, monkeypatch, node):
    sim = SimNode(tmp_path, monkeypatch, node.profile, node.faults)
    fabric_manager = sim.fabric_manager()
    log = sim.dmesg()
    smi = sim.nvidia_smi_facts()
    result = judge_node(
        smi,
        sim.infiniband_facts(),
        kernel.parse_lsmod(sim.lsmod()),
        kernel.parse_xid_events(log),
        expected_for(node.profile),
        link_flaps=parse_link_flaps(log),
        pcie=pcie_sim_helpers.pcie_inputs(smi, log),
        sxid_events=kernel.parse_sxid_events(log),
        fabric_manager=fabric_manager,
    )
    # The registry's standalone checks over the nvidia_smi facts alone, as gpu_node_check runs them after judge_node.
    expected = expected_for(node.profile)
    for check in registry.standalone():
        if set(check.needs) == {"nvidia_smi"} and any(key in expected for key in check.expected):
            result["checks"].append(check.judge({"nvidia_smi": smi}, expected))
    gdr = run_module(
        monkeypatch, tmp_path, {**lab_args(node.profile), "gpus": smi["gpus"], "node_checks": result["records"]}
    )
    assert not gdr.get("failed"), gdr
    # gpu_node_check folds the check in when there is one (a system with peermem: false or no InfiniBand port has none)
    assert gdr["applicable"] is (node.profile not in NO_GDR_PROFILES), (node.profile, gdr["reason"])
    checks = result["checks"] + ([gdr["check"]] if gdr.get("check") else []) + _subnet_manager(monkeypatch, tmp_path)
    checks += roce_qos_checks(monkeypatch, tmp_path)
    return {"checks": checks, **node_report(checks, node.name, node.profile)}


# The lab fabric's SM as the inventory configures it (lab/profiles/SCHEMA.md "Subnet managers": the head node's port).
LAB_SUBNET_MANAGERS = [{"host": "head01", "guid": "0x98039b0300a4c600", "priority": 0}]


def _subnet_manager(monkeypatch, tmp_path):
    """The subnet_manager check on a node with an InfiniBand port: the lab's sminfo, plain and -G of each configured
    SM, judged by gpuforge_sminfo.judge_subnet_manager; none on a node without one (RoCE only)."""
    monkeypatch.setenv("GPUFORGE_LAB_PROC", str(tmp_path / "no-proc"))  # no OpenSM runs on the simulated node
    if sminfo_sim._local_ib_port(sminfo_sim.ib_ports.load()) is None:
        return []

    def run(argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = sminfo_sim.main(argv)
        return rc, out.getvalue(), err.getvalue()

    asked = [(sm["guid"], *run(["-G", sm["guid"]])) for sm in LAB_SUBNET_MANAGERS]
    return [gpuforge_sminfo.judge_subnet_manager(run([]), asked, LAB_SUBNET_MANAGERS)]


def _check_names(fault):
    """The checks that may name a fault, the first that is not ok being its root cause."""
    if fault["type"] == "pcie_link_degraded" and "hca" in fault:
        return ("pcie_link_hca",)
    names = CHECK_OF_FAULT[fault["type"]]
    return (names,) if isinstance(names, str) else names


def test_spec_covers_every_node_health_fault_type_and_every_gpu_profile():
    injected = {fault["type"] for node in SPEC.nodes for fault in node.faults}
    assert injected == set(CHECK_OF_FAULT), set(CHECK_OF_FAULT) ^ injected
    schema = (ROOT / "lab/profiles/SCHEMA.md").read_text(encoding="utf-8")
    documented = {line.split("`")[1] for line in schema.splitlines() if line.startswith("| `")}
    assert (
        documented - OTHER_MODULES - STANDALONE_FAULTS - HEALTH_ONLY_FAULTS - {"type"}
        == set(CHECK_OF_FAULT) - STANDALONE_FAULTS
    ), documented ^ set(CHECK_OF_FAULT)
    assert documented >= STANDALONE_FAULTS | HEALTH_ONLY_FAULTS, (STANDALONE_FAULTS | HEALTH_ONLY_FAULTS) - documented
    # None of them may be injected here: validation does not judge them, so this spec could not prove them.
    assert not injected & HEALTH_ONLY_FAULTS, injected & HEALTH_ONLY_FAULTS
    assert {node.profile for node in GPU_NODES if not node.faults} == set(GPU_PROFILES)
    assert all(sum(1 for node in GPU_NODES if node.faults and node.profile == p) for p in GPU_PROFILES)
    assert max(len(node.faults) for node in SPEC.nodes) >= 4


@pytest.mark.parametrize("node", GPU_NODES, ids=[node.name for node in GPU_NODES])
def test_every_fault_is_one_root_cause_with_its_consequences_under_it(tmp_path, monkeypatch, node):
    result = _judge(tmp_path, monkeypatch, node)
    checks = {check["name"]: check for check in result["checks"]}
    expected_roots = set()
    for fault in node.faults:
        names = _check_names(fault)
        # the first of the checks that name this fault and is not ok on the node
        found = [name for name in names if any(c["name"] == name and c["status"] != "PASS" for c in result["checks"])]
        expected_roots.add(found[0] if found else names[0])
    if not node.faults:
        assert result["healthy"] is True
        assert [c["name"] for c in result["checks"] if c["status"] != "PASS"] == []
        return
    assert result["healthy"] is False
    roots = {name for name, check in checks.items() if check["status"] == "FAIL" and not check["caused_by"]}
    warned = {name for name, check in checks.items() if check["status"] == "WARN" and not check["caused_by"]}
    # Each fault is reported by its own check, as a root cause (a warning only where the fault is one:
    # an Xid whose catalogue action is to restart the application, a single link flap).
    assert expected_roots <= roots | warned, expected_roots - roots - warned
    assert roots | warned <= expected_roots, (roots | warned) - expected_roots
    for name in expected_roots:
        assert checks[name]["fault"], name
        assert checks[name]["remedy"], name
    # Every other check that is not ok is a consequence naming a root cause that was reported.
    for name, check in checks.items():
        if check["status"] != "PASS" and check["caused_by"]:
            assert set(_causes(check["caused_by"])) & expected_roots, (name, check["caused_by"])


def _causes(caused_by):
    if isinstance(caused_by, str):
        return [caused_by]
    if isinstance(caused_by, dict):
        return [caused_by.get("check")]
    return [entry.get("check") if isinstance(entry, dict) else entry for entry in caused_by]
