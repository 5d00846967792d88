"""The NCCL bisection of this scenario names the slowed node, and only it, within ceil(log2 N)+2 runs.

Reads the records benchmark.yml wrote on the controller (Molecule's ephemeral directory, run id nccl-bisect):
nccl/bisection.json (the planner's conclusion and every run) and the runs' parsed results.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

testinfra_hosts = ["bisect01"]

NODES = [f"bisect0{i}" for i in range(1, 9)]
SLOW = "bisect06"


def _nccl_dir() -> Path:
    return Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "artifacts" / "bench" / "nccl-bisect" / "nccl"


def _bisection() -> dict:
    return json.loads((_nccl_dir() / "bisection.json").read_text(encoding="utf-8"))


def test_all_node_run_is_below_the_threshold():
    first = _bisection()["runs"][0]
    assert sorted(first["nodes"]) == NODES
    assert first["slow"] is True, first


def test_bisection_names_the_slow_node_only():
    bisection = _bisection()
    assert bisection["done"] is True, bisection
    assert bisection["slow_nodes"] == [SLOW], bisection["summary"]


def test_bisection_stays_within_its_run_budget():
    runs = _bisection()["runs"]
    budget = math.ceil(math.log2(len(NODES))) + 2
    assert len(runs) <= budget, [run["nodes"] for run in runs]


def test_every_probe_without_the_slow_node_is_fast_and_every_probe_with_it_slow():
    for run in _bisection()["runs"]:
        assert run["slow"] is (SLOW in run["nodes"]), run
