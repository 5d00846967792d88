"""p2p_bandwidth module: skipped without the binary, runs it when present (a stand-in printing a fixture)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import p2p_bandwidth

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "p2p"
DELLEMC_C4140 = (FIXTURES / "dellemc_c4140_4xv100_sxm2_cuda91.txt").read_text(encoding="utf-8")


@pytest.fixture
def run_module(ansible_module):
    return partial(ansible_module, p2p_bandwidth, bin_path="/usr/bin/{}".format)


@pytest.fixture
def binary(tmp_path):
    path = tmp_path / "p2pBandwidthLatencyTest"
    path.write_text("#!/bin/sh\n", encoding="ascii")
    path.chmod(0o755)
    return str(path)


def answer(rc, out):
    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        return rc, out, ""

    run.calls = calls
    return run


def test_absent_binary_is_skipped_with_the_reason(run_module, tmp_path):
    runner = answer(0, DELLEMC_C4140)
    result = run_module({"binary": str(tmp_path / "nope"), "node": "gpu01"}, runner)
    assert result["skipped"] is True
    assert result["skip_reason"].startswith(f"p2pBandwidthLatencyTest not found at {tmp_path / 'nope'} on ")
    assert result["results"] == [
        {
            "name": "p2p-gpu01",
            "nodes": ["gpu01"],
            "verdict": "UNKNOWN",
            "run_failed": False,
            "reason": result["skip_reason"],
        }
    ]
    assert runner.calls == []
    assert result["skip_reason"].endswith(
        ": build it with the benchmark_tools role (playbooks/benchmark_tools.yml, benchmark_tools_enabled: true), "
        "or set gpuforge_bench_p2p_binary to the site's build"
    )


def test_the_default_binary_is_the_benchmark_tools_build(run_module, monkeypatch):
    """Issue 48 item 5: without a binary the module runs the benchmark_tools role's build, at the prefix the role
    installs to (roles/gpuforge/defaults/main/benchmark_tools.yml), which gpuforge_bench_p2p_binary also names."""
    import yaml

    root = Path(__file__).resolve().parents[3]
    prefix = yaml.safe_load((root / "roles/gpuforge/defaults/main/benchmark_tools.yml").read_text(encoding="utf-8"))
    role_default = yaml.safe_load((root / "roles/gpuforge_bench/defaults/main.yml").read_text(encoding="utf-8"))
    assert f"{prefix['gpuforge_benchmark_tools_prefix']}/bin/p2pBandwidthLatencyTest" == p2p_bandwidth.DEFAULT_BINARY
    assert (
        role_default["gpuforge_bench_p2p_binary"] == "{{ gpuforge_benchmark_tools_prefix }}/bin/p2pBandwidthLatencyTest"
    )
    seen = []
    monkeypatch.setattr(p2p_bandwidth.os.path, "isfile", lambda path: seen.append(path) or False)
    result = run_module({"node": "gpu01"}, answer(0, DELLEMC_C4140))
    assert seen == [p2p_bandwidth.DEFAULT_BINARY] and result["cmd"] == [p2p_bandwidth.DEFAULT_BINARY]
    assert result["skip_reason"].startswith(f"p2pBandwidthLatencyTest not found at {p2p_bandwidth.DEFAULT_BINARY} on ")


def test_dellemc_output_passes(run_module, binary, tmp_path):
    runner = answer(0, DELLEMC_C4140)
    result = run_module(
        {"binary": binary, "node": "node008", "output_path": str(tmp_path / "out" / "p2p.txt"), "expect": {"gpus": 4}},
        runner,
    )
    assert runner.calls[0][:3] == ["/usr/bin/timeout", "--kill-after=30", "600"]
    assert runner.calls[0][3:] == [binary]
    assert result["verdict"] == "PASS"
    assert result["results"][0] == {
        "name": "p2p-node008",
        "nodes": ["node008"],
        "verdict": "PASS",
        "run_failed": False,
        "gpus": 4,
        "sku": "Tesla V100-SXM2-16GB",
        "uni_min_ratio": 3.43,
        "bi_min_ratio": 7.22,
        "bi_min_enabled_gbyte_per_s": 75.25,
    }
    assert (tmp_path / "out" / "p2p.txt").read_text(encoding="utf-8") == DELLEMC_C4140
    assert result["changed"] is True


def test_slow_pair_fails_the_task(run_module, binary):
    slow = DELLEMC_C4140.replace("  1 47.86 738.42 34.18 38.74", "  1 47.86 738.42 10.50 38.74")
    result = run_module({"binary": binary}, answer(0, slow), expect_failure=True)
    assert result["msg"].startswith("p2pBandwidthLatencyTest verdict FAIL: p2p_uni_ratio=")
    assert result["results"][0]["verdict"] == "FAIL"


def test_failed_run_and_unreadable_output(run_module, binary):
    result = run_module({"binary": binary}, answer(1, "CUDA error: no CUDA-capable device is detected\n"), True)
    assert result["msg"] == "p2pBandwidthLatencyTest failed (rc 1): CUDA error: no CUDA-capable device is detected"
    assert (result["results"][0]["verdict"], result["results"][0]["run_failed"]) == ("FAIL", True)
    result = run_module({"binary": binary}, answer(0, "node008\n"), True)
    assert result["msg"].startswith("could not read the p2pBandwidthLatencyTest output: no p2pBandwidthLatencyTest")


def test_check_mode_runs_nothing(run_module, binary):
    runner = answer(0, DELLEMC_C4140)
    result = run_module({"binary": binary, "args": ["--p2p_read"]}, runner, check_mode=True)
    assert runner.calls == [] and result["cmd"] == [binary, "--p2p_read"]
