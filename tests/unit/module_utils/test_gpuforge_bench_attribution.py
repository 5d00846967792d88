"""Per-node attribution of ib_write_bw pairs and NCCL runs."""

from __future__ import annotations

import importlib.util

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_attribution import (
    attribute_results,
    judge_results,
    median,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_localize import ib_schedule, next_probe


def ring(nodes, gbit_per_s_by_link, hca="mlx5_0", expected=100):
    """ib_write_bw ring results (Gb/s): node i server, node i+1 client."""
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
                "value": gbit_per_s_by_link.get(name, 95.0),
                "unit": "Gb/s",
                "expected": expected,
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
        "gpu01__gpu02__mlx5_0": "FAIL",
        "gpu02__gpu03__mlx5_0": "FAIL",
        "gpu03__gpu04__mlx5_0": "PASS",
        "gpu04__gpu01__mlx5_0": "PASS",
    }
    assert (out["results"][1]["threshold"], out["results"][1]["expected"], out["results"][1]["unit"]) == (
        90.0,
        100.0,
        "Gb/s",
    )
    assert out["summary"].startswith("slow node: gpu02 (every link it is in is slow (2 of 2 on 1 rail)")


def test_degraded_node_named_by_median_baseline_on_tcp_rates():
    rates = {"gpu03__gpu04__mlx5_0": 4.1, "gpu02__gpu03__mlx5_0": 3.8}
    results = ring(NODES, rates)
    for r in results:
        if r["name"] not in rates:
            r["value"] = 21.0
    out = attribute_results(results, baseline="median", median_fraction=0.5)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu03"]
    # median of [21, 3.8, 4.1, 21] is 12.55; half of it is the threshold
    assert out["results"][0]["threshold"] == 6.28
    assert "50% of the median of ib_write_bw (12.55 Gb/s)" in out["results"][1]["reason"]


def test_three_node_ring_needs_the_best_baseline():
    # The demo lab: 3 GPU nodes, gpu02 rate-limited spoils 2 links of 3, so the median is itself slow.
    rates = {"gpu01__gpu02__mlx5_0": 0.9, "gpu02__gpu03__mlx5_0": 1.4, "gpu03__gpu01__mlx5_0": 12.0}
    results = ring(["gpu01", "gpu02", "gpu03"], rates)
    assert attribute_results(results, baseline="median", median_fraction=0.5)["slow_nodes"] == []
    out = attribute_results(results, baseline="best", median_fraction=0.5)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu02"]
    assert out["results"][0]["threshold"] == 6.0
    assert "50% of the best of ib_write_bw (12.0 Gb/s)" in out["results"][0]["reason"]


def test_all_equal_names_nothing():
    out = attribute_results(ring(NODES, {}), baseline="median")
    assert out["slow_nodes"] == [] and out["slow_links"] == []
    assert {r["verdict"] for r in out["results"]} == {"PASS"}
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
        {"name": "nccl-tcp-gpu01", "group": "nccl_single", "nodes": ["gpu01"], "value": 10.0, "unit": "Gb/s"},
        {"name": "nccl-tcp-gpu02", "group": "nccl_single", "nodes": ["gpu02"], "value": 2.0, "unit": "Gb/s"},
        {"name": "nccl-tcp-gpu03", "group": "nccl_single", "nodes": ["gpu03"], "value": 9.5, "unit": "Gb/s"},
        {
            "name": "nccl-tcp-all",
            "group": "nccl_multi",
            "nodes": ["gpu01", "gpu02", "gpu03"],
            "value": 1.0,
            "unit": "Gb/s",
            "expected": 5.0,
        },
    ]
    out = attribute_results(results, baseline="median")
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu02"]
    assert out["slow_nodes"][0]["reasons"][0].startswith("its own run nccl-tcp-gpu02: 2.0 Gb/s is below 4.75")
    # alone in its group, the multi-node run is its own median: not slow by the relative rule
    assert out["results"][3]["verdict"] == "PASS"


def test_failed_run_without_bandwidth_counts_as_bad():
    results = ring(NODES, {"gpu04__gpu01__mlx5_0": None, "gpu03__gpu04__mlx5_0": None})
    results[3]["error"] = "client timed out"
    out = attribute_results(results)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu04"]
    assert (out["results"][3]["verdict"], out["results"][3]["run_failed"]) == ("FAIL", True)
    assert out["results"][3]["reason"] == "client timed out"


def test_missing_expectation_is_unjudged_and_bad_baseline_raises():
    judged = judge_results([{"name": "x", "nodes": ["a", "b"], "value": 5}])
    assert (judged[0]["verdict"], judged[0]["threshold"], judged[0]["unit"]) == ("UNKNOWN", None, "Gb/s")
    assert "expected" not in judged[0]
    slow = judge_results([{"name": "x", "nodes": ["a"], "value": "7.5"}], expected=10)[0]
    assert (slow["verdict"], slow["value"], slow["threshold"], slow["expected"]) == ("FAIL", 7.5, 9.0, 10.0)
    assert slow["run_failed"] is False  # measured: the cluster's FAIL, not the toolkit's
    with pytest.raises(ValueError, match="baseline must be one of absolute, median"):
        judge_results([], baseline="mean")


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert median([]) is None


def test_filter_plugin_exposes_the_function():
    plugin = importlib.import_module("ansible_collections.gpuforge.cluster.plugins.filter.gpuforge")
    attribution = plugin.FilterModule().filters()["gpuforge_bench_attribution"]
    out = attribution(ring(NODES, {"gpu01__gpu02__mlx5_0": 1.0, "gpu04__gpu01__mlx5_0": 1.0}), expected="")
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu01"]


# All pairs per rail (gpuforge_localize.ib_schedule), as roles/gpuforge_bench/tasks/ib_pair.yml records them.
RAILS = ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]


def all_pairs(nodes, gbit_per_s, down=()):
    """ib_write_bw results of every pair on every rail; gbit_per_s(server, client, rail) -> value in Gb/s; down: (node,
    rail)."""
    infiniband = {
        node: {
            "active_ports": [rail for rail in RAILS if (node, rail) not in down],
            "inactive_ports": [rail for rail in RAILS if (node, rail) in down],
            "hcas": [],
        }
        for node in nodes
    }
    results = []
    for entry in ib_schedule(nodes, infiniband):
        for pair in entry["pairs"]:
            results.append(
                {
                    "name": pair["name"],
                    "group": "ib_write_bw",
                    "nodes": [pair["server"], pair["client"]],
                    "hca": pair["hca"],
                    "port": pair["port"],
                    "rail": pair["rail"],
                    "inactive": pair["inactive"],
                    "value": gbit_per_s(pair["server"], pair["client"], pair["rail"]) if pair["run"] else None,
                    "unit": "Gb/s",
                    "expected": 100,
                    "error": "" if pair["run"] else f"{pair['rail']} is not Active on {', '.join(pair['inactive'])}",
                }
            )
    return results


def test_demo_faults_name_gpu02_as_the_node_and_gpu03_mlx5_2_as_a_link():
    # The demo: tc slows all of gpu02's traffic (every rail shares the lab's one interface); gpu03's mlx5_2 is Down.
    results = all_pairs(
        ["gpu01", "gpu02", "gpu03"],
        lambda server, client, rail: 1.2 if "gpu02" in (server, client) else 96.0,
        down={("gpu03", "mlx5_2/1")},
    )
    for baseline in ("best", "absolute"):
        out = attribute_results(results, baseline=baseline, median_fraction=0.5)
        assert [n["node"] for n in out["slow_nodes"]] == ["gpu02"], baseline
        assert out["slow_nodes"][0]["hcas"] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
        assert [(link["kind"], link["name"], link["hca"]) for link in out["slow_links"]] == [
            ("port", "gpu03:mlx5_2/1", "mlx5_2")
        ]
        assert "is not Active on gpu03" in out["slow_links"][0]["reason"]
        assert out["summary"].startswith("slow node: gpu02 (every link it is in is slow (7 of 7 on 4 rails)")
        assert "slow link: gpu03:mlx5_2/1 (" in out["summary"]


def test_one_slow_pair_among_eight_nodes_is_the_link():
    nodes = [f"gpu{i:02d}" for i in range(1, 9)]
    results = all_pairs(nodes, lambda s, c, rail: 40.0 if {s, c} == {"gpu03", "gpu06"} and rail == "mlx5_1/1" else 96.0)
    out = attribute_results(results)
    assert out["slow_nodes"] == []
    assert [(link["kind"], sorted(link["nodes"]), link["rail"]) for link in out["slow_links"]] == [
        ("pair", ["gpu03", "gpu06"], "mlx5_1/1")
    ]


def test_one_node_slow_on_one_rail_is_its_port_not_the_node():
    nodes = [f"gpu{i:02d}" for i in range(1, 6)]
    results = all_pairs(nodes, lambda s, c, rail: 30.0 if "gpu04" in (s, c) and rail == "mlx5_3/1" else 96.0)
    out = attribute_results(results)
    assert out["slow_nodes"] == []
    assert [(link["kind"], link["name"], len(link["results"])) for link in out["slow_links"]] == [
        ("port", "gpu04:mlx5_3/1", 4)
    ]


def test_a_node_slow_on_every_rail_among_eight_is_the_node_only():
    nodes = [f"gpu{i:02d}" for i in range(1, 9)]
    results = all_pairs(nodes, lambda s, c, rail: 20.0 if "gpu07" in (s, c) else 96.0)
    out = attribute_results(results)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu07"] and out["slow_links"] == []
    assert len(out["slow_nodes"][0]["results"]) == 7 * 4


def test_bisection_names_the_node_and_explains_the_all_node_runs():
    nodes = [f"gpu{i:02d}" for i in range(1, 9)]
    state = {"nodes": nodes, "runs": []}
    while not (plan := next_probe(state))["done"]:
        state["runs"].append({"nodes": plan["probe"], "slow": "gpu05" in plan["probe"]})
    results = [{"name": f"nccl-single-{n}", "group": "nccl_single", "nodes": [n], "value": 80.0} for n in nodes]
    results.append({"name": "nccl-multi-ib", "group": "nccl_multi_ib", "nodes": nodes, "value": 8.0})
    results.append({"name": "nccl-multi-tcp", "group": "nccl_multi_tcp", "nodes": nodes, "value": 8.0})
    out = attribute_results(results, baseline="median", bisection=plan)
    assert [n["node"] for n in out["slow_nodes"]] == ["gpu05"]
    assert out["slow_nodes"][0]["reasons"] == ["NCCL bisection: slow node: gpu05 (the others are fine)"]
    assert out["bisection"]["verdict"] == "slow_node" and out["slow_links"] == []
    unresolved = {"verdict": "unresolved", "slow_nodes": [], "suspects": nodes[:2], "summary": "two suspects"}
    assert attribute_results(results, baseline="median", bisection=unresolved)["slow_nodes"] == []


def test_a_slow_rail_run_is_a_rail():
    nodes = ["gpu01", "gpu02", "gpu03"]
    results = [
        {
            "name": f"nccl-rail-{r}",
            "group": "nccl_rail_ib",
            "nodes": nodes,
            "rail": r,
            "hca": r[:6],
            "scope": "rail",
            "value": 20.0 if r == "mlx5_1/1" else 90.0,
            "unit": "Gb/s",
        }
        for r in RAILS
    ]
    out = attribute_results(results, baseline="median")
    assert out["slow_nodes"] == []
    assert [(link["kind"], link["rail"]) for link in out["slow_links"]] == [("rail", "mlx5_1/1")]
    assert "the HCAs, cables or switches of that rail" in out["slow_links"][0]["reason"]


# --- every result in its own unit (issue 16): ResNet-50 images/s is not a Gb/s -------------------------------------


def resnet50(values):
    return [
        {"name": f"resnet50-node-{node}-fp32", "group": "resnet50_node_fp32", "nodes": [node], "value": value,
         "unit": "images/s", "images_per_second": value}
        for node, value in values.items()
    ]  # fmt: skip


def test_resnet50_images_per_second_is_judged_and_reported_in_images_per_second():
    out = attribute_results(resnet50({"gpu01": 1.22, "gpu02": 2.6, "gpu03": 2.5}), baseline="median")
    slow = out["results"][0]
    assert (slow["value"], slow["unit"], slow["threshold"], slow["verdict"]) == (1.22, "images/s", 1.25, "FAIL")
    assert (
        slow["reason"]
        == "1.22 images/s is below 1.25 images/s (50% of the median of resnet50_node_fp32 (2.5 images/s))"
    )
    assert not {"gbps", "threshold_gbps", "expected_gbps"} & set().union(*out["results"])
    assert out["slow_nodes"][0]["reasons"] == [f"its own run resnet50-node-gpu01-fp32: {slow['reason']}"]


def test_the_absolute_baseline_states_its_reference_in_the_results_unit():
    results = [{"name": "srun-nccl", "group": "srun_nccl", "nodes": ["a", "b"], "value": 20.0, "unit": "GB/s busbw"}]
    (judged,) = judge_results(results, expected=25.0)
    assert (judged["expected"], judged["threshold"], judged["verdict"]) == (25.0, 22.5, "FAIL")
    assert judged["reason"] == "20.0 GB/s busbw is below 22.5 GB/s busbw (90% of the expected 25.0 GB/s busbw)"


@pytest.mark.parametrize("retired", ["gbps", "threshold_gbps", "expected_gbps"])
def test_a_result_in_the_retired_shape_is_refused(retired):
    result = {"name": "resnet50-node-gpu01-fp32", "group": "g", "nodes": ["gpu01"], "value": 1.2, retired: 1.2}
    with pytest.raises(ValueError, match=f"'resnet50-node-gpu01-fp32' carries {retired}: the measurement is 'value'"):
        judge_results([result], baseline="median")
