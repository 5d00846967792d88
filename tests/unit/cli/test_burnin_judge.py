"""Burn-in judgement (src/gpuforge/burnin_judge.py) on rounds built from a real lab run's bench summary.

The rounds start from tests/fixtures/records/demo-run/.../summary.json (a 3-node lab run: gpu02's links were
degraded, gpu03's mlx5_2 was down) and change only what a burn-in would see change between rounds: a node's rates,
its port counters (real perfquery output, tests/fixtures/perfquery/) and the DCGM result. Each round's summary is
written as the role writes it (its records built from the changed blocks) and read as the CLI reads it
(gpuforge_records.bench_summary_records). Every record is validated against schemas/burnin-round.schema.json.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_perfquery as pq
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records_mod
from bench_summaries import written

from gpuforge import burnin_judge as burnin

ROOT = Path(__file__).resolve().parents[3]
BENCH = (
    ROOT / "tests" / "fixtures" / "records" / "demo-run" / "benchmark" / "bench" / "20261126T151133Z" / "summary.json"
)
PERFQUERY = ROOT / "tests" / "fixtures" / "perfquery" / "infiniband-diags_issue16_rhel75_perfquery_x.txt"
SCHEMA = json.loads((ROOT / "schemas" / "burnin-round.schema.json").read_text(encoding="utf-8"))
try:  # the controller's venv has it; the older target Python that also runs these tests does not
    import jsonschema
except ImportError:  # pragma: no cover - test_target_python.py's run; the schema tests run with the venv
    jsonschema = None
NODES = ["gpu01", "gpu02", "gpu03"]
PORTS = ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]
OK_RUN = {
    "rc": 0,
    "status": "successful",
    "hosts": {n: {"ok": 30, "changed": 10, "failed": 0, "unreachable": 0, "skipped": 2} for n in NODES},
    "failed_tasks": [],
}


def real_bench() -> dict:
    return json.loads(BENCH.read_text(encoding="utf-8"))


def healthy_bench() -> dict:
    """The real summary with the lab's two faults taken out: gpu02's pairs at the rate of the others and gpu03's
    mlx5_2 pair measured, no slow node - what a healthy 3-node lab round writes."""
    bench = real_bench()
    for result in bench["ib_write_bw"]["results"]:
        if "gpu02" in result["nodes"] or result["value"] is None:
            result["value"] = 12.5
        result.update(verdict="PASS", run_failed=False, reason="healthy round")
    bench["ib_write_bw"]["slow_nodes"] = []
    if not any(r["name"] == "gpu03__gpu01__mlx5_2" for r in bench["ib_write_bw"]["results"]):
        extra = copy.deepcopy(bench["ib_write_bw"]["results"][0])
        extra.update(name="gpu03__gpu01__mlx5_2", nodes=["gpu03", "gpu01"], hca="mlx5_2", value=12.6)
        bench["ib_write_bw"]["results"].append(extra)
    return bench


def scale(bench: dict, node: str, factor: float, benchmark: str) -> dict:
    """The node's results of one benchmark at factor x their rate (ib_write_bw: every pair the node is in;
    nccl: its single-node run)."""
    bench = copy.deepcopy(bench)
    for result in bench[benchmark]["results"]:
        alone = result["nodes"] == [node]
        if result["value"] is not None and (alone if benchmark == "nccl" else node in result["nodes"]):
            result["value"] = round(result["value"] * factor, 2)
    return bench


def port_counters(**grown) -> dict:
    """{hca/port: PortCounters} of every port: the real perfquery output's counters, plus grown {port: {name: n}}."""
    base = pq.parse_perfquery(PERFQUERY.read_text(encoding="utf-8"))[0]["counters"]
    found = {}
    for port in PORTS:
        counters = dict(base)
        for name, value in grown.get(port.replace("/", "_"), {}).items():
            counters[name] = counters.get(name, 0) + value
        found[port] = counters
    return found


def counters_doc(node, before=None, after=None, limits=None) -> dict:
    before = before or port_counters()
    return {"node": node, "before": before, "after": after or before, "max_growth": limits or {}, "errors": []}


def dcgm_doc(node, status="PASS", fault="") -> dict:
    """The document playbooks/tasks/validate_dcgm.yml writes (its dcgm_diag check)."""
    return {
        "host": node,
        "checked_at": "2026-11-23T19:00:00Z",
        "level": 3,
        "ran": True,
        "healthy": status != "FAIL",
        "check": {"name": "dcgm_diag", "status": status, "fault": fault},
        "dcgm": None,
    }


def round_of(number, bench, counters=None, dcgm=None, run=None) -> list:
    counters = counters or {n: counters_doc(n) for n in NODES}
    dcgm = dcgm or {n: dcgm_doc(n) for n in NODES}
    started = f"2026-11-23T{10 + number:02d}:00:00Z"
    ended = f"2026-11-23T{10 + number:02d}:20:00Z"
    bench_records = records_mod.bench_summary_records(written(bench))  # as the role writes it and the CLI reads it
    found = burnin.round_records(
        NODES, number, started, ended, bench_records, counters, dcgm, run or OK_RUN, "burnin-test"
    )
    for record in found:
        validate(record)
    return found


def validate(record):
    """Every record against schemas/burnin-round.schema.json (where jsonschema is installed)."""
    if jsonschema is not None:
        jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(record)


def by_node(found) -> dict:
    return {record["node"]: record for record in found}


def test_schema_is_valid_draft_2020_12_and_has_teeth():
    schema_lib = pytest.importorskip("jsonschema")
    schema_lib.Draft202012Validator.check_schema(SCHEMA)
    record = round_of(1, healthy_bench())[0]
    validate(record)
    for broken in (
        dict(record, verdict="GOOD"),
        dict(record, round=0),
        {k: v for k, v in record.items() if k != "dcgm"},
    ):
        with pytest.raises(schema_lib.ValidationError):
            validate(broken)


def test_a_round_keeps_gbit_per_s_whatever_unit_the_summary_names():
    # The summary's results hold value in their unit (issue 16); the round record keeps Gb/s (busbw_gbit_per_s,
    # gbit_per_s).
    bench = healthy_bench()
    single = next(r for r in bench["nccl"]["results"] if r["name"] == "nccl-single-gpu01")
    assert (single["value"], single["unit"]) == (5.82, "Gb/s")
    single.update(value=0.7275, unit="GB/s busbw")  # the same busbw in nccl-tests' GB/s
    pair = next(r for r in bench["ib_write_bw"]["results"] if r["name"] == "gpu03__gpu01__mlx5_1")
    pair.update(value=99.0, unit="images/s")  # not a bandwidth: not taken for one, though above gpu01__gpu02's
    gpu01 = by_node(round_of(1, bench))["gpu01"]
    assert gpu01["nccl"]["busbw_gbit_per_s"] == 5.82
    assert gpu01["ib_write_bw"]["mlx5_1"]["pairs"]["gpu03__gpu01__mlx5_1"] is None
    assert gpu01["ib_write_bw"]["mlx5_1"]["gbit_per_s"] == 12.5


def test_healthy_rounds_pass_with_the_measurements_recorded():
    found = []
    for number in (1, 2, 3):
        found += round_of(number, healthy_bench())
    rec = by_node(found[:3])
    gpu01 = rec["gpu01"]
    assert gpu01["verdict"] == "PASS" and gpu01["reasons"] == []
    assert gpu01["nccl"]["busbw_gbit_per_s"] == 5.82  # nccl-single-gpu01 of the fixture
    # every NCCL run over gpu01: its single-node run, the three multi-node runs and the four per-rail runs
    rails = {f"nccl-rail-mlx5_{n}-1" for n in range(4)}
    assert (
        set(gpu01["nccl"]["runs"])
        == {"nccl-single-gpu01", "nccl-multi-tcp", "nccl-multi-ib", "nccl-multi-ib_gdr"} | rails
    )
    # per rail: the best of the node's pairs (gpu03__gpu01__mlx5_1 is 11.46 in the fixture, gpu01__gpu02 12.5)
    assert gpu01["ib_write_bw"]["mlx5_1"]["gbit_per_s"] == 12.5
    assert gpu01["ib_write_bw"]["mlx5_1"]["pairs"] == {"gpu01__gpu02__mlx5_1": 12.5, "gpu03__gpu01__mlx5_1": 11.46}
    assert set(gpu01["ib_write_bw"]["mlx5_1"]["pairs"]) == {"gpu01__gpu02__mlx5_1", "gpu03__gpu01__mlx5_1"}
    assert gpu01["counters"]["read"] and gpu01["counters"]["over_limit"] == {}
    assert gpu01["counters"]["ports"]["mlx5_0/1"]["SymbolErrorCounter"] == 0
    assert gpu01["dcgm"] == {"status": "pass", "level": 3, "detail": ""}
    trend = burnin.judge_trend(found)
    assert {n: t["verdict"] for n, t in trend.items()} == dict.fromkeys(NODES, "PASS")
    assert trend["gpu01"]["rounds"] == 3 and trend["gpu01"]["slowed"] == []
    assert trend["gpu01"]["series"]["nccl single-node busbw"] == [5.82, 5.82, 5.82]


def test_the_real_degraded_run_blames_the_node_its_failed_pair_names():
    """gpu02__gpu03__mlx5_2 failed because 'mlx5_2/1 is not Active on gpu03': gpu03 fails, gpu02 does not
    (it is WARN: the attribution named it slow - the lab degraded its link)."""
    rec = by_node(round_of(1, real_bench()))
    assert rec["gpu03"]["verdict"] == "FAIL"
    assert rec["gpu03"]["run"]["failed"]
    assert any("not Active on gpu03" in r for r in rec["gpu03"]["run"]["reasons"])
    assert rec["gpu02"]["verdict"] == "WARN"
    assert not rec["gpu02"]["run"]["failed"]
    assert rec["gpu02"]["reasons"][0].startswith("ib_write_bw: named slow")
    assert rec["gpu01"]["verdict"] == "PASS"


def test_counters_that_grew_in_one_round_fail_the_node():
    found = round_of(1, healthy_bench())
    before = port_counters()
    after = port_counters(mlx5_1_1={"SymbolErrorCounter": 37, "PortRcvErrors": 2})
    counters = {n: counters_doc(n) for n in NODES}
    counters["gpu02"] = counters_doc("gpu02", before, after)
    found += round_of(2, healthy_bench(), counters=counters)
    # round 3 starts from round 2's values: no more growth
    counters["gpu02"] = counters_doc("gpu02", after, after)
    found += round_of(3, healthy_bench(), counters=counters)
    rec2 = by_node(found[3:6])["gpu02"]
    assert rec2["verdict"] == "FAIL"
    assert rec2["counters"]["over_limit"] == {"mlx5_1/1": {"PortRcvErrors": 2, "SymbolErrorCounter": 37}}
    assert "Error counters grew" in rec2["remedy"]
    trend = burnin.judge_trend(found)
    assert trend["gpu02"]["verdict"] == "FAIL"
    assert {(g["round"], g["port"], g["counter"], g["growth"]) for g in trend["gpu02"]["errors_grew"]} == {
        (2, "mlx5_1/1", "SymbolErrorCounter", 37),
        (2, "mlx5_1/1", "PortRcvErrors", 2),
    }
    assert trend["gpu02"]["counter_totals"]["mlx5_1/1"]["SymbolErrorCounter"] == 37
    assert trend["gpu01"]["verdict"] == trend["gpu03"]["verdict"] == "PASS"


def test_growth_within_the_inventory_limit_passes():
    limits = {"SymbolErrorCounter": 50}
    after = port_counters(mlx5_0_1={"SymbolErrorCounter": 37})
    counters = {n: counters_doc(n, limits=limits) for n in NODES}
    counters["gpu01"] = counters_doc("gpu01", port_counters(), after, limits)
    rec = by_node(round_of(1, healthy_bench(), counters=counters))["gpu01"]
    assert rec["verdict"] == "PASS"
    assert rec["counters"]["ports"]["mlx5_0/1"]["SymbolErrorCounter"] == 37
    assert rec["counters"]["limits"] == {"SymbolErrorCounter": 50}


def test_a_saturated_counter_warns():
    full = port_counters(mlx5_0_1={"SymbolErrorCounter": 65535})
    counters = {n: counters_doc(n) for n in NODES}
    counters["gpu03"] = counters_doc("gpu03", full, full)
    rec = by_node(round_of(1, healthy_bench(), counters=counters))["gpu03"]
    assert rec["verdict"] == "WARN"
    assert rec["counters"]["saturated"] == {"mlx5_0/1": ["SymbolErrorCounter"]}


def test_a_node_that_got_slower_fails_and_its_partners_do_not():
    """gpu01's NCCL busbw drops to 70 % from round 4, gpu02's links to 60 %: both got slower; gpu01 and gpu03 keep
    their ib_write_bw pairs with each other at full rate, so gpu02's slow links do not make them slower (a node got
    slower on a rail only when every one of its pairs there did)."""
    found = []
    for number in range(1, 7):
        bench = healthy_bench()
        if number >= 4:
            bench = scale(bench, "gpu01", 0.7, "nccl")
            bench = scale(bench, "gpu02", 0.6, "ib_write_bw")
        found += round_of(number, bench)
    trend = burnin.judge_trend(found)
    assert trend["gpu01"]["verdict"] == "FAIL"
    slowed = {s["metric"]: s for s in trend["gpu01"]["slowed"]}
    assert set(slowed) == {"nccl single-node busbw"}
    assert slowed["nccl single-node busbw"]["window"] == 3
    assert slowed["nccl single-node busbw"]["ratio"] == pytest.approx(0.7, abs=0.01)
    assert trend["gpu02"]["verdict"] == "FAIL"
    assert {s["metric"] for s in trend["gpu02"]["slowed"]} == {f"ib_write_bw mlx5_{i}" for i in range(4)}
    assert trend["gpu03"]["verdict"] == "PASS"
    assert "Throttl" in trend["gpu01"]["remedy"] or "throttling" in trend["gpu01"]["remedy"]
    # The fraction is the parameter: at 0.5 a drop to 70 % / 60 % is within it.
    loose = burnin.judge_trend(found, slowdown_fraction=0.5)
    assert {n: t["verdict"] for n, t in loose.items()} == dict.fromkeys(NODES, "PASS")


def test_one_slow_round_in_the_middle_is_not_a_slowdown():
    found = []
    for number in range(1, 7):
        bench = scale(healthy_bench(), "gpu01", 0.5, "nccl") if number == 3 else healthy_bench()
        found += round_of(number, bench)
    assert burnin.judge_trend(found)["gpu01"]["verdict"] == "PASS"


def test_a_failed_round_fails_the_node_it_failed_on():
    found = round_of(1, healthy_bench())
    run = copy.deepcopy(OK_RUN)
    run.update(rc=4, status="failed")
    run["hosts"]["gpu03"].update(unreachable=1)
    run["failed_tasks"] = [
        {"host": "gpu03", "task": "Run nccl-tests", "status": "unreachable", "msg": "Failed to connect to the host"}
    ]
    counters = {n: counters_doc(n) for n in ("gpu01", "gpu02")}
    dcgm = {n: dcgm_doc(n) for n in ("gpu01", "gpu02")}
    found += round_of(2, healthy_bench(), counters=counters, dcgm=dcgm, run=run)
    found += round_of(3, healthy_bench())
    rec = by_node(found[3:6])
    assert rec["gpu03"]["verdict"] == "FAIL"
    assert rec["gpu03"]["run"]["reasons"][0].startswith("unreachable: Run nccl-tests")
    assert rec["gpu03"]["dcgm"]["status"] == "unknown"
    assert rec["gpu01"]["verdict"] == "PASS"
    trend = burnin.judge_trend(found)
    assert trend["gpu03"]["failed_rounds"] == [2]
    assert trend["gpu03"]["verdict"] == "FAIL"
    assert trend["gpu01"]["verdict"] == "PASS"


def test_a_round_that_wrote_nothing_for_a_node_fails_it():
    bench = healthy_bench()
    found = round_of(1, bench, counters={}, dcgm={}, run={"rc": 1, "status": "failed", "hosts": {}, "failed_tasks": []})
    assert all(r["verdict"] == "FAIL" for r in found)
    # the bench summary named the nodes, so they have data; the run failed with no host to blame: everyone
    assert all(r["run"]["failed"] for r in found)


def test_dcgm_results_in_both_shapes():
    assert burnin.dcgm_result(dcgm_doc("gpu01", "FAIL", "diagnostic on 00000000:07:00.0")) == {
        "status": "fail",
        "level": 3,
        "detail": "diagnostic on 00000000:07:00.0",
    }
    assert burnin.dcgm_result(dcgm_doc("gpu01", "WARN", "w"))["status"] == "warn"
    skipped = {"node": "gpu01", "level": 3, "status": "skipped", "detail": "skipped: not installed"}
    assert burnin.dcgm_result(skipped) == {"status": "skipped", "level": 3, "detail": "skipped: not installed"}
    assert burnin.dcgm_result({"host": "gpu01", "level": 3, "ran": False})["status"] == "skipped"
    assert burnin.dcgm_result({"something": "else"}) is None
    dcgm = {n: dcgm_doc(n) for n in NODES}
    dcgm["gpu02"] = dcgm_doc("gpu02", "FAIL", "DCGM diagnostic level 3 failed: targeted_stress on GPU 3")
    found = round_of(1, healthy_bench(), dcgm=dcgm)
    found += round_of(2, healthy_bench(), dcgm={n: dict(skipped, node=n) for n in NODES})
    rec = by_node(found[:3])
    assert rec["gpu02"]["verdict"] == "FAIL" and "targeted_stress" in rec["gpu02"]["reasons"][0]
    # skipped (not installed) is reported, and does not fail or warn a node
    assert by_node(found[3:])["gpu01"]["dcgm"]["status"] == "skipped"
    assert by_node(found[3:])["gpu01"]["verdict"] == "PASS"
    trend = burnin.judge_trend(found)
    assert trend["gpu02"]["verdict"] == "FAIL" and trend["gpu02"]["dcgm"] == ["fail", "skipped"]
    assert trend["gpu01"]["dcgm"] == ["pass", "skipped"]


def test_one_round_is_judged_without_a_trend():
    trend = burnin.judge_trend(round_of(1, healthy_bench()))
    assert trend["gpu01"]["verdict"] == "PASS"
    assert "one round only" in trend["gpu01"]["reasons"][-1]


@pytest.mark.parametrize(("fraction", "window"), [(0, 3), (1.5, 3), (0.9, 0)])
def test_bad_parameters_are_refused(fraction, window):
    with pytest.raises(ValueError):
        burnin.judge_trend([], slowdown_fraction=fraction, window=window)


def test_records_builder_reads_the_summary_strictly():
    found = round_of(1, healthy_bench()) + round_of(2, real_bench())
    summary = {"run_id": "burnin-test", "records": found}
    built = records_mod.burnin_round_records(summary)
    assert built == found
    for record in built:
        validate(record)
    broken = copy.deepcopy(summary)
    del broken["records"][1]["counters"]
    with pytest.raises(records_mod.RecordError, match=r"records\[1\]: missing key 'counters'"):
        records_mod.burnin_round_records(broken)
    broken = copy.deepcopy(summary)
    broken["records"][0]["verdict"] = "BROKEN"
    with pytest.raises(records_mod.RecordError, match="unknown verdict"):
        records_mod.burnin_round_records(broken)


def test_trend_verdicts_carry_a_slowdown_no_round_shows():
    found = []
    for number in range(1, 5):
        bench = scale(healthy_bench(), "gpu01", 0.7, "nccl") if number >= 3 else healthy_bench()
        found += round_of(number, bench)
    assert all(r["verdict"] == "PASS" for r in found)
    summary = {"run_id": "burnin-test", "records": found, "trend": burnin.judge_trend(found)}
    verdicts = records_mod.burnin_trend_verdicts(summary)
    assert verdicts["gpu01"]["verdict"] == "FAIL" and verdicts["gpu01"]["reasons"][0].startswith("got slower")
    assert verdicts["gpu02"] == {"verdict": "PASS", "reasons": [], "remedy": ""}
    summary["trend"]["gpu03"]["verdict"] = "MAYBE"
    with pytest.raises(records_mod.RecordError, match="unknown verdict"):
        records_mod.burnin_trend_verdicts(summary)
