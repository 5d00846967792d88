"""Stored CRD schemas: each has its source recorded, is a valid JSON schema, and rejects a wrong field."""

import json
from pathlib import Path

import jsonschema
import pytest
from ansible_collections.gpuforge.cluster.plugins.modules.k8s_manifest_validate import kubernetes_semantics

SCHEMAS = Path(__file__).resolve().parents[3] / "k8s_schemas"
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


def test_every_schema_has_its_source():
    assert sorted(SOURCES) == FILES
    assert len(FILES) == 5
    for name in FILES:
        source = SOURCES[name]
        assert source["repository"] and source["path"] and len(source["commit"]) == 40
        assert isinstance(source["release_verified"], bool)


@pytest.mark.parametrize("name", FILES)
def test_schemas_are_valid_and_carry_no_descriptions(name):
    text = (SCHEMAS / name).read_text()
    assert '"description"' not in text
    jsonschema.Draft7Validator.check_schema(kubernetes_semantics(json.loads(text)))


def test_mpijob_passes_and_a_misplaced_field_fails():
    check = jsonschema.Draft7Validator(
        kubernetes_semantics(json.loads((SCHEMAS / "kubeflow.org_v2beta1_MPIJob.json").read_text()))
    )
    assert list(check.iter_errors(MPIJOB)) == []
    wrong = json.loads(json.dumps(MPIJOB))
    wrong["spec"]["cleanPodPolicy"] = "Running"  # v1alpha2's place; v2beta1 has it under runPolicy
    wrong["spec"]["slotsPerWorker"] = "8"
    messages = sorted(e.message for e in check.iter_errors(wrong))
    assert messages == [
        "'8' is not of type 'integer'",
        "Additional properties are not allowed ('cleanPodPolicy' was unexpected)",
    ]


def test_preserve_unknown_fields_keeps_a_subtree_open():
    schema = kubernetes_semantics(
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
