"""rdma_shared_device_plugin: configList from infiniband facts (seed 001 shared_ib0..3, seed 004 RoCE)."""

import json


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
    assert pod["containers"][0]["image"] == "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"
    config_volume = next(v for v in pod["volumes"] if v["name"] == "config")
    assert config_volume["configMap"] == {
        "name": "rdma-devices",
        "items": [{"key": "config.json", "path": "config.json"}],
    }
    assert len(ds["spec"]["template"]["metadata"]["annotations"]["gpuforge.io/config-sha256"]) == 64
