"""validate.yml's RoCE QoS check, run by ansible-playbook: the roce_qos role's settings applied on each RoCE node as
deployed (library/roce_qos.py, state present, over the node's hardware document without faults), then validate.yml's
two RoCE QoS tasks as they are in playbooks/validate.yml and the task that writes every node's records. Each local
host's mlnx_qos is the lab's simulator over its own hardware document and tree (lab/sim/gpuforge_sim/mlnx_qos.py): a
healthy RoCE node, one whose PFC is off (roce_pfc_off) and one whose ToS is wrong (roce_tos_wrong); a node without
roce_qos_ports runs no check. The records and verdicts the report reads must carry the check."""

from __future__ import annotations

import json
from pathlib import Path

from validate_play import check_records, local_host, run_validate_tasks, sim_tool, validate_play

from gpuforge.lab.profiles import hardware_document, load_profile

TASKS = (
    "Read back the RoCE QoS settings",
    "Add the RoCE QoS check to the node's records",
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
    environment = (
        f"GPUFORGE_LAB_HARDWARE=${{GPUFORGE_LAB_HARDWARE:-{tools / 'hardware.json'}}} GPUFORGE_LAB_RUN={tools / 'run'}"
    )
    sim_tool(tools, "mlnx_qos", environment)
    host = local_host(name, PROFILE, CHECKED_AT, 1, sim_bin=str(tools), roce_qos_sysfs_root=str(tools / "run" / "sys"))
    if faults is not None:
        host["roce_qos_ports"] = PORTS
    return host


def test_validate_records_the_roce_qos_check(tmp_path):
    _, tasks = validate_play()
    verify = {**tasks[TASKS[0]], "environment": {"PATH": "{{ sim_bin }}:/usr/bin:/bin"}}
    groups = {"gpu_nodes": {name: _host(tmp_path, name) for name in NODES}}
    _, written = run_validate_tasks(tmp_path, "RoCE QoS", PROFILE, [DEPLOY, verify, tasks[TASKS[1]]], groups)
    roce = check_records(written, "roce_qos")
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
