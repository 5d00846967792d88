"""p2p_bandwidth on a lab node: the module runs what the lab's p2pBandwidthLatencyTest simulator prints on a DGX-1
(lab/sim/gpuforge_sim/p2p_bandwidth_latency.py) with the lab inventory's thresholds, and the benchmark's result filter
gives the node's verdict - as roles/gpuforge_bench/tasks/p2p.yml records it in the demo."""

from __future__ import annotations

import io
import json
from functools import partial
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_gates import p2p_results
from ansible_collections.gpuforge.cluster.plugins.modules import p2p_bandwidth
from gpuforge_sim import driver_state
from gpuforge_sim import nvidia_smi as nvidia_smi_sim
from gpuforge_sim import p2p_bandwidth_latency as sim

from gpuforge.lab.profiles import hardware_document, load_profile

ROOT = Path(__file__).resolve().parents[3]
LAB_EXPECT = yaml.safe_load((ROOT / "inventories/lab/group_vars/all/benchmark.yml").read_text(encoding="utf-8"))[
    "gpuforge_bench_p2p_expect"
]


def simulated_output(tmp_path, monkeypatch, faults, profile="dgx1-v100-edr") -> str:
    (tmp_path / "lib" / "modules").mkdir(parents=True)
    (tmp_path / "lib" / "modules" / "nvidia.ko").write_text("{}")
    (tmp_path / "hardware.json").write_text(json.dumps(hardware_document(load_profile(profile), faults)))
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "lib"))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    driver_state.load_module("nvidia")
    out = io.StringIO()
    assert sim.main([], out) == 0
    return out.getvalue()


def simulated_topo() -> str:
    """`nvidia-smi topo -m` of the same simulated node (after simulated_output)."""
    out = io.StringIO()
    assert nvidia_smi_sim.main(["topo", "-m"], out) == 0
    return out.getvalue()


def answers(output: str, topo: str | None):
    """run_command of the node: the test's output, nvidia-smi topo -m's matrix (None: nvidia-smi is not there)."""

    def run_command(argv, **kwargs):
        if argv[-2:] == ["topo", "-m"]:
            if topo is None:
                raise FileNotFoundError(2, "No such file or directory", argv[0])
            return 0, topo, ""
        return 0, output, ""

    return run_command


@pytest.fixture
def run_module(ansible_module):
    return partial(ansible_module, p2p_bandwidth, bin_path="/usr/bin/{}".format)


@pytest.mark.parametrize(
    ("faults", "verdict"), [([], "PASS"), ([{"type": "nvlink_inactive", "gpu": 7, "links": [3, 5]}], "FAIL")]
)
def test_the_benchmark_result_of_a_lab_node(tmp_path, monkeypatch, run_module, faults, verdict):
    """What roles/gpuforge_bench/tasks/p2p.yml records for a lab node: the module runs the simulator's output and the
    result filter gives the verdict, with the slow pair and the NVLink remedy when a link is down."""
    output = simulated_output(tmp_path, monkeypatch, faults)
    binary = tmp_path / "p2pBandwidthLatencyTest"
    binary.write_text("#!/bin/sh\n", encoding="ascii")
    binary.chmod(0o755)
    result = run_module(
        {"binary": str(binary), "node": "gpu03", "expect": LAB_EXPECT, "fail_on": "never"},
        answers(output, simulated_topo()),
    )
    entry = p2p_results(result, "gpu03", LAB_EXPECT)[0]
    assert entry["verdict"] == verdict and entry["gpus"] == 8 and entry["threshold"] == 30
    if verdict == "PASS":
        assert entry["value"] == 42.93 and entry["remedy"] == ""  # one NVLink both ways
    else:
        assert entry["value"] == 18.84
        assert "p2p_uni_ratio FAIL: worst pair 5->7 1.05x (10.46 / 9.94 GB/s)" in entry["reason"]
        assert "nvidia-smi nvlink --status for down links" in entry["remedy"]


def test_without_nvidia_smi_every_pair_is_held_to_the_reference_as_it_is(tmp_path, monkeypatch, run_module):
    """No `nvidia-smi topo -m` (not installed): the V100 reference over two NVLinks per pair judges every pair, so a
    healthy DGX-1's NV1 pairs fall short and say which figure they missed; the run still gives a verdict."""
    output = simulated_output(tmp_path, monkeypatch, [])
    binary = tmp_path / "p2pBandwidthLatencyTest"
    binary.write_text("#!/bin/sh\n", encoding="ascii")
    binary.chmod(0o755)
    result = run_module(
        {"binary": str(binary), "node": "gpu03", "expect": LAB_EXPECT, "fail_on": "never"}, answers(output, None)
    )
    ratio = {check["name"]: check for check in result["checks"]}["p2p_uni_ratio"]
    assert ratio["status"] == "FAIL" and ratio["expected"].startswith("P2P=Enabled >= 3.09 x P2P=Disabled"), ratio
    assert ratio["observed"]["worst"]["needed_ratio"] == 3.09


def test_the_run_numbers_devices_in_pci_bus_order(tmp_path, monkeypatch, run_module):
    """topo -m numbers GPUs in PCI bus order; CUDA fastest first unless CUDA_DEVICE_ORDER says otherwise."""
    output = simulated_output(tmp_path, monkeypatch, [])
    binary = tmp_path / "p2pBandwidthLatencyTest"
    binary.write_text("#!/bin/sh\n", encoding="ascii")
    binary.chmod(0o755)
    seen = []

    def run_command(argv, **kwargs):
        seen.append((argv, kwargs.get("environ_update", {})))
        return answers(output, simulated_topo())(argv, **kwargs)

    run_module({"binary": str(binary), "node": "gpu03", "expect": LAB_EXPECT, "fail_on": "never"}, run_command)
    test_run = next(environ for argv, environ in seen if str(binary) in argv)
    assert test_run["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


@pytest.mark.parametrize(
    ("profile", "faults", "gpus", "verdict", "reason"),
    [
        # The vGPU guest has one GPU: no peer pair, so without the expected count nothing is judged ...
        ("vsphere-t4-vgpu-roce", [], None, "UNKNOWN", "no peer pair to judge"),
        # ... and with it (roles/gpuforge_bench passes the node's expected count) the run has a verdict.
        ("vsphere-t4-vgpu-roce", [], 1, "PASS", "p2p_gpus PASS: 1 (expected >= 1)"),
        # A GPU the driver does not enumerate is one CUDA cannot test: the run fails on the count.
        ("dgx1-v100-edr", [{"type": "gpu_missing", "gpu": 3}], 8, "FAIL", "p2p_gpus FAIL: 7 (expected >= 8)"),
    ],
)
def test_the_expected_gpu_count_judges_every_node(
    tmp_path, monkeypatch, run_module, profile, faults, gpus, verdict, reason
):
    output = simulated_output(tmp_path, monkeypatch, faults, profile)
    binary = tmp_path / "p2pBandwidthLatencyTest"
    binary.write_text("#!/bin/sh\n", encoding="ascii")
    binary.chmod(0o755)
    expect = dict(LAB_EXPECT, **({} if gpus is None else {"gpus": gpus}))
    result = run_module(
        {"binary": str(binary), "node": "gpu03", "expect": expect, "fail_on": "never"},
        answers(output, simulated_topo()),
    )
    entry = p2p_results(result, "gpu03", expect)[0]
    assert (entry["verdict"], entry["gpus"]) == (verdict, 1 if profile.startswith("vsphere") else 7), entry
    assert reason in entry["reason"]


def test_the_role_passes_each_nodes_expected_gpu_count():
    """tasks/p2p.yml gives the module the node's expected count unless gpuforge_bench_p2p_expect names its own."""
    defaults = yaml.safe_load((ROOT / "roles/gpuforge_bench/defaults/main.yml").read_text(encoding="utf-8"))
    tasks = yaml.safe_load((ROOT / "roles/gpuforge_bench/tasks/p2p.yml").read_text(encoding="utf-8"))
    shared = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml").read_text(encoding="utf-8"))
    assert defaults["gpuforge_bench_p2p_expected_gpu_count"] == "{{ gpuforge_node_expected_gpu_count }}"
    count = shared["gpuforge_node_expected_gpu_count"]
    assert "gpuforge_expected_gpu_count" in count and "get('gpu_count'" in count
    run = next(task for task in tasks if "gpuforge.cluster.p2p_bandwidth" in task)
    expect = run["gpuforge.cluster.p2p_bandwidth"]["expect"]
    assert "{'gpus': gpuforge_bench_p2p_expected_gpu_count | int}" in expect
    assert expect.rstrip().endswith("| combine(gpuforge_bench_p2p_expect) }}")
