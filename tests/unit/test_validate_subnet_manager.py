"""validate.yml's subnet manager check, run by ansible-playbook: its two tasks as they are in playbooks/validate.yml,
then the task that writes every node's records. Each local host's sminfo is the lab's simulator over its own
hardware document (lab/sim/gpuforge_sim/sminfo.py): a healthy node, one whose SM stopped (sm_missing) and one that
sees a second master (sm_duplicate_master); a RoCE-only node runs no check. The records and verdicts the report
reads must carry the check."""

from __future__ import annotations

import json
from pathlib import Path

from validate_play import check_records, local_host, run_validate_tasks, sim_tool, validate_play

from gpuforge.lab.profiles import hardware_document, load_profile

TASKS = (
    "Ask the subnet manager which SM is master",
    "Add the subnet manager check to the node's records",
)
CHECKED_AT = "2026-12-02T12:00:00Z"
NODES = {
    "gpu01": ("dgx1-v100-edr", []),
    "gpu02": ("dgx1-v100-edr", [{"type": "sm_missing"}]),
    "gpu03": ("dgx1-v100-edr", [{"type": "sm_duplicate_master"}]),
    "gpu04": ("supermicro-4029gp-v100", []),
    "gpu05": ("dgx1-v100-edr", []),  # no sminfo installed
}
# ansible_facts.infiniband as tasks/validate_node.yml leaves it (gpu_node_check gathers with infiniband_facts' code).
GATHER = {
    "name": "Read the InfiniBand adapters (the lab's ibstat)",
    "gpuforge.cluster.infiniband_facts": {"devinfo": False},
    "environment": {"PATH": "{{ sim_bin }}:/usr/bin:/bin"},
}


def _tools(tmp_path: Path, name: str, profile: str, faults: list) -> Path:
    """This host's ibstat and sminfo: the lab's simulators over the host's hardware document."""
    (tmp_path / name).mkdir()
    hardware = tmp_path / name / "hardware.json"
    hardware.write_text(json.dumps(hardware_document(load_profile(profile), faults)), encoding="utf-8")
    for tool in ("ibstat", "sminfo"):
        environment = (
            f"GPUFORGE_LAB_HARDWARE={hardware} GPUFORGE_LAB_RUN={tmp_path / name / 'run'} "
            f"GPUFORGE_LAB_PROC={tmp_path / 'no-proc'}"
        )
        sim_tool(tmp_path / name, tool, environment)
    return tmp_path / name


def _host(tmp_path: Path, name: str) -> dict:
    profile, faults = NODES[name]
    tools = _tools(tmp_path, name, profile, faults)
    return local_host(
        name,
        profile,
        CHECKED_AT,
        8,
        gpuforge_sminfo_executable=str(tools / ("no-sminfo" if name == "gpu05" else "sminfo")),
        sim_bin=str(tools),
    )


def test_validate_records_the_subnet_manager_check(tmp_path):
    _, tasks = validate_play()
    # The preferred SM host names its port: the configured SM is asked too (sminfo -G).
    sm_host = {"ansible_connection": "local", "mlnx_ofed_opensm_port_guid": "0x98039b0300a4c600"}
    groups = {"gpu_nodes": {name: _host(tmp_path, name) for name in NODES}, "ib_subnet_manager": {"head01": sm_host}}
    done, written = run_validate_tasks(
        tmp_path, "Subnet manager", "dgx1-v100-edr", [GATHER] + [tasks[name] for name in TASKS], groups
    )
    sm = check_records(written, "subnet_manager")
    assert sm["gpu04"] is None  # RoCE only: no InfiniBand subnet, no check
    assert sm["gpu05"] is None and "sminfo not found" in done.stdout + done.stderr  # a warning
    assert sm["gpu01"]["verdict"] == "PASS", sm["gpu01"]
    assert sm["gpu01"]["checked_at"] == CHECKED_AT and sm["gpu01"]["observed"]["master"]["sm_lid"] == 1
    assert sm["gpu01"]["threshold"]["expected"] == {
        "subnet_managers": [{"host": "head01", "guid": "0x98039b0300a4c600", "priority": 0}]
    }
    assert sm["gpu02"]["verdict"] == "FAIL" and "no subnet manager answers" in sm["gpu02"]["fault"]
    assert sm["gpu03"]["verdict"] == "FAIL" and "2 SMs are master at equal priority 0" in sm["gpu03"]["fault"]
    verdicts = {name: document["verdict"] for name, document in written.items()}
    assert [verdicts[name]["verdict"] for name in sorted(NODES)] == ["PASS", "FAIL", "FAIL", "PASS", "PASS"]
    assert verdicts["gpu02"]["failed_checks"] == ["subnet_manager"]
    assert verdicts["gpu03"]["failed_checks"] == ["subnet_manager"]
