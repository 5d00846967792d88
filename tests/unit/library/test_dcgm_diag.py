"""dcgm_diag module: dcgmi answered by the lab's simulator in-process (a booted SimNode, its nvidia-smi facts)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import dcgm_diag
from gpuforge_sim import dcgmi

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from node_sim_helpers import GPU_PROFILES, SimNode

PATHS = {"dcgmi": "/usr/bin/dcgmi", "timeout": "/usr/bin/timeout"}


def node_with_dcgm(tmp_path, monkeypatch, profile, faults=None, host_engine=True, version="1:4.4.1"):
    node = SimNode(tmp_path, monkeypatch, profile, faults)
    (tmp_path / "lib" / "dcgm.json").write_text(json.dumps({"version": version}), encoding="utf-8")
    if host_engine:
        dcgmi.hostengine_main([], io.StringIO(), serve=False)
    return node


def sim_dcgmi(calls):
    """run_command answered by the simulator: run_bounded wraps the argv in timeout --kill-after=30 <s>."""

    def run_command(argv, **kwargs):
        calls.append((argv, kwargs))
        assert argv[:2] == ["/usr/bin/timeout", "--kill-after=30"]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()):
            rc = dcgmi.main(list(argv[4:]), out, err)
        return rc, out.getvalue(), err.getvalue()

    return run_command


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_healthy_node_of_every_gpu_profile_passes_level_1(tmp_path, monkeypatch, ansible_module, profile):
    node = node_with_dcgm(tmp_path, monkeypatch, profile)
    gpus = node.nvidia_smi_facts(samples=0)["gpus"]
    calls = []
    result = ansible_module(dcgm_diag, {"gpus": gpus}, sim_dcgmi(calls), bin_path=PATHS.get)
    assert (result["ran"], result["healthy"], result["changed"]) == (True, True, False)
    assert result["check"]["status"] == "PASS" and result["check"]["fault"] == ""
    assert sorted(result["check"]["observed"]["per_gpu"]) == sorted(g["bus_id"] for g in gpus)
    argv, kwargs = calls[0]
    assert argv[2:] == ["600", "/usr/bin/dcgmi", "diag", "-r", "1", "-j"]
    assert kwargs["environ_update"]["LC_ALL"] == "C"


def test_injected_failure_names_test_and_bus_id_at_its_level_only(tmp_path, monkeypatch, ansible_module):
    faults = [{"type": "dcgm_diag_failure", "gpu": 3, "test": "memory", "level": 3}]
    node = node_with_dcgm(tmp_path, monkeypatch, "dgx-h100-ndr", faults)
    gpus = node.nvidia_smi_facts(samples=0)["gpus"]
    bus = next(g["bus_id"] for g in gpus if g["index"] == 3)
    validate = ansible_module(dcgm_diag, {"gpus": gpus, "level": 2}, sim_dcgmi([]), bin_path=PATHS.get)
    assert validate["healthy"] is True  # the fault shows from level 3 on
    burnin = ansible_module(dcgm_diag, {"gpus": gpus, "level": 3}, sim_dcgmi([]), bin_path=PATHS.get)
    assert burnin["healthy"] is False and burnin["check"]["status"] == "FAIL"
    assert burnin["check"]["observed"]["failed"][0]["bus_id"] == bus == "00000000:61:00.0"
    assert f"memory on {bus}" in burnin["check"]["fault"] and "Drain the node" in burnin["check"]["remedy"]
    assert burnin["dcgm"]["tests"][-1]["name"] == "memory_bandwidth"


def test_dcgm3_install_is_read_too(tmp_path, monkeypatch, ansible_module):
    faults = [{"type": "dcgm_diag_failure", "gpu": 0, "test": "software"}]
    node = node_with_dcgm(tmp_path, monkeypatch, "poweredge-c4140-v100", faults, version="1:3.3.5")
    gpus = node.nvidia_smi_facts(samples=0)["gpus"]
    result = ansible_module(dcgm_diag, {"gpus": gpus}, sim_dcgmi([]), bin_path=PATHS.get)
    assert result["dcgm"]["format"] == "dcgm3"
    assert [(f["test"], f["gpu"]) for f in result["check"]["observed"]["failed"]] == [("Page Retirement/Row Remap", 0)]


def test_host_engine_not_running_is_named_with_its_fix(tmp_path, monkeypatch, ansible_module):
    node_with_dcgm(tmp_path, monkeypatch, "dgx1-v100-edr", host_engine=False)
    result = ansible_module(dcgm_diag, {}, sim_dcgmi([]), expect_failure=True, bin_path=PATHS.get)
    assert "nv-hostengine) is not running" in result["msg"]
    assert "systemctl enable --now nvidia-dcgm" in result["msg"] and "Unable to connect to host engine" in result["msg"]


def test_missing_dcgmi_names_the_package_and_role_variable(ansible_module):
    result = ansible_module(dcgm_diag, {}, expect_failure=True, bin_path=lambda name: None)
    assert "dcgmi not found" in result["msg"]
    assert "nvidia_driver_dcgm_enabled" in result["msg"] and "datacenter-gpu-manager-4-cuda12" in result["msg"]


def test_check_mode_does_not_run_the_diagnostic(ansible_module):
    def run_command(argv, **_kwargs):
        raise AssertionError(f"ran {argv} in check mode")

    result = ansible_module(dcgm_diag, {"level": 3}, run_command, check_mode=True, bin_path=PATHS.get)
    assert (result["ran"], result["healthy"], result["changed"]) == (False, True, False)
    assert result["cmd"] == ["/usr/bin/dcgmi", "diag", "-r", "3", "-j"] and "check" not in result


def test_unreadable_output_and_timeout_fail(ansible_module):
    answer = {"rc": 226, "out": "", "err": "Error: the diagnostic could not be run: NVVS error\n"}

    def run_command(argv, **_kwargs):
        return answer["rc"], answer["out"], answer["err"]

    bad = ansible_module(dcgm_diag, {}, run_command, expect_failure=True, bin_path=PATHS.get)
    assert "(exit 226) printed no readable result" in bad["msg"] and "NVVS error" in bad["msg"]
    answer.update(rc=124, err="")
    slow = ansible_module(dcgm_diag, {"level": 4, "timeout": 5}, run_command, expect_failure=True, bin_path=PATHS.get)
    assert "did not finish in 5 s" in slow["msg"]


def test_bad_level_is_refused(ansible_module):
    result = ansible_module(dcgm_diag, {"level": 5}, expect_failure=True, bin_path=PATHS.get)
    assert "level" in result["msg"]
