"""The demo's closing summary: stages, faults, figures and the benchmark attribution."""

from __future__ import annotations

import json
from pathlib import Path

from gpuforge import demo
from gpuforge.demo import DEGRADED_NODE, Stage, bench_attribution, firing_alerts, summary_lines
from gpuforge.report import model
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


# --- the toolkit's failures apart from the cluster's faults (issue 48 item 7) ---
DEMO_RUN = Path(__file__).resolve().parents[2] / "fixtures" / "records" / "demo-run"
DEMO_SPEC = Path(__file__).resolve().parents[3] / "lab" / "specs" / "demo.yml"


def _demo_stages() -> list:
    """The stages of the recorded demo run, each with its runner summary where the run kept one (benchmark)."""
    summary = json.loads((DEMO_RUN / "summary.json").read_text(encoding="utf-8"))
    bench = json.loads((DEMO_RUN / "benchmark" / "summary.json").read_text(encoding="utf-8"))
    return [
        Stage(s["stage"], s["status"], s["rc"], s["detail"], bench if s["stage"] == "benchmark" else {})
        for s in summary["stages"]
    ]


def _bench_stage(failed_tasks, hosts=None) -> Stage:
    return Stage("benchmark", "failed", 2, "failed", {"failed_tasks": failed_tasks, "hosts": hosts or {}})


def test_injected_faults_of_the_demo_spec_and_the_degraded_link():
    injected = demo.injected_faults(DEMO_SPEC, demo.degraded_node(DEMO_SPEC))
    assert [(f.node, f.checks) for f in injected] == [
        ("gpu03", ("ib_port_state",)),
        ("gpu03", ("ecc_volatile_dbe",)),
        ("gpu03", ("xid",)),
        (DEGRADED_NODE, ()),
    ]
    assert injected[0].what == "ib_port_state (hca mlx5_2, port 1, state Down, phys_state Disabled)"
    assert injected[2].what == "xid (gpu 5, code 79)"


def test_the_link_is_degraded_only_where_a_third_gpu_node_can_place_it(tmp_path):
    """The demo's 3 GPU nodes: gpu02's link is degraded and must be found. The mixed-OS lab's 2 GPU nodes: every
    ib_write_bw pair has both ends, so a slow link could not be placed; nothing is degraded or expected."""
    assert demo.degraded_node(DEMO_SPEC) == DEGRADED_NODE
    mixed = DEMO_SPEC.parent / "mixed-os.yml"
    assert demo.degraded_node(mixed) is None
    assert all(not fault.what.startswith("link degraded") for fault in demo.injected_faults(mixed, None))
    two_gpu_nodes = tmp_path / "two.yml"
    two_gpu_nodes.write_text(
        "nodes:\n  - {name: gpu01, profile: dgx1-v100-edr}\n  - {name: gpu02, profile: dgx1-v100-edr}\n"
        "  - {name: storage01, profile: storage}\n  - {name: head01, profile: head}\n",
        encoding="utf-8",
    )
    assert demo.degraded_node(two_gpu_nodes) is None
    three = tmp_path / "three.yml"
    three.write_text(two_gpu_nodes.read_text(encoding="utf-8") + "  - {name: gpu03, profile: dgx1-v100-edr}\n")
    assert demo.degraded_node(three) == DEGRADED_NODE


def test_a_benchmark_that_failed_on_the_injected_faults_reads_as_a_verdict():
    """The recorded demo run: its benchmark stage failed (rc 2) on the assert over the ib_write_bw pairs of gpu03's
    dead port, a fault validation found. It reads as the cluster's verdict, with every injected fault found, and
    the demo exits 0."""
    data = model.load(DEMO_RUN)
    stages = demo.judge_stages(_demo_stages(), data)
    bench = next(stage for stage in stages if stage.name == "benchmark")
    assert bench.status == "faults"
    assert bench.detail == (
        "runs without a result on nodes with faults found: gpu02__gpu03__mlx5_2 (gpu02, gpu03), "
        "gpu03__gpu01__mlx5_2 (gpu03)"
    )
    verdict = demo.cluster_verdict(data, demo.injected_faults(DEMO_SPEC, demo.degraded_node(DEMO_SPEC)))
    assert verdict.found == {
        "gpu02": ["ib_write_bw slow node gpu02"],
        "gpu03": ["ecc_volatile_dbe", "ib_port_state", "xid"],
    }
    assert demo.demo_rc(stages, verdict) == 0
    lines = summary_lines(stages, data, Path("r.html"), None, None, verdict)
    assert "cluster verdict: FAIL, 4 faults found (4 injected, all found)" in lines
    assert "toolkit: every stage ran (failures were the cluster's faults)" in lines
    assert not any(line.split()[:3] == ["stage", "benchmark", "failed"] for line in lines)
    assert any(line.split()[:3] == ["stage", "benchmark", "faults"] for line in lines)


def test_an_ansible_error_or_an_unreachable_host_stays_a_toolkit_failure():
    data = model.load(DEMO_RUN)
    verdict = demo.cluster_verdict(data, demo.injected_faults(DEMO_SPEC, demo.degraded_node(DEMO_SPEC)))
    cases = {
        # A task that is not a verdict (nccl-tests missing on a node): the toolkit failed.
        "task error": _bench_stage([{"host": "gpu01", "task": "Run nccl-tests", "status": "failed", "msg": "rc 127"}]),
        # The verdict task, but a host could not be reached during the play.
        "unreachable": _bench_stage(
            [{"host": "gpu03", "task": demo.NO_RESULT_TASK, "status": "failed", "msg": "gpu02__gpu03__mlx5_2: x"}],
            {"gpu01": {"ok": 3, "unreachable": 1}},
        ),
        "unreachable task": _bench_stage([{"host": "gpu01", "task": "Gathering Facts", "status": "unreachable"}]),
        # ansible-playbook ended non-zero without a failed task (a syntax error, a missing role).
        "no task": _bench_stage([]),
        # A run without a result on nodes where nothing was found (see the next test for the data).
        "healthy nodes": _bench_stage(
            [{"host": "gpu01", "task": demo.NO_RESULT_TASK, "status": "failed", "msg": "x: gpu01__gpu02__mlx5_0: y"}]
        ),
        # The verdict task naming no run the records know.
        "unknown run": _bench_stage(
            [{"host": "gpu01", "task": demo.NO_RESULT_TASK, "status": "failed", "msg": "gpu09__gpu10__mlx5_0: z"}]
        ),
    }
    # gpu01 and gpu02 pass validation; without the benchmark attribution (gpu02 slow) nothing was found on them.
    unattributed = ReportData(records=[record for record in data.records if record["kind"] != "attribution"])
    for case, stage in cases.items():
        judged = demo.judge_stages([stage], unattributed if case == "healthy nodes" else data)
        assert judged[0].status == "failed", case
        assert demo.demo_rc(judged, verdict) == 1, case
        lines = summary_lines(judged, data, Path("r.html"), None, None, verdict)
        assert "toolkit: FAILED in benchmark (see the stages above)" in lines, case


def test_a_slow_healthy_node_is_not_a_run_without_a_result():
    """gpu01__gpu02__mlx5_0 is slow (gpu02's degraded link), not without a result: a message naming gpu02's run
    on the healthy-by-validation node gpu02 is explained by the attribution's fault on gpu02."""
    data = model.load(DEMO_RUN)
    stage = _bench_stage(
        [{"host": "gpu01", "task": demo.NO_RESULT_TASK, "status": "failed", "msg": "gpu01__gpu02__mlx5_0: slow"}]
    )
    assert demo.judge_stages([stage], data)[0].status == "faults"


def test_an_injected_fault_that_was_not_found_fails_the_demo():
    data = model.load(DEMO_RUN)
    injected = [
        *demo.injected_faults(DEMO_SPEC, demo.degraded_node(DEMO_SPEC)),
        demo.Injected("gpu01", "ecc_dbe (gpu 0, count 1)", ("ecc_volatile_dbe",)),
    ]
    verdict = demo.cluster_verdict(data, injected)
    assert [f.node for f in verdict.injected_missed] == ["gpu01"]
    stages = demo.judge_stages(_demo_stages(), data)
    assert demo.demo_rc(stages, verdict) == 1
    lines = demo.verdict_lines(stages, verdict)
    assert lines[0] == "cluster verdict: FAIL, 4 faults found (5 injected, 1 not found)"
    assert "  injected, not found: gpu01: ecc_dbe (gpu 0, count 1)" in lines


def test_a_healthy_cluster_passes():
    data = ReportData(records=[])
    verdict = demo.cluster_verdict(data, [])
    stages = [Stage("validate", "ok", 0, "successful"), Stage("benchmark", "ok", 0, "successful")]
    assert demo.verdict_lines(stages, verdict) == ["cluster verdict: PASS, no fault found", "toolkit: every stage ran"]
    assert demo.demo_rc(stages, verdict) == 0


def test_validate_without_report_only_fails_on_its_verdict():
    """validate.yml's assert over unhealthy nodes is a verdict when the records hold the faults, and the
    toolkit's failure when they hold none (the assert then failed on something else)."""
    data = model.load(DEMO_RUN)
    task = {"host": "gpu01", "task": demo.UNHEALTHY_TASK, "status": "failed", "msg": "Unhealthy GPU nodes: gpu03"}
    stage = Stage("validate", "failed", 2, "failed", {"failed_tasks": [task], "hosts": {}})
    assert demo.judge_stages([stage], data)[0].detail == "unhealthy nodes: gpu02, gpu03"
    assert demo.judge_stages([stage], ReportData(records=[]))[0].status == "failed"


def test_the_demo_run_summary_records_the_faults_stage_and_exits_0(tmp_path):
    """_finish over a copy of the recorded run: summary.json names the benchmark stage ``faults`` (its record a
    stage_result the report reads), the demo prints the verdict and returns 0."""
    import shutil
    import time

    run_dir = tmp_path / "20261126T150243Z-dbfcc6"
    shutil.copytree(DEMO_RUN, run_dir)
    printed = []
    rc = demo._finish(
        run_dir,
        _demo_stages(),
        time.time(),
        printed.append,
        demo.injected_faults(DEMO_SPEC, demo.degraded_node(DEMO_SPEC)),
    )
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert rc == 0 and (summary["rc"], summary["status"]) == (0, "successful")
    assert {s["stage"]: s["status"] for s in summary["stages"]}["benchmark"] == "faults"
    assert "cluster verdict: FAIL, 4 faults found (4 injected, all found)" in printed
    stage_records = {r["stage"]: r for r in model.load(run_dir).stages}
    assert (stage_records["benchmark"]["status"], stage_records["benchmark"]["verdict"]) == ("faults", "FAIL")
