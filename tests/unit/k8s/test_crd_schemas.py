"""Stored CRD schemas (schemas/crds/): each has its source recorded, is a valid JSON schema once converted with the
API server's semantics, and every rendered custom resource passes the schema of its kind while a broken one fails
with an error naming the path."""

import copy
import json
import re
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


HEX40 = re.compile(r"^[0-9a-f]{40}$")


def test_every_schema_has_its_release_source():
    assert sorted(SOURCES) == FILES
    assert len(FILES) == 5
    for name in FILES:
        source = SOURCES[name]
        assert source["repository"] and source["path"] and source["tag"], name
        assert HEX40.match(source["commit"]) and HEX40.match(source["blob"]), name
        # Every stored schema is the pinned release's (no release_verified: false left).
        assert source["release_verified"] is True and source["matches_pin"] is True, name
        assert source["upstream_release"] and source["pinned_release"], name
        # What crd_schema_extract.py check-sources runs again: the version, kind and elided subtrees.
        assert set(source["extract"]) == {"version", "kind", "elide"}, name
        assert name == f"{name.split('_')[0]}_{source['extract']['version']}_{source['extract']['kind']}.json"
        assert sorted(source["elided_reason"]) == sorted(source["extract"]["elide"]), name


def _at(data, key):
    for step in key.split("."):
        data = data[step]
    return data


def pin_problem(source):
    """Why a schema's recorded tag is not the release the roles pin (None: it is)."""
    pin = source["pin"]
    values = yaml.safe_load((ROOT / pin["file"]).read_text(encoding="utf-8"))
    wanted = pin["value"].format(
        tag=source["tag"], version=source["tag"].removeprefix("v"), openshift_minor=pin.get("openshift_minor")
    )
    found = str(_at(values, pin["key"]))
    if found != wanted:
        return f"{pin['file']} {pin['key']} is {found!r}; the schema's tag {source['tag']} needs {wanted!r}"
    vendor = source.get("openshift")
    if vendor and vendor["branch"] != f"release-{found}":
        return f"the schema is OpenShift {vendor['branch']}'s, the roles pin OpenShift {found}"
    return None


@pytest.mark.parametrize("name", FILES)
def test_the_recorded_tag_is_the_release_the_roles_pin(name):
    assert pin_problem(SOURCES[name]) is None


@pytest.mark.parametrize(
    ("name", "tag", "message"),
    [
        ("mellanox.com_v1alpha1_NicClusterPolicy.json", "v25.4.0", "'nvidia-network-operator.v25.4.0'"),
        ("nvidia.com_v1_ClusterPolicy.json", "v25.10.0", "'gpu-operator-certified.v25.10.0'"),
        ("kubeflow.org_v2beta1_MPIJob.json", "v0.6.0", "'0.6.0'"),
        ("csi.ibm.com_v1_CSIScaleOperator.json", "v2.13.0", "'v2.13.0'"),
    ],
)
def test_a_schema_of_another_release_than_the_pin_fails(name, tag, message):
    source = copy.deepcopy(SOURCES[name])
    source["tag"] = tag
    assert message in pin_problem(source)


def test_a_subscription_schema_of_another_openshift_minor_fails():
    source = copy.deepcopy(SOURCES["operators.coreos.com_v1alpha1_Subscription.json"])
    source["openshift"]["branch"] = "release-4.18"
    assert pin_problem(source) == "the schema is OpenShift release-4.18's, the roles pin OpenShift 4.17"
    source["pin"]["openshift_minor"] = "4.18"
    assert "gpuforge_openshift_min_version is '4.17'" in pin_problem(source)


def test_mpijob_schema_is_the_release_the_operator_is_pinned_to():
    source = SOURCES["kubeflow.org_v2beta1_MPIJob.json"]
    assert (source["tag"], source["commit"]) == ("v0.7.0", "07a32d9a8cb5e667d754a107cfb0629712811619")
    defaults = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/k8s_addons.yml").read_text(encoding="utf-8"))
    assert source["pinned_release"] == defaults["gpuforge_k8s_addons"]["mpi_operator"]["version"]


def test_clusterpolicy_schema_is_the_v25_3_0_tag():
    source = SOURCES["nvidia.com_v1_ClusterPolicy.json"]
    assert (source["tag"], source["commit"]) == ("v25.3.0", "b5479aaa85c72a3f67090e9cb205dfefd6c7b010")
    # v25.3.0 has none of the later main branch's fields (a file stored earlier was from there).
    spec = json.loads((SCHEMAS / "nvidia.com_v1_ClusterPolicy.json").read_text())["properties"]["spec"]["properties"]
    assert "secretEnv" not in spec["driver"]["properties"] and "hostPID" not in spec["dcgmExporter"]["properties"]
    assert spec["driver"]["properties"]["kernelModuleType"]["enum"] == ["auto", "open", "proprietary"]


def test_nicclusterpolicy_schema_is_v25_1_0_not_the_24_10_line():
    spec = json.loads((SCHEMAS / "mellanox.com_v1alpha1_NicClusterPolicy.json").read_text())["properties"]["spec"]
    props = spec["properties"]
    # v25.1.0 dropped the version pattern (sha256: digests accepted) and requires three ibKubernetes fields.
    assert "pattern" not in props["rdmaSharedDevicePlugin"]["properties"]["version"]
    assert "pattern" not in props["ofedDriver"]["properties"]["version"]
    assert {"pKeyGUIDPoolRangeStart", "pKeyGUIDPoolRangeEnd", "ufmSecret"} <= set(props["ibKubernetes"]["required"])


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
