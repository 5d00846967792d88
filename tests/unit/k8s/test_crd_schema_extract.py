"""scripts/crd_schema_extract.py: the stored CRD schemas (schemas/crds/) are produced by code from the upstream CRD,
descriptions dropped and the listed subtrees elided, nothing else changed."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "crd_schema_extract.py"
_spec = importlib.util.spec_from_file_location("crd_schema_extract", SCRIPT)
extractor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(extractor)

# A small CRD file in the shape upstream publishes (a deploy manifest with other objects and two CRDs).
SAMPLE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        description: Widget is a demo.
        type: object
        properties:
          spec:
            description: |-
              The spec,
              on two lines.
            type: object
            required: [size]
            properties:
              description:
                description: a property that is itself named description
                type: string
              size:
                description: 'Size: 1 or more'
                type: integer
                format: int32
                minimum: 1
              mode:
                type: string
                enum: ["on", "off"]
              quantity:
                anyOf:
                - type: integer
                - type: string
                x-kubernetes-int-or-string: true
              replicas:
                type: object
                additionalProperties:
                  type: object
                  properties:
                    template:
                      type: object
                      properties:
                        spec:
                          description: pod spec
                          type: object
                          required: [containers]
                          properties:
                            containers:
                              type: array
                              items:
                                type: object
                                properties:
                                  name: {type: string, description: name}
              list:
                type: array
                items:
                  type: object
                  properties:
                    deep: {type: object, properties: {x: {type: string}}}
          status:
            description: status
            type: object
            properties:
              state: {type: string}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, description: gadget}
"""


def test_descriptions_are_dropped_and_nothing_else_changes():
    schema = extractor.extract(SAMPLE, "v1", kind="Widget")
    spec = schema["properties"]["spec"]
    assert "description" not in schema and "description" not in spec
    # A property named "description" is data, not a description: kept, its own description dropped.
    assert spec["properties"]["description"] == {"type": "string"}
    assert spec["properties"]["size"] == {"type": "integer", "format": "int32", "minimum": 1}
    assert spec["properties"]["mode"] == {"type": "string", "enum": ["on", "off"]}
    assert spec["required"] == ["size"]
    assert spec["properties"]["quantity"]["x-kubernetes-int-or-string"] is True
    pod = spec["properties"]["replicas"]["additionalProperties"]["properties"]["template"]["properties"]["spec"]
    assert pod["properties"]["containers"]["items"]["properties"]["name"] == {"type": "string"}
    assert '"description": "' not in json.dumps(schema)


def test_elided_subtrees_become_open_objects_keeping_type_and_required():
    schema = extractor.extract(
        SAMPLE, "v1", kind="Widget", elided=["spec.replicas.*.template.spec", "spec.list.[].deep", "status"]
    )
    props = schema["properties"]
    template = props["spec"]["properties"]["replicas"]["additionalProperties"]["properties"]["template"]
    pod = template["properties"]["spec"]
    assert pod == {"type": "object", "required": ["containers"], "x-kubernetes-preserve-unknown-fields": True}
    assert props["spec"]["properties"]["list"]["items"]["properties"]["deep"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert props["status"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


@pytest.mark.parametrize(
    ("version", "kind", "elided", "message"),
    [
        ("v1", None, [], "expected one CustomResourceDefinition, found 2"),
        ("v1", "Nope", [], "expected one CustomResourceDefinition of kind Nope, found 0"),
        ("v2", "Widget", [], "version v2 not in the CRD"),
        ("v1alpha1", "Widget", [], "version v1alpha1 is not served"),
        ("v1", "Widget", ["spec.nothing"], "elide spec.nothing: no schema at spec.nothing"),
    ],
)
def test_wrong_arguments_fail_with_a_message(version, kind, elided, message):
    with pytest.raises(SystemExit, match=message):
        extractor.extract(SAMPLE, version, kind=kind, elided=elided)


def test_the_command_line_writes_the_stored_format():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "v1", "--kind", "Gadget"],
        input=SAMPLE,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == '{\n "type": "object"\n}\n'


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "schemas" / "crds").glob("*_*_*.json")))
def test_stored_schemas_are_in_the_format_the_script_writes(name):
    text = (ROOT / "schemas" / "crds" / name).read_text()
    assert extractor.dump(json.loads(text)) == text
