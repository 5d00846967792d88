"""rdma_workload_access: SA/Role/RoleBinding per namespace; SCC on OpenShift, PSA + policy on Kubernetes."""

import yaml

NAMESPACES = ["ai-team", "benchmarks"]


def test_service_account_role_and_binding_per_namespace(dgx1_k8s):
    for ns in NAMESPACES:
        assert dgx1_k8s.get("ServiceAccount", "mpi", ns)
        binding = dgx1_k8s.get("RoleBinding", "mpi", ns)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mpi"}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi", "namespace": ns}]


def test_kubernetes_uses_pod_security_labels_and_an_admission_policy(dgx1_k8s):
    labels = dgx1_k8s.get("Namespace", "ai-team")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == "baseline"
    assert labels["gpuforge.io/rdma-workloads"] == "true"
    policy = dgx1_k8s.get("ValidatingAdmissionPolicy", "gpuforge-rdma-workloads")
    expressions = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert "c.securityContext.privileged == false" in expressions
    assert '["IPC_LOCK", "NET_BIND_SERVICE"]' in expressions
    binding = dgx1_k8s.get("ValidatingAdmissionPolicyBinding", "gpuforge-rdma-workloads")
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] == {
        "gpuforge.io/rdma-workloads": "true"
    }
    role = dgx1_k8s.get("Role", "mpi", "benchmarks")
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}
    assert ("SecurityContextConstraints", None, "scc-for-mpi") not in dgx1_k8s.objects


def test_openshift_scc_derived_from_restricted_with_ipc_lock(dgx1_openshift):
    scc = dgx1_openshift.get("SecurityContextConstraints", "scc-for-mpi")
    assert scc["defaultAddCapabilities"] == ["IPC_LOCK"]
    assert scc["allowPrivilegedContainer"] is False
    assert scc["allowPrivilegeEscalation"] is False
    assert scc["requiredDropCapabilities"] == ["KILL", "MKNOD", "SETUID", "SETGID"]
    assert scc["runAsUser"] == {"type": "MustRunAsRange"}
    assert scc["groups"] == [] and scc["users"] == []  # granted by RBAC only, not to system:authenticated
    role = dgx1_openshift.get("Role", "mpi", "ai-team")
    assert role["rules"] == [
        {
            "apiGroups": ["security.openshift.io"],
            "resources": ["securitycontextconstraints"],
            "resourceNames": ["scc-for-mpi"],
            "verbs": ["use"],
        }
    ]
    labels = dgx1_openshift.get("Namespace", "ai-team")["metadata"]["labels"]
    assert not any(key.startswith("pod-security") for key in labels)


def test_nothing_rendered_for_workloads_is_privileged(dgx1_k8s, dgx1_openshift):
    for rendered in (dgx1_k8s, dgx1_openshift):
        for name in ("rdma_workload_access/namespaces.yaml", "mpijobs/tf2-a2d2-16x01x02-gpu.yaml"):
            if name in rendered.files:
                assert "privileged: true" not in yaml.safe_dump(rendered.docs(name))
