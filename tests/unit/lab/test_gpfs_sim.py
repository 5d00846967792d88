"""Simulated Storage Scale commands: a storage member creates the cluster, a client joins and mounts."""

from __future__ import annotations

import os

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_spectrum_scale import (
    filesystem_uid,
    parse_mmlsconfig,
    parse_mmlsconfig_y,
)
from gpuforge_sim import gpfs


@pytest.fixture
def nodes(tmp_path, monkeypatch):
    """Two node state dirs sharing one CCR dir; returns run(node, prog, *args) -> (rc, out, err)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("storage01", "gpu01"):
        (tmp_path / name).mkdir()
        os.symlink(shared, tmp_path / name / "shared")

    def run(node, prog, *args, capsys=None):
        monkeypatch.setenv("GPUFORGE_LAB_STATE", str(tmp_path / node))
        monkeypatch.setenv("GPUFORGE_LAB_NODE", node)
        return gpfs.main(list(args), prog=prog)

    return run


def _run(nodes, capsys, node, prog, *args):
    rc = nodes(node, prog, *args)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _cluster_with_client(nodes, capsys):
    assert _run(nodes, capsys, "storage01", "mmcrcluster", "-N", "storage01:quorum-manager", "-C", "lab.gpfs")[0] == 0
    assert _run(nodes, capsys, "storage01", "mmaddnode", "-N", "gpu01")[0] == 0
    assert _run(nodes, capsys, "storage01", "mmchlicense", "client", "--accept", "-N", "gpu01")[0] == 0


def test_commands_outside_a_cluster_fail(nodes, capsys):
    rc, _out, err = _run(nodes, capsys, "gpu01", "mmlsconfig")
    assert rc == 1
    assert err.splitlines()[0] == "mmlsconfig: This node does not belong to a GPFS cluster."


def test_cluster_membership_and_mmlscluster(nodes, capsys):
    _cluster_with_client(nodes, capsys)
    rc, out, _ = _run(nodes, capsys, "gpu01", "mmlscluster")
    assert rc == 0
    assert "  GPFS cluster name:         lab.gpfs" in out
    assert "  Repository type:           CCR" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [(r[0], r[1]) for r in rows] == [("1", "storage01"), ("2", "gpu01")]
    assert rows[0][-1] == "quorum-manager"
    rc, _, err = _run(nodes, capsys, "storage01", "mmaddnode", "-N", "gpu01")
    assert rc == 1 and "gpu01 is already a member" in err


def test_mmchconfig_class_stanza_in_mmlsconfig(nodes, capsys):
    _cluster_with_client(nodes, capsys)
    assert _run(nodes, capsys, "storage01", "mmcrnodeclass", "dgx", "-N", "gpu01")[0] == 0
    assert _run(nodes, capsys, "gpu01", "mmchconfig", "pagepool=128G,verbsPorts=mlx5_0/1 mlx5_1/1", "-N", "dgx")[0] == 0
    assert _run(nodes, capsys, "gpu01", "mmchconfig", "maxMBpS=20000")[0] == 0
    _rc, out, _ = _run(nodes, capsys, "gpu01", "mmlsconfig")
    lines = out.splitlines()
    assert lines[0] == "Configuration data for cluster lab.gpfs:"
    assert lines[lines.index("[dgx]") + 1 : lines.index("[dgx]") + 3] == [
        "pagepool 128G",
        "verbsPorts mlx5_0/1 mlx5_1/1",
    ]
    assert lines.index("[common]") > lines.index("[dgx]")
    assert parse_mmlsconfig(out)["common"]["maxMBpS"] == "20000"
    _, y_out, _ = _run(nodes, capsys, "storage01", "mmlsconfig", "-Y")
    assert parse_mmlsconfig_y(y_out)["dgx"] == {"pagepool": "128G", "verbsPorts": "mlx5_0/1 mlx5_1/1"}
    _, out, _ = _run(nodes, capsys, "gpu01", "mmlsnodeclass", "dgx")
    assert out.splitlines()[-1].split() == ["dgx", "gpu01"]
    _run(nodes, capsys, "gpu01", "mmchconfig", "pagepool=DEFAULT,verbsPorts=DEFAULT", "-N", "dgx")
    assert "[dgx]" not in _run(nodes, capsys, "gpu01", "mmlsconfig")[1]


def test_startup_needs_portability_layer_and_license(nodes, capsys, monkeypatch):
    _run(nodes, capsys, "storage01", "mmcrcluster", "-N", "storage01:quorum-manager", "-C", "lab.gpfs")
    _run(nodes, capsys, "storage01", "mmaddnode", "-N", "gpu01")
    rc, _, err = _run(nodes, capsys, "gpu01", "mmstartup")
    assert rc == 1
    assert f"The GPFS portability layer is not built for kernel {os.uname().release}" in err
    assert "Run /usr/lpp/mmfs/bin/mmbuildgpl on gpu01" in err
    assert _run(nodes, capsys, "gpu01", "mmbuildgpl")[1].count("completed successfully") == 1
    rc, _, err = _run(nodes, capsys, "gpu01", "mmstartup")
    assert rc == 1 and "does not have a GPFS license designation" in err
    _run(nodes, capsys, "storage01", "mmchlicense", "client", "--accept", "-N", "gpu01")
    assert _run(nodes, capsys, "gpu01", "mmstartup")[0] == 0
    _, out, _ = _run(nodes, capsys, "storage01", "mmgetstate", "-a")
    table = [line.split() for line in out.splitlines()[3:]]
    assert table == [["1", "storage01", "down"], ["2", "gpu01", "active"]]
    # A kernel update invalidates the build (stamp mismatch), as a new kernel needs a rebuilt GPL.
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(("Linux", "gpu01", "6.1.0-99-amd64", "#1", "x86_64")))
    assert _run(nodes, capsys, "gpu01", "mmstartup")[0] == 1


def test_remote_filesystem_mount(nodes, capsys, tmp_path):
    _cluster_with_client(nodes, capsys)
    mount_point = str(tmp_path / "gpfs" / "ess3000_4M")
    run = _run
    assert run(nodes, capsys, "storage01", "mmremotecluster", "add", "ess3000.lab", "-n", "essio1,essio2")[0] == 0
    fs_args = ["add", "ess3000_4M", "-f", "ess3000_4M", "-C", "ess3000.lab", "-T", mount_point, "-A", "yes"]
    assert run(nodes, capsys, "storage01", "mmremotefs", *fs_args)[0] == 0
    rc, _, err = run(nodes, capsys, "gpu01", "mmmount", "ess3000_4M")
    assert rc == 1 and "GPFS is not ready on gpu01" in err
    run(nodes, capsys, "gpu01", "mmbuildgpl")
    assert run(nodes, capsys, "gpu01", "mmstartup")[0] == 0
    assert run(nodes, capsys, "gpu01", "mmmount", "ess3000_4M")[0] == 0
    assert os.path.isdir(mount_point)
    _, out, _ = run(nodes, capsys, "storage01", "mmlsmount", "ess3000_4M", "-L")
    assert out.splitlines()[0] == "File system ess3000_4M (ess3000.lab:ess3000_4M) is mounted on 1 nodes:"
    assert out.splitlines()[1].split()[1:] == ["gpu01", "lab.gpfs"]
    _, out, _ = run(nodes, capsys, "gpu01", "mmremotecluster", "show", "all")
    assert "File systems:    ess3000_4M (ess3000_4M)" in out
    _, out, _ = run(nodes, capsys, "gpu01", "mmlsfs", "ess3000_4M", "-B", "-T")
    assert [line.split()[:2] for line in out.splitlines()[2:]] == [["-B", "4194304"], ["-T", mount_point]]
    # The UID the CSI static volumes need: the table the spectrum_scale_facts module reads, stable per file system.
    _, out, _ = run(nodes, capsys, "gpu01", "mmlsfs", "ess3000_4M", "--uid")
    uid = filesystem_uid(out)
    assert out.splitlines()[2].split() == ["--uid", uid, "File", "system", "UID"]
    assert run(nodes, capsys, "gpu01", "mmlsfs", "ess3000_4M", "--uid")[1] == out
    _, out, _ = run(nodes, capsys, "gpu01", "mmlsfs", "ess3000_4M", "-T", "-Y")
    assert out.splitlines()[1].split(":")[7:9] == ["defaultMountPoint", mount_point.replace("/", "%2F")]
    assert run(nodes, capsys, "gpu01", "mmlsfs", "ess3000_4M", "--bogus")[0] != 0
    run(nodes, capsys, "gpu01", "mmshutdown")
    assert "is not mounted." in run(nodes, capsys, "gpu01", "mmlsmount", "ess3000_4M")[1]


def test_program_name_from_environment(nodes, capsys, monkeypatch):
    monkeypatch.setenv("GPUFORGE_SIM_PROG", "mmgetstate")
    monkeypatch.setenv("GPUFORGE_LAB_NODE", "gpu01")
    assert gpfs.main([]) == 1
    assert "mmgetstate: This node does not belong" in capsys.readouterr().err
    monkeypatch.setenv("GPUFORGE_SIM_PROG", "mmbogus")
    assert gpfs.main([]) == 2


def _change_from_another_process(state: str, index: int, barrier) -> None:
    os.environ["GPUFORGE_LAB_STATE"] = state
    os.environ["GPUFORGE_LAB_NODE"] = "storage01"
    barrier.wait()
    for attempt in range(3):
        rc = gpfs.main([f"gpuforgeTest{index}x{attempt}=yes"], prog="mmchconfig")
        assert rc == 0


def test_concurrent_commands_from_many_nodes_all_take_effect(nodes, capsys, tmp_path):
    # 16 clients started GPFS at once on the 16-node lab and one read `down` afterwards: every node rewrote the
    # shared cluster document, and a write based on an older read lost another node's change. The CCR of the real
    # product agrees on each change; the lab serialises the commands with a lock in the shared directory.
    import multiprocessing

    _cluster_with_client(nodes, capsys)
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(8)
    workers = [
        context.Process(target=_change_from_another_process, args=(str(tmp_path / "storage01"), index, barrier))
        for index in range(8)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0] * 8
    capsys.readouterr()
    rc, out, _ = _run(nodes, capsys, "storage01", "mmlsconfig", "-Y")
    assert rc == 0
    common = parse_mmlsconfig_y(out)["common"]
    assert {f"gpuforgeTest{index}x{attempt}" for index in range(8) for attempt in range(3)} <= set(common)
