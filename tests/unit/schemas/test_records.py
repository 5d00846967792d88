"""Result records (module_utils/gpuforge_records.py) built from files the playbooks wrote, against schemas/."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "schemas"
RUN = ROOT / "tests" / "fixtures" / "records" / "demo-run"
BENCH = RUN / "benchmark" / "bench" / "20261123T160859Z" / "summary.json"
SCHEMA_OF = {
    "node_check": "node-check.schema.json",
    "benchmark_run": "benchmark-run.schema.json",
    "attribution": "attribution.schema.json",
    "stage_result": "stage-result.schema.json",
}


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = load(SCHEMAS / SCHEMA_OF[kind])
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.schema.json")), ids=lambda path: path.name)
def test_schemas_are_valid_draft_2020_12(path):
    jsonschema.Draft202012Validator.check_schema(load(path))


@pytest.mark.parametrize(
    "path", sorted(RUN.rglob("validation/*.json")), ids=lambda path: f"{path.parts[-3]}/{path.name}"
)
def test_every_validation_file_becomes_valid_node_check_records(path):
    host_file = load(path)
    built = records.node_check_records(host_file, "run-1")
    assert len(built) == len(host_file["checks"]) == 22
    for record in built:
        validator("node_check").validate(record)
    assert {record["node"] for record in built} == {host_file["host"]}


def test_bench_summary_becomes_valid_benchmark_and_attribution_records():
    bench = load(BENCH)
    runs = records.benchmark_run_records(bench)
    attributions = records.attribution_records(bench)
    for record in runs:
        validator("benchmark_run").validate(record)
    for record in attributions:
        validator("attribution").validate(record)
    assert len(runs) == sum(len(block["results"]) for block in bench.values() if isinstance(block, dict))
    down = next(record for record in runs if record["name"] == "gpu02__gpu03__mlx5_2")
    assert (down["verdict"], down["link"], down["rail"]) == ("FAIL", "gpu02__gpu03__mlx5_2", "mlx5_2")
    assert down["observed"] == {"value": None, "unit": "Gb/s"}
    assert down["reason"] == "mlx5_2 port 1 is not Active on gpu03"
    resnet = next(record for record in runs if record["name"] == "resnet50-node-gpu01")
    assert resnet["observed"] == {"value": 1.1, "unit": "img/s"}  # "gbps" holds images/s: the unit says so
    assert [(record["subject"], record["name"], record["benchmark"]) for record in attributions] == [
        ("node", "gpu02", "ib_write_bw")
    ]


def test_stage_results_of_the_cli_summary():
    built = records.stage_result_records(load(RUN / "summary.json"))
    for record in built:
        validator("stage_result").validate(record)
    assert [(record["stage"], record["verdict"]) for record in built] == [
        ("lab", "PASS"),
        ("lab-services", "PASS"),
        ("provision", "PASS"),
        ("validate", "PASS"),
        ("benchmark", "FAIL"),
        ("k8s", "PASS"),
    ]


def test_the_benchmark_stage_validation_has_the_injected_faults():
    built = records.node_check_records(load(RUN / "benchmark" / "validation" / "gpu03.json"))
    failed = sorted(record["check"] for record in built if record["verdict"] == "FAIL")
    assert failed == ["ecc_volatile_dbe", "ib_port_state", "xid"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda data: data.pop("host"), "missing key 'host'"),
        (lambda data: data["checks"][0].pop("status"), "missing key 'status'"),
        (lambda data: data["checks"][0].update(status="broken"), "unknown status 'broken'"),
        (lambda data: data.update(checks={}), "'checks' is dict, expected list"),
    ],
)
def test_a_changed_validation_shape_is_refused(change, message):
    data = load(RUN / "validate" / "validation" / "gpu01.json")
    change(data)
    with pytest.raises(records.RecordError, match=message):
        records.node_check_records(data)


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("node_check", lambda record: record.update(verdict="ok")),
        ("node_check", lambda record: record.update(extra=1)),
        ("node_check", lambda record: record["threshold"].pop("source")),
        ("node_check", lambda record: record.update(schema_version=2)),
        ("benchmark_run", lambda record: record.update(nodes=[])),
        ("benchmark_run", lambda record: record["observed"].update(value="12")),
        ("attribution", lambda record: record.update(subject="rack")),
        ("stage_result", lambda record: record.update(status="done")),
    ],
)
def test_schemas_refuse_records_they_do_not_allow(kind, change):
    if kind == "stage_result":
        record = records.stage_result_records(load(RUN / "summary.json"))[0]
    elif kind == "node_check":
        record = records.node_check_records(load(RUN / "validate" / "validation" / "gpu01.json"))[0]
    elif kind == "benchmark_run":
        record = records.benchmark_run_records(load(BENCH))[0]
    else:
        record = records.attribution_records(load(BENCH))[0]
    broken = copy.deepcopy(record)
    change(broken)
    validator(kind).validate(record)
    with pytest.raises(jsonschema.ValidationError):
        validator(kind).validate(broken)


def test_node_verdicts_name_the_slow_node_and_the_faulty_node():
    bench = load(BENCH)
    built = (
        records.node_check_records(load(RUN / "benchmark" / "validation" / "gpu01.json"))
        + records.node_check_records(load(RUN / "benchmark" / "validation" / "gpu03.json"))
        + records.benchmark_run_records(bench)
        + records.attribution_records(bench)
    )
    verdicts = records.node_verdicts(built)
    assert {node: entry["verdict"] for node, entry in verdicts.items()} == {
        "gpu01": "PASS",  # its slow links all lead to gpu02, which the attribution names
        "gpu02": "FAIL",
        "gpu03": "FAIL",
    }
    assert [reason["what"] for reason in verdicts["gpu02"]["reasons"]] == ["ib_write_bw: slow node"]


def test_a_failed_link_without_a_slow_node_warns_both_ends():
    bench = load(BENCH)
    for block in bench.values():
        if isinstance(block, dict):
            block["slow_nodes"] = []
    verdicts = records.node_verdicts(records.benchmark_run_records(bench))
    assert verdicts["gpu03"]["verdict"] == "WARN"
    assert any("gpu02__gpu03__mlx5_2" in reason["what"] for reason in verdicts["gpu03"]["reasons"])


@pytest.mark.parametrize(
    ("verdicts", "worst"), [([], "PASS"), (["PASS", "UNKNOWN"], "UNKNOWN"), (["WARN", "FAIL"], "FAIL")]
)
def test_worst_verdict(verdicts, worst):
    assert records.worst_verdict(verdicts) == worst
