"""Bad input stops the playbook with a message that says what is wrong."""


def test_unknown_kubernetes_version(render_error):
    message = render_error("dgx1_edr", version="1.24")
    assert "Unknown Kubernetes version '1.24'" in message
    assert "1.30, 1.31" in message and "1.37" in message


def test_empty_namespace_list(render_error):
    message = render_error(
        "t4_roce", gpuforge_k8s_enabled_addons=["rdma_workload_access"], rdma_workload_access_namespaces=[]
    )
    assert "rdma_workload_access_namespaces must list the namespaces" in message


def test_hca_the_node_does_not_have(render_error):
    message = render_error(
        "t4_roce", gpuforge_k8s_enabled_addons=["rdma_shared_device_plugin"], rdma_shared_device_plugin_hcas=["mlx5_1"]
    )
    assert "node t4-worker1 has no HCA named mlx5_1 (it has mlx5_0)" in message
