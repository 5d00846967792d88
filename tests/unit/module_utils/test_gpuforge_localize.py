"""Fault localization: rounds of disjoint ib_write_bw pairs per rail, and the NCCL bisection planner."""

from __future__ import annotations

import importlib
import itertools

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_localize import (
    bisection_bound,
    ib_schedule,
    next_probe,
    pair_name,
    round_robin_rounds,
)


def names(count):
    return [f"gpu{i:02d}" for i in range(1, count + 1)]


@pytest.mark.parametrize("count", range(2, 17))
def test_rounds_cover_every_pair_once_with_disjoint_pairs(count):
    nodes = names(count)
    rounds = round_robin_rounds(nodes)
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    seen = []
    for current in rounds:
        members = [node for pair in current["pairs"] for node in pair]
        assert len(members) == len(set(members)), f"a node is in two pairs of one round: {current}"
        assert len(current["pairs"]) == count // 2
        if count % 2:
            assert current["bye"] in nodes and current["bye"] not in members
            assert set(members) | {current["bye"]} == set(nodes)
        else:
            assert current["bye"] is None and set(members) == set(nodes)
        seen += [frozenset(pair) for pair in current["pairs"]]
    assert sorted(seen, key=sorted) == sorted((frozenset(p) for p in itertools.combinations(nodes, 2)), key=sorted)
    if count % 2:
        assert sorted(current["bye"] for current in rounds) == nodes


def test_servers_alternate_so_no_node_serves_every_pair():
    for count in (3, 4, 7, 8, 16):
        served = {node: 0 for node in names(count)}
        for current in round_robin_rounds(names(count)):
            for server, _client in current["pairs"]:
                served[server] += 1
        # each node has count - 1 pairs and serves in half of them, rounded either way
        assert set(served.values()) <= {(count - 1) // 2, count // 2}, served


def test_rounds_of_fewer_than_two_nodes_and_duplicates():
    assert round_robin_rounds([]) == [] and round_robin_rounds(["gpu01"]) == []
    with pytest.raises(ValueError, match="unique"):
        round_robin_rounds(["gpu01", "gpu01"])


def facts(active, inactive=(), rate=100):
    ports = {*active, *inactive}
    hcas = sorted({port.split("/")[0] for port in ports})
    return {
        "active_ports": list(active),
        "inactive_ports": list(inactive),
        "hcas": [
            {"name": hca, "ports": [{"port": 1, "rate_gbit_per_s": 10 if f"{hca}/1" in inactive else rate}]}
            for hca in hcas
        ],
    }


RAILS = ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]


def demo_facts():
    """The demo lab: three DGX-1 profiles with four EDR ports; gpu03's mlx5_2 port is Down."""
    return {
        "gpu01": facts(RAILS),
        "gpu02": facts(RAILS),
        "gpu03": facts([r for r in RAILS if r != "mlx5_2/1"], ["mlx5_2/1"]),
    }


def test_schedule_of_the_demo_lab_per_rail():
    schedule = ib_schedule(["gpu01", "gpu02", "gpu03"], demo_facts())
    assert [(entry["rail"], entry["round"], entry["rounds"]) for entry in schedule] == [
        (rail, number, 3) for rail in RAILS for number in (1, 2, 3)
    ]
    pairs = [pair for entry in schedule for pair in entry["pairs"]]
    assert len(pairs) == 12  # 3 pairs on each of 4 rails, one pair per round (n = 3: one node sits out)
    down = [pair for pair in pairs if not pair["run"]]
    assert sorted(pair["name"] for pair in down) == sorted(
        pair_name(p["server"], p["client"], "mlx5_2")
        for p in pairs
        if p["rail"] == "mlx5_2/1" and "gpu03" in p.values()
    )
    assert all(pair["inactive"] == ["gpu03"] for pair in down) and len(down) == 2
    # the line rate comes from an Active end, never from the Down port (ibstat reports 10 there)
    assert {pair["line_rate_gbit_per_s"] for pair in pairs} == {100}


def test_schedule_skips_nodes_without_the_rail_and_names_other_ports():
    infiniband = {"a": facts(["mlx5_0/1", "mlx5_0/2"]), "b": facts(["mlx5_0/1"]), "c": facts(["mlx5_0/1", "mlx5_0/2"])}
    schedule = ib_schedule(["a", "b", "c"], infiniband)
    port2 = [pair for entry in schedule if entry["rail"] == "mlx5_0/2" for pair in entry["pairs"]]
    assert [(pair["server"], pair["client"]) for pair in port2] in ([("a", "c")], [("c", "a")])
    assert port2[0]["name"].endswith("__mlx5_0_p2") and port2[0]["port"] == 2
    assert ib_schedule(["a"], {"a": facts(["mlx5_0/1"])}) == []


def drive(nodes, slow, known_slow=()):
    """Run the planner against a cluster where the nodes in ``slow`` spoil every run they are in."""
    state = {"nodes": nodes, "runs": [], "known_slow": list(known_slow)}
    for _ in range(64):
        plan = next_probe(state)
        if plan["done"]:
            return plan, state["runs"]
        assert len(plan["probe"]) >= 2, plan
        state["runs"].append({"nodes": plan["probe"], "slow": bool(set(plan["probe"]) & set(slow))})
    raise AssertionError("the planner never concluded")


@pytest.mark.parametrize("slow", names(8))
def test_one_slow_node_among_8_is_named_within_5_runs(slow):
    plan, runs = drive(names(8), {slow})
    assert bisection_bound(8) == 5
    assert plan["verdict"] == "slow_node" and plan["slow_nodes"] == [slow]
    assert len(runs) <= 5 and runs[0]["nodes"] == names(8)


@pytest.mark.parametrize("count", range(3, 17))
def test_one_slow_node_is_named_within_the_bound_for_every_size_and_position(count):
    bound = (count - 1).bit_length() + 2  # ceil(log2 N) + 2
    assert bisection_bound(count) == bound
    for slow in names(count):
        plan, runs = drive(names(count), {slow})
        assert (plan["verdict"], plan["slow_nodes"]) == ("slow_node", [slow]), (count, slow, runs)
        assert len(runs) <= bound


def test_a_healthy_cluster_is_not_bisected():
    plan, runs = drive(names(8), set())
    assert plan["verdict"] == "ok" and len(runs) == 1 and plan["slow_nodes"] == []


def test_a_node_slow_alone_is_checked_by_one_run_of_the_others():
    plan, runs = drive(names(8), {"gpu06"}, known_slow=["gpu06"])
    assert plan["verdict"] == "slow_node" and plan["slow_nodes"] == ["gpu06"]
    assert [run["nodes"] for run in runs] == [names(8), [n for n in names(8) if n != "gpu06"]]


def test_two_slow_nodes_are_not_passed_off_as_one():
    for first, second in itertools.combinations(names(8), 2):
        plan, runs = drive(names(8), {first, second})
        assert plan["verdict"] == "unresolved", (first, second, runs, plan)
        assert {first, second} <= set(plan["suspects"])
        assert len(runs) <= bisection_bound(8)


def test_two_nodes_cannot_be_bisected():
    plan, runs = drive(names(2), {"gpu02"})
    assert plan["verdict"] == "unresolved" and plan["suspects"] == names(2) and len(runs) == 1


def test_the_bound_stops_the_bisection():
    state = {"nodes": names(8), "runs": [{"nodes": names(8), "slow": True}], "max_runs": 2}
    plan = next_probe(state)
    assert not plan["done"] and plan["probe"] == names(8)[:4]
    state["runs"].append({"nodes": plan["probe"], "slow": True})
    plan = next_probe(state)
    assert plan["done"] and plan["verdict"] == "unresolved" and plan["suspects"] == names(8)[:4]


def test_filters_expose_the_planner_and_the_schedule():
    plugin = importlib.import_module("ansible_collections.gpuforge.cluster.plugins.filter.gpuforge")
    filters = plugin.FilterModule().filters()
    assert filters["gpuforge_nccl_next_probe"]({"nodes": names(4), "runs": []})["probe"] == names(4)
    assert len(filters["gpuforge_ib_schedule"](["gpu01", "gpu02", "gpu03"], demo_facts())) == 12
