"""The roce_qos check on a booted lab node (its hardware document in GPUFORGE_LAB_HARDWARE): the roce_qos role's
settings applied first with library/roce_qos.py (state present, on the node as deployed: its hardware document
without faults), then the same module with state verify on the node as found (with its faults), each run of
mlnx_qos answered by the lab's simulator in-process. Nodes without a RoCE port have no such check."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpuforge.cluster.plugins.modules import roce_qos
from gpuforge_sim import ib_ports
from gpuforge_sim import mlnx_qos as mlnx_qos_sim

# What validation expects of a RoCE port (the roce_qos role's defaults; roles/roce_qos/defaults/main.yml).
SETTINGS = {"trust": "dscp", "pfc_priority": 3, "tos": 106, "gid_index": 3}


class _Exit(Exception):
    pass


def _simulated(argv, **_kwargs):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = mlnx_qos_sim.main(list(argv[1:]))
    return rc, out.getvalue(), err.getvalue()


def run_roce_qos(monkeypatch, args: dict) -> dict:
    """library/roce_qos.py main() with args; its exit_json or fail_json result (failed=True for the latter)."""
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: f"/usr/sbin/{name}")
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: _simulated(argv, **kw))
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", lambda self, **result: (_ for _ in ()).throw(_Exit(result)))
    monkeypatch.setattr(
        basic.AnsibleModule,
        "fail_json",
        lambda self, **result: (_ for _ in ()).throw(_Exit({**result, "failed": True})),
    )
    with patch_module_args({**args, "_ansible_check_mode": False}), pytest.raises(_Exit) as info:
        roce_qos.main()
    return info.value.args[0]


def roce_qos_checks(monkeypatch, tmp_path: Path) -> list:
    """[the roce_qos check] of the booted node, or [] when it has no RoCE port."""
    hardware = ib_ports.load()
    ports = [
        {"netdev": port["netdev"], "hca": hca["name"], "port": int(port["port"])}
        for hca, port in mlnx_qos_sim.roce_ports(hardware)
    ]
    if not ports:
        return []
    args = {"ports": ports, "sysfs_root": mlnx_qos_sim.sysfs_root(), **SETTINGS}
    deployed = tmp_path / "hardware-deployed.json"
    deployed.write_text(json.dumps({**hardware, "faults": []}), encoding="utf-8")
    with monkeypatch.context() as scoped:
        scoped.setenv("GPUFORGE_LAB_HARDWARE", str(deployed))
        applied = run_roce_qos(scoped, {**args, "state": "present"})
    assert not applied.get("failed"), applied
    found = run_roce_qos(monkeypatch, {**args, "state": "verify"})
    assert not found.get("failed"), found
    return [found["check"]]
