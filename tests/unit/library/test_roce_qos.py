"""roce_qos on the lab's simulated RoCE port (lab/sim/gpuforge_sim/mlnx_qos.py and its sysfs/configfs tree): sets only
what differs, a second run changes nothing, check mode writes nothing, verify judges, the three RoCE QoS faults are
caught as one problem each, and bad input is refused naming the fix."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from functools import partial
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.modules import roce_qos

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "lab" / "sim"))
from gpuforge_sim import mlnx_qos  # noqa: E402

PORTS = [{"netdev": "ens224", "hca": "mlx5_0", "port": 1}]
ARGS = {"ports": PORTS, "pfc_priority": 3, "tos": 106, "gid_index": 3}


@pytest.fixture
def node(tmp_path, monkeypatch):
    """The vsphere-t4-vgpu-roce lab node (mlx5_0 port 1 = ens224, RoCE); returns (sysfs root, set faults, calls)."""
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_SYSFS", str(tmp_path / "sys"))
    hw = yaml.safe_load((ROOT / "lab/profiles/vsphere-t4-vgpu-roce.yml").read_text(encoding="utf-8"))

    def faults(found):
        (tmp_path / "hardware.json").write_text(json.dumps({**hw, "faults": found}), encoding="utf-8")

    faults([])
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    calls = []
    return tmp_path / "sys", faults, calls


def simulated(calls, argv, **_kwargs):
    calls.append(argv[1:])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = mlnx_qos.main(argv[1:])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def run(ansible_module, node):
    root, _faults, calls = node

    def go(expect_failure=False, check_mode=False, **args):
        return ansible_module(
            roce_qos,
            {**ARGS, "sysfs_root": str(root), **args},
            partial(simulated, calls),
            expect_failure=expect_failure,
            check_mode=check_mode,
            bin_path="/usr/sbin/{}".format,
        )

    return go


def setting_calls(calls):
    return [argv for argv in calls if len(argv) > 2]


def test_converges_then_changes_nothing(run, node):
    root, _faults, calls = node
    first = run()
    assert first["changed"] is True
    assert first["changes"] == [
        "ens224: trust pcp -> dscp",
        "ens224: PFC priorities none -> 3",
        "ens224: RDMA-CM default ToS 0 -> 106",
        "ens224: traffic class None -> 106",
    ]
    assert setting_calls(calls) == [["-i", "ens224", "--trust", "dscp"], ["-i", "ens224", "--pfc", "0,0,0,1,0,0,0,0"]]
    assert first["check"]["status"] == "PASS"
    assert (root / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text() == "106"
    calls.clear()
    second = run()
    assert second["changed"] is False and second["changes"] == [] and setting_calls(calls) == []


def test_check_mode_reports_and_writes_nothing(run, node):
    root, _faults, calls = node
    result = run(check_mode=True)
    assert result["changed"] is True and len(result["changes"]) == 4
    assert setting_calls(calls) == []
    assert (root / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text() == "0\n"
    assert "trust state: pcp" in mlnx_qos.render("pcp", mlnx_qos._load_state("ens224")).lower()


def test_ecn_off_on_the_priority_is_set(run, node):
    root, _faults, _calls = node
    run(state="verify")  # the driver tree exists once mlnx_qos ran
    (root / "class/net/ens224/ecn/roce_rp/enable/3").write_text("0\n")
    result = run()
    assert "ens224: ECN roce_rp priority 3 -> 1" in result["changes"]
    assert (root / "class/net/ens224/ecn/roce_rp/enable/3").read_text() == "1"


def test_a_tos_off_the_pfc_priority_is_mapped_onto_it(run):
    result = run(tos=184)  # DSCP 46 is priority 5 by default
    assert "ens224: DSCP 46 -> priority 3" in result["changes"]
    assert result["check"]["status"] == "PASS"


def test_verify_on_an_unconfigured_port_fails_the_check_and_changes_nothing(run, node):
    _root, _faults, calls = node
    result = run(state="verify")
    assert result["changed"] is False and setting_calls(calls) == []
    assert result["check"]["name"] == "roce_qos" and result["check"]["status"] == "FAIL"
    assert "trust state pcp, expected dscp" in result["check"]["fault"]


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ({"type": "roce_trust_pcp", "hca": "mlx5_0", "port": 1}, "priority trust state pcp, expected dscp"),
        ({"type": "roce_pfc_off", "hca": "mlx5_0", "port": 1}, "PFC enabled on priority none, expected only 3"),
        ({"type": "roce_tos_wrong", "hca": "mlx5_0", "port": 1, "tos": 0}, "RDMA-CM default ToS 0, expected 106"),
    ],
)
def test_each_fault_after_configuration_is_caught(run, node, fault, problem):
    _root, faults, _calls = node
    assert run()["check"]["status"] == "PASS"
    faults([fault])
    result = run(state="verify")
    assert result["check"]["status"] == "FAIL" and problem in result["check"]["fault"]
    # setting it again does not take while the fault holds: a failure naming the port, never a silent success
    failed = run(expect_failure=True)
    assert "RoCE QoS settings did not take" in failed["msg"] and "ens224 (mlx5_0 port 1)" in failed["msg"]


def test_gid_index_that_is_not_roce_v2(run):
    result = run(state="verify", gid_index=2)
    assert "GID index 2 is IB/RoCE v1, not RoCE v2" in result["check"]["fault"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pfc_priority": 8}, "pfc_priority 8 is outside 0-7"),
        ({"tos": 300}, "tos 300 is outside 0-255"),
        ({"ports": []}, "ports is empty"),
        ({"ports": [{"netdev": "ens999", "hca": "mlx5_0"}]}, "mlnx_qos -i ens999  failed (exit 1)"),
    ],
)
def test_bad_input_is_refused_naming_the_fix(run, args, message):
    assert message in run(expect_failure=True, **args)["msg"]


def test_missing_mlnx_qos_names_the_package(ansible_module, node):
    root, _faults, _calls = node
    result = ansible_module(
        roce_qos, {**ARGS, "sysfs_root": str(root)}, lambda argv, **kw: (0, "", ""), True, bin_path=lambda name: None
    )
    assert "mlnx-tools" in result["msg"]


def test_check_mode_judges_the_state_before_the_changes(run):
    result = run(check_mode=True)
    assert result["check"]["status"] == "FAIL" and "trust state pcp, expected dscp" in result["check"]["fault"]
    assert not result.get("failed")


def test_ecn_false_does_not_judge_ecn(run, node):
    root, _faults, _calls = node
    run()
    (root / "class/net/ens224/ecn/roce_np/enable/3").write_text("0\n")
    assert run(state="verify", ecn=False)["check"]["status"] == "PASS"
    assert "ECN roce_np on priority 3 is 0" in run(state="verify")["check"]["fault"]
