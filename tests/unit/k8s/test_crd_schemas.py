"""Stored CRD schemas (schemas/crds/): each has its source recorded, is a valid JSON schema once converted with the
API server's semantics, and every rendered custom resource passes the schema of its kind while a broken one fails
with an error naming the path."""

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_k8s_structural import (
    crd_json_schema,
    error_location,
)

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "schemas" / "crds"
SOURCES = json.loads((SCHEMAS / "sources.json").read_text())
FILES = sorted(p.name for p in SCHEMAS.glob("*_*_*.json"))

MPIJOB = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "nccl", "namespace": "bench"},
    "spec": {
        "slotsPerWorker": 8,
        "runPolicy": {"cleanPodPolicy": "Running"},
        "mpiReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w"}]}}}},
    },
}


def validator(name):
    return jsonschema.Draft7Validator(crd_json_schema(json.loads((SCHEMAS / name).read_text())))


def schema_name(obj):
    group, version = obj["apiVersion"].split("/", 1)
    return f"{group}_{version}_{obj['kind']}.json"


def errors(check, obj):
    return sorted((error_location(e), e.message) for e in check.iter_errors(obj))


def test_every_schema_has_its_source():
    assert sorted(SOURCES) == FILES
    assert len(FILES) == 5
    for name in FILES:
        source = SOURCES[name]
        assert source["repository"] and source["path"] and len(source["commit"]) == 40
        assert isinstance(source["release_verified"], bool)
        assert source["pinned_release"]
        # A schema tied to a release says whether that release is the pinned one.
        if source["release_verified"]:
            assert source["upstream_release"] and isinstance(source["matches_pin"], bool)


def test_mpijob_schema_is_the_release_the_operator_is_pinned_to():
    source = SOURCES["kubeflow.org_v2beta1_MPIJob.json"]
    assert source["commit"] == "07a32d9a8cb5e667d754a107cfb0629712811619"
    defaults = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/k8s_addons.yml").read_text(encoding="utf-8"))
    pin = defaults["gpuforge_k8s_addons"]["mpi_operator"]["version"]
    assert source["pinned_release"] == pin
    assert source["matches_pin"] is (source["upstream_release"] == pin) is True


def test_clusterpolicy_schema_is_the_release_the_gpu_operator_subscription_pins():
    source = SOURCES["nvidia.com_v1_ClusterPolicy.json"]
    assert source["commit"] == "bf10728bef0d1a1fa035670408330fc9b480d612"
    assert source["path"].startswith("bundle/v25.3.0/manifests/nvidia.com_clusterpolicies.yaml")
    defaults = yaml.safe_load((ROOT / "roles/openshift_gpu_operators/defaults/main.yml").read_text(encoding="utf-8"))
    csv = defaults["openshift_gpu_operators_gpu_operator"]["starting_csv"]
    assert csv == f"gpu-operator-certified.{source['pinned_release']}"
    assert source["matches_pin"] is (source["upstream_release"] == source["pinned_release"]) is True
    # v25.3.0 has none of the later main branch's fields (the file stored before was from there).
    spec = json.loads((SCHEMAS / "nvidia.com_v1_ClusterPolicy.json").read_text())["properties"]["spec"]["properties"]
    assert "secretEnv" not in spec["driver"]["properties"] and "hostPID" not in spec["dcgmExporter"]["properties"]
    assert spec["driver"]["properties"]["kernelModuleType"]["enum"] == ["auto", "open", "proprietary"]


def test_unverified_schemas_say_where_the_release_was_looked_for():
    for name, source in SOURCES.items():
        if not source["release_verified"]:
            assert len(source["release_search"]) > 40, name


@pytest.mark.parametrize("name", FILES)
def test_schemas_are_valid_and_carry_no_descriptions(name):
    text = (SCHEMAS / name).read_text()
    assert '"description"' not in text
    jsonschema.Draft7Validator.check_schema(crd_json_schema(json.loads(text)))


def test_mpijob_passes_and_broken_ones_fail_naming_the_path():
    check = validator("kubeflow.org_v2beta1_MPIJob.json")
    assert errors(check, MPIJOB) == []
    wrong = copy.deepcopy(MPIJOB)
    wrong["spec"]["cleanPodPolicy"] = "Running"  # v1alpha2's place; v2beta1 has it under runPolicy
    wrong["spec"]["slotsPerWorker"] = "8"
    wrong["spec"]["mpiImplementation"] = "MVAPICH"
    wrong["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 2**31  # int32
    assert errors(check, wrong) == [
        ("spec", "Additional properties are not allowed ('cleanPodPolicy' was unexpected)"),
        ("spec.mpiImplementation", "'MVAPICH' is not one of ['OpenMPI', 'Intel', 'MPICH']"),
        ("spec.mpiReplicaSpecs.Worker.replicas", "2147483648 is greater than the maximum of 2147483647"),
        ("spec.slotsPerWorker", "'8' is not of type 'integer'"),
    ]
    missing = copy.deepcopy(MPIJOB)
    del missing["spec"]["mpiReplicaSpecs"]
    del missing["spec"]["slotsPerWorker"]
    assert errors(check, missing) == [("spec", "'mpiReplicaSpecs' is a required property")]
    no_containers = copy.deepcopy(MPIJOB)
    no_containers["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"] = {}
    assert errors(check, no_containers) == [
        ("spec.mpiReplicaSpecs.Worker.template.spec", "'containers' is a required property")
    ]


def test_preserve_unknown_fields_keeps_a_subtree_open():
    schema = crd_json_schema(
        {
            "type": "object",
            "properties": {"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}}},
        }
    )
    check = jsonschema.Draft7Validator(schema)
    assert list(check.iter_errors({"a": {"anything": 1}})) == []
    assert [e.message for e in check.iter_errors({"b": 1})] == [
        "Additional properties are not allowed ('b' was unexpected)"
    ]


@pytest.mark.parametrize("scenario", ["dgx1_k8s", "dgx1_openshift", "t4_roce"])
def test_every_rendered_custom_resource_passes_its_stored_schema(request, scenario):
    rendered = request.getfixturevalue(scenario)
    checked = set()
    for obj in rendered.objects.values():
        if "/" not in obj["apiVersion"] or not (SCHEMAS / schema_name(obj)).is_file():
            continue
        assert errors(validator(schema_name(obj)), obj) == [], (obj["kind"], obj["metadata"]["name"])
        checked.add(obj["kind"])
    # dgx1_openshift renders the platform-dependent roles only (no custom resource with a stored schema).
    expected = {"dgx1_k8s": {"MPIJob", "CSIScaleOperator"}, "dgx1_openshift": set(), "t4_roce": {"MPIJob"}}
    assert checked >= expected[scenario]


def test_a_rendered_mpijob_with_a_wrong_field_fails_naming_it(dgx1_k8s):
    job = copy.deepcopy(dgx1_k8s.kinds("MPIJob")[0])
    check = validator("kubeflow.org_v2beta1_MPIJob.json")
    job["spec"]["runPolicy"]["cleanPodPolicy"] = ["Running"]
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = "1"
    assert errors(check, job) == [
        ("spec.mpiReplicaSpecs.Launcher.replicas", "'1' is not of type 'integer'"),
        ("spec.runPolicy.cleanPodPolicy", "['Running'] is not of type 'string'"),
    ]


def test_a_rendered_csiscaleoperator_with_a_wrong_field_fails_naming_it(dgx1_k8s):
    (cso,) = dgx1_k8s.kinds("CSIScaleOperator")
    check = validator("csi.ibm.com_v1_CSIScaleOperator.json")
    wrong = copy.deepcopy(cso)
    wrong["spec"]["clusters"][0]["secureSslMode"] = "false"
    assert errors(check, wrong) == [
        ("spec.clusters.0.secureSslMode", "'false' is not of type 'boolean'"),
        ("spec.clusters.0.secureSslMode", "'false' is not one of [True, False]"),
    ]
