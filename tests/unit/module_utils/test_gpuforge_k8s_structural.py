"""Structural checks of the custom resources gpuforge renders."""

import copy

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_k8s_structural import (
    check_object,
    crd_json_schema,
    embedded_pod_templates,
    error_location,
    has_check,
)

WORKER = {
    "replicas": 2,
    "template": {
        "spec": {
            "containers": [
                {
                    "name": "worker",
                    "image": "img",
                    "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                    "resources": {"limits": {"nvidia.com/gpu": 8, "rdma/shared_ib0": 1}},
                }
            ]
        }
    },
}
MPIJOB = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "resnet50", "namespace": "ai"},
    "spec": {
        "slotsPerWorker": 8,
        "runPolicy": {"cleanPodPolicy": "Running"},
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{"name": "l", "image": "img"}]}}},
            "Worker": WORKER,
        },
    },
}
SCC = {
    "apiVersion": "security.openshift.io/v1",
    "kind": "SecurityContextConstraints",
    "metadata": {"name": "scc-for-mpi"},
    "allowHostDirVolumePlugin": False,
    "allowHostIPC": False,
    "allowHostNetwork": False,
    "allowHostPID": False,
    "allowHostPorts": False,
    "allowPrivilegedContainer": False,
    "allowPrivilegeEscalation": False,
    "defaultAddCapabilities": ["IPC_LOCK"],
    "requiredDropCapabilities": ["KILL"],
    "runAsUser": {"type": "MustRunAsRange"},
    "seLinuxContext": {"type": "MustRunAs"},
    "fsGroup": {"type": "MustRunAs"},
    "supplementalGroups": {"type": "RunAsAny"},
    "volumes": ["emptyDir", "secret"],
    "users": [],
    "groups": [],
}
CSI = {
    "apiVersion": "csi.ibm.com/v1",
    "kind": "CSIScaleOperator",
    "metadata": {"name": "ibm-spectrum-scale-csi", "namespace": "ibm-spectrum-scale-csi-driver"},
    "spec": {
        "clusters": [
            {
                "id": "16217308676014575381",
                "primary": {"primaryFs": "fs0"},
                "secrets": "csisecret-local",
                "secureSslMode": False,
                "restApi": [{"guiHost": "192.168.1.30"}],
            }
        ],
        **{
            f: [{"key": "scale", "value": "true"}]
            for f in ("attacherNodeSelector", "provisionerNodeSelector", "pluginNodeSelector")
        },
    },
}


def changed(obj, mutate):
    obj = copy.deepcopy(obj)
    mutate(obj)
    return check_object(obj)


def test_valid_objects_pass():
    assert [check_object(o) for o in (MPIJOB, SCC, CSI)] == [[], [], []]
    assert has_check(MPIJOB) and not has_check({"apiVersion": "v1", "kind": "Pod"})


def test_mpijob_errors():
    def privileged(o):
        o["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["securityContext"] = {
            "privileged": True
        }

    errors = changed(MPIJOB, privileged)
    assert (
        "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].securityContext.privileged: privileged "
        "containers are not allowed" in errors
    )
    assert (
        "spec.mpiReplicaSpecs.Worker.template.spec.containers[0]: requests RDMA resources but does not add "
        "the IPC_LOCK capability" in errors
    )
    assert changed(MPIJOB, lambda o: o["spec"].update(slotsPerWorker=0)) == [
        "spec.slotsPerWorker: 0 is not an integer >= 1"
    ]
    assert changed(MPIJOB, lambda o: o["spec"].update(cleanPodPolicy="Running")) == [
        "spec.cleanPodPolicy: moved to spec.runPolicy.cleanPodPolicy in v2beta1"
    ]
    assert changed(MPIJOB, lambda o: o["spec"]["mpiReplicaSpecs"].pop("Launcher")) == [
        "spec.mpiReplicaSpecs.Launcher: missing"
    ]
    assert changed(MPIJOB, lambda o: o["metadata"].pop("namespace")) == [
        "metadata.namespace: None missing or not a DNS-1123 label"
    ]


def test_scc_errors():
    assert changed(SCC, lambda o: o.update(allowPrivilegedContainer=True)) == [
        "allowPrivilegedContainer: must be false"
    ]
    assert changed(SCC, lambda o: o.update(defaultAddCapabilities=[])) == [
        "defaultAddCapabilities/allowedCapabilities: IPC_LOCK is not granted"
    ]
    assert changed(SCC, lambda o: o["volumes"].append("hostPath")) == [
        "volumes: ['hostPath'] not allowed in an SCC derived from restricted"
    ]
    assert changed(SCC, lambda o: o["metadata"].update(namespace="x")) == [
        "metadata.namespace: set on a cluster-scoped object"
    ]


def test_csi_errors():
    assert changed(CSI, lambda o: o["spec"]["clusters"][0].update(id=16217308676014575381)) == [
        "spec.clusters[0].id: 16217308676014575381 is not a quoted numeric cluster id"
    ]
    assert changed(CSI, lambda o: o["spec"]["clusters"][0].pop("primary")) == [
        "spec.clusters: exactly one cluster must be primary, found 0"
    ]
    assert changed(CSI, lambda o: o["spec"].update(pluginNodeSelector={"scale": "true"})) == [
        "spec.pluginNodeSelector: must be a non-empty list of {key, value}"
    ]


def test_malformed_input_never_raises():
    assert check_object("text") == ["object is not a mapping"]
    assert check_object({"apiVersion": "x/v1", "kind": "Y", "metadata": {"name": "a", "namespace": "b"}}) == [
        "no structural check for apiVersion 'x/v1' kind 'Y'"
    ]
    assert check_object(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "a", "namespace": "b"},
            "spec": {"mpiReplicaSpecs": {"Launcher": 3, "Worker": {"replicas": 1}}},
        }
    ) == [
        "spec.mpiReplicaSpecs.Launcher.template.spec: missing or not a mapping",
        "spec.mpiReplicaSpecs.Worker.template.spec: missing or not a mapping",
    ]


def test_embedded_pod_templates():
    templates = embedded_pod_templates(MPIJOB)
    assert [t["metadata"]["name"] for t in templates] == ["resnet50-launcher", "resnet50-worker"]
    assert templates[1]["template"] is WORKER["template"]
    assert embedded_pod_templates(SCC) == []


def crd_errors(schema, obj):
    # jsonschema is a controller library (k8s_manifest_validate); the oldest node Python these module_utils tests
    # also run under (tests/unit/test_target_python.py) does not have it, and skips these tests there only.
    jsonschema = pytest.importorskip("jsonschema")
    check = jsonschema.Draft7Validator(crd_json_schema(schema))
    return sorted((error_location(e), e.message) for e in check.iter_errors(obj))


def test_crd_schema_rejects_fields_it_does_not_name_unless_preserved():
    schema = {
        "type": "object",
        "properties": {
            "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    assert crd_errors(schema, {"closed": {"a": "x"}, "open": {"z": 1}, "map": {"k": "v"}}) == []
    assert crd_errors(schema, {"closed": {"b": 1}, "map": {"k": 1}}) == [
        ("closed", "Additional properties are not allowed ('b' was unexpected)"),
        ("map.k", "1 is not of type 'string'"),
    ]


def test_crd_schema_int_or_string_nullable_and_int32():
    schema = {
        "type": "object",
        "properties": {
            "bare": {"x-kubernetes-int-or-string": True},
            "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "maybe": {"type": "string", "nullable": True, "enum": ["a"]},
            "count": {"type": "integer", "format": "int32"},
        },
    }
    assert crd_errors(schema, {"bare": 1, "port": "http", "maybe": None, "count": 2**31 - 1}) == []
    assert crd_errors(schema, {"bare": 1.5, "port": True, "maybe": "b", "count": 2**31}) == [
        ("bare", "1.5 is not valid under any of the given schemas"),
        ("count", "2147483648 is greater than the maximum of 2147483647"),
        ("maybe", "'b' is not one of ['a', None]"),
        ("port", "True is not valid under any of the given schemas"),
    ]


def test_crd_schema_conversion_leaves_its_input_alone():
    schema = {"type": "object", "properties": {"a": {"type": "integer", "format": "int64", "nullable": True}}}
    before = copy.deepcopy(schema)
    converted = crd_json_schema(schema)
    assert schema == before
    assert converted["additionalProperties"] is False
    assert converted["properties"]["a"]["type"] == ["integer", "null"]
    assert error_location(type("E", (), {"absolute_path": []})()) == "(root)"
