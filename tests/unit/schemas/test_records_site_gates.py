"""benchmark_run records of the fio and p2p gates (summary.json made from the real modules' output by
tests/unit/site_gates.py, its records written by the role's filter), against schemas/benchmark-run.schema.json, and
what they do to node verdicts."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records
from bench_summaries import written

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "schemas" / "benchmark-run.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


@pytest.fixture(scope="module")
def summary(site_gates_run) -> dict:
    return json.loads(next(site_gates_run.glob("bench/*/summary.json")).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs(summary) -> dict:
    return {
        r["name"]: r
        for r in records.bench_summary_records(summary)
        if r["kind"] == "benchmark_run" and r["benchmark"] in ("fio", "p2p")
    }


def test_every_fio_and_p2p_result_is_a_valid_record(summary, runs):
    assert len(runs) == len(summary["fio"]["results"]) + len(summary["p2p"]["results"]) == 19 + 3
    for record in runs.values():
        VALIDATOR.validate(record)
    # fio and p2p results are each one node's own: they name no slow node or link.
    demo = written({key: value for key, value in summary.items() if key not in ("fio", "p2p")})
    assert [r for r in summary["records"] if r["kind"] == "attribution"] == [
        r for r in demo["records"] if r["kind"] == "attribution"
    ]


def test_fio_records_name_their_unit_target_job_and_the_site_threshold(runs):
    seq = runs["fio-gpu03-scratch:/var/tmp-seq_read"]
    assert seq["observed"] == {
        "value": 340.25,
        "unit": "MiB/s",
        "mib_per_second": 340.25,
        "iops": 340.25,
        "clat_p99_us": 29491.2,
    }
    assert (seq["target"], seq["job"], seq["group"], seq["nodes"], seq["link"]) == (
        "scratch:/var/tmp",
        "seq_read",
        "scratch:/var/tmp",
        ["gpu03"],
        None,
    )
    assert seq["threshold"] == {
        "value": 600,
        "unit": "MiB/s",
        "op": ">=",
        "baseline": "site",
        "source": "site threshold gpuforge_bench_fio_thresholds['scratch:/var/tmp']",
    }
    assert (seq["verdict"], seq["module_verdict"]) == ("FAIL", "FAIL")
    assert "is below the threshold" in seq["remedy"]
    rand = runs["fio-gpu01-scratch:/var/tmp-rand_read"]
    assert (rand["observed"]["unit"], rand["observed"]["clat_p99_us"], rand["threshold"]["clat_p99_us_max"]) == (
        "IOPS",
        1253.38,
        2000,
    )
    assert rand["verdict"] == "PASS"


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("fio-gpu01-scratch:/var/tmp-seq_write", "UNKNOWN"),  # measured, no threshold
        ("fio-gpu01-nfs:/shared/home", "UNKNOWN"),  # not mounted
        ("fio-gpu03-data-rand_read", "FAIL"),  # fio error 2
        ("p2p-gpu01", "PASS"),
        ("p2p-gpu02", "UNKNOWN"),  # no binary
    ],
)
def test_verdicts(runs, name, verdict):
    assert runs[name]["verdict"] == verdict


def test_p2p_records(runs):
    v100 = runs["p2p-gpu01"]
    assert v100["observed"] == {
        "value": 75.25,
        "unit": "GB/s",
        "gpus": 4,
        "sku": "Tesla V100-SXM2-16GB",
        "uni_min_ratio": 3.43,
        "bi_min_ratio": 7.22,
    }
    assert (v100["threshold"]["value"], v100["threshold"]["baseline"]) == (None, "reference")
    assert "REFERENCES" in v100["threshold"]["source"]
    skipped = runs["p2p-gpu02"]
    assert skipped["observed"] == {"value": None, "unit": "GB/s"}
    assert skipped["reason"].startswith("p2pBandwidthLatencyTest not found at ")


def test_unjudged_runs_leave_a_node_verdict_alone_and_a_missed_threshold_fails_it(summary):
    verdicts = records.node_verdicts(records.bench_summary_records(summary))
    # gpu01: its fio results are ok or unjudged, its NFS share is not mounted: they add nothing to what the demo
    # run's other gates say of it (nothing: its slow ib_write_bw pairs all lead to gpu02, the slow node).
    demo = written({key: value for key, value in summary.items() if key not in ("fio", "p2p")})
    alone = records.node_verdicts(records.bench_summary_records(demo))
    assert (
        verdicts["gpu01"]
        == alone["gpu01"]
        == {"verdict": "PASS", "healthy": True, "failed_checks": [], "caused_failures": {}, "reasons": []}
    )
    gpu03 = [reason["what"] for reason in verdicts["gpu03"]["reasons"]]
    assert "fio fio-gpu03-scratch:/var/tmp-seq_read" in gpu03
    assert "fio fio-gpu03-data-rand_read" in gpu03
    assert not any("p2p" in what or "nfs" in what for what in gpu03)


@pytest.mark.parametrize(
    "change",
    [
        lambda record: record.update(benchmark="iozone"),
        lambda record: record["observed"].update(iops="many"),
        lambda record: record["threshold"].update(clat_p99_us_max="2 ms"),
        lambda record: record.update(job=3),
    ],
)
def test_the_schema_refuses(runs, change):
    record = copy.deepcopy(runs["fio-gpu01-scratch:/var/tmp-rand_read"])
    change(record)
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(record)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("value", "680", "'value' is str"),
        ("threshold", "600", "'threshold' is str"),
        ("unit", None, "'unit' is NoneType"),
        ("verdict", "meh", "verdict 'meh' is not one of PASS, WARN, FAIL, UNKNOWN"),
        ("verdict", "slow", "verdict 'slow' is not one of PASS, WARN, FAIL, UNKNOWN"),
        ("run_failed", "no", "'run_failed' is str, expected bool"),
        ("iops", [1], "'iops' is list"),
    ],
)
def test_a_changed_fio_result_shape_is_refused_when_the_role_writes_it(summary, key, value, message):
    broken = copy.deepcopy(summary)
    broken["fio"]["results"][0][key] = value
    with pytest.raises(records.RecordError, match=r"summary.json fio.results\[0\]: .*" + message):
        written(broken)
