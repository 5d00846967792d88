#!/usr/bin/env python3
"""Turn an upstream CustomResourceDefinition into the stored schema of schemas/crds/.

Reads CRD YAML on stdin (a file of several documents is fine, e.g. an operator's whole deploy manifest), picks the
CustomResourceDefinition of --kind (needed only when there are several) and its version VERSION, and writes that
version's openAPIV3Schema as JSON (indent 1, keys sorted, as schemas/crds/README.md describes) with exactly two
changes:

- every `description` of a schema node is dropped (a property that happens to be named "description" is kept);
- each --elide PATH is replaced by an open object: the node keeps its `type` and `required` and gets
  `x-kubernetes-preserve-unknown-fields: true`, everything else under it is dropped.

PATH is dotted from the schema root: a name steps into `properties`, `*` into `additionalProperties`, `[]` into
`items`, e.g. `spec.mpiReplicaSpecs.*.template.spec` or `spec.affinity`.

    python3 scripts/crd_schema_extract.py v1 --kind ClusterPolicy < nvidia.com_clusterpolicies.yaml \
        > schemas/crds/nvidia.com_v1_ClusterPolicy.json
"""

import argparse
import json
import sys

import yaml

# Keys whose value is one schema, and keys whose value is a list of schemas (apiextensions v1 JSONSchemaProps).
SCHEMA_KEYS = ("additionalProperties", "items", "not", "additionalItems")
SCHEMA_LIST_KEYS = ("allOf", "anyOf", "oneOf")
SCHEMA_MAP_KEYS = ("properties", "patternProperties", "definitions", "dependencies")


def drop_descriptions(node):
    """Return a copy of the schema node without `description`, recursing only where the API holds schemas."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key in SCHEMA_KEYS and isinstance(value, dict):
            out[key] = drop_descriptions(value)
        elif key in SCHEMA_LIST_KEYS or (key in SCHEMA_KEYS and isinstance(value, list)):  # items: list of schemas
            out[key] = [drop_descriptions(v) for v in value]
        elif key in SCHEMA_MAP_KEYS and isinstance(value, dict):
            out[key] = {name: drop_descriptions(v) for name, v in value.items()}
        else:
            out[key] = value
    return out


def elide(schema, path):
    """Replace the node at PATH by an open object (type and required kept). Fails if PATH is not in the schema."""
    steps = path.split(".")
    node = schema
    for i, step in enumerate(steps):
        if step == "*":
            holder, key = node, "additionalProperties"
        elif step == "[]":
            holder, key = node, "items"
        else:
            holder, key = node.get("properties", {}), step
        if not isinstance(holder.get(key), dict):
            raise SystemExit(f"elide {path}: no schema at {'.'.join(steps[: i + 1])}")
        if i == len(steps) - 1:
            old = holder[key]
            new = {k: old[k] for k in ("type", "required") if k in old}
            new["x-kubernetes-preserve-unknown-fields"] = True
            holder[key] = new
        else:
            node = holder[key]


def extract(text, version, kind=None, elided=()):
    crds = [
        doc
        for doc in yaml.safe_load_all(text)
        if isinstance(doc, dict)
        and doc.get("kind") == "CustomResourceDefinition"
        and (kind is None or doc["spec"]["names"]["kind"] == kind)
    ]
    if len(crds) != 1:
        which = f" of kind {kind}" if kind else ""
        raise SystemExit(f"expected one CustomResourceDefinition{which}, found {len(crds)}")
    versions = [v for v in crds[0]["spec"]["versions"] if v["name"] == version]
    if len(versions) != 1:
        raise SystemExit(f"version {version} not in the CRD")
    if not versions[0].get("served", True):
        raise SystemExit(f"version {version} is not served")
    schema = drop_descriptions(versions[0]["schema"]["openAPIV3Schema"])
    for path in elided:
        elide(schema, path)
    return schema


def dump(schema):
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="CRD version name, e.g. v1")
    parser.add_argument("--kind", help="CRD kind, when stdin holds several CRDs")
    parser.add_argument("--elide", action="append", default=[], metavar="PATH", help="subtree to store open")
    args = parser.parse_args(argv)
    sys.stdout.write(dump(extract(sys.stdin.read(), args.version, args.kind, args.elide)))


if __name__ == "__main__":
    main()
