"""playbooks/validate.yml end to end on this scenario's DGX-1 lab node (side_effect.yml): the files it wrote, the
records gpuforge report and export build from them, and the verdicts, healthy and with one InfiniBand port down.

What the node's checks read is simulated (nvidia-smi, ibstat, lspci, dmesg, dcgmi, nvbandwidth, ib_write_bw: the
lab's simulators, stdout byte-compatible with the tools); the playbook, its module run over the connection, the
report files and their records are the real ones.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from gpuforge.paths import PROJECT_ROOT, collection_import
from gpuforge.report.export import load_records

testinfra_hosts = ["gpuforge-mol-gpudirect"]

HOST = "gpuforge-mol-gpudirect"
SCHEMAS = PROJECT_ROOT / "schemas"
SCHEMA_OF = {"node_check": "node-check.schema.json"}
# What a diagnostic adds to the node's checks (gpu_node_check diagnostics), beside the snapshot's own.
DIAGNOSTIC_CHECKS = {"dcgm_diag", "nvbandwidth", "gdr_ib_write_bw"}
# The DGX-1's four EDR ports (lab/profiles/dgx1-v100-edr.yml), each measured by the GPUDirect RDMA loopback.
PORTS = {"mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"}


def _run(name: str) -> Path:
    return Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / name


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _verdicts(run: str) -> dict:
    built = load_records(_run(run))
    for record in built:
        schema = _read(SCHEMAS / SCHEMA_OF[record["kind"]])
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(record)
    assert {record["node"] for record in built} == {HOST}
    return {record["check"]: record for record in built}


@pytest.mark.parametrize("run", ["validate-healthy", "validate-port-down"])
def test_each_run_wrote_the_report_and_the_three_diagnostics(run):
    validation = _run(run) / "validation"
    names = sorted(str(path.relative_to(validation)) for path in validation.rglob("*.json"))
    assert names == sorted(f"{folder}{HOST}.json" for folder in ("", "dcgm/", "gdr/", "nvbandwidth/"))
    report = _read(validation / f"{HOST}.json")
    assert report["host"] == HOST
    assert report["system"] == "dgx1-v100-edr"
    # The root causes: a failure caused by another failed check (caused_by) counts once, under its cause.
    roots = [r["check"] for r in report["records"] if r["verdict"] == "FAIL" and not r["caused_by"]]
    assert report["verdict"]["failed_checks"] == roots
    # The verdict the file holds is the one verdict function's over the records it holds.
    records = collection_import("plugins.module_utils.gpuforge_records")
    assert report["verdict"] == records.node_verdicts(records.node_check_records(report))[HOST]


def test_the_healthy_node_passes_every_check_and_each_diagnostic_ran():
    validation = _run("validate-healthy") / "validation"
    report = _read(validation / f"{HOST}.json")
    assert report["verdict"]["healthy"] is True, report["verdict"]
    verdicts = _verdicts("validate-healthy")
    assert set(verdicts) >= DIAGNOSTIC_CHECKS
    assert {name: record["verdict"] for name, record in verdicts.items() if record["verdict"] != "PASS"} == {}
    for name in ("dcgm", "nvbandwidth"):
        result = _read(validation / name / f"{HOST}.json")
        assert (result["ran"], result["healthy"]) == (True, True), result
    gdr = _read(validation / "gdr" / f"{HOST}.json")
    assert (gdr["applicable"], gdr["ran"], gdr["healthy"]) == (True, True, True), gdr
    assert {f"{entry['hca']}/{entry['port']}" for entry in gdr["plan"]} == PORTS


def test_a_port_down_fails_its_check_and_the_loopback_through_it_only():
    validation = _run("validate-port-down") / "validation"
    report = _read(validation / f"{HOST}.json")
    assert (report["verdict"]["verdict"], report["verdict"]["healthy"]) == ("FAIL", False)
    assert report["verdict"]["failed_checks"] == ["ib_port_state"]
    verdicts = _verdicts("validate-port-down")
    failed = {name: record for name, record in verdicts.items() if record["verdict"] == "FAIL"}
    assert sorted(failed) == ["gdr_ib_write_bw", "ib_port_state"], {n: r["observed"] for n, r in failed.items()}
    assert failed["ib_port_state"]["observed"] == {"mlx5_1/1": "Down/Disabled"}
    assert failed["ib_port_state"]["caused_by"] == []
    assert failed["gdr_ib_write_bw"]["caused_by"] == ["ib_port_state"]
    gdr = _read(validation / "gdr" / f"{HOST}.json")
    assert gdr["healthy"] is False
    statuses = {key: port["status"] for key, port in gdr["check"]["observed"]["ports"].items()}
    assert {key for key, status in statuses.items() if status != "ok"} == {"mlx5_1/1"}, statuses
