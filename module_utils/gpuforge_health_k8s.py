"""gpuforge-health's verdict as Kubernetes NodeConditions and a NoSchedule taint (the DaemonSet of
roles/node_health/templates/k8s/, docs/monitoring.md "gpuforge-health on Kubernetes").

Stdlib only; runs in the DaemonSet's pod on the node's Python 3.8+. Pure functions build the two requests from the
node as the API server returned it and the record gpuforge-health wrote; NodeApi sends them with the pod's service
account (in-cluster configuration: the KUBERNETES_SERVICE_HOST/PORT variables, the token and CA in
/var/run/secrets/kubernetes.io/serviceaccount; Kubernetes, "Accessing the Kubernetes API from a Pod",
https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/).

- Conditions: PATCH /api/v1/nodes/<name>/status with a strategic merge patch of status.conditions, whose merge key
  is `type` (Kubernetes API reference, Node v1, NodeStatus.conditions: "patch strategy: merge on key type",
  https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/): only gpuforge's two conditions
  change; lastTransitionTime moves only when a condition's status changes.
- Taint (when enabled): PATCH /api/v1/nodes/<name> with a JSON merge patch of spec.taints, the node's whole list
  (taints have no merge key) with gpuforge's taint added or removed, and the resourceVersion it was read at, so a
  concurrent change of the list makes the API server answer 409 Conflict instead of losing it (API concepts,
  "Resource versions", https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL

__all__ = ["CONDITION_CHECKS", "TAINT_KEY", "NodeApi", "conditions", "status_patch", "taint_patch"]

# Which of gpuforge-health's checks (module_utils/gpuforge_health.py PROFILES) each condition stands for. The
# kernel log carries the Xids, so it is the GPU's; nvidia-peermem is what GPUDirect RDMA over the fabric needs.
CONDITION_CHECKS = {
    "GpuHealthy": (
        "nvidia_smi_readable",
        "gpu_fallen_off_bus",
        "gpu_count",
        "gpu_bus_ids",
        "ecc_volatile_dbe",
        "ecc_enabled",
        "row_remap",
        "retired_pages",
        "throttle",
        "kernel_log_readable",
        "xid",
        "sxid",
        "gpu_memory_released",
    ),
    "IbHealthy": (
        "infiniband_readable",
        "hcas_present",
        "ib_port_state",
        "ib_port_rate",
        "lsmod_readable",
        "peermem_loaded",
    ),
}
# The taint gpuforge puts on a node that failed (its value: the first failed check, a label value).
TAINT_KEY = "gpuforge.io/unhealthy"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def conditions(record: dict, node: dict, now: str) -> list:
    """gpuforge's two conditions for `node` (a Node as the API server returns it) from a gpuforge-health record:
    True when none of the condition's checks failed, else False with the failed checks as reason and their faults
    as message. lastHeartbeatTime is now; lastTransitionTime is kept from the node while the status is the same."""
    current = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
    failed = {c["name"]: c for c in record.get("checks") or [] if c.get("status") == FAIL}
    out = []
    for kind, names in CONDITION_CHECKS.items():
        bad = [failed[name] for name in names if name in failed]
        status = "False" if bad else "True"
        before = current.get(kind) or {}
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": "GpuforgeHealthPassed" if not bad else "GpuforgeHealthFailed",
                "message": (
                    f"gpuforge-health ({record.get('profile')}) at {record.get('checked_at')}: "
                    + (
                        "; ".join(f"{c['name']}: {' '.join(str(c.get('fault') or '').split())}" for c in bad)
                        or "passed"
                    )
                )[:1024],
                "lastHeartbeatTime": now,
                "lastTransitionTime": before.get("lastTransitionTime")
                if before.get("status") == status and before.get("lastTransitionTime")
                else now,
            }
        )
    return out


def status_patch(conds: list) -> dict:
    """The strategic merge patch of PATCH /api/v1/nodes/<name>/status."""
    return {"status": {"conditions": conds}}


def taint_patch(node: dict, record: dict):
    """The JSON merge patch of PATCH /api/v1/nodes/<name> that makes gpuforge's NoSchedule taint match the record
    (present when the node failed, absent when not), or None when the node already matches."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    ours = [t for t in taints if t.get("key") == TAINT_KEY]
    others = [t for t in taints if t.get("key") != TAINT_KEY]
    failed = [c["name"] for c in record.get("checks") or [] if c.get("status") == FAIL and not c.get("caused_by")]
    failed = failed or [c["name"] for c in record.get("checks") or [] if c.get("status") == FAIL]
    wanted = [{"key": TAINT_KEY, "value": failed[0][:63], "effect": "NoSchedule"}] if failed else []
    if [{k: t.get(k) for k in ("key", "value", "effect")} for t in ours] == wanted:
        return None
    metadata = node.get("metadata") or {}
    return {"metadata": {"resourceVersion": metadata.get("resourceVersion")}, "spec": {"taints": others + wanted}}


class ApiError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(f"HTTP {code}: {message}")
        self.code = code


class NodeApi:
    """GET and PATCH of one Node with the pod's service account; `opener` is for tests (a urllib opener)."""

    def __init__(self, server: str, token: str, context=None, opener=None):
        self.server = server.rstrip("/")
        self.token = token
        self.opener = opener or urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))

    @classmethod
    def in_cluster(cls) -> NodeApi:
        """The pod's service account: its token and CA from the files Kubernetes mounts, or from GPUFORGE_K8S_TOKEN
        and GPUFORGE_K8S_CA (PEM), which the DaemonSet's loop sets from those files before it runs gpuforge-health in
        the host's root (chroot /host), where the pod's files are not."""
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise ApiError(0, "not in a pod: KUBERNETES_SERVICE_HOST/PORT are not set")
        token, ca = os.environ.get("GPUFORGE_K8S_TOKEN"), os.environ.get("GPUFORGE_K8S_CA")
        if not token:
            with open(os.path.join(SERVICE_ACCOUNT, "token"), encoding="ascii") as handle:
                token = handle.read()
        if ca:
            context = ssl.create_default_context(cadata=ca)
        else:
            context = ssl.create_default_context(cafile=os.path.join(SERVICE_ACCOUNT, "ca.crt"))
        return cls(f"https://{host}:{port}", token.strip(), context)

    def request(self, method: str, path: str, body=None, content_type="application/json") -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with self.opener.open(request, timeout=30) as response:
                return json.loads(response.read().decode())
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message") or text
            except ValueError:
                message = text
            raise ApiError(exc.code, message[:300]) from exc

    def update(self, name: str, record: dict, now: str, taint: bool) -> list:
        """Set gpuforge's conditions on node `name` and, when `taint`, its taint; returns what it did. A 409 on the
        taint (the node changed since it was read) is retried once with the node read again."""
        path = f"/api/v1/nodes/{name}"
        node = self.request("GET", path)
        done = []
        self.request(
            "PATCH",
            f"{path}/status",
            status_patch(conditions(record, node, now)),
            "application/strategic-merge-patch+json",
        )
        done.append("conditions")
        for attempt in (1, 2) if taint else ():
            patch = taint_patch(node, record)
            if patch is None:
                break
            try:
                self.request("PATCH", path, patch, "application/merge-patch+json")
                done.append("taint")
                break
            except ApiError as exc:
                if exc.code != 409 or attempt == 2:
                    raise
                node = self.request("GET", path)
        return done
