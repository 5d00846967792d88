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


# --- check-sources: the stored schemas against the upstream repositories' tags -----------------------------------


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def upstream(tmp_path):
    """A clone of an upstream repository 'acme/widgets' with tag v1.0.0, and a schemas/crds folder recording it."""
    repo = tmp_path / "git" / "acme" / "widgets"
    (repo / "crds").mkdir(parents=True)
    (repo / "crds" / "widgets.yaml").write_text(SAMPLE)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "widgets v1.0.0")
    git(repo, "tag", "v1.0.0")
    (repo / "crds" / "widgets.yaml").write_text(SAMPLE.replace("minimum: 1", "minimum: 2"))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "after the release")
    schemas = tmp_path / "crds"
    schemas.mkdir()
    (schemas / "example.com_v1_Widget.json").write_text(extractor.dump(extractor.extract(SAMPLE, "v1", "Widget")))
    source = {
        "repository": "acme/widgets",
        "tag": "v1.0.0",
        "commit": git(repo, "rev-parse", "v1.0.0"),
        "path": "crds/widgets.yaml",
        "blob": git(repo, "rev-parse", "v1.0.0:crds/widgets.yaml"),
        "extract": {"version": "v1", "kind": "Widget", "elide": []},
    }
    return extractor.Git(str(tmp_path / "git" / "{owner}" / "{name}" / ".git")), schemas, source


def check(upstream, **changes):
    reader, schemas, source = upstream
    (schemas / "sources.json").write_text(json.dumps({"example.com_v1_Widget.json": {**source, **changes}}))
    return extractor.check_sources(reader, schemas)["example.com_v1_Widget.json"]


def test_check_sources_passes_when_tag_commit_blob_and_schema_agree(upstream):
    assert check(upstream) == []


def test_check_sources_names_a_tag_of_another_commit(upstream):
    reader, _schemas, source = upstream
    later = reader("acme/widgets", "rev-parse", "HEAD").strip()
    blob = reader("acme/widgets", "rev-parse", "HEAD:crds/widgets.yaml").strip()
    # The later commit's file is another schema (minimum 2), so its extract is not the stored one either.
    assert check(upstream, commit=later, blob=blob) == [
        f"tag v1.0.0 is commit {source['commit']}, not the recorded {later}",
        "extracting acme/widgets@v1.0.0:crds/widgets.yaml does not give the stored example.com_v1_Widget.json",
    ]


def test_check_sources_names_a_schema_that_is_not_the_extract(upstream):
    _reader, schemas, _source = upstream
    stored = schemas / "example.com_v1_Widget.json"
    stored.write_text(stored.read_text().replace('"minimum": 1', '"minimum": 2'))
    assert check(upstream) == [
        "extracting acme/widgets@v1.0.0:crds/widgets.yaml does not give the stored example.com_v1_Widget.json"
    ]


def test_check_sources_names_a_wrong_blob_a_missing_tag_and_a_missing_clone(upstream):
    assert check(upstream, blob="0" * 40)[0].startswith("crds/widgets.yaml at ")
    assert "git rev-parse v9.9.9^{commit}" in check(upstream, tag="v9.9.9")[0]
    (missing,) = check(upstream, repository="acme/gadgets")
    assert (
        missing.startswith("no clone of acme/gadgets at ")
        and "git clone --bare https://github.com/acme/gadgets" in missing
    )


MIRROR = Path("/work/.mirror")


@pytest.mark.skipif(
    not all(
        (MIRROR / f"{source['repository'].replace('/', '+')}" / "repo").is_dir()
        for source in json.loads((ROOT / "schemas" / "crds" / "sources.json").read_text()).values()
    ),
    reason="needs clones of the upstream repositories (the development machine's /work/.mirror)",
)
def test_every_stored_schema_is_its_release_tags_extract():
    """Where the upstream clones are at hand, every stored schema is regenerated from its tag and compared."""
    results = extractor.check_sources(extractor.Git(str(MIRROR / "{owner}+{name}" / "repo")))
    assert results == {name: [] for name in results}
