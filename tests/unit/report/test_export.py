"""gpuforge export: JUnit read back by junitparser, CTRF against the CTRF schema's rules, per-node verdicts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from junitparser import Failure, JUnitXml, Skipped

from gpuforge import cli
from gpuforge.report import export

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "tests" / "fixtures" / "records" / "demo-run"

# The rules of the official CTRF schema (ctrf-io/ctrf, schema/ctrf.schema.json @08703dfd,
# https://github.com/ctrf-io/ctrf/blob/08703dfde1d87a7c3281bd740ed5a8bd081e0056/schema/ctrf.schema.json) for the
# fields gpuforge writes, restated here: required keys, the "CTRF" constant, the SemVer pattern, integer
# counts and millisecond times, the status enum, closed tool/summary objects and scalar (or non-empty list) labels.
_SCALAR = {"type": ["string", "number", "boolean"]}
CTRF_RULES = {
    "type": "object",
    "required": ["results", "reportFormat", "specVersion"],
    "properties": {
        "reportFormat": {"const": "CTRF"},
        "specVersion": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+\.[0-9]+$"},
        "generatedBy": {"type": "string"},
        "results": {
            "type": "object",
            "required": ["tool", "summary", "tests"],
            "properties": {
                "tool": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string", "minLength": 1}, "version": {"type": "string"}},
                    "additionalProperties": False,
                },
                "summary": {
                    "type": "object",
                    "required": ["tests", "passed", "failed", "skipped", "pending", "other", "start", "stop"],
                    "properties": {
                        key: {"type": "integer"}
                        for key in ("tests", "passed", "failed", "skipped", "pending", "other", "start", "stop")
                    },
                    "additionalProperties": False,
                },
                "tests": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "status", "duration"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "status": {"enum": ["passed", "failed", "skipped", "pending", "other"]},
                            "duration": {"type": "integer"},
                            "suite": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                            "message": {"type": "string"},
                            "trace": {"type": "string"},
                            "rawStatus": {"type": "string"},
                            "labels": {
                                "type": "object",
                                "additionalProperties": {
                                    "anyOf": [_SCALAR, {"type": "array", "minItems": 1, "items": _SCALAR}]
                                },
                            },
                        },
                        "additionalProperties": False,
                    },
                },
            },
        },
    },
}


@pytest.fixture(scope="module")
def records():
    return export.load_records(RUN)


def _failed_checks(records, node):
    return sorted(
        r["check"] for r in records if r["kind"] == "node_check" and r["node"] == node and r["verdict"] == "FAIL"
    )


def test_load_records_reads_every_result_file_of_the_run(records):
    kinds = [record["kind"] for record in records]
    # 33 checks per node and its fleet_consistency record
    assert kinds.count("node_check") == 3 * 33 + 3
    assert kinds.count("stage_result") == 7
    # ib_write_bw's slow node gpu02 and slow port gpu03:mlx5_2/1; no other benchmark named a node or link
    assert kinds.count("attribution") == 2
    # fio 21, ib_write_bw 12, nccl 10, p2p 3, resnet50 12, slurm 3 (srun-nccl, srun-resnet50, srun-apptainer-nccl)
    assert kinds.count("benchmark_run") == 61
    assert _failed_checks(records, "gpu03") == ["ecc_volatile_dbe", "gdr_ib_write_bw", "ib_port_state", "xid"]


def test_load_records_takes_the_newest_validation_of_each_host(tmp_path):
    # A stage that copied gpu03's file earlier, before the faults showed: the newest checked_at wins, whatever the
    # order of the folders.
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    newest = json.loads((run / "validate" / "validation" / "gpu03.json").read_text(encoding="utf-8"))
    older = dict(
        newest, checked_at="2026-11-26T12:00:00Z", records=[dict(r, verdict="PASS") for r in newest["records"]]
    )
    assert older["checked_at"] < newest["checked_at"] < "2026-11-26T16:00:00Z"
    for stage in ("a-earlier", "z-earlier"):
        (run / stage / "validation").mkdir(parents=True)
        (run / stage / "validation" / "gpu03.json").write_text(json.dumps(older), encoding="utf-8")
    built = export.load_records(run)
    assert [r["node"] for r in built if r["kind"] == "node_check"].count("gpu03") == 33 + 1
    assert _failed_checks(built, "gpu03") == ["ecc_volatile_dbe", "gdr_ib_write_bw", "ib_port_state", "xid"]
    newer = dict(older, checked_at="2026-11-26T16:00:00Z")
    (run / "a-earlier" / "validation" / "gpu03.json").write_text(json.dumps(newer), encoding="utf-8")
    assert _failed_checks(export.load_records(run), "gpu03") == []


def test_junit_is_read_by_junitparser_one_failing_case_per_fault(records, tmp_path):
    path = tmp_path / "gpuforge.xml"
    path.write_text(export.to_junit(records), encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {"stages", "node checks", "benchmark gates", "attribution"}
    cases = [(suite.name, case) for suite in xml for case in suite]
    assert len(cases) == len(records)
    failed = {
        (name, case.classname, case.name)
        for name, case in cases
        if any(isinstance(result, Failure) for result in case.result)
    }
    assert ("node checks", "gpu03", "ecc_volatile_dbe") in failed
    assert ("node checks", "gpu03", "ib_port_state") in failed
    assert ("node checks", "gpu03", "xid") in failed
    assert ("node checks", "gpu03", "gdr_ib_write_bw") in failed  # the consequence of the Down port
    assert ("attribution", "ib_write_bw.node", "gpu02") in failed
    assert ("attribution", "ib_write_bw.link", "gpu03:mlx5_2/1") in failed
    assert ("benchmark gates", "ib_write_bw.ib_write_bw", "gpu02__gpu03__mlx5_2") in failed
    assert ("benchmark gates", "ib_write_bw.ib_write_bw", "gpu03__gpu01__mlx5_2") in failed
    assert ("stages", "stage", "benchmark") in failed
    assert not any(case.classname == "gpu01" for _, case in cases if case.result)
    assert suites["node checks"].failures == 4
    # one failing case per record that did not pass: the benchmark stage, gpu03's 4 checks, 9 ib_write_bw pairs
    # (7 slow through gpu02, 2 not run over gpu03's Down port) and the 2 attributions; nccl failed nothing
    assert len(failed) == sum(1 for record in records if record["verdict"] == "FAIL") == 16
    assert not any(name == "benchmark gates" and classname.startswith("nccl.") for name, classname, _ in failed)
    link = next(case for _, case in cases if case.name == "gpu02__gpu03__mlx5_2")
    assert link.result[0].message == "mlx5_2/1 is not Active on gpu03"


def test_junit_warn_passes_and_unknown_is_skipped():
    base = export.load_records(RUN)[0]
    warn = dict(base, verdict="WARN", detail="slow")
    unknown = dict(base, stage="k8s", verdict="UNKNOWN", detail="not run")
    xml = JUnitXml.fromstring(export.to_junit([warn, unknown]).encode())
    first, second = list(next(iter(xml)))
    assert first.is_passed and "WARN: slow" in first.system_out
    assert isinstance(second.result[0], Skipped)


def test_ctrf_follows_the_ctrf_schema_rules(records):
    report = export.to_ctrf(records, now_ms=1_790_000_000_000)
    jsonschema.Draft7Validator(CTRF_RULES).validate(report)
    summary = report["results"]["summary"]
    assert summary["tests"] == len(records)
    assert summary["failed"] == sum(1 for record in records if record["verdict"] == "FAIL")
    assert summary["passed"] + summary["failed"] + summary["other"] + summary["skipped"] == summary["tests"]
    slow = next(test for test in report["results"]["tests"] if test["name"] == "ib_write_bw.node gpu02")
    assert slow["status"] == "failed"
    assert slow["labels"]["nodes"] == ["gpu02"]


def test_ctrf_rules_refuse_a_wrong_status(records):
    report = export.to_ctrf(records[:1], now_ms=0)
    report["results"]["tests"][0]["status"] = "PASS"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(CTRF_RULES).validate(report)


def test_verdicts_document_drains_and_taints_the_failed_nodes(records):
    document = export.to_verdicts(records, now="2026-11-26T12:40:00Z")
    schema = json.loads((ROOT / "schemas" / "node-verdicts.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(document)
    nodes = {entry["node"]: entry for entry in document["nodes"]}
    assert {node: entry["verdict"] for node, entry in nodes.items()} == {
        "gpu01": "PASS",  # its slow ib_write_bw pairs all lead to gpu02, the slow node
        "gpu02": "FAIL",
        "gpu03": "FAIL",
    }
    assert document["counts"] == {"PASS": 1, "WARN": 0, "FAIL": 2, "UNKNOWN": 0}
    slurm = nodes["gpu03"]["actions"]["slurm"]
    assert slurm["state"] == "DRAIN"
    assert slurm["command"][:4] == ["scontrol", "update", "NodeName=gpu03", "State=DRAIN"]
    assert slurm["reason"] == (
        "gpuforge: check ecc_volatile_dbe; check ib_port_state; check xid; "
        "check gdr_ib_write_bw (caused by ib_port_state); ib_write_bw: slow link gpu03:mlx5_2/1"
    )
    assert nodes["gpu02"]["actions"]["slurm"]["reason"] == "gpuforge: ib_write_bw: slow node"
    kube = nodes["gpu02"]["actions"]["kubernetes"]
    assert kube["taint"] == {"key": "gpuforge/health", "value": "fail", "effect": "NoSchedule"}
    assert kube["command"] == ["kubectl", "taint", "nodes", "gpu02", "gpuforge/health=fail:NoSchedule", "--overwrite"]
    # a passed node is resumed and untainted
    assert nodes["gpu01"]["actions"]["slurm"] == {
        "state": "RESUME",
        "reason": "",
        "command": ["scontrol", "update", "NodeName=gpu01", "State=RESUME"],
    }
    assert nodes["gpu01"]["actions"]["kubernetes"] == {
        "taint": None,
        "labels": {"gpuforge/health": "pass"},
        "command": ["kubectl", "taint", "nodes", "gpu01", "gpuforge/health:NoSchedule-"],
    }
    # a warned node is neither drained nor resumed, only labelled: a slow link over every node (what an NCCL rail
    # run below half the median of the rails names; the demo run of 2026-11-26T12:22 had one over mlx5_1)
    rail = dict(kind="attribution", benchmark="nccl", subject="link", name="nccl-rail-mlx5_1-1", verdict="FAIL")
    rail.update(nodes=["gpu01", "gpu02", "gpu03"], remedy="r")
    warned = {entry["node"]: entry for entry in export.to_verdicts([*records, rail], now="x")["nodes"]}
    assert warned["gpu01"]["verdict"] == "WARN"
    assert warned["gpu01"]["actions"]["slurm"] == {"state": "NONE", "reason": "", "command": None}
    assert warned["gpu01"]["actions"]["kubernetes"] == {
        "taint": None,
        "labels": {"gpuforge/health": "warn"},
        "command": None,
    }
    # gpu01's own records (its checks, all passed) resume it
    (alone,) = export.to_verdicts([r for r in records if r.get("node") == "gpu01"], now="x")["nodes"]
    assert alone["verdict"] == "PASS" and alone["actions"]["slurm"]["state"] == "RESUME"
    assert alone["actions"]["kubernetes"]["labels"] == {"gpuforge/health": "pass"}


def test_slurm_reason_is_bounded():
    reasons = [{"verdict": "FAIL", "what": f"check number_{index}", "remedy": ""} for index in range(40)]
    reason = export._slurm_reason(reasons)
    assert len(reason) == export.SLURM_REASON_MAX
    assert reason.endswith("...")


@pytest.mark.parametrize("fmt", ["junit", "ctrf", "verdicts"])
def test_cli_export(fmt, tmp_path, capsys):
    out = tmp_path / f"out.{fmt}"
    assert cli.main(["export", "--format", fmt, str(RUN), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    if fmt == "junit":
        assert JUnitXml.fromstring(text.encode()).failures == 16
    else:
        assert json.loads(text)
    assert capsys.readouterr().out == f"export: {out}\n"
    assert cli.main(["export", "--format", fmt, str(RUN)]) == 0
    printed = capsys.readouterr().out
    if fmt == "junit":
        assert printed == text
    else:  # the same document but for the time it was made
        assert _timeless(json.loads(printed)) == _timeless(json.loads(text))


def _timeless(document):
    document.pop("generated_at", None)
    for key in ("start", "stop"):
        document.get("results", {}).get("summary", {}).pop(key, None)
    return document


def test_cli_export_refuses_an_unknown_shape(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(RUN / "validate", run / "validate")
    broken = run / "validate" / "validation" / "gpu01.json"
    data = json.loads(broken.read_text(encoding="utf-8"))
    del data["records"][0]["verdict"]
    broken.write_text(json.dumps(data), encoding="utf-8")
    assert cli.main(["export", "--format", "junit", str(run)]) == 1
    assert "missing key 'verdict'" in capsys.readouterr().err
    assert cli.main(["export", "--format", "junit", str(tmp_path / "absent")]) == 2
