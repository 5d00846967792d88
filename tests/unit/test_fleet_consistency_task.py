"""playbooks/tasks/fleet_consistency.yml as it is, run by ansible-playbook on the controller alone: it builds the
compared facts of every node from hostvars (only what gpuforge_perfquery.fleet_facts compares) and names the node
whose HCA firmware differs. The nodes' facts are the shapes gpu_node_check (gather: true) returns, set by a test-only
module that returns what it is given as ansible_facts, with the keys the comparison leaves out kept in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from local_playbook import run_local_playbook

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "playbooks" / "tasks" / "fleet_consistency.yml"
# A module that returns its `facts` argument as ansible_facts (what a facts module returns), for the play below.
FACTS_MODULE = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={"facts": {"type": "dict", "required": True}})
module.exit_json(changed=False, ansible_facts=module.params["facts"])
"""


def node_facts(firmware: str) -> dict:
    gpu = {"index": 0, "bus_id": "00000000:06:00.0", "vbios_version": "88.00.4F.00.09", "clock_events": {"samples": 10}}
    port = {"port": 1, "state": "Active", "rate_gbit_per_s": 100}
    return {
        "kernel": "6.1.0-28-amd64",
        "nvidia_smi": {"driver_version": "550.90.07", "gpus": [gpu], "topology": {"gpus": []}, "errors": []},
        "infiniband": {
            "available": True,
            "hcas": [
                {"name": "mlx5_0", "fw_ver": "12.23.1020", "ports": [port]},
                {"name": "mlx5_1", "fw_ver": firmware, "ports": [port]},
            ],
            "ofed_release": "OFED-internal-24.10-1.1.4.0.200:",
            "errors": [],
        },
    }


def test_the_node_flashed_differently_is_the_outlier(tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    (library / "facts_given.py").write_text(FACTS_MODULE, encoding="utf-8")
    firmware = {"gpu01": "12.23.1020", "gpu02": "12.23.1020", "gpu03": "12.21.1000"}
    hosts = {
        name: {
            "ansible_python_interpreter": sys.executable,
            # The system as gpu_node_check returns it (validate_node.yml): not in hostvars when it is a play variable.
            "gpuforge_node_check": {"pkeys": {"mlx5_0/1": ["0xffff"]}, "system": "dgx1-v100-edr"},
            "given_facts": node_facts(fw),
        }
        for name, fw in firmware.items()
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}), encoding="utf-8")
    show = {"name": "Show the result", "ansible.builtin.debug": {"var": "gpuforge_fleet_consistency"}, "run_once": True}
    play = {
        "name": "Fleet",
        "hosts": "gpu_nodes",
        "gather_facts": False,
        "tasks": [
            {"name": "Facts", "facts_given": {"facts": "{{ given_facts }}"}},
            *yaml.safe_load(TASKS.read_text()),
            show,
        ],
    }
    playbook = tmp_path / "fleet.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False), encoding="utf-8")
    result = run_local_playbook(
        playbook,
        "-i",
        str(inventory),
        ANSIBLE_LIBRARY=str(library),
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
    )
    document, _ = json.JSONDecoder().raw_decode(result.stdout)  # ansible.cfg's timer prints after it
    shown = document["plays"][0]["tasks"][-1]["hosts"]["gpu01"]["gpuforge_fleet_consistency"]
    assert shown["outliers"] == ["gpu03"]
    check = shown["checks"]["dgx1-v100-edr"]
    assert check["status"] == "FAIL"
    assert check["observed"] == {"hca_firmware.mlx5_1": {"gpu03": "12.21.1000"}}
    # every property the comparison reads reached it: firmware, driver, VBIOS, OFED, kernel, P_Keys
    assert check["expected"] == {
        "gpu_driver": "550.90.07",
        "hca_firmware.mlx5_0": "12.23.1020",
        "hca_firmware.mlx5_1": "12.23.1020",
        "kernel": "6.1.0-28-amd64",
        "ofed": "OFED-internal-24.10-1.1.4.0.200",
        "pkeys.mlx5_0/1": "0xffff",
        "vbios.00000000:06:00.0": "88.00.4F.00.09",
    }
