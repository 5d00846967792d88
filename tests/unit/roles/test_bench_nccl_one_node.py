"""roles/gpuforge_bench/tasks/nccl.yml on a one-node play: the all-node and per-rail runs are skipped by their
condition (ansible_play_hosts | length > 1), and their skipped loop items are not results. A real single-H200 run
of benchmark.yml (2026-12-04, benchmarks/real_node/run.sh) failed its summary with "nccl-multi-tcp: the run
produced no measurement" for the three modes it never ran."""

from __future__ import annotations

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from gpu_stack_render import ROOT
from role_yaml import trusted

TASKS = yaml.safe_load((ROOT / "roles/gpuforge_bench/tasks/nccl.yml").read_text(encoding="utf-8"))
KEEP = next(t for t in TASKS if t["name"] == "Keep the results of the all-node and per-rail runs")


def skipped_loop(items: list) -> dict:
    """What Ansible registers for a looped task whose condition is false for every item."""
    results = [
        {"changed": False, "skipped": True, "skip_reason": "Conditional result was False", "item": item}
        for item in items
    ]
    return {"changed": False, "skipped": True, "msg": "All items skipped", "results": results}


def ran(mode: str, busbw: float) -> dict:
    return {"changed": False, "item": mode, "verdict": "PASS", "nccl": {"avg_busbw": busbw}}


def kept(multi: dict, rail: dict | None = None) -> list:
    variables = {"gpuforge_bench_nccl_multi": multi}
    if rail is not None:
        variables["gpuforge_bench_nccl_rail"] = rail
    return Templar(loader=DataLoader(), variables=trusted(variables)).template(trusted(KEEP["loop"]))


def test_a_one_node_play_keeps_no_all_node_or_rail_result():
    assert kept(skipped_loop(["tcp", "ib", "ib_gdr"]), skipped_loop(["mlx5_0/1"])) == []


def test_runs_that_ran_are_kept_with_their_scope():
    multi = {"changed": False, "results": [ran("tcp", 10.5), ran("ib", 90.1)]}
    rail = {"changed": False, "results": [ran("mlx5_0/1", 45.0)]}
    assert [(result["item"], scope) for result, scope in kept(multi, rail)] == [
        ("tcp", "multi"),
        ("ib", "multi"),
        ("mlx5_0/1", "rail"),
    ]
