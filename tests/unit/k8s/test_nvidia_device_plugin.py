"""nvidia_device_plugin: pinned image, GPU nodes only, tolerations, config in a ConfigMap."""

import yaml


def test_daemonset_runs_on_gpu_nodes_only(dgx1_k8s):
    ds = dgx1_k8s.get("DaemonSet", "nvidia-device-plugin-daemonset", "kube-system")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    container = pod["containers"][0]
    # The tag, and the digest gpuforge recorded for it with its source (k8s_addons_common_image_digests).
    assert container["image"] == (
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
        "@sha256:af31e2b7c7f89834c4e5219860def7ac2e49a207b3d4e8610d5a26772b7738e5"
    )
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert {"name": "CONFIG_FILE", "value": "/etc/nvidia-device-plugin/config.yaml"} in container["env"]
    assert pod["volumes"][1] == {"name": "config", "configMap": {"name": "nvidia-device-plugin-config"}}


def test_config_has_mig_strategy_and_no_time_slicing(dgx1_k8s):
    cm = dgx1_k8s.get("ConfigMap", "nvidia-device-plugin-config", "kube-system")
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["version"] == "v1"
    assert config["flags"]["migStrategy"] == "none"
    assert config["flags"]["failOnInitError"] is True
    assert "sharing" not in config


def test_openshift_selects_the_gpu_accelerator_label_and_binds_an_scc(dgx1_openshift):
    ds = dgx1_openshift.get("DaemonSet", "nvidia-device-plugin-daemonset", "kube-system")
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"openshift.com/gpu-accelerator": "true"}
    binding = dgx1_openshift.get("RoleBinding", "nvidia-device-plugin-scc", "kube-system")
    assert binding["roleRef"]["name"] == "system:openshift:scc:hostmount-anyuid"
