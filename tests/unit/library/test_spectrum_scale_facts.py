"""spectrum_scale_facts module: cluster facts from mmlscluster -Y (run_command mocked)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import spectrum_scale_facts

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
    assert result["ansible_facts"]["spectrum_scale"] == {"member": False, "cluster": None, "filesystems": {}}


def test_truncated_output_is_a_clear_failure(ansible_module, mmfs_bin):
    truncated = MMLSCLUSTER_Y.splitlines()[2] + "\n"
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin}, answer(0, truncated), True)
    assert result["msg"].startswith("could not read mmlscluster -Y: ")


def test_not_installed(ansible_module, tmp_path):
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": str(tmp_path)}, answer(0, ""), True)
    assert result["msg"].startswith(f"mmlscluster not found at {tmp_path} on ")
    assert "is IBM Storage Scale (gpfs.base) installed?" in result["msg"]


# `mmlsfs <fs> --uid` in the plain table layout (flag, value, description under a dashed rule); the UID is
# the one IBM Redpaper REDP-5610 shows for ess3000_4M.
MMLSFS_UID = (
    "flag                value                    description\n"
    "------------------- ------------------------ -----------------------------------\n"
    " --uid              099B6A7A:5EB99743        File system UID\n"
)


def by_command(answers):
    """run_command answering by the command's base name: {name: (rc, out, err)}."""
    calls = []

    def run_command(argv, **kwargs):
        calls.append(argv)
        return answers[Path(argv[0]).name]

    run_command.calls = calls
    return run_command


def test_filesystem_uids_for_static_volumes(ansible_module, mmfs_bin):
    runner = by_command({"mmlscluster": (0, MMLSCLUSTER_Y, ""), "mmlsfs": (0, MMLSFS_UID, "")})
    args = {"mmfs_bin": mmfs_bin, "filesystems": ["ess3000_4M"]}
    result = ansible_module(spectrum_scale_facts, args, runner, check_mode=True)
    assert result["ansible_facts"]["spectrum_scale"]["filesystems"] == {"ess3000_4M": {"uid": "099B6A7A:5EB99743"}}
    assert runner.calls[1] == [f"{mmfs_bin}/mmlsfs", "ess3000_4M", "--uid"]


def test_an_unknown_filesystem_names_it_and_the_fix(ansible_module, mmfs_bin):
    unknown = "mmlsfs: File system fs9 is not known to the GPFS cluster.\nmmlsfs: Command failed."
    runner = by_command({"mmlscluster": (0, MMLSCLUSTER_Y, ""), "mmlsfs": (1, "", unknown)})
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin, "filesystems": ["fs9"]}, runner, True)
    assert "mmlsfs fs9 --uid failed (rc=1)" in result["msg"]
    assert "is not known to the GPFS cluster" in result["msg"]
    assert "mmremotefs show" in result["msg"]


@pytest.mark.parametrize(
    ("out", "problem"),
    [
        ("", "no 'flag value description' header"),
        (MMLSFS_UID.replace("099B6A7A:5EB99743", "unknown"), "not a file system UID"),
        ("\n".join(MMLSFS_UID.splitlines()[:2]), "no --uid row"),
    ],
)
def test_output_without_a_uid_is_a_clear_failure(ansible_module, mmfs_bin, out, problem):
    runner = by_command({"mmlscluster": (0, MMLSCLUSTER_Y, ""), "mmlsfs": (0, out, "")})
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin, "filesystems": ["ess3000_4M"]}, runner, True)
    assert result["msg"].startswith("could not read the UID of file system ess3000_4M")
    assert problem in result["msg"]
