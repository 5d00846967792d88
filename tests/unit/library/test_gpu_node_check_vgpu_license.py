"""The vgpu_license check (module_utils/gpuforge_vgpu_license.py, a standalone entry of gpuforge_registry) through
gpu_node_check on the lab's vGPU guest: the simulated nvidia-smi's licence section, read from the nvidia_smi facts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import gpu_node_check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from node_sim_helpers import SimNode, expected_for

PROFILE = "vsphere-t4-vgpu-roce"


@pytest.mark.parametrize(
    ("faults", "verdict"),
    [([], "PASS"), ([{"type": "vgpu_unlicensed"}], "FAIL")],
)
def test_gpu_node_check_judges_the_vgpu_guest_s_licence(tmp_path, monkeypatch, ansible_module, faults, verdict):
    node = SimNode(tmp_path, monkeypatch, PROFILE, faults)
    args = {
        "nvidia_smi": node.nvidia_smi_facts(),
        "infiniband": node.infiniband_facts(),
        "lsmod": node.lsmod(),
        "kernel_log": node.dmesg(),
        "pcie": False,
        "expected": expected_for(PROFILE),
    }
    result = ansible_module(gpu_node_check, args, None, check_mode=True)
    records = {r["check"]: r for r in result["records"]}
    assert records["vgpu_license"]["verdict"] == verdict, records["vgpu_license"]
    assert result["failed_checks"] == (["vgpu_license"] if verdict == "FAIL" else [])
    if verdict == "FAIL":
        assert "Unlicensed (Restricted)" in records["vgpu_license"]["fault"]
        assert "gridd.conf" in records["vgpu_license"]["remedy"]
    # A bare-metal system's spec has no vgpu_guest key: the check is not run there.
    other = ansible_module(gpu_node_check, {**args, "expected": expected_for("dgx1-v100-edr")}, None, check_mode=True)
    assert "vgpu_license" not in {r["check"] for r in other["records"]}
