"""The demo's closing summary: stages, faults, figures and the benchmark attribution."""

from __future__ import annotations

import json
from pathlib import Path

from gpuforge.demo import DEGRADED_NODE, Stage, bench_attribution, summary_lines
from gpuforge.report.model import ReportData


def test_attribution_is_read_from_the_benchmark_stage(tmp_path):
    bench = tmp_path / "benchmark" / "bench" / "20261122T000000Z"
    bench.mkdir(parents=True)
    summary = {
        "run_id": "20261122T000000Z",
        "netem_node": DEGRADED_NODE,
        "ib_write_bw": {"results": [{"name": "gpu01__gpu02__mlx5_0"}], "summary": f"slow: {DEGRADED_NODE} (...)"},
        "nccl": {"results": [], "summary": "no slow node or link"},
    }
    (bench / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    attribution = bench_attribution(tmp_path)
    assert attribution == {"ib_write_bw": f"slow: {DEGRADED_NODE} (...)"}
    lines = summary_lines([Stage("benchmark", "ok", 0, "successful")], ReportData(), Path("r.html"), attribution)
    assert f"  ib_write_bw: slow: {DEGRADED_NODE} (...)" in lines
    assert lines[-1] == "report: r.html"


def test_no_benchmark_stage_no_attribution(tmp_path):
    assert bench_attribution(tmp_path) == {}
