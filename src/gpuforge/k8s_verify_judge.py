"""Judge Kubernetes API responses for `gpuforge k8s verify` (post-deploy checks of the add-ons).

Every function here takes objects exactly as the API server returns them (the JSON of a NodeList, a Pod, a pod
log, an MPIJob) and returns ``k8s_check`` records (schemas/k8s-check.schema.json, built by
gpuforge_records.k8s_check_record) whose ``verdict`` is one of PASS / WARN / FAIL / UNKNOWN (gpuforge_checks, the one
status vocabulary): `gpuforge k8s verify` stamps their run and time and writes them as they are. Nothing here talks
to the network: src/gpuforge/k8s_verify.py fetches the objects, so these functions are tested against recorded
responses.

Shapes and names, with their sources:

* Node ``status.capacity`` / ``status.allocatable``: maps of resource name to quantity string (Kubernetes API
  reference, Node v1, https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/). A device
  plugin's resource appears in capacity once the plugin registered with the kubelet; extended resources are whole
  numbers ("Extended resources", https://kubernetes.io/docs/tasks/configure-pod-container/extended-resource/).
* Pod ``status.phase`` (Pending / Running / Succeeded / Failed / Unknown), ``status.conditions`` and
  ``status.containerStatuses[].state`` (Pod v1, https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/).
* The CUDA sample vectorAdd prints ``Test PASSED`` after it verified every element, and exits non-zero with
  ``Result verification failed at element N!`` otherwise (NVIDIA/cuda-samples,
  Samples/0_Introduction/vectorAdd/vectorAdd.cu at 35a407d5799a3022e4f7340b28a6856bf87d977d,
  https://github.com/NVIDIA/cuda-samples/blob/35a407d5799a3022e4f7340b28a6856bf87d977d/Samples/0_Introduction/vectorAdd/vectorAdd.cu).
* MPIJob kubeflow.org/v2beta1 ``status.conditions[]`` ``{type, status, reason, message, ...}`` with the types
  Created, Running, Restarting, Succeeded, Suspended and Failed, a condition counting when its status is "True"
  (kubeflow/mpi-operator pkg/apis/kubeflow/v2beta1/types.go ``JobConditionType`` and
  pkg/controller/mpi_job_controller_status.go ``hasCondition``/``isFinished``,
  https://github.com/kubeflow/mpi-operator/blob/013fa15b22a60180c99f5111a904b60099828f89/pkg/apis/kubeflow/v2beta1/types.go).
* RDMA shared device plugin resources: ``configList[].resourceName`` of its config.json
  (Mellanox/k8s-rdma-shared-dev-plugin README, "RDMA Shared Device Plugin Configurations",
  https://github.com/Mellanox/k8s-rdma-shared-dev-plugin), registered under the ``rdma/`` prefix unless an entry
  sets ``resourcePrefix``; each node offers ``rdmaHcaMax`` of each.

Stdlib and the collection's gpuforge_errors only. Only the CLI uses it, so it lives in the CLI's package, not in the
collection's module_utils (docs/architecture.md, "module_utils by concern").
"""

from __future__ import annotations

import json
import re

from gpuforge.paths import collection_import

ParseError = collection_import("plugins.module_utils.gpuforge_errors").ParseError
_checks = collection_import("plugins.module_utils.gpuforge_checks")
_records = collection_import("plugins.module_utils.gpuforge_records")
PASS, WARN, FAIL, UNKNOWN = _checks.PASS, _checks.WARN, _checks.FAIL, _checks.UNKNOWN

GPU_RESOURCE = "nvidia.com/gpu"
RDMA_PREFIX = "rdma"
VECTOR_ADD_PASSED = "Test PASSED"
VECTOR_ADD_FAILED = "Result verification failed"
MPIJOB_SUCCEEDED = "Succeeded"
MPIJOB_FAILED = "Failed"
# Labels the v2 operator puts on the launcher pod (pkg/controller/mpi_job_controller.go defaultLabels;
# pkg/apis/kubeflow/v2beta1/constants.go JobNameLabel / JobRoleLabel).
LAUNCHER_SELECTOR = "training.kubeflow.org/job-name={name},training.kubeflow.org/job-role=launcher"
STATUSES = _checks.VERDICTS

SOURCE_GPU = (
    "expected hardware (gpuforge_expected_gpu_count, else gpu_count of the node's gpuforge_expected_system; "
    "roles/gpuforge/defaults/main/expected_hardware.yml) x nvidia_device_plugin_time_slicing_replicas"
)
SOURCE_RDMA = "rendered RDMA shared device plugin config (rdma_shared_device_plugin/configmap.yaml: configList)"
SOURCE_VECTOR_ADD = "NVIDIA/cuda-samples vectorAdd prints 'Test PASSED' (Samples/0_Introduction/vectorAdd/vectorAdd.cu)"
SOURCE_MPIJOB = "kubeflow/mpi-operator v2beta1 JobStatus: condition Succeeded with status True"
SOURCE_BUSBW = (
    "gpuforge_bench_nccl_min_busbw_gbyte_per_s (the host benchmarks' threshold; "
    "nccl_tests expect.min_busbw_gbyte_per_s)"
)

_INTEGER = re.compile(r"^[0-9]+$")

__all__ = [
    "GPU_RESOURCE",
    "LAUNCHER_SELECTOR",
    "STATUSES",
    "check",
    "expected_gpu_count",
    "judge_gpu_allocatable",
    "judge_mpijob",
    "judge_nccl_log",
    "judge_rdma_allocatable",
    "judge_vector_add",
    "mpijob_finished",
    "pod_finished",
    "pod_problems",
    "quantity",
    "rdma_resources",
]


def check(name, subject, status, observed, expected, source, remedy="", node=None, nodes=None):
    """One check's ``k8s_check`` record (gpuforge_records.k8s_check_record); ValueError for a status outside the
    verdicts."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
    return _records.k8s_check_record(name, subject, status, observed, expected, source, remedy, node=node, nodes=nodes)


def quantity(value):
    """A whole-number resource quantity ("8") as an int; None for anything else (absent, "500m", "1Ki")."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INTEGER.match(value.strip()):
        return int(value.strip())
    return None


def expected_gpu_count(host_vars, systems, time_slicing_replicas=0):
    """GPUs a node must offer as nvidia.com/gpu, or None when its inventory says nothing about its GPUs.

    ``gpuforge_expected_gpu_count`` when set (the inventory check keeps it equal to the system's), else
    ``gpu_count`` of ``systems[gpuforge_expected_system]``; times the time-slicing replicas when above 1 (the
    device plugin then advertises each GPU that many times).
    """
    count = host_vars.get("gpuforge_expected_gpu_count")
    if count is None:
        system = systems.get(host_vars.get("gpuforge_expected_system")) if isinstance(systems, dict) else None
        count = system.get("gpu_count") if isinstance(system, dict) else None
    count = quantity(count if not isinstance(count, str) else count.strip())
    if count is None:
        return None
    replicas = quantity(time_slicing_replicas) or 0
    return count * replicas if replicas > 1 else count


def _nodes_by_name(node_list):
    if not isinstance(node_list, dict) or not isinstance(node_list.get("items"), list):
        raise ValueError("not a NodeList: expected an object with items[]")
    return {(item.get("metadata") or {}).get("name"): item for item in node_list["items"] if isinstance(item, dict)}


def _resources(node, field):
    return (node.get("status") or {}).get(field) or {}


def judge_gpu_allocatable(node_list, expected):
    """One check per node of ``expected`` ({node name: GPUs}): the device plugin registered and allocatable equals."""
    nodes = _nodes_by_name(node_list)
    checks = []
    for name in sorted(expected):
        want = expected[name]
        node = nodes.get(name)
        if node is None:
            checks.append(
                check(
                    "gpu_allocatable",
                    "node",
                    FAIL,
                    {"registered_node": False},
                    want,
                    SOURCE_GPU,
                    "the node is not in the cluster under this name: join it, or set k8s_node_name in the inventory "
                    "to its Kubernetes node name",
                    node=name,
                )
            )
            continue
        capacity = _resources(node, "capacity").get(GPU_RESOURCE)
        allocatable = _resources(node, "allocatable").get(GPU_RESOURCE)
        observed = {"capacity": quantity(capacity), "allocatable": quantity(allocatable)}
        if capacity is None:
            status = FAIL
            remedy = (
                "the NVIDIA device plugin has not registered with this node's kubelet: check its pod on the node "
                "(kubectl -n <namespace> logs ds/nvidia-device-plugin-daemonset) for NVML or driver errors"
            )
        elif observed["allocatable"] != want:
            status = FAIL
            remedy = (
                f"the node offers {allocatable} of {want} GPUs: run 'gpuforge validate' on it (a GPU fell off the "
                "bus, Xid, or a GPU held by another device plugin), then restart the device plugin pod"
            )
        else:
            status, remedy = PASS, ""
        checks.append(check("gpu_allocatable", "node", status, observed, want, SOURCE_GPU, remedy, node=name))
    return checks


def rdma_resources(config):
    """``[{name, hca_max}]`` of an RDMA shared device plugin config.json (text or parsed), name with its prefix."""
    if isinstance(config, str):
        config = json.loads(config)
    entries = config.get("configList") if isinstance(config, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError("the RDMA shared device plugin config has no configList entries")
    resources = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("resourceName"), str):
            raise ValueError(f"configList[{index}] has no resourceName")
        prefix = entry.get("resourcePrefix") or RDMA_PREFIX
        name = f"{prefix}/{entry['resourceName']}"
        resources.append({"name": name, "hca_max": quantity(entry.get("rdmaHcaMax"))})
    return resources


def judge_rdma_allocatable(node_list, node_names, resources):
    """One check per node: every RDMA resource allocatable, as many as its rdmaHcaMax (fewer, but some: warn)."""
    nodes = _nodes_by_name(node_list)
    expected = {resource["name"]: resource["hca_max"] for resource in resources}
    checks = []
    for name in sorted(node_names):
        node = nodes.get(name)
        if node is None:
            checks.append(
                check(
                    "rdma_allocatable",
                    "node",
                    FAIL,
                    {"registered_node": False},
                    expected,
                    SOURCE_RDMA,
                    "the node is not in the cluster under this name: join it, or set k8s_node_name in the inventory",
                    node=name,
                )
            )
            continue
        allocatable = _resources(node, "allocatable")
        observed = {resource: quantity(allocatable.get(resource)) for resource in sorted(expected)}
        missing = sorted(resource for resource, value in observed.items() if not value)
        short = sorted(
            resource
            for resource, value in observed.items()
            if value and expected[resource] is not None and value < expected[resource]
        )
        if missing:
            status = FAIL
            remedy = (
                f"{', '.join(missing)} not allocatable: check the rdma-shared-dp pod on this node (its log lists the "
                "devices each selector matched), the HCA ports' netdevs (ip link) and that the port is up (ibstat)"
            )
        elif short:
            status = WARN
            remedy = (
                f"{', '.join(short)} offered fewer times than rdmaHcaMax: pods already hold some, or the plugin's "
                "config differs from the rendered one (re-apply rdma_shared_device_plugin)"
            )
        else:
            status, remedy = PASS, ""
        checks.append(check("rdma_allocatable", "node", status, observed, expected, SOURCE_RDMA, remedy, node=name))
    return checks


def pod_finished(pod):
    """True once a pod's phase is Succeeded or Failed."""
    return ((pod or {}).get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _pod_problem(pod):
    """Why a pod is not done: an unschedulable condition, a waiting/terminated container's reason and message."""
    status = pod.get("status") or {}
    reasons = []
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reasons.append(f"{condition.get('reason') or 'Unschedulable'}: {condition.get('message') or ''}")
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        for kind in ("waiting", "terminated"):
            detail = state.get(kind)
            if detail and (kind == "waiting" or detail.get("exitCode")):
                text = f"{container.get('name')} {detail.get('reason') or kind}"
                if detail.get("exitCode") is not None:
                    text += f" (exit code {detail['exitCode']})"
                if detail.get("message"):
                    text += f": {detail['message']}"
                reasons.append(text)
    return reasons


def pod_problems(pod):
    """Why a pod is not done (an unschedulable condition, a waiting or failed container), as messages."""
    return _pod_problem(pod or {})


def judge_vector_add(pod, log_text, timeout_s=None):
    """The CUDA vector-add pod: phase Succeeded and its log says Test PASSED."""
    status = (pod or {}).get("status") or {}
    phase = status.get("phase")
    node = ((pod or {}).get("spec") or {}).get("nodeName")
    text = log_text or ""
    passed = VECTOR_ADD_PASSED in text
    observed = {"phase": phase, "node": node, "test_passed": passed, "problems": _pod_problem(pod or {})}
    expected = {"phase": "Succeeded", "log": VECTOR_ADD_PASSED}
    if phase == "Succeeded" and passed:
        result, remedy = PASS, ""
    elif phase == "Succeeded":
        result = FAIL
        remedy = f"the pod ended without printing '{VECTOR_ADD_PASSED}': check that the image runs the CUDA sample"
    elif phase == "Failed":
        result = FAIL
        remedy = (
            "the CUDA sample failed"
            + (" its result check" if VECTOR_ADD_FAILED in text else "")
            + ": read the pod log; a CUDA error there (no CUDA-capable device, driver/library mismatch) points at "
            "the node's driver or the container toolkit"
        )
    else:
        result = FAIL
        within = f" within {timeout_s}s" if timeout_s else ""
        problems = "; ".join(observed["problems"]) or (
            "check image pulls (kubectl describe pod) and that a node has a free nvidia.com/gpu"
        )
        remedy = f"the pod did not finish{within} (phase {phase or 'unknown'}): {problems}"
    return check("cuda_vector_add", "pod", result, observed, expected, SOURCE_VECTOR_ADD, remedy, node=node)


def _true_conditions(mpijob):
    conditions = ((mpijob or {}).get("status") or {}).get("conditions") or []
    return {c.get("type"): c for c in conditions if isinstance(c, dict) and c.get("status") == "True"}


def mpijob_finished(mpijob):
    """True once the MPIJob has a Succeeded or Failed condition with status True (the operator's isFinished)."""
    true = _true_conditions(mpijob)
    return MPIJOB_SUCCEEDED in true or MPIJOB_FAILED in true


def judge_mpijob(mpijob, nodes=None, timeout_s=None):
    """The verification MPIJob completed: its Succeeded condition is True."""
    true = _true_conditions(mpijob)
    status = (mpijob or {}).get("status") or {}
    observed = {
        "conditions": sorted(true),
        "replica_statuses": status.get("replicaStatuses") or {},
    }
    expected = {"condition": MPIJOB_SUCCEEDED, "status": "True"}
    if MPIJOB_SUCCEEDED in true:
        result, remedy = PASS, ""
    elif MPIJOB_FAILED in true:
        failed = true[MPIJOB_FAILED]
        observed["reason"] = failed.get("reason")
        observed["message"] = failed.get("message")
        result = FAIL
        remedy = (
            f"the MPIJob failed ({failed.get('message') or 'no message'}): read the launcher log for mpirun/ssh "
            "errors and the workers' events; RDMA jobs need IPC_LOCK (rdma_workload_access) and the rdma/ resources"
        )
    else:
        result = FAIL
        within = f" within {timeout_s}s" if timeout_s else ""
        remedy = (
            f"the MPIJob did not finish{within} (conditions: {', '.join(sorted(true)) or 'none'}): check that its "
            "pods were scheduled (GPUs and rdma/ resources free) and that the mpi-operator controller runs"
        )
    return check("mpijob_completed", "mpijob", result, observed, expected, SOURCE_MPIJOB, remedy, nodes=nodes or [])


def judge_nccl_log(nccl, text, min_busbw_gbyte_per_s=None, nodes=None):
    """The launcher log through the host benchmarks' nccl-tests parser and judge (gpuforge_nccl_tests).

    ``nccl`` is the gpuforge_nccl_tests module (passed in so this file imports nothing beside the stdlib). Returns the
    checks of judge_nccl as ``nccl_<name>`` k8s checks, plus an ``nccl_busbw`` check that is unknown when no
    threshold is set.
    """
    try:
        result = nccl.parse_nccl_tests(text or "")
    except ParseError as exc:  # every parser's error derives from gpuforge_errors.ParseError
        return [
            check(
                "nccl_output",
                "mpijob",
                FAIL,
                {"error": str(exc)},
                "nccl-tests output in the launcher log",
                SOURCE_BUSBW,
                "the launcher printed no nccl-tests table: read its log (the all_reduce_perf path in the image, "
                "mpirun errors)",
                nodes=nodes or [],
            )
        ]
    expect = {"min_busbw_gbyte_per_s": float(min_busbw_gbyte_per_s)} if min_busbw_gbyte_per_s is not None else {}
    checks = []
    for item in nccl.judge_nccl(result, expect):
        name = "nccl_busbw" if item["name"] == "large_message_busbw" else "nccl_" + item["name"]
        source = SOURCE_BUSBW if name == "nccl_busbw" else "nccl-tests output (module_utils/gpuforge_nccl_tests.py)"
        checks.append(
            check(
                name,
                "mpijob",
                item["status"],  # a benchmark check's status is a verdict
                item["observed"],
                item["expected"],
                source,
                item.get("remedy") or "",
                nodes=nodes or [],
            )
        )
    mode = (result.get("transport") or {}).get("mode")
    if mode in ("ib", "ib_gdr"):
        transport_status, transport_remedy = PASS, ""
    elif mode is None:
        transport_status = WARN
        transport_remedy = "the log does not say which transport NCCL used: run the job with NCCL_DEBUG=INFO"
    else:
        transport_status = FAIL
        transport_remedy = (
            "NCCL used sockets, not the RDMA devices: check the rdma/ resources and IPC_LOCK of the workers, "
            "/dev/infiniband in the containers and NCCL_IB_DISABLE"
        )
    checks.append(
        check(
            "nccl_transport",
            "mpijob",
            transport_status,
            mode,
            "ib or ib_gdr (NET/IB)",
            "NCCL INFO lines of the launcher log (module_utils/gpuforge_nccl_tests.py)",
            transport_remedy,
            nodes=nodes or [],
        )
    )
    if min_busbw_gbyte_per_s is None:
        rows = result.get("rows") or []
        largest = max(rows, key=lambda row: row["size"]) if rows else None
        observed = None
        if largest:
            values = [run.get("busbw") for run in (largest["out_of_place"], largest["in_place"]) if run]
            values = [value for value in values if isinstance(value, (int, float))]
            observed = max(values) if values else None
        checks.append(
            check(
                "nccl_busbw",
                "mpijob",
                UNKNOWN,
                observed,
                None,
                SOURCE_BUSBW,
                "no bus bandwidth threshold: set gpuforge_bench_nccl_min_busbw_gbyte_per_s in the inventory "
                "(or --min-busbw-gbyte-per-s)",
                nodes=nodes or [],
            )
        )
    return checks
