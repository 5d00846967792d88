"""A `gpuforge burnin` run folder for the report tests, written by the real code from real-format inputs.

``build_burnin_run(root, faults, rounds)`` runs ``gpuforge.burnin.run`` (the CLI's round loop, which judges through
src/gpuforge/burnin_judge.py and writes ``burnin/summary.json`` and the run's ``summary.json``) with a stand-in
for ansible-runner that writes, per round, what playbooks/burnin.yml leaves in ``burnin/round-<n>/``:

* ``bench/<id>/summary.json``: the real lab run's benchmark summary (tests/fixtures/records/demo-run/, see its
  SOURCES.md) with the lab's faults taken out (as tests/unit/cli/test_burnin.py does), rates scaled per round, and
  the records of those blocks as the role's summary.yml writes them;
* ``counters/<host>.json``: ``{node, before, after, max_growth, errors}`` with real perfquery PortCounters
  (tests/fixtures/perfquery/, parsed by gpuforge_perfquery.parse_perfquery) on four ports;
* ``dcgm/<host>.json``: validate_dcgm.yml's document (host, checked_at, level, ran, healthy, check, dcgm), its
  ``check`` judged by gpuforge_dcgm.judge_diag from the
  real ``dcgmi diag -r 3 -j`` of tests/fixtures/dcgmi/ (ok; warn when the skips are not allowed), or burnin.yml's
  rescue document ``{node, level, status: fail, detail}`` when the DCGM tasks failed.

Faults, per round number: ``{"grow": node}`` its mlx5_0/1 SymbolErrorCounter +12 and LinkErrorRecoveryCounter +1;
``{"slow": node}`` its single-node NCCL run and every ib_write_bw pair it is in at 0.6 x; ``{"dcgm_warn": node}``;
``{"dcgm_fail": node}``.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

from bench_summaries import written

from gpuforge import burnin
from gpuforge.paths import collection_import

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "tests/fixtures/records/demo-run/benchmark/bench/20261126T151133Z/summary.json"
PERFQUERY = ROOT / "tests/fixtures/perfquery/infiniband-diags_issue16_rhel75_perfquery_x.txt"
DCGMI = ROOT / "tests/fixtures/dcgmi/dcgm-3.3.1-r3-t400-skips.json"
NODES = ("gpu01", "gpu02", "gpu03")
PORTS = ("mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1")
ROUND_S = 600.0
# Run-to-run variation of the rates, per round (a few per cent, as on a healthy fabric).
JITTER = (1.0, 0.98, 1.01, 0.99, 1.02, 0.97)

# The demo fixture's faults: gpu02 counters grow in round 2 and its DCGM tasks fail in round 5; gpu03 warns in DCGM
# in round 1 and gets slower from round 4 on; gpu01 is healthy throughout.
DEMO_FAULTS = {
    1: {"dcgm_warn": "gpu03"},
    2: {"grow": "gpu02"},
    4: {"slow": "gpu03"},
    5: {"slow": "gpu03", "dcgm_fail": "gpu02"},
    6: {"slow": "gpu03"},
}


def _bench(bench_id: str, number: int, slow: str | None) -> dict:
    bench = json.loads(BENCH.read_text(encoding="utf-8"))
    bench["run_id"] = bench_id
    factor = JITTER[(number - 1) % len(JITTER)]
    bench["ib_write_bw"]["results"] = [r for r in bench["ib_write_bw"]["results"] if r["value"] is not None]
    for result in bench["ib_write_bw"]["results"]:
        value = 12.5 if "gpu02" in result["nodes"] else result["value"]
        value *= 0.6 if slow in result["nodes"] else 1.0
        result.update(value=round(value * factor, 2), verdict="PASS", run_failed=False, reason="healthy round")
    for result in bench["nccl"]["results"]:
        value = result["value"] * (0.6 if result["nodes"] == [slow] else 1.0)
        result["value"] = round(value * factor, 2)
    bench["ib_write_bw"]["slow_nodes"] = []
    return written(bench)


def _counters() -> dict:
    perfquery = collection_import("plugins.module_utils.gpuforge_perfquery")
    counters = perfquery.parse_perfquery(PERFQUERY.read_text(encoding="utf-8"))[0]["counters"]
    return {port: dict(counters) for port in PORTS}


def _dcgm(node: str, fault: dict) -> dict:
    if fault.get("dcgm_fail") == node:
        detail = "the DCGM tasks failed: Run the DCGM diagnostic: dcgmi diag -r 3 did not finish in 3600 s on " + node
        return {"node": node, "level": 3, "status": "fail", "detail": detail}
    dcgm = collection_import("plugins.module_utils.gpuforge_dcgm")
    parsed = dcgm.parse_diag(DCGMI.read_text(encoding="utf-8"))
    check = dcgm.judge_diag(parsed, 3, None, fault.get("dcgm_warn") != node)
    document = {"host": node, "checked_at": "2026-11-18T11:06:40Z", "level": 3, "ran": True}
    return dict(document, healthy=check["status"] != "FAIL", check=check, dcgm=parsed)


class _Round:
    """run_playbook's stand-in: writes the round's files, advances the clock, returns the round's run summary."""

    def __init__(self, clock, faults):
        self.clock, self.faults, self.number = clock, faults, 0
        self.counters = {node: _counters() for node in NODES}

    def __call__(self, request, round_dir, view):
        self.number += 1
        fault = self.faults.get(self.number, {})
        extra = dict(v.split("=", 1) for v in request.extra_vars if "=" in v)
        bench_dir = round_dir / "bench" / extra["gpuforge_bench_run_id"]
        bench_dir.mkdir(parents=True)
        bench = _bench(extra["gpuforge_bench_run_id"], self.number, fault.get("slow"))
        (bench_dir / "summary.json").write_text(json.dumps(bench, indent=2), encoding="utf-8")
        for folder in ("counters", "dcgm"):
            (round_dir / folder).mkdir()
        for node in NODES:
            before = copy.deepcopy(self.counters[node])
            if fault.get("grow") == node:
                self.counters[node]["mlx5_0/1"]["SymbolErrorCounter"] += 12
                self.counters[node]["mlx5_0/1"]["LinkErrorRecoveryCounter"] += 1
            document = {"node": node, "before": before, "after": copy.deepcopy(self.counters[node])}
            document.update(max_growth={}, errors=[])
            (round_dir / "counters" / f"{node}.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
            (round_dir / "dcgm" / f"{node}.json").write_text(json.dumps(_dcgm(node, fault), indent=2), encoding="utf-8")
        self.clock.now += ROUND_S
        hosts = {n: {"ok": 40, "changed": 12, "failed": 0, "unreachable": 0, "skipped": 3} for n in NODES}
        summary = {"rc": 0, "status": "successful", "hosts": hosts, "failed_tasks": []}
        (round_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        return summary


class _Clock:
    def __init__(self):
        self.now = 1_795_000_000.0

    def __call__(self):
        return self.now


def build_burnin_run(root: Path, faults=None, rounds: int = 6, fraction: float = 0.9) -> Path:
    """The run folder ``root/<run-id>/`` of a burn-in of ``rounds`` rounds with ``faults`` (DEMO_FAULTS when None)."""
    root.mkdir(parents=True, exist_ok=True)
    args = argparse.Namespace(
        duration=rounds * ROUND_S,
        inventory=str(ROOT / "inventories" / "lab" / "hosts.yml"),
        limit=None,
        extra_vars=[],
        rounds_max=rounds,
        slowdown_fraction=fraction,
        json=False,
    )
    clock = _Clock()
    before = set(root.iterdir())
    burnin.run(args, runner=_Round(clock, DEMO_FAULTS if faults is None else faults), clock=clock,
               artifacts_root=root, log=lambda line: None)  # fmt: skip
    (run_dir,) = set(root.iterdir()) - before
    return run_dir
