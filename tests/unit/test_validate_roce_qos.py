"""validate.yml's RoCE QoS check, run by ansible-playbook: the roce_qos role's settings applied on each RoCE node as
deployed (library/roce_qos.py, state present, over the node's hardware document without faults), then validate.yml's
two RoCE QoS tasks as they are in playbooks/validate.yml and the task that writes every node's records. Each local
host's mlnx_qos is the lab's simulator over its own hardware document and tree (lab/sim/gpuforge_sim/mlnx_qos.py): a
healthy RoCE node, one whose PFC is off (roce_pfc_off) and one whose ToS is wrong (roce_tos_wrong); a node without
roce_qos_ports runs no check. The records and verdicts the report reads must carry the check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records

from gpuforge.lab.profiles import hardware_document, load_profile

ROOT = Path(__file__).resolve().parents[2]
TASKS = (
    "Read back the RoCE QoS settings",
    "Add the RoCE QoS check to the node's records",
    "Write every node's records and its diagnostics' results on the controller",
)
CHECKED_AT = "2026-12-02T12:00:00Z"
PROFILE = "vsphere-t4-vgpu-roce"  # mlx5_0 port 1 = ens224
PORTS = [{"netdev": "ens224", "hca": "mlx5_0", "port": 1}]
NODES = {
    "roce01": [],
    "roce02": [{"type": "roce_pfc_off", "hca": "mlx5_0", "port": 1}],
    "roce03": [{"type": "roce_tos_wrong", "hca": "mlx5_0", "port": 1, "tos": 0}],
    "ib04": None,  # no roce_qos_ports
}
# What the roce_qos role did at deployment: the module over the node as deployed (no faults).
DEPLOY = {
    "name": "Apply the roce_qos role's settings (as deployed)",
    "gpuforge.cluster.roce_qos": {
        "ports": "{{ roce_qos_ports }}",
        "pfc_priority": 3,
        "tos": 106,
        "sysfs_root": "{{ roce_qos_sysfs_root }}",
    },
    "environment": {"PATH": "{{ sim_bin }}:/usr/bin:/bin", "GPUFORGE_LAB_HARDWARE": "{{ sim_bin }}/deployed.json"},
    "when": "roce_qos_ports | default([]) | length > 0",
}


def _host(tmp_path: Path, name: str) -> dict:
    faults = NODES[name]
    tools = tmp_path / name
    tools.mkdir()
    document = hardware_document(load_profile(PROFILE), faults or [])
    (tools / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
    (tools / "deployed.json").write_text(json.dumps({**document, "faults": []}), encoding="utf-8")
    script = tools / "mlnx_qos"
    script.write_text(
        f"#!/bin/sh\nGPUFORGE_LAB_HARDWARE=${{GPUFORGE_LAB_HARDWARE:-{tools / 'hardware.json'}}} "
        f"GPUFORGE_LAB_RUN={tools / 'run'} PYTHONPATH={ROOT / 'lab' / 'sim'} "
        f'exec {sys.executable} -m gpuforge_sim.mlnx_qos "$@"\n',
        encoding="ascii",
    )
    script.chmod(0o755)
    check = {"name": "gpu_count", "status": "PASS", "observed": 1, "expected": 1}
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "sim_bin": str(tools),
        "roce_qos_sysfs_root": str(tools / "run" / "sys"),
        "gpuforge_node_check": {
            **records.node_report([check], name, PROFILE, CHECKED_AT),
            "system": PROFILE,
            "node": name,
            "checked_at": CHECKED_AT,
            "diagnostics": {},
        },
    }
    if faults is not None:
        host["roce_qos_ports"] = PORTS
    return host


def test_validate_records_the_roce_qos_check(tmp_path):
    plays = yaml.safe_load((ROOT / "playbooks" / "validate.yml").read_text(encoding="utf-8"))
    validate = next(play for play in plays if play.get("name") == "Validate GPU nodes")
    tasks = {task["name"]: task for task in validate["tasks"]}
    verify = {**tasks[TASKS[0]], "environment": {"PATH": "{{ sim_bin }}:/usr/bin:/bin"}}
    play = {
        "name": "RoCE QoS",
        "hosts": "gpu_nodes",
        "gather_facts": False,
        "vars": {
            **validate["vars"],
            "gpuforge_artifacts_dir": str(tmp_path / "artifacts"),
            "gpuforge_expected_system": PROFILE,
            "gpuforge_validate_dcgm": False,
            "gpuforge_dcgm_level": 1,
        },
        "tasks": [DEPLOY, verify, tasks[TASKS[1]], tasks[TASKS[2]]],
    }
    playbook = tmp_path / "roce.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False), encoding="utf-8")
    inventory = {"all": {"children": {"gpu_nodes": {"hosts": {name: _host(tmp_path, name) for name in NODES}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(tmp_path / "hosts.yml"), str(playbook)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    written = {
        name: json.loads((tmp_path / "artifacts" / "validation" / f"{name}.json").read_text(encoding="utf-8"))
        for name in NODES
    }
    roce = {
        name: next((r for r in document["records"] if r["check"] == "roce_qos"), None)
        for name, document in written.items()
    }
    assert roce["ib04"] is None  # no RoCE ports: no check
    assert roce["roce01"]["verdict"] == "PASS", roce["roce01"]
    assert roce["roce01"]["observed"]["ens224"]["pfc_priorities"] == [3]
    assert (
        roce["roce02"]["verdict"] == "FAIL"
        and "PFC enabled on priority none, expected only 3" in roce["roce02"]["fault"]
    )
    assert roce["roce03"]["verdict"] == "FAIL" and "RDMA-CM default ToS 0, expected 106" in roce["roce03"]["fault"]
    verdicts = {name: document["verdict"] for name, document in written.items()}
    assert [verdicts[name]["verdict"] for name in ("roce01", "roce02", "roce03", "ib04")] == [
        "PASS",
        "FAIL",
        "FAIL",
        "PASS",
    ]
    assert verdicts["roce02"]["failed_checks"] == ["roce_qos"]
