"""subnet_manager_check module: sminfo answered by the lab's simulator in-process, on a healthy lab node and under
the two subnet manager faults; a missing sminfo fails naming the fix."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import subnet_manager_check
from gpuforge_sim import sminfo

from gpuforge.lab import mirror
from gpuforge.lab.profiles import hardware_document, load_profile

LAB_SM = {"host": "head01", "guid": "0x98039b0300a4c600", "priority": 0}


@pytest.fixture
def lab_node(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_PROC", str(tmp_path / "proc"))

    def write(faults=None, profile="dgx1-v100-edr"):
        document = hardware_document(load_profile(profile), faults or [])
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
        monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))

    return write


def sim_sminfo(calls):
    def run_command(argv, **kwargs):
        calls.append((argv, kwargs))
        assert argv[0] == "/usr/sbin/sminfo"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = sminfo.main(list(argv[1:]))
        return rc, out.getvalue(), err.getvalue()

    return run_command


def run(ansible_module, args, calls, expect_failure=False):
    paths = {"sminfo": "/usr/sbin/sminfo"}
    return ansible_module(subnet_manager_check, args, sim_sminfo(calls), expect_failure, bin_path=paths.get)


def test_healthy_lab_fabric_passes_and_asks_each_configured_sm(lab_node, ansible_module):
    lab_node()
    calls = []
    result = run(ansible_module, {"subnet_managers": [LAB_SM]}, calls)
    assert result["changed"] is False
    assert result["check"]["status"] == "PASS", result["check"]
    assert [argv[1:] for argv, _kw in calls] == [[], ["-G", "0x98039b0300a4c600"]]
    assert calls[0][1]["environ_update"]["LC_ALL"] == "C"
    assert result["check"]["observed"]["master"]["sm_lid"] == 1


def test_sm_missing_fails_the_check_not_the_module(lab_node, ansible_module):
    lab_node([{"type": "sm_missing"}])
    result = run(ansible_module, {"subnet_managers": [LAB_SM]}, [])
    assert result["check"]["status"] == "FAIL"
    assert "no subnet manager answers" in result["check"]["fault"]
    assert result["runs"][0]["rc"] == 255 and "_do_madrpc failed; dport (Lid 1)" in result["runs"][0]["stderr"]


def test_sm_duplicate_master_fails_with_and_without_configured_sms(lab_node, ansible_module):
    lab_node([{"type": "sm_duplicate_master"}])
    configured = run(ansible_module, {"subnet_managers": [LAB_SM]}, [])
    assert configured["check"]["status"] == "FAIL"
    assert "2 SMs are master at equal priority 0" in configured["check"]["fault"]


def test_bad_configuration_and_missing_sminfo_fail_naming_the_fix(lab_node, ansible_module):
    lab_node()
    bad = run(ansible_module, {"subnet_managers": [{"host": "head01", "guid": "head", "priority": 1}]}, [], True)
    assert "each entry needs host, guid" in bad["msg"]
    missing = ansible_module(subnet_manager_check, {}, sim_sminfo([]), True, bin_path=lambda name: None)
    assert "infiniband-diags" in missing["msg"]


def test_without_sminfo_and_not_required_no_check_and_a_warning(lab_node, ansible_module, capsys):
    lab_node()
    result = ansible_module(subnet_manager_check, {"require_sminfo": False}, sim_sminfo([]), bin_path=lambda name: None)
    assert (result["check"], result["runs"], result["changed"]) == (None, [], False)
    warned = capsys.readouterr().err
    assert "sminfo not found" in warned and "infiniband-diags" in warned and "was not checked" in warned


@pytest.fixture
def doca_sminfo(tmp_path, monkeypatch):
    """/usr/sbin/sminfo of the lab mirror's DOCA infiniband-diags (vendor_facts/nvidia-doca/debian12.yml), built as the
    mirror builds it and unpacked: the command a DOCA lab node runs."""
    definitions = mirror.load_definitions()
    definitions["publish"] = ["nvidia-doca/debian12"]
    package = next(
        p for p in mirror.expand(definitions) if p["name"] == "infiniband-diags" and p["repo"] == "nvidia-doca/debian12"
    )
    assert package["commands"].get("/usr/sbin/sminfo") == "gpuforge_sim.sminfo", package["commands"]
    (tmp_path / "debs").mkdir()
    deb = mirror.build_deb(package, tmp_path / "staging", tmp_path / "debs")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "root")], check=True)
    # The wrapper runs /usr/bin/python3, which finds gpuforge_sim where the lab's gpuforge-lab-sim would put it.
    monkeypatch.setenv("PYTHONPATH", str(mirror.SIM_DIR.parent))
    return str(tmp_path / "root" / "usr" / "sbin" / "sminfo")


@pytest.mark.parametrize(
    ("faults", "status", "fault"),
    [
        ([], "PASS", ""),
        ([{"type": "sm_missing"}], "FAIL", "no subnet manager answers"),
        ([{"type": "sm_duplicate_master"}], "FAIL", "2 SMs are master at equal priority 0"),
    ],
)
def test_a_doca_lab_node_judges_the_subnet_manager_instead_of_warning(
    lab_node, ansible_module, doca_sminfo, faults, status, fault
):
    """validate.yml passes require_sminfo=false: without sminfo a DOCA lab node got a warning and no check. With the
    DOCA package's sminfo the check judges the fabric, and catches both subnet manager faults."""
    lab_node(faults)
    args = {"subnet_managers": [LAB_SM], "require_sminfo": False}
    result = ansible_module(subnet_manager_check, args, bin_path={"sminfo": doca_sminfo}.get)
    assert result["check"] is not None and result["check"]["status"] == status, result
    assert fault in result["check"]["fault"]
    assert result["runs"][0]["argv"][0] == doca_sminfo
