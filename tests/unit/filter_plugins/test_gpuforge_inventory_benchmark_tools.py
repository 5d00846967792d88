"""The inventory check's benchmark tools rule (filter_plugins/gpuforge_inventory.py, check_benchmark_tools): a GPU
node whose benchmark_tools role is off must name the site's own nccl-tests, nvbandwidth and p2pBandwidthLatencyTest,
or validation and the benchmarks would run binaries nothing installed."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_inventory import check_inventory

GPU = {
    "gpuforge_expected_system": "dgx1-v100-edr",
    "gpuforge_expected_gpu_count": 8,
    "ipoib_interfaces": [{"hca": "mlx5_1", "port": 1, "address": "198.51.100.11/24"}],
}
TOOLS = ["gpuforge_bench_nccl_binary", "gpuforge_bench_p2p_binary", "gpuforge_nvbandwidth_executable"]


def run(**host) -> list[dict]:
    hosts = {"gpu01": copy.deepcopy({**GPU, **host})}
    return check_inventory(hosts, {"all": ["gpu01"], "gpu_nodes": ["gpu01"]})


def errors(problems) -> dict:
    return {p["variable"]: p for p in problems if p["severity"] == "error"}


def test_the_roles_builds_need_nothing_named():
    assert errors(run()) == {}
    assert errors(run(benchmark_tools_enabled=True)) == {}


@pytest.mark.parametrize("off", [False, "false", "no"])
def test_role_off_without_the_sites_tools_is_refused_naming_each_variable(off):
    found = errors(run(benchmark_tools_enabled=off))
    assert sorted(found) == TOOLS
    problem = found["gpuforge_nvbandwidth_executable"]
    assert problem["host"] == "gpu01"
    assert "benchmark_tools_enabled is false: nothing installs it on this host" in problem["problem"]
    assert problem["fix"].startswith("set gpuforge_nvbandwidth_executable to the path of the site's own nvbandwidth")


def test_role_off_with_the_sites_tools_named_passes():
    named = {
        "gpuforge_bench_nccl_binary": "/opt/site/all_reduce_perf",
        "gpuforge_nvbandwidth_executable": "/opt/nvb",
        "gpuforge_bench_p2p_binary": "/opt/site/p2pBandwidthLatencyTest",
    }
    assert errors(run(benchmark_tools_enabled=False, **named)) == {}
    # One named, the others not: only the others are refused.
    assert sorted(errors(run(benchmark_tools_enabled=False, gpuforge_bench_nccl_binary="/x"))) == TOOLS[1:]
    p2p = errors(
        run(benchmark_tools_enabled=False, gpuforge_bench_nccl_binary="/x", gpuforge_nvbandwidth_executable="/y")
    )
    assert sorted(p2p) == ["gpuforge_bench_p2p_binary"]
    assert p2p["gpuforge_bench_p2p_binary"]["fix"].startswith(
        "set gpuforge_bench_p2p_binary to the path of the site's own p2pBandwidthLatencyTest build"
    )


def test_nodes_that_are_not_gpu_nodes_are_not_checked():
    problems = check_inventory(
        {"head01": {"benchmark_tools_enabled": False}}, {"all": ["head01"], "head_nodes": ["head01"]}
    )
    assert "gpuforge_bench_nccl_binary" not in errors(problems)
