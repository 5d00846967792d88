"""slurm_node_state module: drain/resume through scontrol (run_command mocked)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import slurm_node_state

IDLE = (
    "NodeName=slurm-dgx1 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 CPUTot=2 Gres=gpu:v100:8 NodeAddr=slurm-dgx1 "
    "Version=22.05.8 RealMemory=22057 Sockets=1 Boards=1 State=IDLE ThreadsPerCore=1 Partitions=v100"
)
DRAINED = IDLE.replace("State=IDLE", "State=IDLE+DRAIN") + " Reason=gpu 3 xid 79 [root@2026-11-22T01:00:00]"


@pytest.fixture
def run_module(ansible_module):
    def run(args: dict, outputs: list, check_mode: bool = False):
        """Run the module; outputs are (rc, out, err) answers in call order. Returns (result, calls)."""
        calls = []

        def run_command(argv, **kwargs):
            calls.append(argv)
            assert kwargs["environ_update"] == {"LC_ALL": "C"}
            return outputs.pop(0)

        result = ansible_module(
            slurm_node_state,
            args,
            run_command,
            expect_failure=None,
            check_mode=check_mode,
            bin_path="/usr/bin/{}".format,
        )
        return result, [c[1:] for c in calls]

    return run


def test_drain_idle_node(run_module):
    result, calls = run_module(
        {"name": "slurm-dgx1", "state": "drain", "reason": "gpu 3 xid 79"},
        [(0, IDLE, ""), (0, "", ""), (0, DRAINED, "")],
    )
    assert result["changed"] is True
    assert calls[1] == ["update", "nodename=slurm-dgx1", "state=drain", "reason=gpu 3 xid 79"]
    assert result["state"] == "IDLE+DRAIN"
    assert result["reason"] == "gpu 3 xid 79"
    assert result["diff"] == {
        "before": {"state": "IDLE", "reason": None},
        "after": {"state": "IDLE+DRAIN", "reason": "gpu 3 xid 79"},
    }


def test_drain_is_idempotent_with_same_reason(run_module):
    result, calls = run_module({"name": "slurm-dgx1", "state": "drain", "reason": "gpu 3 xid 79"}, [(0, DRAINED, "")])
    assert result["changed"] is False
    assert len(calls) == 1


def test_drain_with_new_reason_updates_it(run_module):
    result, calls = run_module(
        {"name": "slurm-dgx1", "state": "drain", "reason": "ecc dbe"},
        [(0, DRAINED, ""), (0, "", ""), (0, DRAINED.replace("gpu 3 xid 79", "ecc dbe"), "")],
    )
    assert result["changed"] is True
    assert calls[1][-1] == "reason=ecc dbe"


def test_resume_in_check_mode_runs_no_update(run_module):
    result, calls = run_module({"name": "slurm-dgx1", "state": "resume"}, [(0, DRAINED, "")], check_mode=True)
    assert result["changed"] is True
    assert calls == [["show", "node", "-o", "slurm-dgx1"]]
    assert result["diff"]["after"] == {"state": "IDLE", "reason": None}


def test_resume_idle_node_is_unchanged(run_module):
    result, calls = run_module({"name": "slurm-dgx1", "state": "resume"}, [(0, IDLE, "")])
    assert result["changed"] is False
    assert len(calls) == 1


def test_unknown_node_fails_with_hint(run_module):
    result, _ = run_module({"name": "nope", "state": "query"}, [(1, "", "Node nope not found")])
    assert result["failed"] is True
    assert "Node nope not found" in result["msg"]
    assert "sinfo -N" in result["msg"]


def test_unreadable_output_fails(run_module):
    result, _ = run_module({"name": "slurm-dgx1", "state": "query"}, [(0, "garbage", "")])
    assert result["failed"] is True
    assert "could not read 'scontrol show node -o slurm-dgx1'" in result["msg"]


def test_failed_update_reports_scontrol_error(run_module):
    result, _ = run_module(
        {"name": "slurm-dgx1", "state": "drain", "reason": "x"},
        [(0, IDLE, ""), (1, "", "slurm_update error: Invalid user id")],
    )
    assert result["failed"] is True
    assert "Invalid user id" in result["msg"]
