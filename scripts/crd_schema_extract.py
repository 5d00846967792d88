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

`check-sources` re-does this for every entry of schemas/crds/sources.json from clones of the upstream
repositories (bare clones are fine; nothing is fetched): the recorded tag resolves to the recorded commit, the
file at that commit is the recorded git blob, and extracting it with the recorded `extract` arguments gives the
stored file byte for byte. It prints one line per entry and exits 1 when any differs.

    git clone --bare https://github.com/NVIDIA/gpu-operator /srv/crd-sources/NVIDIA/gpu-operator   # one per repository
    python3 scripts/crd_schema_extract.py check-sources --git-dir '/srv/crd-sources/{owner}/{name}'
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

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


SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas" / "crds"


class Git:
    """Read-only git calls on the clone of an upstream repository; `template` names its git dir by owner and name."""

    def __init__(self, template: str):
        self.template = template

    def __call__(self, repository: str, *args: str) -> str:
        owner, name = repository.split("/", 1)
        git_dir = self.template.format(owner=owner, name=name)
        if not Path(git_dir).is_dir():
            raise LookupError(
                f"no clone of {repository} at {git_dir}: git clone --bare https://github.com/{repository} {git_dir}"
            )
        done = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise LookupError(f"{repository}: git {' '.join(args)}: {done.stderr.strip() or done.returncode}")
        return done.stdout


def check_source(name: str, source: dict, git, schema_dir: Path = SCHEMA_DIR) -> list:
    """What differs between sources.json's entry `name` and its upstream repository (empty: nothing)."""
    repository, tag, commit, path = source["repository"], source["tag"], source["commit"], source["path"]
    problems = []
    try:
        tagged = git(repository, "rev-parse", f"{tag}^{{commit}}").strip()
        if tagged != commit:
            problems.append(f"tag {tag} is commit {tagged}, not the recorded {commit}")
        blob = git(repository, "rev-parse", f"{commit}:{path}").strip()
        if blob != source["blob"]:
            problems.append(f"{path} at {commit[:12]} is blob {blob}, not the recorded {source['blob']}")
        arguments = source["extract"]
        schema = extract(
            git(repository, "show", f"{commit}:{path}"),
            arguments["version"],
            arguments.get("kind"),
            arguments.get("elide", []),
        )
        if dump(schema) != (schema_dir / name).read_text(encoding="utf-8"):
            problems.append(f"extracting {repository}@{tag}:{path} does not give the stored {name}")
        # A release that ships another project's CRD (OpenShift's OLM and operator-framework/api) names it too.
        vendor = source.get("openshift")
        if vendor:
            copy = git(vendor["repository"], "rev-parse", f"{vendor['commit']}:{vendor['same_blob']}").strip()
            if copy != source["blob"]:
                problems.append(f"{vendor['repository']}@{vendor['branch']}:{vendor['same_blob']} is blob {copy}")
    except (LookupError, SystemExit) as exc:
        problems.append(str(exc))
    return problems


def check_sources(git, schema_dir: Path = SCHEMA_DIR) -> dict:
    """{stored file: its problems} for every entry of schema_dir/sources.json."""
    sources = json.loads((schema_dir / "sources.json").read_text(encoding="utf-8"))
    return {name: check_source(name, source, git, schema_dir) for name, source in sorted(sources.items())}


def main_check_sources(argv) -> int:
    parser = argparse.ArgumentParser(prog="crd_schema_extract.py check-sources", description=check_sources.__doc__)
    parser.add_argument("--git-dir", required=True, help="git dir of each repository, e.g. '/srv/{owner}/{name}'")
    parser.add_argument("--schema-dir", default=str(SCHEMA_DIR), help="folder of sources.json (default schemas/crds)")
    args = parser.parse_args(argv)
    results = check_sources(Git(args.git_dir), Path(args.schema_dir))
    for name, problems in results.items():
        print(f"{'OK  ' if not problems else 'FAIL'} {name}" + "".join(f"\n     {p}" for p in problems))
    return 1 if any(results.values()) else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["check-sources"]:
        raise SystemExit(main_check_sources(argv[1:]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="CRD version name, e.g. v1")
    parser.add_argument("--kind", help="CRD kind, when stdin holds several CRDs")
    parser.add_argument("--elide", action="append", default=[], metavar="PATH", help="subtree to store open")
    args = parser.parse_args(argv)
    sys.stdout.write(dump(extract(sys.stdin.read(), args.version, args.kind, args.elide)))


if __name__ == "__main__":
    main()
