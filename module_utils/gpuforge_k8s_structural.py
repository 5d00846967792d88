"""Structural checks for the custom resources gpuforge renders (stdlib only, shipped alone).

kubernetes-validate knows only core Kubernetes kinds. The custom resources gpuforge writes
(MPIJob kubeflow.org/v2beta1, OpenShift SecurityContextConstraints, CSIScaleOperator) are checked
here for the fields gpuforge sets: presence, types, allowed values and the least-privilege rules
the project promises (no privileged containers, no host namespaces).

check_object(obj) returns a list of error strings (empty when the object passes); it never raises
on malformed input. embedded_pod_templates(obj) returns core PodTemplate objects found inside a
custom resource so that the caller can validate them against the Kubernetes schema as well.

crd_json_schema(schema) turns a CRD's openAPIV3Schema (the stored ones are in schemas/crds/) into a JSON Schema
(draft 7) that a validator such as jsonschema applies the way the API server does; error_location(error) names
the path of a jsonschema error ("spec.slotsPerWorker").
"""

from __future__ import annotations

import re

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CAPABILITY = re.compile(r"^[A-Z][A-Z_]*$")

MPIJOB = ("kubeflow.org/v2beta1", "MPIJob")
SCC = ("security.openshift.io/v1", "SecurityContextConstraints")
CSI_SCALE = ("csi.ibm.com/v1", "CSIScaleOperator")
SUBSCRIPTION = ("operators.coreos.com/v1alpha1", "Subscription")
OPERATOR_GROUP = ("operators.coreos.com/v1", "OperatorGroup")
MACHINE_CONFIG = ("machineconfiguration.openshift.io/v1", "MachineConfig")
NFD = ("nfd.openshift.io/v1", "NodeFeatureDiscovery")
CLUSTER_SCOPED = (SCC, MACHINE_CONFIG)
# Ignition spec versions MachineConfig accepts on OpenShift 4.x (3.x; gpuforge writes 3.2.0).
IGNITION_VERSION = re.compile(r"^3\.[0-9]+\.[0-9]+$")

MPI_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
CLEAN_POD_POLICIES = ("None", "Running", "All")
SCC_STRATEGY_TYPES = {
    "runAsUser": ("MustRunAs", "MustRunAsRange", "MustRunAsNonRoot", "RunAsAny"),
    "seLinuxContext": ("MustRunAs", "RunAsAny"),
    "fsGroup": ("MustRunAs", "RunAsAny"),
    "supplementalGroups": ("MustRunAs", "RunAsAny"),
}
# Volume types an SCC derived from "restricted" may allow; hostPath is deliberately absent.
SCC_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)


INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def crd_json_schema(schema):
    """JSON Schema (draft 7) equivalent of a CRD openAPIV3Schema, with the API server's semantics.

    - an object schema that names properties rejects other fields (the API server prunes them, or refuses them
      with strict field validation, as kubectl apply --validate=strict does), unless it has
      additionalProperties or x-kubernetes-preserve-unknown-fields: true;
    - x-kubernetes-int-or-string: true accepts an integer or a string (when the schema does not say so itself);
    - nullable: true accepts null besides the declared type;
    - format int32/int64 bounds the integer.
    Other x-kubernetes-* extensions do not constrain a single object and are kept as annotations.
    """
    if isinstance(schema, list):
        return [crd_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: crd_json_schema(value) for key, value in schema.items()}
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in schema and "additionalProperties" not in schema and not preserve:
        result["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in schema and "type" not in schema:
        result["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") is True:
        if isinstance(result.get("type"), str):
            result["type"] = [result["type"], "null"]
        if isinstance(result.get("enum"), list) and None not in result["enum"]:
            result["enum"] = [*result["enum"], None]
        if "anyOf" in result:
            result["anyOf"] = [*result["anyOf"], {"type": "null"}]
    bounds = INT_RANGES.get(schema.get("format")) if schema.get("type") == "integer" else None
    if bounds:
        result.setdefault("minimum", bounds[0])
        result.setdefault("maximum", bounds[1])
    return result


def error_location(error):
    """Dotted path of a jsonschema ValidationError ("spec.mpiReplicaSpecs.Worker.replicas"; "(root)" at the top)."""
    return ".".join(str(part) for part in getattr(error, "absolute_path", ())) or "(root)"


def known_kinds():
    """Return the (apiVersion, kind) pairs this module checks."""
    return [MPIJOB, SCC, CSI_SCALE, SUBSCRIPTION, OPERATOR_GROUP, MACHINE_CONFIG, NFD]


def has_check(obj):
    """True when check_object knows the object's apiVersion and kind."""
    return isinstance(obj, dict) and (obj.get("apiVersion"), obj.get("kind")) in known_kinds()


def check_object(obj):
    """Return a list of errors for one custom resource; [] when it passes."""
    if not isinstance(obj, dict):
        return ["object is not a mapping"]
    key = (obj.get("apiVersion"), obj.get("kind"))
    errors = _check_metadata(obj, namespaced=key not in CLUSTER_SCOPED)
    checker = {
        MPIJOB: _check_mpijob,
        SCC: _check_scc,
        CSI_SCALE: _check_csi_scale,
        SUBSCRIPTION: _check_subscription,
        OPERATOR_GROUP: _check_operator_group,
        MACHINE_CONFIG: _check_machine_config,
        NFD: _check_nfd,
    }.get(key)
    if checker is None:
        return [*errors, f"no structural check for apiVersion {key[0]!r} kind {key[1]!r}"]
    return errors + checker(obj)


def embedded_pod_templates(obj):
    """Core v1 PodTemplate objects built from an MPIJob's replica templates (for schema validation)."""
    if not has_check(obj) or (obj.get("apiVersion"), obj.get("kind")) != MPIJOB:
        return []
    specs = _get(obj, "spec", "mpiReplicaSpecs")
    if not isinstance(specs, dict):
        return []
    name = _get(obj, "metadata", "name") or "mpijob"
    templates = []
    for role in sorted(specs):
        template = specs[role].get("template") if isinstance(specs[role], dict) else None
        if isinstance(template, dict):
            templates.append(
                {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {"name": f"{name}-{role.lower()}"},
                    "template": template,
                }
            )
    return templates


def _get(obj, *keys):
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _check_metadata(obj, namespaced):
    errors = []
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return ["metadata: missing or not a mapping"]
    name = metadata.get("name")
    if not isinstance(name, str) or not DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        errors.append(f"metadata.name: {name!r} is not a DNS-1123 subdomain")
    namespace = metadata.get("namespace")
    if namespaced and not (isinstance(namespace, str) and DNS1123_SUBDOMAIN.match(namespace)):
        errors.append(f"metadata.namespace: {namespace!r} missing or not a DNS-1123 label")
    if not namespaced and namespace is not None:
        errors.append("metadata.namespace: set on a cluster-scoped object")
    for field in ("labels", "annotations"):
        values = metadata.get(field, {})
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            errors.append(f"metadata.{field}: must map strings to strings")
    return errors


def _int_at_least(value, minimum):
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _check_mpijob(obj):
    errors = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: missing or not a mapping"]
    if "slotsPerWorker" in spec and not _int_at_least(spec["slotsPerWorker"], 1):
        errors.append(f"spec.slotsPerWorker: {spec['slotsPerWorker']!r} is not an integer >= 1")
    if spec.get("mpiImplementation", "OpenMPI") not in MPI_IMPLEMENTATIONS:
        errors.append(f"spec.mpiImplementation: {spec['mpiImplementation']!r} not in {MPI_IMPLEMENTATIONS}")
    if "cleanPodPolicy" in spec:
        errors.append("spec.cleanPodPolicy: moved to spec.runPolicy.cleanPodPolicy in v2beta1")
    policy = _get(spec, "runPolicy", "cleanPodPolicy")
    if policy is not None and policy not in CLEAN_POD_POLICIES:
        errors.append(f"spec.runPolicy.cleanPodPolicy: {policy!r} not in {CLEAN_POD_POLICIES}")
    replicas = spec.get("mpiReplicaSpecs")
    if not isinstance(replicas, dict):
        return [*errors, "spec.mpiReplicaSpecs: missing or not a mapping"]
    unknown = sorted(set(replicas) - {"Launcher", "Worker"})
    if unknown:
        errors.append(f"spec.mpiReplicaSpecs: unknown replica types {unknown}")
    if "Launcher" not in replicas:
        errors.append("spec.mpiReplicaSpecs.Launcher: missing")
    elif _get(replicas, "Launcher", "replicas") not in (None, 1):
        errors.append("spec.mpiReplicaSpecs.Launcher.replicas: must be 1")
    worker_replicas = _get(replicas, "Worker", "replicas")
    if "Worker" in replicas and not _int_at_least(worker_replicas, 1):
        errors.append(f"spec.mpiReplicaSpecs.Worker.replicas: {worker_replicas!r} is not an integer >= 1")
    for role in sorted(set(replicas) & {"Launcher", "Worker"}):
        errors.extend(_check_pod_spec(_get(replicas, role, "template", "spec"), f"spec.mpiReplicaSpecs.{role}"))
    return errors


def _check_pod_spec(pod_spec, where):
    if not isinstance(pod_spec, dict):
        return [f"{where}.template.spec: missing or not a mapping"]
    errors = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(field):
            errors.append(f"{where}.template.spec.{field}: host namespaces are not allowed")
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [*errors, f"{where}.template.spec.containers: missing or empty"]
    for index, container in enumerate(containers):
        path = f"{where}.template.spec.containers[{index}]"
        if not isinstance(container, dict) or not container.get("name") or not container.get("image"):
            errors.append(f"{path}: needs a name and an image")
            continue
        security = container.get("securityContext") or {}
        if security.get("privileged"):
            errors.append(f"{path}.securityContext.privileged: privileged containers are not allowed")
        added = _get(security, "capabilities", "add") or []
        limits = _get(container, "resources", "limits") or {}
        wants_rdma = any(str(name).startswith("rdma/") for name in limits)
        if wants_rdma and "IPC_LOCK" not in added:
            errors.append(f"{path}: requests RDMA resources but does not add the IPC_LOCK capability")
    for volume in pod_spec.get("volumes") or []:
        if isinstance(volume, dict) and "hostPath" in volume:
            errors.append(f"{where}.template.spec.volumes[{volume.get('name')}]: hostPath is not allowed")
    return errors


def _check_capability_list(value, path):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(c, str) and CAPABILITY.match(c) for c in value):
        return [f"{path}: must be a list of capability names like IPC_LOCK"]
    return []


def _check_scc(obj):
    errors = []
    if obj.get("allowPrivilegedContainer") is not False:
        errors.append("allowPrivilegedContainer: must be false")
    for field in ("allowHostDirVolumePlugin", "allowHostIPC", "allowHostNetwork", "allowHostPID", "allowHostPorts"):
        if obj.get(field) is not False:
            errors.append(f"{field}: must be false")
    if not isinstance(obj.get("allowPrivilegeEscalation", False), bool):
        errors.append("allowPrivilegeEscalation: must be a boolean")
    for field in ("defaultAddCapabilities", "allowedCapabilities", "requiredDropCapabilities"):
        errors.extend(_check_capability_list(obj.get(field), field))
    granted = (obj.get("defaultAddCapabilities") or []) + (obj.get("allowedCapabilities") or [])
    if "IPC_LOCK" not in granted:
        errors.append("defaultAddCapabilities/allowedCapabilities: IPC_LOCK is not granted")
    if "IPC_LOCK" in (obj.get("requiredDropCapabilities") or []):
        errors.append("requiredDropCapabilities: drops IPC_LOCK, which this SCC exists to grant")
    for field, allowed in SCC_STRATEGY_TYPES.items():
        kind = _get(obj, field, "type")
        if kind not in allowed:
            errors.append(f"{field}.type: {kind!r} not in {allowed}")
    volumes = obj.get("volumes")
    if not isinstance(volumes, list) or not volumes:
        errors.append("volumes: missing or empty")
    else:
        extra = sorted(set(volumes) - set(SCC_VOLUMES))
        if extra:
            errors.append(f"volumes: {extra} not allowed in an SCC derived from restricted")
    for field in ("users", "groups"):
        if not isinstance(obj.get(field, []), list):
            errors.append(f"{field}: must be a list")
    return errors


def _check_node_selector(value, path):
    if not isinstance(value, list) or not value:
        return [f"{path}: must be a non-empty list of {{key, value}}"]
    errors = []
    for index, item in enumerate(value):
        if not (
            isinstance(item, dict)
            and set(item) == {"key", "value"}
            and all(isinstance(v, str) and v for v in item.values())
        ):
            errors.append(f"{path}[{index}]: must be {{key: <string>, value: <string>}}")
    return errors


def _check_csi_scale(obj):
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: missing or not a mapping"]
    errors = []
    clusters = spec.get("clusters")
    if not isinstance(clusters, list) or not clusters:
        return ["spec.clusters: missing or empty"]
    primaries = 0
    for index, cluster in enumerate(clusters):
        path = f"spec.clusters[{index}]"
        if not isinstance(cluster, dict):
            errors.append(f"{path}: not a mapping")
            continue
        if not (isinstance(cluster.get("id"), str) and cluster["id"].isdigit()):
            errors.append(f"{path}.id: {cluster.get('id')!r} is not a quoted numeric cluster id")
        secret = cluster.get("secrets")
        if not (isinstance(secret, str) and DNS1123_SUBDOMAIN.match(secret)):
            errors.append(f"{path}.secrets: {secret!r} is not a Secret name")
        if not isinstance(cluster.get("secureSslMode"), bool):
            errors.append(f"{path}.secureSslMode: must be a boolean")
        rest = cluster.get("restApi")
        if not isinstance(rest, list) or not rest:
            errors.append(f"{path}.restApi: missing or empty")
        else:
            for rindex, entry in enumerate(rest):
                if not (isinstance(entry, dict) and isinstance(entry.get("guiHost"), str) and entry["guiHost"]):
                    errors.append(f"{path}.restApi[{rindex}].guiHost: missing")
        if "primary" in cluster:
            primaries += 1
            if not isinstance(_get(cluster, "primary", "primaryFs"), str):
                errors.append(f"{path}.primary.primaryFs: missing")
    if primaries != 1:
        errors.append(f"spec.clusters: exactly one cluster must be primary, found {primaries}")
    for field in ("attacherNodeSelector", "provisionerNodeSelector", "pluginNodeSelector"):
        errors.extend(_check_node_selector(spec.get(field), f"spec.{field}"))
    return errors


def _nonempty_str(value):
    return isinstance(value, str) and bool(value.strip())


def _check_subscription(obj):
    """gpuforge's pinning policy for OLM Subscriptions (the CRD schema leaves these free strings)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: missing or not a mapping"]
    errors = []
    for field in ("name", "source", "sourceNamespace", "channel", "startingCSV"):
        if not _nonempty_str(spec.get(field)):
            errors.append(f"spec.{field}: missing or empty (gpuforge pins every operator by channel and startingCSV)")
    if spec.get("installPlanApproval") != "Manual":
        errors.append(
            f"spec.installPlanApproval: {spec.get('installPlanApproval')!r} is not 'Manual' "
            "(an Automatic plan would upgrade past the pinned startingCSV)"
        )
    return errors


def _check_operator_group(obj):
    spec = obj.get("spec", {})
    if not isinstance(spec, dict):
        return ["spec: not a mapping"]
    targets = spec.get("targetNamespaces", [])
    if not isinstance(targets, list) or not all(isinstance(n, str) and DNS1123_SUBDOMAIN.match(n) for n in targets):
        return ["spec.targetNamespaces: must be a list of namespace names"]
    return []


def _check_machine_config(obj):
    errors = []
    labels = _get(obj, "metadata", "labels") or {}
    if not _nonempty_str(labels.get("machineconfiguration.openshift.io/role")):
        errors.append("metadata.labels: machineconfiguration.openshift.io/role (the pool, e.g. worker) is missing")
    ignition = _get(obj, "spec", "config", "ignition", "version")
    if not (isinstance(ignition, str) and IGNITION_VERSION.match(ignition)):
        errors.append(f"spec.config.ignition.version: {ignition!r} is not an Ignition 3.x.y version")
    files = _get(obj, "spec", "config", "storage", "files") or []
    if not isinstance(files, list):
        return [*errors, "spec.config.storage.files: must be a list"]
    for index, entry in enumerate(files):
        where = f"spec.config.storage.files[{index}]"
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str) and entry["path"].startswith("/etc/")):
            errors.append(f"{where}.path: must be a file under /etc (RHCOS keeps /usr read-only)")
            continue
        source = _get(entry, "contents", "source")
        if not (isinstance(source, str) and source.startswith("data:")):
            errors.append(f"{where}.contents.source: must be a data: URL")
        if not _int_at_least(entry.get("mode"), 0):
            errors.append(f"{where}.mode: must be an integer (decimal file mode)")
    return errors


def _check_nfd(obj):
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: missing or not a mapping"]
    image = _get(spec, "operand", "image")
    if image is not None and not (isinstance(image, str) and (":" in image.rsplit("/", 1)[-1] or "@sha256:" in image)):
        return [f"spec.operand.image: {image!r} has neither a tag nor a digest"]
    return []
