"""Per-node attribution of ib_write_bw pairs and NCCL runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from gpuforge_bench_attribution import attribute_results, judge_results, median


def ring(nodes, gbps_by_link, hca="mlx5_0", expected=100):
    """ib_write_bw ring results: node i server, node i+1 client."""
    results = []
    for i, server in enumerate(nodes):
        client = nodes[(i + 1) % len(nodes)]
        name = f"{server}__{client}__{hca}"
        results.append(
            {
                "name": name,
                "group": "ib_write_bw",
                "nodes": [server, client],
                "hca": hca,
                "gbps": gbps_by_link.get(name, 95.0),
                "expected_gbps": expected,
            }
        )
    return results


NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]


def test_degraded_node_in_ring_is_named_absolute():
    results = ring(NODES, {"gpu02__gpu03__mlx5_0": 40.0, "gpu01__gpu02__mlx5_0": 41.5})
    out = attribute_results(results)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu02"]
    assert out["slow_nodes"][0]["hcas"] == ["mlx5_0"]
    assert out["slow_nodes"][0]["results"] == ["gpu01__gpu02__mlx5_0", "gpu02__gpu03__mlx5_0"]
    assert out["slow_links"] == []
    verdicts = {r["name"]: r["verdict"] for r in out["results"]}
    assert verdicts == {
        "gpu01__gpu02__mlx5_0": "slow",
        "gpu02__gpu03__mlx5_0": "slow",
        "gpu03__gpu04__mlx5_0": "ok",
        "gpu04__gpu01__mlx5_0": "ok",
    }
    assert out["results"][1]["threshold_gbps"] == 90.0
    assert out["summary"].startswith("slow: gpu02 (every link it is in is slow")


def test_degraded_node_named_by_median_baseline_on_tcp_rates():
    rates = {"gpu03__gpu04__mlx5_0": 4.1, "gpu02__gpu03__mlx5_0": 3.8}
    results = ring(NODES, rates)
    for r in results:
        if r["name"] not in rates:
            r["gbps"] = 21.0
    out = attribute_results(results, baseline="median", median_fraction=0.5)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu03"]
    # median of [21, 3.8, 4.1, 21] is 12.55; half of it is the threshold
    assert out["results"][0]["threshold_gbps"] == 6.28
    assert "50% of the median of ib_write_bw (12.55 Gb/s)" in out["results"][1]["reason"]


def test_three_node_ring_needs_the_best_baseline():
    # The demo lab: 3 GPU nodes, gpu02 rate-limited spoils 2 links of 3, so the median is itself slow.
    rates = {"gpu01__gpu02__mlx5_0": 0.9, "gpu02__gpu03__mlx5_0": 1.4, "gpu03__gpu01__mlx5_0": 12.0}
    results = ring(["gpu01", "gpu02", "gpu03"], rates)
    assert attribute_results(results, baseline="median", median_fraction=0.5)["slow_nodes"] == []
    out = attribute_results(results, baseline="best", median_fraction=0.5)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu02"]
    assert out["results"][0]["threshold_gbps"] == 6.0
    assert "50% of the best of ib_write_bw (12.0 Gb/s)" in out["results"][0]["reason"]


def test_all_equal_names_nothing():
    out = attribute_results(ring(NODES, {}), baseline="median")
    assert out["slow_nodes"] == [] and out["slow_links"] == []
    assert {r["verdict"] for r in out["results"]} == {"ok"}
    assert out["summary"] == "no slow node or link"


def test_two_nodes_cannot_separate_ends_so_links_are_named():
    out = attribute_results(ring(["gpu01", "gpu02"], {"gpu01__gpu02__mlx5_0": 30.0, "gpu02__gpu01__mlx5_0": 31.0}))
    assert out["slow_nodes"] == []
    assert [link["name"] for link in out["slow_links"]] == ["gpu01__gpu02__mlx5_0", "gpu02__gpu01__mlx5_0"]
    assert "either end, the cable or the switch port" in out["slow_links"][0]["reason"]


def test_single_slow_link_is_a_link_not_a_node():
    out = attribute_results(ring(NODES, {"gpu03__gpu04__mlx5_0": 50.0}))
    assert out["slow_nodes"] == []
    assert [(link["name"], link["hca"]) for link in out["slow_links"]] == [("gpu03__gpu04__mlx5_0", "mlx5_0")]


def test_nccl_single_node_run_names_its_node_and_explains_multi_node():
    results = [
        {"name": "nccl-tcp-gpu01", "group": "nccl_single", "nodes": ["gpu01"], "gbps": 10.0},
        {"name": "nccl-tcp-gpu02", "group": "nccl_single", "nodes": ["gpu02"], "gbps": 2.0},
        {"name": "nccl-tcp-gpu03", "group": "nccl_single", "nodes": ["gpu03"], "gbps": 9.5},
        {
            "name": "nccl-tcp-all",
            "group": "nccl_multi",
            "nodes": ["gpu01", "gpu02", "gpu03"],
            "gbps": 1.0,
            "expected_gbps": 5.0,
        },
    ]
    out = attribute_results(results, baseline="median")
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu02"]
    assert out["slow_nodes"][0]["reasons"][0].startswith("its own run nccl-tcp-gpu02: 2.0 Gb/s is below 4.75")
    # alone in its group, the multi-node run is its own median: not slow by the relative rule
    assert out["results"][3]["verdict"] == "ok"


def test_failed_run_without_bandwidth_counts_as_bad():
    results = ring(NODES, {"gpu04__gpu01__mlx5_0": None, "gpu03__gpu04__mlx5_0": None})
    results[3]["error"] = "client timed out"
    out = attribute_results(results)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu04"]
    assert out["results"][3]["verdict"] == "failed"
    assert out["results"][3]["reason"] == "client timed out"


def test_missing_expectation_is_unjudged_and_bad_baseline_raises():
    judged = judge_results([{"name": "x", "nodes": ["a", "b"], "gbps": 5}])
    assert judged[0]["verdict"] == "unjudged"
    assert judge_results([{"name": "x", "nodes": ["a"], "gbps": "7.5"}], expected_gbps=10)[0]["verdict"] == "slow"
    with pytest.raises(ValueError, match="baseline must be one of absolute, median"):
        judge_results([], baseline="mean")


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert median([]) is None


def test_filter_plugin_exposes_the_function():
    # filter_plugins/gpuforge.py shares its name with the src/gpuforge package: load it by path
    path = Path(__file__).parents[3] / "filter_plugins" / "gpuforge.py"
    spec = importlib.util.spec_from_file_location("gpuforge_filter_plugins", path)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    attribution = plugin.FilterModule().filters()["gpuforge_bench_attribution"]
    out = attribution(ring(NODES, {"gpu01__gpu02__mlx5_0": 1.0, "gpu04__gpu01__mlx5_0": 1.0}), expected_gbps="")
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu01"]
