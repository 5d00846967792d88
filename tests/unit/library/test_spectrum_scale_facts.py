"""spectrum_scale_facts module: cluster facts from mmlscluster -Y (run_command mocked)."""

from __future__ import annotations

from pathlib import Path

import pytest
import spectrum_scale_facts

MMLSCLUSTER_Y = (Path(__file__).resolve().parents[2] / "fixtures" / "mmlscluster" / "seed001_Y.txt").read_text(
    encoding="utf-8"
)

NOT_A_MEMBER = "mmlscluster: This node does not belong to a GPFS cluster.\nmmlscluster: Command failed."


@pytest.fixture
def mmfs_bin(tmp_path):
    (tmp_path / "mmlscluster").write_text("#!/bin/sh\n", encoding="utf-8")
    return str(tmp_path)


def answer(rc, out, err=""):
    calls = []

    def run_command(argv, **kwargs):
        calls.append((argv, kwargs))
        return rc, out, err

    run_command.calls = calls
    return run_command


def test_cluster_id_and_nodes(ansible_module, mmfs_bin):
    runner = answer(0, MMLSCLUSTER_Y)
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin}, runner, check_mode=True)
    facts = result["ansible_facts"]["spectrum_scale"]
    assert facts["member"] is True
    assert facts["cluster"]["id"] == "16217308676014575381"
    assert [node["ip"] for node in facts["cluster"]["nodes"]] == ["192.168.1.30", "192.168.1.19"]
    assert result["changed"] is False
    argv, kwargs = runner.calls[0]
    assert argv == [f"{mmfs_bin}/mmlscluster", "-Y"]
    assert kwargs["environ_update"] == {"LC_ALL": "C"}


def test_not_a_member_fails_with_the_reason(ansible_module, mmfs_bin):
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin}, answer(1, "", NOT_A_MEMBER), True)
    assert "does not belong to a GPFS cluster" in result["msg"]


def test_not_a_member_allowed(ansible_module, mmfs_bin):
    args = {"mmfs_bin": mmfs_bin, "allow_no_cluster": True}
    result = ansible_module(spectrum_scale_facts, args, answer(1, "", NOT_A_MEMBER))
    assert result["ansible_facts"]["spectrum_scale"] == {"member": False, "cluster": None}


def test_truncated_output_is_a_clear_failure(ansible_module, mmfs_bin):
    truncated = MMLSCLUSTER_Y.splitlines()[2] + "\n"
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin}, answer(0, truncated), True)
    assert result["msg"].startswith("could not read mmlscluster -Y: ")


def test_not_installed(ansible_module, tmp_path):
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": str(tmp_path)}, answer(0, ""), True)
    assert result["msg"].startswith(f"mmlscluster not found at {tmp_path} on ")
    assert "is IBM Storage Scale (gpfs.base) installed?" in result["msg"]
