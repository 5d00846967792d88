"""rdma_shared_device_plugin: configList from infiniband facts (IBM Redpaper REDP-5610's shared_ib0..3, the VMware
vGPU/PVRDMA paper's RoCE)."""

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_k8s import rdma_config_list


def config(rendered):
    return json.loads(rendered.get("ConfigMap", "rdma-devices", "kube-system")["data"]["config.json"])


def test_dgx1_four_edr_hcas_give_shared_ib0_to_3(dgx1_k8s):
    assert config(dgx1_k8s)["configList"] == [
        {"resourceName": f"shared_ib{i}", "rdmaHcaMax": 100, "selectors": {"ifNames": [f"ib{i}"]}} for i in range(4)
    ]


def test_t4_roce_gives_one_roce_resource(t4_roce):
    assert config(t4_roce)["configList"] == [
        {"resourceName": "shared_roce0", "rdmaHcaMax": 100, "selectors": {"ifNames": ["ens224"]}}
    ]


def test_daemonset_mounts_the_config_and_selects_rdma_nodes(dgx1_k8s):
    ds = dgx1_k8s.get("DaemonSet", "rdma-shared-dp-ds", "kube-system")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpuforge.io/rdma": "true"}
    # The tag, and the digest gpuforge recorded for it with its source (k8s_addons_common_image_digests: the
    # certified Network Operator 25.4.0 bundle's rdma-shared-device-plugin image).
    assert pod["containers"][0]["image"] == (
        "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"
        "@sha256:1eb5ab7f4b6f0cf89c954cf7ac8eb2e6fb2290a4f5f57417136a5302f20b12c8"
    )
    config_volume = next(v for v in pod["volumes"] if v["name"] == "config")
    assert config_volume["configMap"] == {
        "name": "rdma-devices",
        "items": [{"key": "config.json", "path": "config.json"}],
    }
    assert len(ds["spec"]["template"]["metadata"]["annotations"]["gpuforge.io/config-sha256"]) == 64


# The demo lab (lab/specs/demo.yml): three DGX-1 nodes, mlx5_0..3 -> ib0..ib3 (lab/profiles/dgx1-v100-edr.yml),
# and gpu03's mlx5_2 port 1 Down (the fault the demo must find).
def _dgx1_node(down=()):
    hcas, active = [], []
    for i in range(4):
        state = "Down" if f"mlx5_{i}" in down else "Active"
        hcas.append(
            {
                "name": f"mlx5_{i}",
                "ca_type": "MT4115",
                "ports": [{"port": 1, "state": state, "link_layer": "InfiniBand", "netdev": f"ib{i}"}],
            }
        )
        if state == "Active":
            active.append(f"mlx5_{i}/1")
    return {"ansible_facts": {"infiniband": {"hcas": hcas, "active_ports": active}}}


DEMO = {"gpu01": _dgx1_node(), "gpu02": _dgx1_node(), "gpu03": _dgx1_node(down=("mlx5_2",))}


def test_demo_fault_keeps_every_hca_on_its_own_resource_on_every_node():
    resources = rdma_config_list(DEMO, ["gpu01", "gpu02", "gpu03"])
    assert [(r["resourceName"], r["selectors"]["ifNames"]) for r in resources] == [
        (f"shared_ib{i}", [f"ib{i}"]) for i in range(4)
    ]
    # Whatever the node order and whichever node is faulty, the names do not move.
    assert rdma_config_list(DEMO, ["gpu03", "gpu01", "gpu02"]) == resources
    one_bad = {"gpu03": DEMO["gpu03"]}
    assert rdma_config_list(one_bad, ["gpu03"]) == resources


def test_a_netdev_name_on_two_hcas_is_refused():
    swapped = _dgx1_node()
    ports = swapped["ansible_facts"]["infiniband"]["hcas"]
    ports[0]["ports"][0]["netdev"], ports[1]["ports"][0]["netdev"] = "ib1", "ib0"
    with pytest.raises(AnsibleFilterError, match=r"netdev ib1 is mlx5_0/1 on gpu02 but mlx5_1/1 on gpu01"):
        rdma_config_list({"gpu01": _dgx1_node(), "gpu02": swapped}, ["gpu01", "gpu02"])
