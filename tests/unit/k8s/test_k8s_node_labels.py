"""k8s_node_labels: GPU product, GPU presence, RDMA and Spectrum Scale client labels."""


def test_dgx1_kubernetes_labels(dgx1_k8s):
    nodes = dgx1_k8s.docs("k8s_node_labels/nodes.yaml")
    assert [n["metadata"]["name"] for n in nodes] == ["dgx01.ocp4.scale.ibm.com", "dgx02.ocp4.scale.ibm.com"]
    assert nodes[0]["metadata"]["labels"] == {
        "gpuforge.io/rdma": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB",
        "scale": "true",
    }
    assert set(nodes[0]) == {"apiVersion", "kind", "metadata"}  # labels only, nothing else of the Node


def test_openshift_adds_the_redhat_supermicro_gpu_accelerator_label(dgx1_openshift):
    labels = dgx1_openshift.get("Node", "dgx02.ocp4.scale.ibm.com")["metadata"]["labels"]
    assert labels["openshift.com/gpu-accelerator"] == "true"
    assert labels["nvidia.com/gpu.product"] == "Tesla-V100-SXM2-16GB"


def test_t4_vgpu_nodes_have_no_scale_label(t4_roce):
    nodes = t4_roce.kinds("Node")
    assert len(nodes) == 4
    assert {n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in nodes} == {"GRID-T4-16C"}
    assert all("scale" not in n["metadata"]["labels"] for n in nodes)
