"""spectrum_scale_facts module: cluster facts from mmlscluster -Y, and with gather the state a client is in
(run_command mocked, or answered by the lab's simulated mm commands)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import spectrum_scale_facts

MMLSCLUSTER_Y = (Path(__file__).resolve().parents[2] / "fixtures" / "mmlscluster" / "redp5610_Y.txt").read_text(
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


# --- gather: what spectrum_scale_client reads for a client in one call on a member node ------------------------

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def seed(relative: str) -> str:
    return (FIXTURES / relative).read_text(encoding="utf-8")


ROLE_ARGS = {
    "gather": ["cluster", "nodeclass", "state", "remote_clusters", "remote_filesystems", "mounts"],
    "node": "dgx01",
    "node_classes": ["dgx"],
    "devices": ["ess3000_4M"],
}
# IBM Redpaper REDP-5610's converged client dgx01 (tests/fixtures/*/SOURCES.md), as the member scale00 reads it.
CONVERGED = {
    "mmlscluster": (0, MMLSCLUSTER_Y, ""),
    "mmlsnodeclass": (0, seed("mmlsnodeclass/redp5610_dgx.txt"), ""),
    "mmgetstate": (0, seed("mmgetstate/redp5610_dgx01_Y.txt"), ""),
    "mmremotecluster": (0, seed("mmremotecluster/redp5610_show_all.txt"), ""),
    "mmremotefs": (0, seed("mmremotefs/redp5610_show_all.txt"), ""),
    "mmlsmount": (0, seed("mmlsmount/redp5610_L.txt"), ""),
}


def test_everything_the_role_decides_on_in_one_call(ansible_module, mmfs_bin):
    calls = []

    def run_command(argv, **kwargs):
        calls.append((argv, kwargs["environ_update"]))
        return CONVERGED[Path(argv[0]).name]

    args = {"mmfs_bin": mmfs_bin, **ROLE_ARGS, "gather": list(reversed(ROLE_ARGS["gather"]))}
    result = ansible_module(spectrum_scale_facts, args, run_command, check_mode=True)
    facts = result["ansible_facts"]["spectrum_scale"]
    assert facts["member"] is True and facts["cluster"]["id"] == "16217308676014575381"
    assert facts["node"] == {
        "name": "dgx01",
        "member": True,
        "state": "active",
        "node_classes": ["dgx"],
        "mounted": ["ess3000_4M"],
    }
    assert facts["node_classes"] == {
        "dgx": {"exists": True, "members": ["dgx01.ocp4.scale.com", "dgx02.ocp4.scale.com"]}
    }
    assert facts["remote_clusters"]["ess3000.bda.scale.ibm.com"]["filesystems"] == {"ess3000_4M": "ess3000_4M"}
    assert facts["remote_filesystems"]["ess3000_4M"]["mount_point"] == "/gpfs/ess3000_4M"
    assert facts["mounts"]["ess3000_4M"]["defined"] is True
    assert [node["name"] for node in facts["mounts"]["ess3000_4M"]["nodes"]] == ["dgx01.ocp4", "dgx02.ocp4"]
    assert facts["unread"] == {} and facts["filesystems"] == {}
    # In gather's own order whatever the order given; the C locale on every command.
    assert [argv[:1] + argv[1:] for argv, _ in calls] == [
        [f"{mmfs_bin}/mmlscluster", "-Y"],
        [f"{mmfs_bin}/mmlsnodeclass", "dgx"],
        [f"{mmfs_bin}/mmgetstate", "-N", "dgx01", "-Y"],
        [f"{mmfs_bin}/mmremotecluster", "show", "all"],
        [f"{mmfs_bin}/mmremotefs", "show", "all"],
        [f"{mmfs_bin}/mmlsmount", "ess3000_4M", "-L"],
    ]
    assert {environ["LC_ALL"] for _, environ in calls} == {"C"}
    assert result["changed"] is False


def test_a_client_not_yet_joined(ansible_module, mmfs_bin):
    """dgx03 on a cluster that has no class, remote cluster or file system yet: no failure, each 'not there' said."""
    answers = {
        **CONVERGED,
        "mmlsnodeclass": (1, "", "mmlsnodeclass: Node class dgx does not exist.\nmmlsnodeclass: Command failed."),
        "mmremotecluster": (1, "", "mmremotecluster: There are no remote cluster definitions."),
        "mmremotefs": (0, seed("mmremotefs/redp5610_show_all.txt").splitlines()[0] + "\n", ""),
        "mmlsmount": (1, "", "mmlsmount: File system ess3000_4M is not known to the GPFS cluster."),
    }
    runner = by_command(answers)
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin, **ROLE_ARGS, "node": "dgx03"}, runner)
    facts = result["ansible_facts"]["spectrum_scale"]
    assert facts["node"] == {"name": "dgx03", "member": False, "state": None, "node_classes": [], "mounted": []}
    assert facts["node_classes"] == {"dgx": {"exists": False, "members": []}}
    assert facts["remote_clusters"] == {} and facts["remote_filesystems"] == {}
    assert facts["mounts"] == {"ess3000_4M": {"defined": False, "cluster": "", "remote": "", "count": 0, "nodes": []}}
    assert facts["unread"] == {
        "nodeclass dgx": "rc=1: mmlsnodeclass: Node class dgx does not exist. mmlsnodeclass: Command failed.",
        "remote_clusters": "rc=1: mmremotecluster: There are no remote cluster definitions.",
        "mounts ess3000_4M": "rc=1: mmlsmount: File system ess3000_4M is not known to the GPFS cluster.",
    }
    # Not a member: its daemon state is not asked for (mmgetstate -N would fail on an unknown node).
    assert "mmgetstate" not in [Path(argv[0]).name for argv in runner.calls]


def test_short_name_matches_the_daemon_and_the_shortened_mount_names(ansible_module, mmfs_bin):
    args = {"mmfs_bin": mmfs_bin, **ROLE_ARGS, "node": "dgx01.ocp4.scale.com"}
    facts = ansible_module(spectrum_scale_facts, args, by_command(CONVERGED))["ansible_facts"]["spectrum_scale"]
    assert facts["node"]["member"] is True and facts["node"]["mounted"] == ["ess3000_4M"]
    # dgx02 is in the class and mounts it, but IBM Redpaper REDP-5610's mmlscluster does not list it: no state is asked
    # for.
    facts = ansible_module(spectrum_scale_facts, {**args, "node": "dgx02"}, by_command(CONVERGED))["ansible_facts"]
    assert facts["spectrum_scale"]["node"] == {
        "name": "dgx02",
        "member": False,
        "state": None,
        "node_classes": ["dgx"],
        "mounted": ["ess3000_4M"],
    }


def test_a_state_record_of_another_node_is_not_this_node_s_state(ansible_module, mmfs_bin):
    other = seed("mmgetstate/redp5610_dgx01_Y.txt").replace("dgx01.ocp4.scale.com:2", "scale00.ocp4.scale.com:1")
    runner = by_command({**CONVERGED, "mmgetstate": (0, other, "")})
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin, **ROLE_ARGS}, runner, True)
    assert (
        result["msg"] == "could not read mmgetstate -N dgx01 -Y: no record for dgx01 (records: scale00.ocp4.scale.com)"
    )


@pytest.mark.parametrize(
    ("command", "answer", "message"),
    [
        (
            "mmlsmount",
            (1, "", "mmlsmount: File system ess3000_4M is not known to the GPFS cluster."),
            "mmlsmount ess3000_4M -L failed (rc=1: mmlsmount: File system ess3000_4M is not known to the GPFS "
            "cluster.) - is ess3000_4M the device name this cluster knows the file system by",
        ),
        (
            "mmgetstate",
            (1, "", "mmgetstate: Incorrect node dgx01 specified for command."),
            "mmgetstate -N dgx01 -Y failed (rc=1: mmgetstate: Incorrect node dgx01 specified for command.) - is "
            "dgx01 the daemon node name of a node of this cluster (mmlscluster)?",
        ),
        (
            "mmremotefs",
            (0, "mmremotefs: unexpected\n", ""),
            "could not read mmremotefs show all: mmremotefs show line 1",
        ),
        ("mmlsnodeclass", (0, "garbage\n", ""), "could not read mmlsnodeclass dgx: mmlsnodeclass line 1"),
        (
            "mmlsnodeclass",
            (0, "Node Class Name  Members\n---\nother  dgx01\n", ""),
            "could not read mmlsnodeclass dgx: it printed no row for dgx (rows: other)",
        ),
        ("mmlsmount", (0, "File system other is not mounted.\n", ""), "no line for ess3000_4M (file systems: other)"),
    ],
)
def test_failures_that_are_not_an_answer_fail_naming_the_command(ansible_module, mmfs_bin, command, answer, message):
    """A file system mmremotefs lists whose mounts cannot be read, a member whose state cannot: not 'not mounted'."""
    runner = by_command({**CONVERGED, command: answer})
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin, **ROLE_ARGS}, runner, True)
    assert message in result["msg"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"devices": ["ess3000_4M"]}, "devices names the file systems gather: mounts reads; add mounts to gather"),
        ({"node_classes": ["dgx"]}, "node_classes names the classes gather: nodeclass reads; add nodeclass to gather"),
        ({"gather": ["state"], "node": "-a"}, "node is not a node name (letters, digits, _ . -, not starting with -)"),
        ({"gather": ["nodeclass"], "node_classes": ["--all"]}, "node_classes[0] is not a node class name"),
        ({"gather": ["mounts"], "devices": ["fs1", "all -a"]}, "devices[1] is not a file system device name"),
        ({"gather": ["clusters"]}, "value of gather must be one or more of: cluster, nodeclass, state"),
    ],
)
def test_bad_options(ansible_module, mmfs_bin, args, message):
    runner = by_command(CONVERGED)
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin, **args}, runner, True)
    assert result["msg"].startswith(message)
    assert runner.calls == []


def test_default_gather_returns_what_it_always_did(ansible_module, mmfs_bin):
    runner = by_command(CONVERGED)
    facts = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin}, runner)["ansible_facts"]["spectrum_scale"]
    assert sorted(facts) == ["cluster", "filesystems", "member"]
    assert runner.calls == [[f"{mmfs_bin}/mmlscluster", "-Y"]]


def test_a_node_without_gather_cluster_reads_its_state_and_mounts_only(ansible_module, mmfs_bin):
    """The role's re-read after mmstartup: mounts only (gather: [mounts])."""
    runner = by_command(CONVERGED)
    args = {"mmfs_bin": mmfs_bin, "gather": ["mounts"], "node": "dgx02", "devices": ["ess3000_4M"]}
    facts = ansible_module(spectrum_scale_facts, args, runner)["ansible_facts"]["spectrum_scale"]
    assert facts["node"] == {
        "name": "dgx02",
        "member": None,
        "state": None,
        "node_classes": [],
        "mounted": ["ess3000_4M"],
    }
    assert facts["member"] is None and facts["cluster"] is None
    assert runner.calls == [[f"{mmfs_bin}/mmlsmount", "ess3000_4M", "-L"]]


def test_every_user_class_without_node_classes(ansible_module, mmfs_bin):
    runner = by_command(CONVERGED)
    args = {"mmfs_bin": mmfs_bin, "gather": ["nodeclass"], "node": "dgx02"}
    facts = ansible_module(spectrum_scale_facts, args, runner)["ansible_facts"]["spectrum_scale"]
    assert facts["node"]["node_classes"] == ["dgx"] and facts["node_classes"]["dgx"]["exists"] is True
    assert runner.calls == [[f"{mmfs_bin}/mmlsnodeclass"]]
    # Without a class to read, a failure is not 'no such class': it fails.
    runner = by_command({"mmlsnodeclass": (1, "", "mmlsnodeclass: This node does not belong to a GPFS cluster.")})
    result = ansible_module(spectrum_scale_facts, args, runner, True)
    assert result["msg"] == (
        "mmlsnodeclass failed (rc=1: mmlsnodeclass: This node does not belong to a GPFS cluster.) - run it on an "
        "administration node"
    )


# --- Against the lab's simulated mm commands (lab/sim/gpuforge_sim/gpfs.py): a client before and after it joins --


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """The simulated commands on two lab nodes sharing one CCR; returns (run_command on `node`, mm(node, ...))."""
    from gpuforge_sim import gpfs

    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("storage01", "gpu01"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "shared").symlink_to(shared)
    monkeypatch.setattr(gpfs, "_address", lambda name: {"storage01": "10.0.0.10", "gpu01": "10.0.0.21"}[name])
    monkeypatch.setattr(gpfs.os, "uname", lambda: os.uname_result(("Linux", "x", "6.1.0-26-amd64", "#1", "x86_64")))

    def mm(node, prog, *args):
        monkeypatch.setenv("GPUFORGE_LAB_STATE", str(tmp_path / node))
        monkeypatch.setenv("GPUFORGE_LAB_NODE", node)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = gpfs.main(list(args), prog=prog)
        return rc, out.getvalue(), err.getvalue()

    def on(node):
        return lambda argv, **kwargs: mm(node, Path(argv[0]).name, *argv[1:])

    assert mm("storage01", "mmcrcluster", "-N", "storage01:quorum-manager", "-C", "lab.gpfs")[0] == 0
    return on, mm


def test_the_simulated_lab_before_and_after_the_client_joins(ansible_module, mmfs_bin, lab, tmp_path):
    on, mm = lab
    args = {"mmfs_bin": mmfs_bin, **ROLE_ARGS, "node": "gpu01"}
    facts = ansible_module(spectrum_scale_facts, args, on("storage01"))["ansible_facts"]["spectrum_scale"]
    assert facts["node"] == {"name": "gpu01", "member": False, "state": None, "node_classes": [], "mounted": []}
    assert facts["node_classes"]["dgx"]["exists"] is False
    assert facts["remote_clusters"] == {} and facts["remote_filesystems"] == {}
    assert facts["mounts"]["ess3000_4M"]["defined"] is False
    assert sorted(facts["unread"]) == ["mounts ess3000_4M", "nodeclass dgx", "remote_clusters"]

    # What the role does on a fresh client (tasks/membership.yml, start_mount.yml), on the simulated commands.
    mount_point = str(tmp_path / "gpfs" / "ess3000_4M")
    for node, *command in [
        ("storage01", "mmaddnode", "-N", "gpu01"),
        ("storage01", "mmchlicense", "client", "--accept", "-N", "gpu01"),
        ("storage01", "mmcrnodeclass", "dgx", "-N", "gpu01"),
        ("gpu01", "mmbuildgpl"),
        ("gpu01", "mmstartup"),
        ("storage01", "mmremotecluster", "add", "ess3000.lab", "-n", "essio1,essio2"),
        ("storage01", "mmremotefs", "add", "ess3000_4M", "-f", "ess3000_4M", "-C", "ess3000.lab", "-T", mount_point),
    ]:
        assert mm(node, *command)[0] == 0, command
    facts = ansible_module(spectrum_scale_facts, args, on("storage01"))["ansible_facts"]["spectrum_scale"]
    assert facts["node"] == {"name": "gpu01", "member": True, "state": "active", "node_classes": ["dgx"], "mounted": []}
    assert facts["remote_clusters"]["ess3000.lab"] == {
        "contact_nodes": ["essio1", "essio2"],
        "sha_digest": facts["remote_clusters"]["ess3000.lab"]["sha_digest"],
        "filesystems": {"ess3000_4M": "ess3000_4M"},
    }
    assert facts["remote_filesystems"]["ess3000_4M"]["mount_point"] == mount_point
    assert facts["mounts"]["ess3000_4M"] == {
        "defined": True,
        "cluster": "ess3000.lab",
        "remote": "ess3000_4M",
        "count": 0,
        "nodes": [],
    }
    assert facts["unread"] == {}

    assert mm("gpu01", "mmmount", "ess3000_4M")[0] == 0
    reread = {"mmfs_bin": mmfs_bin, "gather": ["mounts"], "node": "gpu01", "devices": ["ess3000_4M"]}
    facts = ansible_module(spectrum_scale_facts, reread, on("storage01"))["ansible_facts"]["spectrum_scale"]
    assert facts["node"]["mounted"] == ["ess3000_4M"]
    assert facts["mounts"]["ess3000_4M"]["nodes"] == [{"ip": "10.0.0.21", "name": "gpu01", "cluster": "lab.gpfs"}]
    # The shutdown unmounts it; mmgetstate -N from the member sees the client down.
    assert mm("gpu01", "mmshutdown")[0] == 0
    facts = ansible_module(spectrum_scale_facts, args, on("storage01"))["ansible_facts"]["spectrum_scale"]
    assert facts["node"]["state"] == "down" and facts["node"]["mounted"] == []


# The bad-input matrix (test_bad_input_matrix.py) changes every command's output at once, so mmlscluster's parser
# stops most families; here each command of the role's call gets the bad output alone.
BAD_OUTPUTS = {
    "empty": lambda text: "",
    "truncated": lambda text: text[: len(text) // 2],
    "garbage": lambda text: random.Random(20240501).randbytes(4096).decode("utf-8", "surrogateescape"),
    "huge": lambda text: text + "gpuforge filler: a line of no tool\n" * 300_000,
}


@pytest.mark.parametrize("family", sorted(BAD_OUTPUTS))
@pytest.mark.parametrize("command", ["mmlsnodeclass", "mmgetstate", "mmremotecluster", "mmremotefs", "mmlsmount"])
def test_bad_output_of_one_command_fails_naming_it(ansible_module, mmfs_bin, command, family):
    rc, out, err = CONVERGED[command]
    runner = by_command({**CONVERGED, command: (rc, BAD_OUTPUTS[family](out), err)})
    result = ansible_module(spectrum_scale_facts, {"mmfs_bin": mmfs_bin, **ROLE_ARGS}, runner, None)
    json.dumps(result)
    if result.get("failed"):
        assert result["msg"].startswith(f"could not read {command}"), result["msg"]
        assert len(result["msg"]) < 400
    else:  # half of a one-record output can still be a whole one: then it must read as the whole one did
        assert family == "truncated", result
        assert result["ansible_facts"]["spectrum_scale"]["node"]["state"] == "active"
