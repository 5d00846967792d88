"""gpu_node_check with diagnostics: the node's checks, then the DCGM diagnostic, nvbandwidth and the GPUDirect RDMA
loopback in the same module run (validate.yml's one round trip per node), against the lab's simulators run as
processes, as on a lab node. Each diagnostic must return what its own module returns on the same node, and its
check must decide the node's verdict as validate.yml's fold of the separate tasks did."""

from __future__ import annotations

import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import (
    dcgm_diag,
    gdr_loopback_bw,
    gpu_node_check,
    nvbandwidth,
)
from gpuforge_sim import dcgmi

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
from gdr_sim_helpers import lab_args, sim_executable
from node_sim_helpers import SimNode, expected_for, nvbandwidth_minimums

# The tools the module runs here, each the lab simulator of the same name (lsmod, dmesg are given as text).
SIMULATED = ("nvidia-smi", "ibstat", "ibv_devinfo", "ibdev2netdev", "dcgmi", "nvbandwidth", "ib_write_bw")
PROFILE = "dgx1-v100-edr"


class LabTools:
    """get_bin_path and run_command of a lab node: each simulated tool is a script on disk that runs the simulator
    with this Python (as the lab package's wrapper does), started as a real process; `calls` records every argv."""

    def __init__(self, directory: Path, missing=()):
        directory.mkdir(exist_ok=True)
        self.paths = {"timeout": shutil.which("timeout")}
        self.paths.update({tool: sim_executable(directory, tool) for tool in SIMULATED if tool not in missing})
        self.calls = []

    def path(self, name):
        return self.paths.get(name)

    def __call__(self, argv, environ_update=None, before_communicate_callback=None, **_kwargs):
        self.calls.append([Path(part).name if part in self.paths.values() else part for part in argv])
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(environ_update or {})},
        )
        if before_communicate_callback:
            before_communicate_callback(process)
        out, err = process.communicate()
        return process.returncode, out, err


@pytest.fixture
def lab_node(tmp_path, monkeypatch):
    """A booted SimNode of PROFILE with these faults, DCGM's host engine running, and the arguments of its check."""

    def boot(faults=()):
        node = SimNode(tmp_path, monkeypatch, PROFILE, list(faults))
        (tmp_path / "lib" / "dcgm.json").write_text(json.dumps({"version": "1:4.4.1"}), encoding="utf-8")
        dcgmi.hostengine_main([], io.StringIO(), serve=False)
        monkeypatch.setenv("GPUFORGE_LAB_PERFTEST_TIMEOUT", "20")
        base = {
            "expected": expected_for(PROFILE),
            "gather": True,
            "clock_event_samples": 0,
            "lsmod": node.lsmod(),
            "kernel_log": node.dmesg(),
            "pcie": False,
        }
        return node, base

    return boot


def diagnostics_options() -> dict:
    """What validate.yml hands the module in the lab: level 1, the SKU's minimums, the lab's loopback settings."""
    return {
        "dcgm": {"level": 1},
        "nvbandwidth": {"testcases": ["h2d", "d2h"], "thresholds": nvbandwidth_minimums(PROFILE)},
        "gdr": lab_args(PROFILE),
    }


def without(result: dict, *keys) -> dict:
    return {key: value for key, value in result.items() if key not in keys}


def test_each_diagnostic_returns_what_its_module_returns_and_decides_the_verdict(tmp_path, lab_node, ansible_module):
    """A slow GPUDirect port (gdr_slow): the snapshot passes, the loopback fails as a root cause."""
    _, base = lab_node([{"type": "gdr_slow", "hca": "mlx5_3", "fraction": 0.0002}])
    tools = LabTools(tmp_path / "bin")
    checked = ansible_module(gpu_node_check, base, tools, bin_path=tools.path)
    assert checked["healthy"] is True and checked["diagnostics"] == {}
    gpus = checked["ansible_facts"]["nvidia_smi"]["gpus"]
    options = diagnostics_options()
    alone = {
        "dcgm": ansible_module(dcgm_diag, {**options["dcgm"], "gpus": gpus}, tools, bin_path=tools.path),
        "nvbandwidth": ansible_module(
            nvbandwidth, {**options["nvbandwidth"], "gpus": gpus}, tools, bin_path=tools.path
        ),
        "gdr": ansible_module(
            gdr_loopback_bw,
            {**options["gdr"], "gpus": gpus, "node_checks": checked["records"]},
            tools,
            bin_path=tools.path,
        ),
    }
    separate_calls, tools.calls = tools.calls, []

    both = ansible_module(gpu_node_check, {**base, "diagnostics": options}, tools, bin_path=tools.path)

    assert tools.calls == separate_calls  # the same runs in the same order, in one module run
    assert list(both["diagnostics"]) == ["dcgm", "nvbandwidth", "gdr"]
    for name in ("dcgm", "nvbandwidth"):
        assert without(both["diagnostics"][name], "checked_at") == alone[name]
    gdr, gdr_alone = both["diagnostics"]["gdr"], alone["gdr"]
    assert without(gdr, "checked_at", "check") == without(gdr_alone, "check")
    assert (gdr["check"]["status"], gdr["check"]["observed"]["low"]) == ("FAIL", ["mlx5_3/1"])
    for result in both["diagnostics"].values():
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", result["checked_at"])
    assert [r["check"] for r in both["records"]] == [r["check"] for r in checked["records"]] + [
        "dcgm_diag",
        "nvbandwidth",
        "gdr_ib_write_bw",
    ]
    assert [without(r, "checked_at") for r in both["records"][: len(checked["records"])]] == [
        without(r, "checked_at") for r in checked["records"]
    ]
    assert {r["verdict"] for r in both["records"][-3:]} == {"PASS", "FAIL"} and both["verdict"] == "FAIL"
    assert (both["healthy"], both["failed_checks"], both["caused_failures"]) == (False, ["gdr_ib_write_bw"], {})


def test_a_port_a_node_check_already_failed_is_its_consequence(tmp_path, lab_node, ansible_module):
    """mlx5_3 down: ib_port_state fails; the loopback on that port fails too, caused by it (node_checks are the
    module's own checks), so the root causes stay the node check's."""
    _, base = lab_node([{"type": "ib_port_state", "hca": "mlx5_3", "port": 1, "state": "Down"}])
    tools = LabTools(tmp_path / "bin")
    result = ansible_module(
        gpu_node_check, {**base, "diagnostics": {"gdr": diagnostics_options()["gdr"]}}, tools, bin_path=tools.path
    )
    check = result["diagnostics"]["gdr"]["check"]
    assert (check["status"], check["caused_by"]) == ("FAIL", "ib_port_state")
    assert result["healthy"] is False and result["failed_checks"] == ["ib_port_state"]
    assert result["caused_failures"]["gdr_ib_write_bw"] == "ib_port_state"


def test_bad_diagnostic_options_fail_before_anything_runs(tmp_path, lab_node, ansible_module):
    _, base = lab_node()
    tools = LabTools(tmp_path / "bin")
    cases = {
        "diagnostics: unknown nccl; the diagnostics are dcgm, nvbandwidth, gdr": {"nccl": {}},
        "diagnostics.dcgm: a dict of its module's options, got 1": {"dcgm": 1},
        "diagnostics.nvbandwidth: missing required arguments: thresholds": {"nvbandwidth": {}},
    }
    for message, diagnostics in cases.items():
        result = ansible_module(
            gpu_node_check, {**base, "diagnostics": diagnostics}, tools, expect_failure=True, bin_path=tools.path
        )
        assert result["msg"] == message
    level = ansible_module(
        gpu_node_check, {**base, "diagnostics": {"dcgm": {"level": 7}}}, tools, expect_failure=True, bin_path=tools.path
    )
    assert level["msg"].startswith("diagnostics.dcgm: value of level must be one of: 1, 2, 3, 4, got: 7")
    assert tools.calls == []


def fake_tool(directory: Path, name: str, out: str, rc: int = 0) -> str:
    """A tool on disk that prints `out` and exits with `rc`: a broken or mismatched build."""
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{out}\nEOF\nexit {rc}\n", encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def assert_judged_without(result: dict, alone: dict, failed: str) -> dict:
    """The node's own checks are those of a run without diagnostics, each judged as there; `failed` is a FAIL record
    and the other diagnostics' checks are judged. Returns the failed record."""
    own = [r["check"] for r in alone["records"]]
    assert [r["check"] for r in result["records"]][: len(own)] == own
    assert [without(r, "checked_at") for r in result["records"][: len(own)]] == [
        without(r, "checked_at") for r in alone["records"]
    ]
    diagnostic_records = {r["check"]: r for r in result["records"][len(own) :]}
    assert set(diagnostic_records) == {"dcgm_diag", "nvbandwidth", "gdr_ib_write_bw"}
    for name, record in diagnostic_records.items():
        assert record["verdict"] == ("FAIL" if name == failed else "PASS"), record
    assert (result["verdict"], result["healthy"], result["failed_checks"]) == ("FAIL", False, [failed])
    return diagnostic_records[failed]


def test_a_missing_diagnostic_tool_fails_its_check_and_the_node_is_still_judged(tmp_path, lab_node, ansible_module):
    """Issue 48 item 3: nvbandwidth not installed on a node. Its check fails, naming the host, the variable that names
    the tool and the role that builds it; DCGM and the GPUDirect loopback still run, the node's own checks are
    judged, and the module returns every record (validate.yml writes them) instead of failing the task."""
    _, base = lab_node()
    tools = LabTools(tmp_path / "bin", missing=("nvbandwidth",))
    alone = ansible_module(gpu_node_check, base, tools, bin_path=tools.path)
    tools.calls = []
    result = ansible_module(gpu_node_check, {**base, "diagnostics": diagnostics_options()}, tools, bin_path=tools.path)
    record = assert_judged_without(result, alone, "nvbandwidth")
    assert record["fault"].startswith(f"nvbandwidth not judged: nvbandwidth not found in PATH on {platform.node()}")
    assert record["remedy"].startswith("nvbandwidth not found: build it with the benchmark_tools role")
    assert "gpuforge_nvbandwidth_executable" in record["remedy"]
    assert "gpuforge_validate_nvbandwidth: false" in record["remedy"]
    assert record["observed"] == {"ran": False, "rc": None}
    outcome = result["diagnostics"]["nvbandwidth"]
    assert (outcome["ran"], outcome["healthy"], outcome["check"]["status"]) == (False, False, "FAIL")
    assert outcome["msg"] in record["fault"]
    ran = {part for call in tools.calls for part in call}  # dcgmi and ib_write_bw run under timeout
    assert {"dcgmi", "ib_write_bw"} <= ran and "nvbandwidth" not in ran


def test_a_missing_dcgm_fails_dcgm_diag_naming_the_driver_roles_variable(tmp_path, lab_node, ansible_module):
    _, base = lab_node()
    tools = LabTools(tmp_path / "bin", missing=("dcgmi",))
    alone = ansible_module(gpu_node_check, base, tools, bin_path=tools.path)
    result = ansible_module(gpu_node_check, {**base, "diagnostics": diagnostics_options()}, tools, bin_path=tools.path)
    record = assert_judged_without(result, alone, "dcgm_diag")
    assert record["remedy"] == (
        "dcgmi not found: install DCGM with the nvidia_driver role (nvidia_driver_dcgm_enabled: true), or leave the "
        "diagnostic out with gpuforge_validate_dcgm: false"
    )
    assert f"dcgmi not found in PATH on {platform.node()}" in record["fault"]


@pytest.mark.parametrize(
    ("tool", "out", "rc", "check", "fault"),
    [
        # nvbandwidth built against another CUDA: it exits non-zero with the CUDA error.
        (
            "nvbandwidth",
            "CUDA error: CUDA driver version is insufficient for CUDA runtime version",
            1,
            "nvbandwidth",
            "nvbandwidth exited with code 1 on",
        ),
        # A build that prints something else than nvbandwidth's matrices, and exits 0.
        ("nvbandwidth", "Segmentation fault\n\x00\x7f garbage 12.5 GB/s", 0, "nvbandwidth", "nvbandwidth output"),
        # dcgmi printing no JSON (an old DCGM without -j, or a crash banner).
        ("dcgmi", "Error: unrecognized option -j\nUsage: dcgmi diag", 0, "dcgm_diag", "printed no readable result"),
        ("dcgmi", '{"DCGM GPU Diagnostic": {"test_categories": 7}}', 0, "dcgm_diag", "printed no readable result"),
    ],
)
def test_a_broken_diagnostic_tool_fails_its_check_and_the_node_is_still_judged(
    tmp_path, lab_node, ansible_module, tool, out, rc, check, fault
):
    """A tool that runs but exits non-zero or prints what its parser cannot read: its check FAILs naming what it
    printed and what to look at; never a traceback, and every other check is judged and returned."""
    _, base = lab_node()
    tools = LabTools(tmp_path / "bin")
    alone = ansible_module(gpu_node_check, base, tools, bin_path=tools.path)
    tools.paths[tool] = fake_tool(tmp_path / "broken", tool, out, rc)
    result = ansible_module(gpu_node_check, {**base, "diagnostics": diagnostics_options()}, tools, bin_path=tools.path)
    record = assert_judged_without(result, alone, check)
    assert record["fault"].startswith(f"{check} not judged: ") and fault in record["fault"]
    assert "not found" not in record["remedy"] and "run validate.yml again" in record["remedy"]
    assert result["diagnostics"][{"dcgm_diag": "dcgm"}.get(check, check)]["ran"] is False


def test_a_judge_that_meets_unexpected_output_fails_the_check_not_the_module(
    tmp_path, lab_node, ansible_module, monkeypatch
):
    """Output the parser accepts but the judge cannot use (here a testcase without its matrix) raises inside the
    judge: the check fails naming the error, the other checks stand."""
    from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_diagnostics

    parse = gpuforge_diagnostics.parse_output

    def no_matrix(text):
        parsed = parse(text)
        for case in parsed["testcases"].values():
            del case["matrix"]
        return parsed

    _, base = lab_node()
    tools = LabTools(tmp_path / "bin")
    alone = ansible_module(gpu_node_check, base, tools, bin_path=tools.path)
    monkeypatch.setattr(gpuforge_diagnostics, "parse_output", no_matrix)
    result = ansible_module(gpu_node_check, {**base, "diagnostics": diagnostics_options()}, tools, bin_path=tools.path)
    record = assert_judged_without(result, alone, "nvbandwidth")
    assert record["fault"].startswith("nvbandwidth not judged: gpuforge could not judge nvbandwidth's output on ")
    assert "KeyError" in record["fault"]


def test_validate_writes_every_nodes_records_when_one_node_lacks_a_tool(tmp_path, lab_node, ansible_module):
    """validate.yml's controller side (filter gpuforge_validation_files) over two nodes, one without nvbandwidth:
    both get their report and a verdict; the broken one FAILs on nvbandwidth alone (it used to get no file)."""
    from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_validation import gpuforge_validation_files

    _, base = lab_node()
    healthy_tools = LabTools(tmp_path / "bin")
    broken_tools = LabTools(tmp_path / "bin-broken", missing=("nvbandwidth",))
    results = {
        "gpu01": ansible_module(
            gpu_node_check,
            {**base, "node": "gpu01", "diagnostics": diagnostics_options()},
            healthy_tools,
            bin_path=healthy_tools.path,
        ),
        "gpu02": ansible_module(
            gpu_node_check,
            {**base, "node": "gpu02", "diagnostics": diagnostics_options()},
            broken_tools,
            bin_path=broken_tools.path,
        ),
    }
    hosts = [{"inventory_hostname": host, "gpuforge_node_check": result} for host, result in results.items()]
    built = gpuforge_validation_files(hosts, str(tmp_path / "validation"))
    paths = {file["path"].rsplit("validation/", 1)[1] for file in built["files"]}
    assert {"gpu01.json", "gpu02.json", "nvbandwidth/gpu01.json", "nvbandwidth/gpu02.json"} <= paths
    assert built["verdicts"]["gpu01"]["verdict"] == "PASS"
    assert (built["verdicts"]["gpu02"]["verdict"], built["verdicts"]["gpu02"]["failed_checks"]) == (
        "FAIL",
        ["nvbandwidth"],
    )
    assert built["summary"] == ["gpu01 | PASS", "gpu02 | FAIL: nvbandwidth"]
    report = json.loads(next(f["content"] for f in built["files"] if f["path"].endswith("/validation/gpu02.json")))
    assert len(report["records"]) == len(results["gpu01"]["records"])


def test_check_mode_runs_no_diagnostic(tmp_path, lab_node, ansible_module):
    _, base = lab_node()
    tools = LabTools(tmp_path / "bin")
    result = ansible_module(
        gpu_node_check, {**base, "diagnostics": diagnostics_options()}, tools, check_mode=True, bin_path=tools.path
    )
    assert {name: r["msg"] for name, r in result["diagnostics"].items()} == {
        "dcgm": "check mode: the DCGM diagnostic was not run",
        "nvbandwidth": "check mode: nvbandwidth was not run",
        "gdr": "check mode: ib_write_bw was not run",
    }
    assert not any("check" in r for r in result["diagnostics"].values())
    assert result["healthy"] is True
    assert [call[0] for call in tools.calls if call[0] in ("timeout", "dcgmi", "nvbandwidth", "ib_write_bw")] == []


def test_p2p_is_left_out_on_a_node_with_one_gpu(tmp_path, lab_node, ansible_module):
    """nvbandwidth's GPU<->GPU copies need two GPUs: validate.yml asks for p2p by the SKU's minimum, the module
    leaves it out where fewer than two GPUs answered (as validate.yml did from the gathered count)."""
    node, base = lab_node()
    tools = LabTools(tmp_path / "bin")
    facts = node.nvidia_smi_facts(samples=0)
    one_gpu = {**facts, "gpus": facts["gpus"][:1], "gpu_count": 1}
    args = {
        **{k: v for k, v in base.items() if k not in ("gather", "clock_event_samples")},
        "nvidia_smi": one_gpu,
        "infiniband": node.infiniband_facts(),
        "diagnostics": {
            "nvbandwidth": {"testcases": ["h2d", "d2h", "p2p"], "thresholds": {"h2d": 1, "d2h": 1, "p2p": 1}}
        },
    }
    result = ansible_module(gpu_node_check, args, tools, bin_path=tools.path)
    assert result["diagnostics"]["nvbandwidth"]["cmd"][2:] == ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce"]
    assert result["diagnostics"]["nvbandwidth"]["check"]["status"] == "PASS"
