"""Filters that turn node facts into add-on configuration."""

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_k8s import (
    gpu_product_label,
    k8s_version_check,
    rdma_config_list,
    scale_volume_handle,
)


def node(*ports, active=None):
    hcas = [
        {
            "name": hca,
            "ca_type": "MT4115",
            "ports": [{"port": 1, "state": state, "link_layer": layer, "netdev": netdev}],
        }
        for hca, layer, netdev, state in ports
    ]
    active = active if active is not None else [f"{hca}/1" for hca, _, _, state in ports if state == "Active"]
    return {"ansible_facts": {"infiniband": {"hcas": hcas, "active_ports": active}}}


DGX = node(*[(f"mlx5_{i}", "InfiniBand", f"ib{i}", "Active") for i in (0, 1, 10, 2)])


def test_active_ports_numbered_in_natural_hca_order():
    resources = rdma_config_list({"a": DGX}, ["a"])
    assert [(r["resourceName"], r["selectors"]["ifNames"]) for r in resources] == [
        ("shared_ib0", ["ib0"]),
        ("shared_ib1", ["ib1"]),
        ("shared_ib2", ["ib2"]),
        ("shared_ib3", ["ib10"]),
    ]
    assert {r["rdmaHcaMax"] for r in resources} == {100}


def test_down_port_keeps_its_resource_and_netdevs_merge_across_nodes():
    one = node(("mlx5_0", "Ethernet", "ens224", "Active"), ("mlx5_1", "Ethernet", "ens256", "Down"))
    two = node(("mlx5_0", "Ethernet", "ens3f0", "Active"))
    assert rdma_config_list({"a": one, "b": two}, ["a", "b"], rdma_hca_max=10) == [
        {"resourceName": "shared_roce0", "rdmaHcaMax": 10, "selectors": {"ifNames": ["ens224", "ens3f0"]}},
        {"resourceName": "shared_roce1", "rdmaHcaMax": 10, "selectors": {"ifNames": ["ens256"]}},
    ]


def test_errors_name_the_node():
    with pytest.raises(
        AnsibleFilterError, match=r"node a has no HCA named mlx5_7 \(it has mlx5_0, mlx5_1, mlx5_2, mlx5_10\)"
    ):
        rdma_config_list({"a": DGX}, ["a"], hcas=["mlx5_7"])
    down = node(("mlx5_0", "InfiniBand", "ib0", "Down"))
    with pytest.raises(AnsibleFilterError, match="no active RDMA port on any of a"):
        rdma_config_list({"a": down}, ["a"], hcas=["mlx5_0"])
    with pytest.raises(AnsibleFilterError, match="no active RDMA port on any of a"):
        rdma_config_list({"a": down}, ["a"])
    roce = node(("mlx5_0", "Ethernet", "ens224", "Active"))
    with pytest.raises(AnsibleFilterError, match="mlx5_0/1 is Ethernet on b but InfiniBand on a"):
        rdma_config_list({"a": DGX, "b": roce}, ["a", "b"])
    with pytest.raises(AnsibleFilterError, match=r"node b has no ansible_facts\.infiniband"):
        rdma_config_list({"a": DGX, "b": {}}, ["a", "b"])
    with pytest.raises(AnsibleFilterError, match="node group is empty"):
        rdma_config_list({}, [])


def test_gpu_product_label():
    assert (
        gpu_product_label({"a": {"ansible_facts": {"nvidia_smi": {"gpu_product_label": "GRID-T4-16C"}}}}, "a")
        == "GRID-T4-16C"
    )
    with pytest.raises(AnsibleFilterError, match="node a has no GPU product label"):
        gpu_product_label({"a": {"ansible_facts": {}}}, "a")
    with pytest.raises(AnsibleFilterError, match="is not a valid label value"):
        gpu_product_label({"a": {"ansible_facts": {"nvidia_smi": {"gpu_product_label": "Tesla V100"}}}}, "a")


def test_scale_volume_handle():
    assert (
        scale_volume_handle("16217308676014575381", "099B6A7A:5EB99743", "/gpfs/ess3000_4M/adas")
        == "16217308676014575381;099B6A7A:5EB99743;path=/gpfs/ess3000_4M/adas"
    )
    with pytest.raises(AnsibleFilterError, match="not like 099B6A7A:5EB99743"):
        scale_volume_handle("1", "099b6a7a", "/gpfs")
    with pytest.raises(AnsibleFilterError, match="is not absolute"):
        scale_volume_handle("1", "099B6A7A:5EB99743", "gpfs")


def test_k8s_version_check():
    assert k8s_version_check("v1.33.2", "1.30") == "1.33"
    with pytest.raises(AnsibleFilterError, match=r"Unknown Kubernetes version '1.29': .* 1.30, 1.31, .*1.37"):
        k8s_version_check("1.29", "1.30")
    with pytest.raises(AnsibleFilterError, match="Unknown Kubernetes version 'latest'"):
        k8s_version_check("latest", "1.30")
