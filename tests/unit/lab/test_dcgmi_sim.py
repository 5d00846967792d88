"""Simulated dcgmi / nv-hostengine: host engine state, levels, the DCGM 3.x and 4.x JSON shapes, the
dcgm_diag_failure fault and its validation, and the lab mirror packages that install them."""

from __future__ import annotations

import io
import json
import os
import re

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_dcgm import judge_diag, parse_diag
from gpuforge_sim import dcgmi

from gpuforge.lab import mirror, profiles
from gpuforge.lab.profiles import hardware_document, load_profile


def _node(tmp_path, monkeypatch, profile="dgx-h100-ndr", faults=None, version="1:4.4.1-1", engine=True):
    (tmp_path / "lib").mkdir(exist_ok=True)
    if version:
        (tmp_path / "lib" / "dcgm.json").write_text(json.dumps({"version": version}), encoding="utf-8")
    (tmp_path / "hardware.json").write_text(json.dumps(hardware_document(load_profile(profile), faults or [])))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "lib"))
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.delenv("GPUFORGE_SIM_PROG", raising=False)
    if engine:
        dcgmi.hostengine_main(["-n"], io.StringIO(), serve=False)


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    rc = dcgmi.main(argv, out, err)
    return rc, out.getvalue(), err.getvalue()


def test_version_is_the_installed_package_without_epoch_or_revision(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch)
    assert _run(["-v"])[1].startswith("Version : 4.4.1\n")
    (tmp_path / "lib" / "dcgm.json").unlink()
    assert _run(["--version"])[1].startswith(f"Version : {dcgmi.DEFAULT_VERSION}\n")


def test_no_host_engine_prints_the_client_error(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, engine=False)
    rc, out, err = _run(["diag", "-r", "1", "-j"])
    assert (rc, out) == (dcgmi.NO_HOST_ENGINE_RC, "")
    assert err.splitlines() == [
        "Error: unable to establish a connection to the specified host: localhost",
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.",
    ]
    # a pid file of a process that is gone does not count as a running host engine
    os.makedirs(tmp_path / "run", exist_ok=True)
    (tmp_path / "run" / "nv-hostengine.pid").write_text("999999999", encoding="ascii")
    assert _run(["diag", "-r", "1", "-j"])[0] == dcgmi.NO_HOST_ENGINE_RC


def test_host_engine_runs_as_nv_hostengine(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, engine=False)
    monkeypatch.setenv("GPUFORGE_SIM_PROG", "nv-hostengine")
    assert dcgmi.main(["-n", "--service-account", "nvidia-dcgm"], io.StringIO(), io.StringIO(), serve=False) == 0
    assert int((tmp_path / "run" / "nv-hostengine.pid").read_text()) == os.getpid()
    assert dcgmi.host_engine_running()


@pytest.mark.parametrize(("level", "tests"), [("1", 1), ("short", 1), ("2", 3), ("long", 7), ("4", 9), ("xlong", 9)])
def test_levels_add_tests(tmp_path, monkeypatch, level, tests):
    _node(tmp_path, monkeypatch)
    rc, out, _ = _run(["diag", "--run", level, "--json"])
    document = json.loads(out)
    names = [t["name"] for c in document["DCGM Diagnostic"]["test_categories"] for t in c["tests"]]
    assert rc == 0 and len(names) == tests and names[0] == "software"
    assert document["metadata"]["version"] == "4.4.1"
    assert [e["entity_id"] for e in document["entity_groups"][0]["entities"]] == list(range(8))


def test_dcgm4_failure_shape(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, faults=[{"type": "dcgm_diag_failure", "gpu": 6, "test": "pcie"}])
    document = json.loads(_run(["diag", "-r", "2", "-j"])[1])
    pcie = next(c for c in document["DCGM Diagnostic"]["test_categories"] if c["category"] == "Integration")["tests"][0]
    assert pcie["name"] == "pcie" and pcie["test_summary"] == {"status": "Fail"}
    failed = [r for r in pcie["results"] if r["status"] == "Fail"]
    assert [(r["entity_group"], r["entity_group_id"], r["entity_id"]) for r in failed] == [("GPU", 1, 6)]
    assert set(failed[0]["warnings"][0]) == {"error_category", "error_id", "error_severity", "warning"}
    assert "GPU 6" in failed[0]["warnings"][0]["warning"]


def test_missing_gpu_shifts_indices_and_the_fault_follows_the_board(tmp_path, monkeypatch):
    faults = [{"type": "gpu_missing", "gpu": 0}, {"type": "dcgm_diag_failure", "gpu": 3, "test": "software"}]
    _node(tmp_path, monkeypatch, faults=faults)
    software = json.loads(_run(["diag", "-r", "1", "-j"])[1])["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    assert len(software["results"]) == 7
    assert [r["entity_id"] for r in software["results"] if r["status"] == "Fail"] == [2]


def test_dcgm3_shape(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "poweredge-c4140-v100", version="1:3.3.5")
    document = json.loads(_run(["diag", "-r", "2", "-j"])[1])
    assert list(document) == ["DCGM GPU Diagnostic"]
    deployment = document["DCGM GPU Diagnostic"]["test_categories"][0]
    assert deployment["category"] == "Deployment" and len(deployment["tests"]) == 9
    assert deployment["tests"][0]["results"][0] == {"gpu_id": "0", "status": "Pass"}
    assert "test_summary" not in deployment["tests"][0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["diag", "-r", "9", "-j"], "invalid diagnostic level"), (["diag", "-j"], "needs -r"), (["stats"], "only")],
)
def test_bad_arguments(tmp_path, monkeypatch, argv, message):
    _node(tmp_path, monkeypatch)
    rc, _out, err = _run(argv)
    assert rc == 2 and message in err


def test_table_output_is_not_simulated(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch)
    rc, out, _ = _run(["diag", "-r", "1"])
    assert rc == 0 and out.startswith("Successfully ran diagnostic for group.")


@pytest.mark.parametrize(
    ("fault", "field"),
    [
        ({"type": "dcgm_diag_failure", "gpu": 0, "test": "gemm"}, "faults[0].test"),
        ({"type": "dcgm_diag_failure", "gpu": 0, "test": "memtest", "level": 3}, "faults[0].level"),
        ({"type": "dcgm_diag_failure", "gpu": 9, "test": "memory"}, "faults[0].gpu"),
        ({"type": "dcgm_diag_failure", "gpu": 0}, "faults[0]"),
        ({"type": "host_bandwidth_degraded", "gpu": 0, "fraction": 1.5}, "faults[0].fraction"),
        ({"type": "host_bandwidth_degraded", "gpu": 0, "fraction": 0.5, "test": "x"}, "faults[0]"),
    ],
)
def test_bad_faults_are_refused(fault, field):
    with pytest.raises(ValueError, match=re.escape(f": {field}: ")):
        hardware_document(load_profile("dgx-h100-ndr"), [fault])


def test_lab_mirror_ships_dcgm_and_nvbandwidth_with_their_simulators():
    packages = mirror.expand(mirror.load_definitions())
    core = next(
        p
        for p in packages
        if p["name"] == "datacenter-gpu-manager-4-core"
        and p["repo"] == "nvidia-cuda/debian12"
        and p["version"] == "1:4.4.1-1"  # the pinned build; from 4.7.0 nv-hostengine is a package of its own
    )
    assert core["commands"] == {"/usr/bin/dcgmi": "gpuforge_sim.dcgmi", "/usr/bin/nv-hostengine": "gpuforge_sim.dcgmi"}
    assert json.loads(core["files"]["/usr/lib/gpuforge-lab/dcgm.json"]) == {"version": "4.4.1"}  # upstream: no epoch
    assert "nv-hostengine -n --service-account nvidia-dcgm" in core["units"]["nvidia-dcgm.service"]
    cuda12 = next(p for p in packages if p["name"] == "datacenter-gpu-manager-4-cuda12")
    assert cuda12["depends"] == ["datacenter-gpu-manager-4-core (= 1:4.4.1-1)"]
    tool = next(p for p in packages if p["name"] == "nvbandwidth")
    assert tool["commands"] == {"/usr/bin/nvbandwidth": "gpuforge_sim.nvbandwidth"}
    assert not mirror.missing_simulators(core) and not mirror.missing_simulators(tool)


def test_fault_validation_and_simulator_agree_on_the_levels():
    assert profiles.DCGM_TEST_LEVELS == dcgmi.TEST_LEVELS


def test_parser_names_the_bus_id_of_the_gpu_the_simulator_fails(tmp_path, monkeypatch):
    profile = load_profile("dgx-h100-ndr")
    gpus = [{"index": i, "bus_id": d["bus_id"]} for i, d in enumerate(profile["gpu"]["devices"])]
    _node(tmp_path, monkeypatch, faults=[{"type": "dcgm_diag_failure", "gpu": 5, "test": "targeted_stress"}])
    level1 = parse_diag(_run(["diag", "-r", "1", "-j"])[1])
    assert [t["name"] for t in level1["tests"]] == ["software"] and judge_diag(level1, 1, gpus)["status"] == "PASS"
    parsed = parse_diag(_run(["diag", "-r", "3", "-j"])[1])
    assert (parsed["format"], parsed["version"], len(parsed["gpus"])) == ("dcgm4", "4.4.1", 8)
    check = judge_diag(parsed, 3, gpus)
    assert check["status"] == "FAIL"
    assert [(f["test"], f["bus_id"]) for f in check["observed"]["failed"]] == [("targeted_stress", "00000000:C3:00.0")]


def test_parser_reads_the_simulated_dcgm3_shape(tmp_path, monkeypatch):
    faults = [{"type": "dcgm_diag_failure", "gpu": 1, "test": "memory"}]
    _node(tmp_path, monkeypatch, "dgx1-v100-edr", faults, version="1:3.3.5")
    parsed = parse_diag(_run(["diag", "-r", "2", "-j"])[1])
    assert parsed["format"] == "dcgm3"
    names = [t["name"] for t in parsed["tests"]]
    assert names[:2] == ["Denylist", "NVML Library"] and names[-2:] == ["GPU Memory", "PCIe"] and len(names) == 11
    assert [(f["test"], f["gpu"]) for f in judge_diag(parsed, 2)["observed"]["failed"]] == [("GPU Memory", 1)]
