"""The inventory check's one-GID-index rule (filter_plugins/gpuforge_inventory.py, check_roce_gid_index): on a host with
RoCE ports, the GID index the GDR loopback benchmark gives ib_write_bw -x (gpuforge_gdr_gid_index) and the one
validation checks is RoCE v2 (roce_qos_gid_index) are one value; validate.yml uses the second when the first is null."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_inventory import check_inventory

ROOT = Path(__file__).resolve().parents[3]
ROCE = {
    "gpuforge_expected_system": "vsphere-t4-vgpu-roce",
    "roce_qos_ports": [{"netdev": "ens224", "hca": "mlx5_0", "port": 1}],
}


def run(**host) -> list[dict]:
    hosts = {"gpu01": copy.deepcopy({**ROCE, **host})}
    return check_inventory(hosts, {"all": ["gpu01"], "gpu_nodes": ["gpu01"]})


def gid_errors(problems) -> list[dict]:
    return [p for p in problems if p["severity"] == "error" and "gid_index" in p["variable"]]


def test_a_benchmark_index_other_than_the_validated_one_is_refused_naming_both_and_the_fix():
    (problem,) = gid_errors(run(gpuforge_gdr_gid_index=1, roce_qos_gid_index=3))
    assert problem["host"] == "gpu01" and problem["variable"] == "gpuforge_gdr_gid_index"
    assert problem["problem"].startswith(
        "is 1, but roce_qos_gid_index (the GID index validation checks is RoCE v2) is 3"
    )
    assert problem["fix"].startswith("set gpuforge_gdr_gid_index to 3 or leave it null")


def test_the_roce_qos_roles_default_is_the_validated_index():
    default = yaml.safe_load((ROOT / "roles/roce_qos/defaults/main.yml").read_text(encoding="utf-8"))
    assert default["roce_qos_gid_index"] == 3
    (problem,) = gid_errors(run(gpuforge_gdr_gid_index=0))
    assert "roce_qos_gid_index (the GID index validation checks is RoCE v2) is 3" in problem["problem"]
    assert gid_errors(run(gpuforge_gdr_gid_index="3")) == []


@pytest.mark.parametrize(
    "host",
    [
        {"gpuforge_gdr_gid_index": 3, "roce_qos_gid_index": 3},  # one value
        {"roce_qos_gid_index": 1},  # benchmark unset: validate.yml uses roce_qos_gid_index
        {"gpuforge_gdr_gid_index": None},
        {"gpuforge_gdr_gid_index": 1, "roce_qos_ports": []},  # no RoCE port: nothing validates a GID
    ],
)
def test_one_index_or_none_to_compare_passes(host):
    assert gid_errors(run(**host)) == []


def test_validate_yml_benchmarks_the_validated_index_when_none_is_set():
    play = yaml.safe_load((ROOT / "playbooks/validate.yml").read_text(encoding="utf-8"))
    text = yaml.safe_dump(play)
    assert "gpuforge_gdr_gid_index if gpuforge_gdr_gid_index is not none" in text
    assert "else (roce_qos_gid_index | default(3) if roce_qos_ports" in text
