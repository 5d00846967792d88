"""Result records (module_utils/gpuforge_records.py) read from files the playbooks wrote, against schemas/."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records
from bench_summaries import schema_validator, written

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "schemas"
RUN = ROOT / "tests" / "fixtures" / "records" / "demo-run"
BENCH = RUN / "benchmark" / "bench" / "20261126T151133Z" / "summary.json"
LOCALIZE_BENCH = ROOT / "tests" / "fixtures" / "report" / "localize-run" / "bench" / "20261123T185641Z" / "summary.json"
# The checks of playbooks/validate.yml in the run of tests/fixtures/records/demo-run/: 30 node checks, then DCGM,
# nvbandwidth and the GPUDirect RDMA loopback (each a check of its own in validation/<host>.json).
CHECKS_PER_NODE = 33
NEW_CHECKS = {"dcgm_diag", "nvbandwidth", "gdr_ib_write_bw"}
# What lab/specs/demo.yml injects into gpu03 and the validation finds: a Down port (mlx5_2/1), uncorrectable ECC
# errors and Xid 48/79. gdr_ib_write_bw fails as a consequence of the Down port (caused_by ib_port_state).
INJECTED = ["ecc_volatile_dbe", "ib_port_state", "xid"]
SCHEMA_OF = {
    "node_check": "node-check.schema.json",
    "benchmark_run": "benchmark-run.schema.json",
    "attribution": "attribution.schema.json",
    "stage_result": "stage-result.schema.json",
    # Not a record: bench/<run>/summary.json itself, the file that holds the benchmark_run and attribution records.
    "bench_summary": "bench-summary.schema.json",
}


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def validator(kind: str) -> jsonschema.Draft202012Validator:
    return schema_validator(SCHEMA_OF[kind])


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.schema.json")), ids=lambda path: path.name)
def test_schemas_are_valid_draft_2020_12(path):
    jsonschema.Draft202012Validator.check_schema(load(path))


@pytest.mark.parametrize(
    "path", sorted(RUN.rglob("validation/*.json")), ids=lambda path: f"{path.parts[-3]}/{path.name}"
)
def test_every_validation_file_holds_valid_node_check_records_and_their_verdict(path):
    host_file = load(path)
    built = records.node_check_records(host_file, "run-1")
    assert len(built) == len(host_file["records"]) == CHECKS_PER_NODE + 1  # and the node's fleet_consistency record
    for record in built:
        validator("node_check").validate(record)
    assert {record["node"] for record in built} == {host_file["host"]}
    assert {record["run_id"] for record in built} == {"run-1"}
    assert {record["check"] for record in built} >= NEW_CHECKS | {"fleet_consistency"}
    # The verdict the file holds is node_verdicts' over the records it holds.
    assert host_file["verdict"] == records.node_verdicts(built)[host_file["host"]]


def test_every_record_of_the_run_folder_is_valid():
    """What gpuforge report/export read from the whole fixture (load_records: the CLI summary, every
    validation/<host>.json, the bench summary with its parsed nccl/resnet50 files) validates against schemas/."""
    from gpuforge.report.export import load_records

    built = load_records(RUN)
    kinds = sorted({record["kind"] for record in built})
    assert kinds == ["attribution", "benchmark_run", "node_check", "stage_result"]
    for record in built:
        validator(record["kind"]).validate(record)


def test_the_bench_summary_holds_valid_benchmark_and_attribution_records_read_as_written():
    bench = load(BENCH)
    built = records.bench_summary_records(bench)
    assert built == bench["records"]  # read as summary.yml wrote them, not translated
    runs = [record for record in built if record["kind"] == "benchmark_run"]
    attributions = [record for record in built if record["kind"] == "attribution"]
    assert len(runs) + len(attributions) == len(built)
    for record in runs:
        validator("benchmark_run").validate(record)
    for record in attributions:
        validator("attribution").validate(record)
    assert len(runs) == sum(len(block["results"]) for block in bench.values() if isinstance(block, dict))
    down = next(record for record in runs if record["name"] == "gpu02__gpu03__mlx5_2")
    assert (down["verdict"], down["link"], down["rail"]) == ("FAIL", "gpu02__gpu03__mlx5_2", "mlx5_2")
    assert down["observed"] == {"value": None, "unit": "Gb/s"}
    assert down["reason"] == "mlx5_2/1 is not Active on gpu03"
    resnet = next(record for record in runs if record["name"] == "resnet50-node-gpu01-fp32")
    # one result per node and precision, with the GPU count of its node file
    assert resnet["observed"] == {"value": 1.19, "unit": "images/s", "gpus": 1}
    assert (resnet["threshold"]["value"], resnet["threshold"]["unit"]) == (0.66, "images/s")
    # The lab's faults: gpu02's links degraded (tc) make it the slow node of ib_write_bw; gpu03's Down port is
    # named as a port. Nothing else is named: no NCCL run (single, multi-node, per rail) fell below half the
    # median of its group in this run, so nccl names no node or link.
    assert [(record["subject"], record["name"], record["benchmark"]) for record in attributions] == [
        ("node", "gpu02", "ib_write_bw"),
        ("link", "gpu03:mlx5_2/1", "ib_write_bw"),
    ]
    assert (bench["nccl"]["slow_nodes"], bench["nccl"]["slow_links"]) == ([], [])
    assert {record["verdict"] for record in runs if record["benchmark"] == "nccl"} == {"PASS"}
    port = attributions[1]
    assert (port["nodes"], port["observed"]["results"]) == (["gpu03"], ["gpu02__gpu03__mlx5_2", "gpu03__gpu01__mlx5_2"])
    # The CLI run's id, where the reader is given one (export.load_records: the run directory's).
    assert {record["run_id"] for record in records.bench_summary_records(bench, "run-1")} == {"run-1"}


@pytest.mark.parametrize("path", [BENCH, LOCALIZE_BENCH], ids=["demo-run", "localize-run"])
def test_the_fixture_records_are_what_the_role_writes_from_their_blocks(path):
    """The fixtures' records were added by the role's filter (their SOURCES.md): they stay what it writes, so a
    change of the producer shows here."""
    assert written(load(path), path.parent) == load(path)


def test_every_verdict_of_the_records_is_its_results(site_gates_run):
    """The producer copies each result's verdict and run_failed into its record, one record per result, in order."""
    for path in (BENCH, LOCALIZE_BENCH, next(site_gates_run.glob("bench/*/summary.json"))):
        bench = load(path)
        runs = [record for record in bench["records"] if record["kind"] == "benchmark_run"]
        results = [
            (name, result) for name, block in sorted(bench.items()) if isinstance(block, dict)
            for result in block["results"]
        ]  # fmt: skip
        assert [(r["benchmark"], r["name"], r["verdict"], r["run_failed"]) for r in runs] == [
            (name, result["name"], result["verdict"], result["run_failed"]) for name, result in results
        ]


def test_a_summary_without_records_is_refused_naming_the_file_and_the_command():
    bench = load(BENCH)
    del bench["records"]  # as a gpuforge before issue 47 wrote it
    with pytest.raises(records.RecordError) as refused:
        records.bench_summary_records(bench, where=str(BENCH))
    assert str(refused.value).startswith(f"{BENCH}: no 'records': this file was written by an older gpuforge")
    assert str(refused.value).endswith("run `gpuforge bench` (playbooks/benchmark.yml) again")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda data: data["records"][0].pop("verdict"), r"records\[0\]: missing key 'verdict'"),
        (
            lambda data: data["records"][0].update(verdict="slow"),
            r"verdict 'slow' is not one of .*benchmark.yml\) again",
        ),
        (lambda data: data["records"][0].update(run_failed="no"), r"'run_failed' is str, expected bool"),
        (lambda data: data["records"][0].update(nodes=[]), r"'nodes' is empty"),
        (lambda data: data["records"][0].update(schema_version=2), r"not a benchmark_run record of schema_version 1"),
        (lambda data: data["records"][-1].update(kind="node_check"), r"kind is 'node_check', expected benchmark_run"),
        (lambda data: data["records"][-1]["threshold"].pop("source"), r"threshold: missing key 'source'"),
        (lambda data: data.update(records={}), r"'records' is dict, expected list"),
    ],
)
def test_a_changed_record_of_the_bench_summary_is_refused(change, message):
    data = load(BENCH)
    change(data)
    with pytest.raises(records.RecordError, match=message):
        records.bench_summary_records(data)


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
        ("alerts", "PASS"),
        ("k8s", "PASS"),
    ]
    assert built == load(RUN / "summary.json")["stages"]  # read as the CLI wrote them, not translated


def test_a_stage_as_an_older_gpuforge_wrote_it_is_refused_naming_the_fix():
    summary = load(RUN / "summary.json")
    summary["stages"][0] = {"name": "lab", "status": "ok", "verdict": "PASS", "rc": 0, "detail": ""}
    with pytest.raises(records.RecordError, match=r"stages\[0\]: written by an older gpuforge.*run the command again"):
        records.stage_result_records(summary)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("verdict", "ok", "verdict 'ok' is not one of PASS, WARN, FAIL, UNKNOWN"),
        ("rc", "0", "'rc' is str"),
        ("run_id", "another-run", "the record of run 'another-run'"),
        ("kind", "node_check", "not a stage_result record"),
    ],
)
def test_a_stage_record_that_is_not_one_is_refused_naming_the_key(key, value, message):
    summary = load(RUN / "summary.json")
    summary["stages"][4][key] = value
    with pytest.raises(records.RecordError, match=r"stages\[4\]"):
        try:
            records.stage_result_records(summary)
        except records.RecordError as exc:
            assert message in str(exc)
            raise


def test_the_validation_has_the_injected_faults_and_their_consequence():
    built = records.node_check_records(load(RUN / "validate" / "validation" / "gpu03.json"))
    failed = {record["check"]: record for record in built if record["verdict"] == "FAIL"}
    assert sorted(name for name, record in failed.items() if not record["caused_by"]) == INJECTED
    assert failed["gdr_ib_write_bw"]["caused_by"] == ["ib_port_state"]
    assert sorted(failed) == sorted([*INJECTED, "gdr_ib_write_bw"])
    assert failed["ib_port_state"]["observed"] == {"mlx5_2/1": "Down/Disabled"}
    for host in ("gpu01", "gpu02"):
        built = records.node_check_records(load(RUN / "validate" / "validation" / f"{host}.json"))
        assert [record["check"] for record in built if record["verdict"] != "PASS"] == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda data: data.pop("host"), "missing key 'host'"),
        (lambda data: data["records"][0].pop("verdict"), "missing key 'verdict'"),
        (lambda data: data["records"][0].update(verdict="ok"), "verdict 'ok' is not one of .*validate.yml again"),
        (lambda data: data["records"][0].update(node="gpu02"), "the record of node 'gpu02' in the file of 'gpu01'"),
        (lambda data: data["records"][0].update(kind="k8s_check"), "not a node_check record"),
        (lambda data: data["records"][0].update(caused_by="xid"), "'caused_by' is str, expected list"),
        (lambda data: data.update(records={}), "'records' is dict, expected list"),
        (lambda data: data.update(checks=data.pop("records")), "missing key 'records'"),
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
        record = records.bench_summary_records(load(BENCH))[0]
    else:
        record = records.bench_summary_records(load(BENCH))[-1]
    broken = copy.deepcopy(record)
    change(broken)
    validator(kind).validate(record)
    with pytest.raises(jsonschema.ValidationError):
        validator(kind).validate(broken)


def test_node_verdicts_name_the_slow_node_and_the_faulty_node():
    bench = load(BENCH)
    built = (
        records.node_check_records(load(RUN / "validate" / "validation" / "gpu01.json"))
        + records.node_check_records(load(RUN / "validate" / "validation" / "gpu03.json"))
        + records.bench_summary_records(bench)
    )
    verdicts = records.node_verdicts(built)
    assert {node: entry["verdict"] for node, entry in verdicts.items()} == {
        "gpu01": "PASS",  # its slow ib_write_bw pairs all lead to gpu02, the slow node: not a reason against it
        "gpu02": "FAIL",
        "gpu03": "FAIL",
    }
    assert verdicts["gpu01"]["reasons"] == []
    assert [(reason["verdict"], reason["what"]) for reason in verdicts["gpu02"]["reasons"]] == [
        ("FAIL", "ib_write_bw: slow node"),
    ]
    gpu03 = [reason["what"] for reason in verdicts["gpu03"]["reasons"] if reason["verdict"] == "FAIL"]
    assert gpu03 == [
        "check ecc_volatile_dbe",
        "check ib_port_state",
        "check xid",
        "check gdr_ib_write_bw (caused by ib_port_state)",
        "ib_write_bw: slow link gpu03:mlx5_2/1",
    ]


def test_a_failed_link_without_a_slow_node_warns_both_ends():
    bench = load(BENCH)
    for block in bench.values():
        if isinstance(block, dict):
            block["slow_nodes"] = []
    runs = [record for record in records.bench_summary_records(written(bench)) if record["kind"] == "benchmark_run"]
    verdicts = records.node_verdicts(runs)
    assert verdicts["gpu03"]["verdict"] == "WARN"
    assert any("gpu02__gpu03__mlx5_2" in reason["what"] for reason in verdicts["gpu03"]["reasons"])


def test_a_slow_link_between_nodes_warns_each_end_and_a_slow_port_fails_its_node():
    # An NCCL multi-node run below the median (an earlier demo run had one) names a "link" over gpu01 and gpu03:
    # neither end is known to be at fault. ib_write_bw's Down port of gpu03 names one node's port: that node fails.
    base = {"kind": "attribution", "benchmark": "nccl", "subject": "link", "verdict": "FAIL", "remedy": "r"}
    built = [
        dict(base, name="nccl-multi-ib", nodes=["gpu01", "gpu03"]),
        dict(base, benchmark="ib_write_bw", name="gpu03:mlx5_2/1", nodes=["gpu03"]),
    ]
    verdicts = records.node_verdicts(built)
    assert verdicts["gpu01"]["verdict"] == "WARN"
    assert verdicts["gpu03"]["verdict"] == "FAIL"
    assert [reason["verdict"] for reason in verdicts["gpu03"]["reasons"]] == ["WARN", "FAIL"]


def test_a_pair_through_a_port_blamed_on_one_node_does_not_warn_the_other_end():
    # The demo: gpu03's mlx5_2/1 is Down, so the pair gpu03__gpu01 on that rail has no result. The attribution
    # names the port of gpu03; gpu01, healthy, must not be warned for it.
    port = dict(kind="attribution", benchmark="ib_write_bw", subject="link", name="gpu03:mlx5_2/1", nodes=["gpu03"])
    port.update(rails=["mlx5_2/1"], verdict="FAIL", remedy="r")
    pair = dict(kind="benchmark_run", benchmark="ib_write_bw", name="gpu03__gpu01__mlx5_2", link=True, rail="mlx5_2/1")
    pair.update(nodes=["gpu03", "gpu01"], verdict="FAIL", reason="not Active", remedy="")
    verdicts = records.node_verdicts([port, pair])
    assert verdicts["gpu01"] == {
        "verdict": "PASS",
        "healthy": True,
        "failed_checks": [],
        "caused_failures": {},
        "reasons": [],
    }
    assert verdicts["gpu03"]["verdict"] == "FAIL"
    # the same pair on another rail is a question about both ends
    other = dict(pair, name="gpu03__gpu01__mlx5_0", rail="mlx5_0/1")
    assert records.node_verdicts([port, other])["gpu01"]["verdict"] == "WARN"


@pytest.mark.parametrize(
    ("verdicts", "worst"), [([], "PASS"), (["PASS", "UNKNOWN"], "UNKNOWN"), (["WARN", "FAIL"], "FAIL")]
)
def test_worst_verdict(verdicts, worst):
    assert records.worst_verdict(verdicts) == worst


def test_benchmark_records_carry_the_chart_data_of_the_parsed_results():
    """summary.yml reads the parsed results beside summary.json when it writes it; the records keep their chart data."""
    runs = [record for record in records.bench_summary_records(load(BENCH)) if record["kind"] == "benchmark_run"]
    for record in runs:
        validator("benchmark_run").validate(record)
    by_name = {record["name"]: record for record in runs}
    rows = load(BENCH.parent / "nccl" / "multi-ib.json")["nccl"]["rows"]
    series = by_name["nccl-multi-ib"]["observed"]["series"]
    assert series["points"] == [[row["size"], row["out_of_place"]["busbw"]] for row in rows]
    assert (series["x_unit"], series["y_unit"]) == ("B", "GB/s")
    rail = load(BENCH.parent / "nccl" / "rail-mlx5_1-1.json")["nccl"]["rows"]
    assert by_name["nccl-rail-mlx5_1-1"]["observed"]["series"]["points"] == [
        [row["size"], row["out_of_place"]["busbw"]] for row in rail
    ]
    for precision in ("fp32", "amp"):
        sweep = [by_name[f"resnet50-sweep-{n}gpu-{precision}"]["observed"] for n in (1, 2, 3)]
        assert [observed["gpus"] for observed in sweep] == [1, 2, 3]
    assert by_name["resnet50-sweep-3gpu-amp"]["observed"] == {"value": 16.78, "unit": "images/s", "gpus": 3}
    assert by_name["gpu02__gpu03__mlx5_2"]["threshold"]["line_rate"] == 100.0
    assert "series" not in by_name["srun-nccl"]["observed"]  # no parsed file is named by the gate (slurm/)
    # Without the folder (a summary written elsewhere) the records carry no chart data, and nothing else changes.
    bare = {record["name"]: record for record in written(load(BENCH))["records"] if record["kind"] == "benchmark_run"}
    assert (
        "series" not in bare["nccl-multi-ib"]["observed"] and "gpus" not in bare["resnet50-sweep-3gpu-amp"]["observed"]
    )
    assert {name: record["verdict"] for name, record in bare.items()} == {n: r["verdict"] for n, r in by_name.items()}


def test_resnet50_node_records_carry_the_gpu_count_of_their_node_file():
    by_name = {record["name"]: record for record in records.bench_summary_records(load(BENCH))}
    node = load(BENCH.parent / "resnet50" / "gpu02" / "node.json")
    (amp,) = [run for run in node["runs"] if run["precision"] == "amp"]
    assert by_name["resnet50-node-gpu02-amp"]["observed"] == {
        "value": amp["images_per_second"],
        "unit": "images/s",
        "gpus": amp["gpus"],
    }


# --- bench/<run>/summary.json itself (schemas/bench-summary.schema.json): value in its unit, no generic gbps --------


@pytest.mark.parametrize("path", [BENCH, LOCALIZE_BENCH], ids=["demo-run", "localize-run"])
def test_the_lab_runs_bench_summaries_are_valid(path):
    validator("bench_summary").validate(load(path))


def test_the_site_gates_run_bench_summary_is_valid(site_gates_run):
    validator("bench_summary").validate(load(next(site_gates_run.glob("bench/*/summary.json"))))


def test_resnet50_results_hold_images_per_second_as_their_value():
    for result in load(BENCH)["resnet50"]["results"]:
        assert (result["unit"], result["value"]) == ("images/s", result["images_per_second"])
        assert result["value"] is None or " images/s " in result["reason"]


@pytest.mark.parametrize(
    ("benchmark", "change"),
    [
        ("resnet50", lambda result: result.update(gbps=result["value"])),  # the old generic key, beside value
        ("resnet50", lambda result: result.update(gbps=result.pop("value"))),
        ("resnet50", lambda result: result.update(threshold_gbps=result.pop("threshold"))),
        ("resnet50", lambda result: result.update(unit="images_per_second")),
        ("ib_write_bw", lambda result: result.update(expected_gbps=result.pop("expected"))),
        ("ib_write_bw", lambda result: result.pop("unit")),
        ("nccl", lambda result: result.update(unit="GB/s")),  # NCCL results are busbw x 8, Gb/s
        ("slurm", lambda result: result.update(gbps=result["value"])),
        ("fio", lambda result: result.update(gbps=1.0)),
        ("p2p", lambda result: result.update(gbps=1.0)),
    ],
)
def test_the_bench_summary_schema_refuses_a_result_without_its_own_unit(benchmark, change):
    bench = load(BENCH)
    broken = copy.deepcopy(bench)
    change(broken[benchmark]["results"][0])
    validator("bench_summary").validate(bench)
    with pytest.raises(jsonschema.ValidationError):
        validator("bench_summary").validate(broken)


def test_the_role_refuses_to_write_a_result_with_the_retired_gbps_key():
    bench = load(BENCH)
    result = bench["resnet50"]["results"][0]
    result["gbps"] = result.pop("value")
    with pytest.raises(records.RecordError, match=r"resnet50.results\[0\]: missing key 'value'"):
        written(bench)


def test_the_fleet_comparison_becomes_each_node_s_fleet_consistency_record():
    check = {
        "status": "PASS",
        "observed": {},
        "expected": {"gpu_driver": "550.90.07", "kernel": "6.1.0-18"},
        "remedy": "upgrade it",
    }
    record = records.fleet_check_record(check, "gpu02", "dgx1-v100-edr", "2026-11-26T08:00:00Z", "run-1")
    validator("node_check").validate(record)
    assert (record["node"], record["check"], record["verdict"]) == ("gpu02", "fleet_consistency", "PASS")
    assert record["observed"]["gpu_driver"] == record["threshold"]["expected"]["gpu_driver"] == "550.90.07"
    check.update(status="FAIL", observed={"kernel": {"gpu02": "6.1.0-13"}})
    record = records.fleet_check_record(check, "gpu02", "dgx1-v100-edr")
    assert (record["verdict"], record["observed"]["kernel"], record["remedy"]) == ("FAIL", "6.1.0-13", "upgrade it")
    other = records.fleet_check_record(check, "gpu01", "dgx1-v100-edr")  # another node is the outlier
    assert (other["verdict"], other["observed"]["kernel"], other["remedy"]) == ("PASS", "6.1.0-18", "")
    with pytest.raises(records.RecordError, match="unknown status 'fail'"):
        records.fleet_check_record(dict(check, status="fail"), "gpu02", "dgx1-v100-edr")
    # The demo run's own files carry the fleet comparison too: the three lab nodes agree.
    for host in ("gpu01", "gpu02", "gpu03"):
        built = records.node_check_records(load(RUN / "validate" / "validation" / f"{host}.json"), "run-1")
        (record,) = [record for record in built if record["check"] == "fleet_consistency"]
        assert (record["node"], record["verdict"]) == (host, "PASS")


def test_port_attributions_name_the_results_they_rest_on():
    bench = load(
        ROOT / "tests" / "fixtures" / "report" / "localize-run" / "bench" / "20261123T185641Z" / "summary.json"
    )
    built = [record for record in records.bench_summary_records(bench) if record["kind"] == "attribution"]
    for record in built:
        validator("attribution").validate(record)
    port = next(record for record in built if record["name"] == "gpu03:mlx5_2/1")
    assert (port["subject"], port["nodes"], port["rails"]) == ("link", ["gpu03"], ["mlx5_2"])
    assert port["observed"]["results"] == ["gpu02__gpu03__mlx5_2", "gpu03__gpu01__mlx5_2"]
    assert "results" not in next(record for record in built if record["name"] == "gpu01__gpu02__mlx5_0")["observed"]


def test_a_consequence_keeps_its_root_causes_and_the_verdict_names_them():
    checks = [
        {
            "name": "hcas_present",
            "status": "FAIL",
            "observed": ["mlx5_0"],
            "expected": ["mlx5_0", "mlx5_3"],
            "fault": "HCA(s) ['mlx5_3'] not found",
            "remedy": "Check lspci -d 15b3:",
            "caused_by": None,
        },
        {
            "name": "ib_port_state",
            "status": "FAIL",
            "observed": {"mlx5_3/1": "HCA absent"},
            "expected": "Active/LinkUp",
            "fault": "",
            "remedy": "Check cable",
            "caused_by": "hcas_present",
        },
        {
            "name": "gpu_hca_affinity",
            "status": "FAIL",
            "observed": {},
            "expected": [],
            "fault": "",
            "remedy": "Check slots",
            "caused_by": "gpu_count,hcas_present",
        },
    ]
    report = records.node_report(checks, "gpu07", "dgx-h100-ndr", "2026-11-26T08:00:00Z")
    built = report["records"]
    for record in built:
        validator("node_check").validate(record)
    assert [record["caused_by"] for record in built] == [[], ["hcas_present"], ["gpu_count", "hcas_present"]]
    assert [reason["what"] for reason in report["reasons"]] == [
        "check hcas_present",
        "check ib_port_state (caused by hcas_present)",
        "check gpu_hca_affinity (caused by gpu_count, hcas_present)",
    ]
    assert (report["verdict"], report["healthy"], report["failed_checks"]) == ("FAIL", False, ["hcas_present"])
    assert report["caused_failures"] == {"ib_port_state": "hcas_present", "gpu_hca_affinity": "gpu_count,hcas_present"}


# The report playbooks/validate.yml wrote for a real NVIDIA H200 VM (benchmarks/real_node; tests/fixtures/validation).
REAL_NODE_REPORT = ROOT / "tests" / "fixtures" / "validation" / "gpuforge-device_1xh200_real-node.json"


def test_h200_vm_report_checks_are_valid_node_check_records():
    """validation/real-node.json as the playbook wrote it: every check makes a record schemas/ accepts."""
    report = json.loads(REAL_NODE_REPORT.read_text(encoding="utf-8"))
    assert (report["host"], report["system"], report["healthy"], report["failed"]) == (
        "real-node",
        "h200-1gpu-vm",
        True,
        [],
    )
    schema = json.loads((SCHEMAS / "node-check.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    # Written before gpu_node_check returned records: its checks say ok/warn/fail.
    checks = [
        dict(check, status={"ok": "PASS", "warn": "WARN", "fail": "FAIL"}[check["status"]])
        for check in report["checks"]
    ]
    built = records.node_report(checks, "real-node", report["system"], report["checked_at"])["records"]
    assert [r["check"] for r in built] == [c["name"] for c in report["checks"]]
    assert {r["verdict"] for r in built} == {"PASS"}
    for record in built:
        validator.validate(record)


def test_every_validation_file_is_valid_against_its_schema():
    """validation/<host>.json itself (schemas/validation-host.schema.json), its records by node-check.schema.json."""
    from referencing import Registry, Resource

    node_check = load(SCHEMAS / "node-check.schema.json")
    registry_ = Registry().with_resource(node_check["$id"], Resource.from_contents(node_check))
    schema = load(SCHEMAS / "validation-host.schema.json")
    check = jsonschema.Draft202012Validator(schema, registry=registry_, format_checker=jsonschema.FormatChecker())
    files = sorted(RUN.rglob("validation/*.json")) + sorted((ROOT / "tests/fixtures/report/fleet-run").rglob("*.json"))
    assert len(files) == 6
    for path in files:
        check.validate(load(path))
    broken = load(files[0])
    broken["verdict"]["verdict"] = "ok"
    with pytest.raises(jsonschema.ValidationError):
        check.validate(broken)
    broken = load(files[0])
    broken["records"][0]["verdict"] = "ok"  # the records are checked by the node_check schema
    with pytest.raises(jsonschema.ValidationError):
        check.validate(broken)


# validate.yml on the same H200 VM with the benchmark tools built there (2026-12-04, benchmarks/real_node/run.sh's
# second stage; tests/fixtures/real-node/h200-20261204/SOURCES.md): written as records, nvbandwidth among them.
REAL_NODE_RECORDS = ROOT / "tests" / "fixtures" / "real-node" / "h200-20261204" / "validation"


def test_h200_vm_report_with_nvbandwidth_is_valid_and_names_its_two_failures():
    from referencing import Registry, Resource

    node_check = load(SCHEMAS / "node-check.schema.json")
    registry_ = Registry().with_resource(node_check["$id"], Resource.from_contents(node_check))
    schema = load(SCHEMAS / "validation-host.schema.json")
    report = load(REAL_NODE_RECORDS / "real-node.json")
    jsonschema.Draft202012Validator(schema, registry=registry_, format_checker=jsonschema.FormatChecker()).validate(
        report
    )
    verdicts = {record["check"]: record["verdict"] for record in report["records"]}
    # The VM image has neither kmod nor pciutils; every GPU check and nvbandwidth pass.
    assert sorted(check for check, verdict in verdicts.items() if verdict != "PASS") == [
        "lsmod_readable",
        "lspci_readable",
    ]
    assert verdicts["nvbandwidth"] == "PASS"
    assert (report["verdict"]["verdict"], report["verdict"]["failed_checks"]) == (
        "FAIL",
        ["lsmod_readable", "lspci_readable"],
    )
    # The one verdict function gives the same verdict from the records the file holds.
    assert records.node_verdicts(report["records"])["real-node"] == report["verdict"]
    diagnostic = load(REAL_NODE_RECORDS / "nvbandwidth-real-node.json")
    observed = diagnostic["check"]["observed"]["testcases"]
    assert observed == {
        "device_to_host_memcpy_ce": {"00000000:00:06.0": 55.36},
        "host_to_device_memcpy_ce": {"00000000:00:06.0": 55.54},
    }
