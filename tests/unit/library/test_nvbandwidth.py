"""nvbandwidth module: nvbandwidth answered by the lab's simulator in-process (a booted SimNode), judged against
the per-SKU minimums of roles/gpuforge/defaults/main/acceptance_checks.yml."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import nvbandwidth as nvbandwidth_module
from gpuforge_sim import nvbandwidth

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from node_sim_helpers import GPU_PROFILES, SimNode
from node_sim_helpers import nvbandwidth_minimums as minimums

PATHS = {"nvbandwidth": "/usr/bin/nvbandwidth", "timeout": "/usr/bin/timeout"}


def sim_nvbandwidth(calls):
    def run_command(argv, **kwargs):
        calls.append((argv, kwargs))
        assert argv[:2] == ["/usr/bin/timeout", "--kill-after=30"]
        out, err = io.StringIO(), io.StringIO()
        rc = nvbandwidth.main(list(argv[4:]), out, err)
        return rc, out.getvalue(), err.getvalue()

    return run_command


def run(ansible_module, node, thresholds, testcases=("h2d", "d2h", "p2p"), calls=None, **kwargs):
    args = {
        "testcases": [t for t in testcases if thresholds.get(t) is not None or t != "p2p"],
        "thresholds": thresholds,
        "gpus": node.nvidia_smi_facts(samples=0)["gpus"],
    }
    return ansible_module(nvbandwidth_module, args, sim_nvbandwidth([] if calls is None else calls), **kwargs)


@pytest.mark.parametrize("profile", [p for p in GPU_PROFILES if minimums(p)["h2d"] is not None])
def test_healthy_node_passes_its_sku_minimums(tmp_path, monkeypatch, ansible_module, profile):
    node = SimNode(tmp_path, monkeypatch, profile)
    calls = []
    result = run(ansible_module, node, minimums(profile), calls=calls, bin_path=PATHS.get)
    assert (result["ran"], result["healthy"], result["check"]["status"]) == (True, True, "PASS")
    argv, kwargs = calls[0]
    assert argv[2:5] == ["900", "/usr/bin/nvbandwidth", "-t"]
    assert kwargs["environ_update"] == {"LC_ALL": "C", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    measured = result["check"]["observed"]["testcases"]["host_to_device_memcpy_ce"]
    assert sorted(measured) == sorted(g["bus_id"] for g in node.nvidia_smi_facts(samples=0)["gpus"])


def test_h100_node_runs_p2p_and_a_degraded_gpu_is_named(tmp_path, monkeypatch, ansible_module):
    faults = [{"type": "host_bandwidth_degraded", "gpu": 5, "fraction": 0.5}]
    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr", faults)
    result = run(ansible_module, node, minimums("dgx-h100-ndr"), bin_path=PATHS.get)
    assert result["cmd"][-1] == "device_to_device_memcpy_read_ce"
    assert result["healthy"] is False and result["check"]["status"] == "FAIL"
    low = {(e["testcase"], e["bus_id"]) for e in result["check"]["observed"]["low"]}
    assert low == {("host_to_device_memcpy_ce", "00000000:C3:00.0"), ("device_to_host_memcpy_ce", "00000000:C3:00.0")}
    assert "00000000:C3:00.0" in result["check"]["fault"] and "PCIe link" in result["check"]["remedy"]
    assert len(result["check"]["observed"]["testcases"]["device_to_device_memcpy_read_ce"]) == 8 * 7


def test_downtrained_pcie_link_fails_the_v100_minimum(tmp_path, monkeypatch, ansible_module):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "pcie_width_degraded", "gpu": 2, "width": 8}])
    result = run(ansible_module, node, minimums("dgx1-v100-edr"), bin_path=PATHS.get)
    assert result["check"]["status"] == "FAIL"
    assert {e["gpu"] for e in result["check"]["observed"]["low"]} == {2}
    assert result["cmd"][-2:] == ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce"]  # V100: no p2p minimum


def test_sku_without_a_published_minimum_names_the_site_variable(tmp_path, monkeypatch, ansible_module):
    node = SimNode(tmp_path, monkeypatch, "vsphere-t4-vgpu-roce")
    result = run(ansible_module, node, minimums("vsphere-t4-vgpu-roce"), expect_failure=True, bin_path=PATHS.get)
    assert "thresholds.h2d is not set" in result["msg"] and "gpuforge_expected_nvbandwidth" in result["msg"]


def test_check_mode_does_not_run_nvbandwidth(ansible_module):
    def run_command(argv, **_kwargs):
        raise AssertionError(f"ran {argv} in check mode")

    args = {"testcases": ["h2d"], "thresholds": {"h2d": 10}}
    result = ansible_module(nvbandwidth_module, args, run_command, check_mode=True, bin_path=PATHS.get)
    assert (result["ran"], result["healthy"]) == (False, True)
    assert result["cmd"] == ["/usr/bin/nvbandwidth", "-t", "host_to_device_memcpy_ce"]


def test_failures_to_run_are_named(tmp_path, monkeypatch, ansible_module):
    missing = ansible_module(
        nvbandwidth_module, {"thresholds": {"h2d": 1, "d2h": 1}}, expect_failure=True, bin_path=lambda n: None
    )
    assert "nvbandwidth not found" in missing["msg"] and "github.com/NVIDIA/nvbandwidth" in missing["msg"]
    bad = ansible_module(nvbandwidth_module, {"thresholds": {"h2d": "fast", "d2h": 1}}, expect_failure=True)
    assert "thresholds.h2d: 'fast' is not a number" in bad["msg"]

    def no_driver(argv, **_kwargs):
        return 1, "", "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n"

    args = {"thresholds": {"h2d": 1, "d2h": 1}}
    failed = ansible_module(nvbandwidth_module, args, no_driver, expect_failure=True, bin_path=PATHS.get)
    assert "exited with code 1" in failed["msg"] and "CUDA_ERROR_NO_DEVICE" in failed["msg"]
