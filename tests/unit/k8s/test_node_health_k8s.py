"""node_health_k8s (issue 50): the gpuforge-health DaemonSet and its least-privilege RBAC, rendered for Kubernetes and
OpenShift through playbooks/k8s_addons.yml (k8s_manifest_validate validates every object against the release's
schema as it writes it)."""

import pytest


@pytest.mark.parametrize(("platform", "version", "taint"), [("kubernetes", "1.30", False), ("openshift", "1.33", True)])
def test_daemonset_and_rbac(render_scenario, platform, version, taint):
    rendered = render_scenario(
        "dgx1_edr",
        "dgx1-edr",
        platform,
        version,
        gpuforge_k8s_enabled_addons=["node_health"],
        node_health_k8s_taint=taint,
        gpuforge_workload_image_digest="sha256:" + "a" * 64,
    )
    ds = rendered.get("DaemonSet", "gpuforge-health", "kube-system")
    pod = ds["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["serviceAccountName"] == "gpuforge-health" and pod["hostPID"] is True
    assert container["image"].endswith("@sha256:" + "a" * 64)
    script = container["args"][0]
    assert 'chroot /host /usr/local/sbin/gpuforge-health --profile full --kubernetes-node "$NODE_NAME"' in script
    assert ("--kubernetes-taint" in script) is taint
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert {"key": "gpuforge.io/unhealthy", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    role = rendered.get("ClusterRole", "gpuforge-health")
    # Least privilege: nodes read (and patched only to taint), nodes/status patched; nothing else.
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"] if taint else ["get"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    ]
    binding = rendered.get("ClusterRoleBinding", "gpuforge-health")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpuforge-health", "namespace": "kube-system"}]
    scc = ("RoleBinding", "kube-system", "gpuforge-health-scc") in rendered.objects
    assert scc is (platform == "openshift")
    if scc:
        assert rendered.get("RoleBinding", "gpuforge-health-scc", "kube-system")["roleRef"]["name"] == (
            "system:openshift:scc:privileged"
        )
