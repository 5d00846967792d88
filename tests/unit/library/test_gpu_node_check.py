"""gpu_node_check module: facts from a simulated node, lsmod/dmesg through a mocked run_command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import gpu_node_check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from node_sim_helpers import SimNode, expected_for


@pytest.fixture
def run_module(ansible_module):
    paths = {"lsmod": "/usr/sbin/lsmod", "dmesg": "/usr/bin/dmesg"}

    def run(args, answers):
        calls = []

        def run_command(cmd, **kwargs):
            calls.append((cmd, kwargs))
            return answers[cmd[0]]

        return ansible_module(gpu_node_check, args, run_command, check_mode=True, bin_path=paths.get), calls

    return run


def test_runs_lsmod_and_dmesg_and_finds_xid_and_peermem(tmp_path, monkeypatch, run_module):
    faults = [{"type": "peermem_load_failure"}, {"type": "xid", "gpu": 2, "code": 48, "message": "DBE"}]
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", faults)
    args = {
        "nvidia_smi": node.nvidia_smi_facts(),
        "infiniband": node.infiniband_facts(),
        "expected": expected_for("dgx1-v100-edr"),
    }
    answers = {"/usr/sbin/lsmod": (0, node.lsmod(), ""), "/usr/bin/dmesg": (0, node.dmesg(), "")}
    result, calls = run_module(args, answers)
    assert [c[0] for c in calls] == [["/usr/sbin/lsmod"], ["/usr/bin/dmesg"]]
    assert all(c[1]["environ_update"] == {"LC_ALL": "C"} for c in calls)
    assert result["changed"] is False
    assert result["healthy"] is False
    assert result["failed_checks"] == ["xid", "peermem_loaded"]
    # `failed` is Ansible's own result key: a truthy value there fails the task with "Unknown error".
    assert "failed" not in result
    xid = next(c for c in result["checks"] if c["name"] == "xid")
    assert [(x["code"], x["action"], x["gpu"]) for x in xid["observed"]] == [
        (48, "reset_gpu", "00000000:0A:00.0 (GPU 2, serial 0321618000102)")
    ]
    assert result["caused_failures"] == {}


def test_given_text_is_used_without_running_commands(tmp_path, monkeypatch, run_module):
    node = SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100")
    args = {
        "nvidia_smi": node.nvidia_smi_facts(),
        "infiniband": node.infiniband_facts(),
        "lsmod": node.lsmod(),
        "kernel_log": node.dmesg(),
        "expected": expected_for("poweredge-c4140-v100"),
    }
    result, calls = run_module(args, {})
    assert calls == []
    assert result["healthy"] is True
    # 22 checks plus ecc_aggregate, nvlink_errors (the C4140's V100s have NVLink) and ib_link_flaps.
    assert len(result["checks"]) == 25


def test_unreadable_lsmod_and_failing_dmesg_are_failed_checks(run_module):
    args = {"nvidia_smi": None, "infiniband": None, "expected": expected_for("dgx1-v100-edr")}
    answers = {
        "/usr/sbin/lsmod": (0, "garbage\n", ""),
        "/usr/bin/dmesg": (1, "", "dmesg: read kernel buffer failed: Operation not permitted"),
    }
    result, _ = run_module(args, answers)
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["lsmod_readable"]["fault"] == (
        "could not read lsmod output: lsmod: missing the 'Module Size Used by' header"
    )
    assert checks["kernel_log_readable"]["fault"] == (
        "could not read the kernel log: dmesg exited with code 1: dmesg: read kernel buffer failed: "
        "Operation not permitted"
    )
    assert {"nvidia_smi_readable", "infiniband_readable", "lsmod_readable", "kernel_log_readable"} <= set(
        result["failed_checks"]
    )
    assert "xid" not in checks and "peermem_loaded" not in checks
