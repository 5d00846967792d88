"""The demo's closing summary: stages, faults, figures and the benchmark attribution."""

from __future__ import annotations

import json
from pathlib import Path

from gpuforge.demo import DEGRADED_NODE, Stage, bench_attribution, firing_alerts, summary_lines
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


def _alert(instance, name, state="firing"):
    return {"labels": {"alertname": name, "instance": instance, "severity": "critical"}, "state": state}


def test_firing_alerts_by_node_from_the_prometheus_document(tmp_path):
    # The /api/v1/alerts shape (Prometheus HTTP API: data.alerts[] with labels, annotations, state, activeAt).
    document = {
        "status": "success",
        "data": {
            "alerts": [
                _alert("gpu03", "GpuXidFatal"),
                _alert("gpu03", "GpuEccDoubleBitErrors"),
                _alert("gpu03", "GpuEccDoubleBitErrors"),
                _alert("gpu03", "IbPortDown", state="pending"),
                _alert("gpu01", "GpuThermalSlowdown", state="inactive"),
                "not an alert",
                {"state": "firing", "labels": None},
            ]
        },
    }
    path = tmp_path / "alerts.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    alerts = firing_alerts(path)
    assert alerts == {"gpu03": ["GpuEccDoubleBitErrors", "GpuXidFatal"]}
    lines = summary_lines([Stage("alerts", "ok", 0, "successful")], ReportData(), Path("r.html"), None, alerts)
    assert "  gpu03: GpuEccDoubleBitErrors, GpuXidFatal" in lines


def test_alerts_not_read_are_said_so(tmp_path):
    assert firing_alerts(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    assert firing_alerts(tmp_path / "bad.json") is None
    lines = summary_lines([], ReportData(), Path("r.html"), None, None)
    assert "monitoring alerts: not read" in lines
    assert "monitoring alerts firing (Prometheus): none" in summary_lines([], ReportData(), Path("r.html"), None, {})


def test_consequences_are_printed_under_their_root_cause():
    # Records of a real demo run (tests/fixtures/records/SOURCES.md): on gpu03 the GPUDirect RDMA loopback failed on
    # the port that ib_port_state already failed, and says so in caused_by.
    from gpuforge.report import model

    run = Path(__file__).resolve().parents[2] / "fixtures" / "records" / "demo-run" / "validate"
    data = model.load(run)
    lines = summary_lines([Stage("validate", "ok", 0, "successful")], data, Path("r.html"))
    faults = [line for line in lines if line.startswith("  fault: ") or line.startswith("    caused by it: ")]
    roots = [line.split(":")[2].strip() for line in faults if line.startswith("  fault: ")]
    assert roots == ["ecc_volatile_dbe", "ib_port_state", "xid"]
    port = next(i for i, line in enumerate(faults) if line.startswith("  fault: gpu03: ib_port_state:"))
    assert faults[port + 1].startswith("    caused by it: gdr_ib_write_bw: ")
    assert sum("gdr_ib_write_bw" in line for line in faults) == 1
