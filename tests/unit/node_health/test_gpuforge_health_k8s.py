"""gpuforge-health's verdict as NodeConditions and a taint (module_utils/gpuforge_health_k8s.py), against the recorded
Node responses of tests/fixtures/k8s/api/ (SOURCES.md there: their shapes and sources)."""

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


def conflict(name):
    """A 409 in the Status shape of the recorded errors (status-404.json)."""
    status = json.loads((API / "status-404.json").read_text(encoding="utf-8"))
    message = f'Operation cannot be fulfilled on nodes "{name}": the object has been modified'
    return dict(status, reason="Conflict", code=409, message=message)


def test_update_patches_the_status_then_retries_a_conflicting_taint_once():
    dgx02 = node("dgx02", "nodes-faulty.json")
    fresh = copy.deepcopy(dgx02)
    fresh["metadata"]["resourceVersion"] = "999999"
    server = Server([(200, dgx02), (200, dgx02), (409, conflict("dgx02")), (200, fresh), (200, fresh)])
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
