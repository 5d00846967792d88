"""slurm_node_state module: drain/resume through scontrol (run_command mocked)."""

from __future__ import annotations

from unittest import mock

import pytest
import slurm_node_state
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

IDLE = (
    "NodeName=slurm-dgx1 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 CPUTot=2 Gres=gpu:v100:8 NodeAddr=slurm-dgx1 "
    "Version=22.05.8 RealMemory=22057 Sockets=1 Boards=1 State=IDLE ThreadsPerCore=1 Partitions=v100"
)
DRAINED = IDLE.replace("State=IDLE", "State=IDLE+DRAIN") + " Reason=gpu 3 xid 79 [root@2026-11-22T01:00:00]"


class Exit(Exception):
    pass


def run(args: dict, outputs: list, check_mode: bool = False):
    """Run the module; outputs are (rc, out, err) answers in call order. Returns (result, calls)."""
    args = {**args, "_ansible_check_mode": check_mode}
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        assert kwargs["environ_update"] == {"LC_ALL": "C"}
        return outputs.pop(0)

    def leave(self, **result):
        raise Exit(result)

    with (
        patch_module_args(args),
        mock.patch.object(basic.AnsibleModule, "run_command", run_command),
        mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: f"/usr/bin/{name}"),
        mock.patch.object(basic.AnsibleModule, "exit_json", leave),
        mock.patch.object(basic.AnsibleModule, "fail_json", lambda self, **r: leave(self, failed=True, **r)),
        pytest.raises(Exit) as exc,
    ):
        slurm_node_state.main()
    return exc.value.args[0], [c[1:] for c in calls]


def test_drain_idle_node():
    result, calls = run(
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


def test_drain_is_idempotent_with_same_reason():
    result, calls = run({"name": "slurm-dgx1", "state": "drain", "reason": "gpu 3 xid 79"}, [(0, DRAINED, "")])
    assert result["changed"] is False
    assert len(calls) == 1


def test_drain_with_new_reason_updates_it():
    result, calls = run(
        {"name": "slurm-dgx1", "state": "drain", "reason": "ecc dbe"},
        [(0, DRAINED, ""), (0, "", ""), (0, DRAINED.replace("gpu 3 xid 79", "ecc dbe"), "")],
    )
    assert result["changed"] is True
    assert calls[1][-1] == "reason=ecc dbe"


def test_resume_in_check_mode_runs_no_update():
    result, calls = run({"name": "slurm-dgx1", "state": "resume"}, [(0, DRAINED, "")], check_mode=True)
    assert result["changed"] is True
    assert calls == [["show", "node", "-o", "slurm-dgx1"]]
    assert result["diff"]["after"] == {"state": "IDLE", "reason": None}


def test_resume_idle_node_is_unchanged():
    result, calls = run({"name": "slurm-dgx1", "state": "resume"}, [(0, IDLE, "")])
    assert result["changed"] is False
    assert len(calls) == 1


def test_unknown_node_fails_with_hint():
    result, _ = run({"name": "nope", "state": "query"}, [(1, "", "Node nope not found")])
    assert result["failed"] is True
    assert "Node nope not found" in result["msg"]
    assert "sinfo -N" in result["msg"]


def test_unreadable_output_fails():
    result, _ = run({"name": "slurm-dgx1", "state": "query"}, [(0, "garbage", "")])
    assert result["failed"] is True
    assert "could not read 'scontrol show node -o slurm-dgx1'" in result["msg"]


def test_failed_update_reports_scontrol_error():
    result, _ = run(
        {"name": "slurm-dgx1", "state": "drain", "reason": "x"},
        [(0, IDLE, ""), (1, "", "slurm_update error: Invalid user id")],
    )
    assert result["failed"] is True
    assert "Invalid user id" in result["msg"]
