"""Exports of a run's result records: JUnit XML, CTRF JSON and a per-node verdict document.

``load_records(run_dir)`` turns what the playbooks wrote into the run directory into typed records
(module_utils/gpuforge_records.py, schemas/*.schema.json); every exporter reads only those records.

Formats, and where their rules come from:
* JUnit XML: ``<testsuites>/<testsuite>/<testcase classname name>`` with ``<failure>`` or ``<skipped>``, the
  layout Jenkins' JUnit plugin and junitparser read (the schema most tools follow:
  https://github.com/windyroad/JUnit-Schema/blob/master/JUnit.xsd). One case per node x check, per benchmark
  gate, per attribution and per stage. JUnit has no "warning": a WARN case passes and says WARN in its
  ``system-out``; UNKNOWN is ``skipped``.
* CTRF (Common Test Report Format): ``reportFormat: "CTRF"``, ``specVersion``, ``results.tool.name``,
  ``results.summary`` counts with ``start``/``stop`` in milliseconds since the epoch, ``results.tests[]`` with
  ``name``, ``status`` (passed/failed/skipped/pending/other) and ``duration`` in milliseconds; per-test
  ``labels`` hold scalars (https://github.com/ctrf-io/ctrf/blob/main/schema/ctrf.schema.json). WARN is
  ``other`` with ``rawStatus: "WARN"``.
* Verdict document (schemas/node-verdicts.schema.json): per node PASS/WARN/FAIL/UNKNOWN with the actions a
  scheduler takes: Slurm ``scontrol update NodeName=N State=DRAIN Reason=...`` / ``State=RESUME``
  (https://slurm.schedmd.com/scontrol.html) and a Kubernetes ``NoSchedule`` taint plus a label
  (``kubectl taint nodes N key=value:NoSchedule``, https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/).
"""

from __future__ import annotations

import json
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from gpuforge.paths import collection_import

FORMATS = ("junit", "ctrf", "verdicts")
CTRF_SPEC_VERSION = "0.0.0"
TOOL = "gpuforge"
TAINT_KEY = "gpuforge/health"
LABEL_KEY = "gpuforge/health"
SLURM_REASON_MAX = 250  # kept short for sinfo -R / squeue columns; Slurm itself takes a longer string


def _records_module():
    return collection_import("plugins.module_utils.gpuforge_records")


def _read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _result_files(run_dir: Path):
    """Result files under run_dir, outside runner/ folders: {"validation": validation/<host>.json files,
    "bench": bench/<run>/summary.json files, "k8s": k8s/verify.json files, "burnin": burnin/summary.json files}.

    One directory walk (a 256-node run has tens of thousands of ib_write_bw pair files under bench/, never read).
    Files under validation/'s subfolders (dcgm/, nvbandwidth/) are the raw results behind node checks that the
    node's own report already holds.
    """
    found: dict = {"validation": [], "bench": [], "k8s": [], "burnin": []}
    for folder, subfolders, files in os.walk(run_dir):
        subfolders[:] = sorted(name for name in subfolders if name != "runner")
        here = Path(folder)
        if here.name == "validation":
            found["validation"] += [here / name for name in sorted(files) if name.endswith(".json")]
            subfolders[:] = []
        elif here.parent.name == "bench" and "summary.json" in files:
            found["bench"].append(here / "summary.json")
            subfolders[:] = []  # the parsed results behind it: their chart data are in its records already
        elif here.name == "k8s" and "verify.json" in files:
            found["k8s"].append(here / "verify.json")
        elif here.name == "burnin" and "summary.json" in files:
            found["burnin"].append(here / "summary.json")
            subfolders[:] = []
    return found


def _bench_rerun(path: Path, records_mod) -> str:
    """The command that writes a bench summary.json again: gpuforge k8s verify for its in-pod pair's
    (bench/k8s-rdma-<id>/), the benchmarks for the others."""
    return "run `gpuforge k8s verify` again" if path.parent.name.startswith("k8s-rdma-") else records_mod.BENCH_RERUN


def load_records(run_dir: Path, validation_files=None, bench_summaries=None) -> list:
    """Records of every result file under ``run_dir`` (a CLI run directory, or any folder holding them).

    ``validation/<host>.json`` (the node_check records gpu_node_check returned and the node's fleet_consistency
    record, as validate.yml wrote them; the newest ``checked_at`` of a host wins when stages copied it twice),
    ``bench/<run>/summary.json`` (its ``records``: benchmark gates with their chart data, and attributions, as
    summary.yml wrote them), ``k8s/verify.json`` (gpuforge k8s verify),
    ``burnin/summary.json`` (gpuforge burnin rounds) and the run's own ``summary.json`` (stages). The optional
    lists replace the search under run_dir (the shared artifacts/ folders). A file of the wrong shape raises
    gpuforge_records.RecordError naming the file.
    """
    records_mod = _records_module()
    run_dir = Path(run_dir)
    run_id = None
    records: list = []
    top = run_dir / "summary.json"
    if top.is_file():
        summary = _read(top)
        run_id = summary.get("run_id")
        records += records_mod.stage_result_records(summary)
    found = _result_files(run_dir) if run_dir.is_dir() else {"validation": [], "bench": [], "k8s": [], "burnin": []}
    validation_files = found["validation"] if validation_files is None else validation_files
    bench_summaries = found["bench"] if bench_summaries is None else bench_summaries
    hosts: dict = {}
    for path in validation_files:
        data = _read(path)
        if not isinstance(data, dict):
            raise records_mod.RecordError(f"{path}: not an object")
        host = data.get("host") or path.stem
        if host not in hosts or str(data.get("checked_at") or "") > str(hosts[host].get("checked_at") or ""):
            hosts[host] = data
    for host in sorted(hosts):
        records += records_mod.node_check_records(hosts[host], run_id)
    for path in bench_summaries:
        records += records_mod.bench_summary_records(_read(path), run_id, str(path), _bench_rerun(path, records_mod))
    for path in found["k8s"]:
        records += records_mod.k8s_check_records(_object(path, records_mod), run_id)
    for path in found["burnin"]:
        records += records_mod.burnin_round_records(_object(path, records_mod), run_id)
    return records


def _object(path: Path, records_mod):
    data = _read(path)
    if not isinstance(data, dict):
        raise records_mod.RecordError(f"{path}: not an object")
    return data


def burnin_summaries(run_dir: Path) -> list:
    """The burnin/summary.json files under run_dir (the report reads their trend beside the records)."""
    return _result_files(Path(run_dir))["burnin"] if Path(run_dir).is_dir() else []


def load_burnin_trends(run_dir: Path) -> dict:
    """{node: trend verdict} of the burn-in summaries under run_dir (gpuforge_records.burnin_trend_verdicts)."""
    records_mod = _records_module()
    trends: dict = {}
    if Path(run_dir).is_dir():
        for path in _result_files(Path(run_dir))["burnin"]:
            trends.update(records_mod.burnin_trend_verdicts(_object(path, records_mod)))
    return trends


def _case_id(record) -> tuple:
    """(suite, classname, name) of a record's test case."""
    kind = record["kind"]
    if kind == "node_check":
        return "node checks", record["node"], record["check"]
    if kind == "benchmark_run":
        return "benchmark gates", f"{record['benchmark']}.{record['group']}", record["name"]
    if kind == "attribution":
        return "attribution", f"{record['benchmark']}.{record['subject']}", record["name"]
    if kind == "k8s_check":
        return "kubernetes checks", record["node"] or record["subject"], record["check"]
    if kind == "burnin_round":
        return "burn-in rounds", record["node"], f"round {record['round']}"
    return "stages", "stage", record["stage"]


def _message(record) -> str:
    kind = record["kind"]
    if kind == "node_check":
        return f"{record['node']} {record['check']}: observed {json.dumps(record['observed'])}, expected " + json.dumps(
            record["threshold"]["expected"]
        )
    if kind == "benchmark_run":
        return record["reason"]
    if kind == "attribution":
        return "; ".join(record["observed"]["reasons"][:3])
    if kind == "k8s_check":
        return f"{record['check']}: observed {json.dumps(record['observed'])}, expected " + json.dumps(
            record["threshold"]["expected"]
        )
    if kind == "burnin_round":
        return "; ".join(record["reasons"][:3]) or record["verdict"]
    return record["detail"]


def to_junit(records) -> str:
    """JUnit XML text: a testsuite per record group, a testcase per record."""
    suites: dict = {}
    for record in records:
        suite, classname, name = _case_id(record)
        suites.setdefault(suite, []).append((classname, name, record))
    root = ET.Element("testsuites", name=TOOL)
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for suite_name, cases in suites.items():
        failures = sum(1 for *_, record in cases if record["verdict"] == "FAIL")
        skipped = sum(1 for *_, record in cases if record["verdict"] == "UNKNOWN")
        suite = ET.SubElement(
            root,
            "testsuite",
            name=suite_name,
            tests=str(len(cases)),
            failures=str(failures),
            errors="0",
            skipped=str(skipped),
        )
        for classname, name, record in cases:
            case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
            message = _message(record)
            if record["verdict"] == "FAIL":
                failure = ET.SubElement(case, "failure", message=message[:500], type=record["kind"])
                failure.text = f"{message}\nremedy: {record.get('remedy') or '-'}"
            elif record["verdict"] == "UNKNOWN":
                ET.SubElement(case, "skipped", message=message[:500] or "not judged")
            elif record["verdict"] == "WARN":
                ET.SubElement(case, "system-out").text = f"WARN: {message}\nremedy: {record.get('remedy') or '-'}"
        totals["tests"] += len(cases)
        totals["failures"] += failures
        totals["skipped"] += skipped
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("skipped", str(totals["skipped"]))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


_CTRF_STATUS = {"PASS": "passed", "FAIL": "failed", "UNKNOWN": "skipped", "WARN": "other"}


def _label(value):
    return value if isinstance(value, (str, int, float, bool)) and value is not None else json.dumps(value)


def to_ctrf(records, now_ms: int | None = None) -> dict:
    """CTRF report object (json.dumps it to write the file)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    tests = []
    counts = {"passed": 0, "failed": 0, "skipped": 0, "pending": 0, "other": 0}
    for record in records:
        suite, classname, name = _case_id(record)
        status = _CTRF_STATUS[record["verdict"]]
        counts[status] += 1
        test = {
            "name": f"{classname} {name}",
            "status": status,
            "duration": 0,
            "suite": [suite, classname],
            "rawStatus": record["verdict"],
            "labels": {"kind": record["kind"], "verdict": record["verdict"]},
        }
        if record["kind"] == "node_check":
            test["labels"]["node"] = record["node"]
        if record["kind"] in ("benchmark_run", "attribution"):
            test["labels"]["nodes"] = list(record["nodes"]) or [""]
        if record["verdict"] != "PASS":
            test["message"] = _message(record) or record["verdict"]
            if record.get("remedy"):
                test["trace"] = f"remedy: {record['remedy']}"
        tests.append(test)
    return {
        "reportFormat": "CTRF",
        "specVersion": CTRF_SPEC_VERSION,
        "generatedBy": TOOL,
        "results": {
            "tool": {"name": TOOL},
            "summary": {"tests": len(tests), **counts, "start": now_ms, "stop": now_ms},
            "tests": tests,
        },
    }


def _slurm_reason(reasons) -> str:
    text = "gpuforge: " + "; ".join(reason["what"] for reason in reasons if reason["verdict"] == "FAIL")
    return text if len(text) <= SLURM_REASON_MAX else text[: SLURM_REASON_MAX - 3] + "..."


def to_verdicts(records, now: str | None = None, burnin_trends=None) -> dict:
    """The per-node verdict document (schemas/node-verdicts.schema.json); ``burnin_trends``: load_burnin_trends."""
    records_mod = _records_module()
    run_ids = sorted({record.get("run_id") for record in records if record.get("run_id")})
    nodes = []
    counts = {verdict: 0 for verdict in records_mod.VERDICTS}
    for node, entry in sorted(records_mod.node_verdicts(records, burnin_trends).items()):
        verdict = entry["verdict"]
        counts[verdict] += 1
        if not entry["healthy"]:  # node_verdicts: FAIL; WARN and UNKNOWN are healthy for scheduling, flagged
            reason = _slurm_reason(entry["reasons"])
            slurm = {
                "state": "DRAIN",
                "reason": reason,
                "command": ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"],
            }
            taint = {"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"}
            kube_command = ["kubectl", "taint", "nodes", node, f"{TAINT_KEY}=fail:NoSchedule", "--overwrite"]
        elif verdict == "PASS":
            slurm = {
                "state": "RESUME",
                "reason": "",
                "command": ["scontrol", "update", f"NodeName={node}", "State=RESUME"],
            }
            taint = None
            kube_command = ["kubectl", "taint", "nodes", node, f"{TAINT_KEY}:NoSchedule-"]
        else:  # WARN, UNKNOWN: nothing to do to the scheduler; the label tells
            slurm = {"state": "NONE", "reason": "", "command": None}
            taint = None
            kube_command = None
        nodes.append(
            {
                "node": node,
                "verdict": verdict,
                "reasons": entry["reasons"],
                "actions": {
                    "slurm": slurm,
                    "kubernetes": {"taint": taint, "labels": {LABEL_KEY: verdict.lower()}, "command": kube_command},
                },
            }
        )
    return {
        "kind": "node_verdicts",
        "schema_version": records_mod.SCHEMA_VERSION,
        "run_id": run_ids[0] if len(run_ids) == 1 else (",".join(run_ids) or None),
        "generated_at": now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "counts": counts,
        "nodes": nodes,
    }


def export(run_dir: Path, fmt: str) -> str:
    """The text of ``fmt`` (junit | ctrf | verdicts) for the run directory."""
    records = load_records(run_dir)
    if fmt == "junit":
        return to_junit(records)
    if fmt == "ctrf":
        return json.dumps(to_ctrf(records), indent=2) + "\n"
    if fmt == "verdicts":
        return json.dumps(to_verdicts(records, burnin_trends=load_burnin_trends(run_dir)), indent=2) + "\n"
    raise ValueError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
