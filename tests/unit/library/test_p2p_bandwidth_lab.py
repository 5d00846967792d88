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
from gpuforge_sim import p2p_bandwidth_latency as sim

from gpuforge.lab.profiles import hardware_document, load_profile

ROOT = Path(__file__).resolve().parents[3]
LAB_EXPECT = yaml.safe_load((ROOT / "inventories/lab/group_vars/all/benchmark.yml").read_text(encoding="utf-8"))[
    "gpuforge_bench_p2p_expect"
]


def simulated_output(tmp_path, monkeypatch, faults) -> str:
    (tmp_path / "lib" / "modules").mkdir(parents=True)
    (tmp_path / "lib" / "modules" / "nvidia.ko").write_text("{}")
    (tmp_path / "hardware.json").write_text(json.dumps(hardware_document(load_profile("dgx1-v100-edr"), faults)))
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "lib"))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    driver_state.load_module("nvidia")
    out = io.StringIO()
    assert sim.main([], out) == 0
    return out.getvalue()


@pytest.fixture
def run_module(ansible_module):
    return partial(ansible_module, p2p_bandwidth, bin_path="/usr/bin/{}".format)


@pytest.mark.parametrize(
    ("faults", "verdict"), [([], "ok"), ([{"type": "nvlink_inactive", "gpu": 7, "links": [3, 5]}], "slow")]
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
        lambda argv, **kwargs: (0, output, ""),
    )
    entry = p2p_results(result, "gpu03", LAB_EXPECT)[0]
    assert entry["verdict"] == verdict and entry["gpus"] == 8 and entry["threshold"] == 30
    if verdict == "ok":
        assert entry["value"] == 42.93 and entry["remedy"] == ""  # one NVLink both ways
    else:
        assert entry["value"] == 18.84
        assert "p2p_uni_ratio fail: worst pair 5->7 1.05x (10.46 / 9.94 GB/s)" in entry["reason"]
        assert "nvidia-smi nvlink --status for down links" in entry["remedy"]
