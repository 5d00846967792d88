"""gpuforge-health's verdict as NodeConditions and a taint (module_utils/gpuforge_health_k8s.py), against the recorded
Node responses of tests/fixtures/k8s/api/: the hand-written DGX nodes (nodes-*.json, in the API's shape) and the real
responses of node-health/ (SOURCES.md of tests/fixtures/k8s/api, "Node-condition updates": which is which, sources)."""

from __future__ import annotations

import copy
import io
import json
import urllib.error
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_health_k8s as k8s

API = Path(__file__).resolve().parents[2] / "fixtures" / "k8s" / "api"
NOW = "2026-12-02T09:00:00Z"


def node(name="dgx01", fixture="nodes-healthy.json") -> dict:
    items = json.loads((API / fixture).read_text(encoding="utf-8"))["items"]
    return copy.deepcopy(next(item for item in items if item["metadata"]["name"] == name))


def record(*failed):
    checks = [{"name": "gpu_count", "status": "PASS", "fault": "", "caused_by": None}]
    checks += [{"name": name, "status": "FAIL", "fault": fault, "caused_by": None} for name, fault in failed]
    return {"profile": "full", "checked_at": NOW, "checks": checks}


def test_a_healthy_node_gets_both_conditions_true_and_keeps_its_taints():
    dgx01 = node()
    conds = {c["type"]: c for c in k8s.conditions(record(), dgx01, NOW)}
    assert set(conds) == {"GpuHealthy", "IbHealthy"}
    assert all(c["status"] == "True" and c["reason"] == "GpuforgeHealthPassed" for c in conds.values())
    assert conds["GpuHealthy"]["lastTransitionTime"] == NOW  # new conditions
    assert k8s.taint_patch(dgx01, record()) is None


def test_failed_checks_set_their_condition_false_and_taint_the_node():
    dgx01 = node()
    dgx01["spec"]["taints"] = [{"key": "example.com/maintenance", "value": "soon", "effect": "PreferNoSchedule"}]
    failing = record(
        ("xid", "Xid in the kernel log: 79 GPU has fallen off the bus"), ("ib_port_state", "mlx5_1/1 Down")
    )
    conds = {c["type"]: c for c in k8s.conditions(failing, dgx01, NOW)}
    assert (
        conds["GpuHealthy"]["status"] == "False" and "xid: Xid in the kernel log: 79" in conds["GpuHealthy"]["message"]
    )
    assert conds["IbHealthy"]["status"] == "False" and "ib_port_state: mlx5_1/1 Down" in conds["IbHealthy"]["message"]
    patch = k8s.taint_patch(dgx01, failing)
    assert patch == {
        "metadata": {"resourceVersion": dgx01["metadata"]["resourceVersion"]},
        "spec": {
            "taints": [
                {"key": "example.com/maintenance", "value": "soon", "effect": "PreferNoSchedule"},
                {"key": "gpuforge.io/unhealthy", "value": "xid", "effect": "NoSchedule"},
            ]
        },
    }
    # Once tainted, a pass takes only gpuforge's taint away.
    dgx01["spec"]["taints"] = patch["spec"]["taints"]
    assert k8s.taint_patch(dgx01, failing) is None
    assert k8s.taint_patch(dgx01, record())["spec"]["taints"] == [
        {"key": "example.com/maintenance", "value": "soon", "effect": "PreferNoSchedule"}
    ]


def test_the_transition_time_moves_only_when_the_status_changes():
    dgx01 = node()
    before = "2026-11-30T10:00:00Z"
    dgx01["status"]["conditions"].append(
        {"type": "GpuHealthy", "status": "True", "lastTransitionTime": before, "lastHeartbeatTime": before}
    )
    conds = {c["type"]: c for c in k8s.conditions(record(), dgx01, NOW)}
    assert conds["GpuHealthy"]["lastTransitionTime"] == before and conds["GpuHealthy"]["lastHeartbeatTime"] == NOW
    conds = {c["type"]: c for c in k8s.conditions(record(("xid", "x")), dgx01, NOW)}
    assert conds["GpuHealthy"]["lastTransitionTime"] == NOW


class Server:
    """A urllib opener answering from a queue of (code, body) and keeping the requests."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests = []

    def open(self, request, timeout=None):
        body = json.loads(request.data.decode()) if request.data else None
        self.requests.append((request.get_method(), request.full_url, request.get_header("Content-type"), body))
        code, answer = self.answers.pop(0)
        data = json.dumps(answer).encode()
        if code >= 400:
            raise urllib.error.HTTPError(request.full_url, code, "error", {}, io.BytesIO(data))
        return io.BytesIO(data)


def test_update_patches_the_status_then_retries_a_conflicting_taint_once():
    dgx02 = node("dgx02", "nodes-faulty.json")
    fresh = copy.deepcopy(dgx02)
    fresh["metadata"]["resourceVersion"] = "999999"
    server = Server(
        [(200, dgx02), (200, dgx02), (409, real("status-409-conflict-node.json")), (200, fresh), (200, fresh)]
    )
    api = k8s.NodeApi("https://10.0.0.1:6443", "token", opener=server)
    done = api.update("dgx02", record(("gpu_count", "nvidia-smi lists 7 GPU(s), the spec has 8")), NOW, taint=True)
    assert done == ["conditions", "taint"]
    methods = [(m, url.split(":6443")[1], ctype) for m, url, ctype, _ in server.requests]
    assert methods == [
        ("GET", "/api/v1/nodes/dgx02", None),
        ("PATCH", "/api/v1/nodes/dgx02/status", "application/strategic-merge-patch+json"),
        ("PATCH", "/api/v1/nodes/dgx02", "application/merge-patch+json"),
        ("GET", "/api/v1/nodes/dgx02", None),
        ("PATCH", "/api/v1/nodes/dgx02", "application/merge-patch+json"),
    ]
    assert server.requests[4][3]["metadata"]["resourceVersion"] == "999999"
    assert [c["type"] for c in server.requests[1][3]["status"]["conditions"]] == ["GpuHealthy", "IbHealthy"]


def test_an_api_error_names_the_code_and_message():
    denied = json.loads((API / "status-401.json").read_text(encoding="utf-8"))
    api = k8s.NodeApi("https://10.0.0.1:6443", "bad", opener=Server([(401, denied)]))
    with pytest.raises(k8s.ApiError, match=r"HTTP 401: ") as caught:
        api.update("dgx01", record(), NOW, taint=False)
    assert caught.value.code == 401


# Real API server responses (tests/fixtures/k8s/api/SOURCES.md, "Node-condition updates"): a Node as `kubectl get node
# -o json` printed it from a minikube v1.23.1 cluster, the same node after `kubectl taint` (resourceVersion 9432 ->
# 9871, taint key1:NoSchedule), and a 403 Status body an API server returned for a user without RBAC on nodes.
REAL = API / "node-health"


def real(name: str) -> dict:
    return json.loads((REAL / name).read_text(encoding="utf-8"))


def test_a_real_node_keeps_the_kubelet_conditions_out_of_the_patch_and_gets_gpuforges_two():
    minikube = real("node-minikube-v1.23.1.json")
    kubelet = copy.deepcopy(minikube["status"]["conditions"])
    patch = k8s.status_patch(k8s.conditions(record(), minikube, NOW))
    # A strategic merge patch merges status.conditions on `type`: only gpuforge's types may be in it, or it would
    # overwrite what the kubelet reported (Ready, MemoryPressure, DiskPressure, PIDPressure).
    assert [c["type"] for c in patch["status"]["conditions"]] == ["GpuHealthy", "IbHealthy"]
    assert {c["type"] for c in kubelet} == {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}
    assert minikube["status"]["conditions"] == kubelet  # the node as read is not modified
    assert all(c["lastTransitionTime"] == NOW for c in patch["status"]["conditions"])


def test_a_real_untainted_node_is_tainted_at_the_resource_version_it_was_read_at():
    minikube = real("node-minikube-v1.23.1.json")
    assert "taints" not in minikube["spec"]
    patch = k8s.taint_patch(minikube, record(("ib_port_state", "mlx5_0/1 Down")))
    assert patch == {
        "metadata": {"resourceVersion": "9432"},
        "spec": {"taints": [{"key": k8s.TAINT_KEY, "value": "ib_port_state", "effect": "NoSchedule"}]},
    }
    assert k8s.taint_patch(minikube, record()) is None


def test_a_real_node_with_someone_elses_taint_keeps_it():
    tainted = real("node-minikube-v1.23.1-tainted.json")
    assert tainted["spec"]["taints"] == [{"effect": "NoSchedule", "key": "key1", "value": ""}]
    patch = k8s.taint_patch(tainted, record(("xid", "Xid 79")))
    assert patch["metadata"] == {"resourceVersion": "9871"}
    assert patch["spec"]["taints"] == [
        {"effect": "NoSchedule", "key": "key1", "value": ""},
        {"key": k8s.TAINT_KEY, "value": "xid", "effect": "NoSchedule"},
    ]
    # Healthy: nothing of gpuforge's to take away, and key1 is not gpuforge's to touch.
    assert k8s.taint_patch(tainted, record()) is None


def test_update_against_real_responses_then_a_real_conflict_and_a_reread():
    """GET answers the real node; PATCH .../status and PATCH of the node answer a Node, as the API server does (the
    real node, then the real tainted node); the 409 carries the real conflict message."""
    minikube = real("node-minikube-v1.23.1.json")
    tainted = real("node-minikube-v1.23.1-tainted.json")
    conflict_body = real("status-409-conflict-node.json")
    server = Server([(200, minikube), (200, minikube), (409, conflict_body), (200, tainted), (200, tainted)])
    api = k8s.NodeApi("https://10.0.0.1:6443", "token", opener=server)
    done = api.update("danielg-minikube", record(("xid", "Xid 79")), NOW, taint=True)
    assert done == ["conditions", "taint"]
    assert [(m, url.split(":6443")[1]) for m, url, _, _ in server.requests] == [
        ("GET", "/api/v1/nodes/danielg-minikube"),
        ("PATCH", "/api/v1/nodes/danielg-minikube/status"),
        ("PATCH", "/api/v1/nodes/danielg-minikube"),
        ("GET", "/api/v1/nodes/danielg-minikube"),
        ("PATCH", "/api/v1/nodes/danielg-minikube"),
    ]
    first, retry = server.requests[2][3], server.requests[4][3]
    assert first["metadata"]["resourceVersion"] == "9432" and retry["metadata"]["resourceVersion"] == "9871"
    # The re-read node carries key1 (someone else's taint added meanwhile): the retry keeps it.
    assert {"effect": "NoSchedule", "key": "key1", "value": ""} in retry["spec"]["taints"]


def test_a_second_conflict_is_an_error_naming_the_code_and_the_servers_message():
    minikube = real("node-minikube-v1.23.1.json")
    conflict_body = real("status-409-conflict-node.json")
    server = Server([(200, minikube), (200, minikube), (409, conflict_body), (200, minikube), (409, conflict_body)])
    api = k8s.NodeApi("https://10.0.0.1:6443", "token", opener=server)
    with pytest.raises(k8s.ApiError, match=r"HTTP 409: Operation cannot be fulfilled on nodes") as caught:
        api.update("danielg-minikube", record(("xid", "Xid 79")), NOW, taint=True)
    assert caught.value.code == 409


def test_a_real_forbidden_answer_names_the_rbac_problem():
    forbidden = real("status-403-nodes.json")
    api = k8s.NodeApi("https://10.0.0.1:6443", "token", opener=Server([(403, forbidden)]))
    with pytest.raises(k8s.ApiError, match=r'HTTP 403: nodes is forbidden: User "test-username" cannot') as caught:
        api.update("danielg-minikube", record(), NOW, taint=False)
    assert caught.value.code == 403
