"""rdma_workload_access: SA/Role/RoleBinding per namespace; SCC on OpenShift, PSA + policy on Kubernetes."""

from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[3]
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


def rdma_test(rendered):
    return {
        role: rendered.get("Pod", f"gpuforge-rdma-test-{role}", "ai-team") for role in ("server", "client")
    }, rendered.get("Service", "gpuforge-rdma-test", "ai-team")


def test_the_in_pod_rdma_test_renders_on_kubernetes_and_validates(dgx1_k8s):
    pods, service = rdma_test(dgx1_k8s)
    nodes = []
    for role, pod in pods.items():
        kubernetes_validate.validate(pod, "1.30", strict=True)
        spec = pod["spec"]
        container = spec["containers"][0]
        assert spec["serviceAccountName"] == "mpi" and "securityContext" not in spec
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]},
        }
        # One RDMA resource: the first rail the RDMA shared device plugin offers (IBM Redpaper REDP-5610: shared_ib0 =
        # mlx5_0).
        assert container["resources"]["limits"] == {"rdma/shared_ib0": 1}
        assert container["image"] == "registry.example.invalid/gpuforge/workload:1.0.0"
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        nodes += term["matchFields"][0]["values"]
        assert (spec["hostname"], spec["subdomain"]) == (role, "gpuforge-rdma-test")
        script = container["command"][2]
        for tool in ('ibv_devinfo -d "$hca" -i 1', 'ibstatus "$hca:1"', 'exec ib_write_bw -d "$hca" -i 1'):
            assert tool in script
    # Two different nodes: the first two RDMA nodes by their Kubernetes names.
    assert nodes == ["dgx01.ocp4.scale.ibm.com", "dgx02.ocp4.scale.ibm.com"]
    assert (
        pods["client"]["spec"]["containers"][0]["command"][2]
        .rstrip()
        .endswith("-F server.gpuforge-rdma-test.ai-team.svc")
    )
    kubernetes_validate.validate(service, "1.30", strict=True)
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["ports"][0]["port"] == 18515
    assert service["spec"]["selector"]["gpuforge.io/rdma-test-role"] == "server"


def test_the_in_pod_rdma_test_is_written_but_never_applied(dgx1_k8s):
    names = sorted(name for name in dgx1_k8s.files if name.startswith("rdma_workload_access/rdma-test"))
    assert names == [
        "rdma_workload_access/rdma-test-client.yaml",
        "rdma_workload_access/rdma-test-server.yaml",
        "rdma_workload_access/rdma-test-service.yaml",
    ]
    tasks = yaml.safe_load((ROOT / "roles/rdma_workload_access/tasks/main.yml").read_text(encoding="utf-8"))
    render = next(task for task in tasks if task["name"] == "Render, validate and apply the RDMA workload access")
    assert {item["apply"] for item in render["vars"]["rdma_test"]} == {False}


def test_without_rdma_resources_the_test_is_not_rendered(dgx1_openshift):
    # dgx1_openshift renders no RDMA shared device plugin: nothing for the pods to request.
    assert not [name for name in dgx1_openshift.files if "rdma-test" in name]
