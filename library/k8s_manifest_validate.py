#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: validate rendered Kubernetes manifests before anything applies them."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: k8s_manifest_validate
short_description: Validate rendered Kubernetes manifests against the schema of a Kubernetes version
description:
  - Reads YAML manifest files (one or more documents each) on the controller.
  - Core Kubernetes objects are validated with kubernetes-validate against the JSON schema of the
    requested Kubernetes version (strict mode rejects unknown fields).
  - Custom resources whose CRD schema is stored in I(crd_schema_dir) (C(<group>_<version>_<Kind>.json),
    see schemas/crds/README.md) are validated against it with jsonschema, with the API server's semantics (a field
    the schema does not name is an error unless the schema preserves unknown fields there; int-or-string,
    nullable and int32/int64 bounds as the API server applies them).
  - Custom resources gpuforge renders also get structural checks for the fields and policies gpuforge
    promises (MPIJob, SecurityContextConstraints, CSIScaleOperator, OLM Subscription and OperatorGroup,
    MachineConfig, NodeFeatureDiscovery); the pod templates inside an MPIJob are also validated as core
    PodTemplate objects.
  - An object that is neither a core kind of that version nor a custom resource with a stored schema or a
    structural check is an error.
  - With I(manifests), the module first writes each rendered content to its path (creating directories,
    rewriting only files whose content differs), then validates those files. gpuforge keeps rendered
    manifests as controller artifacts; writing them all in one module call keeps rendering fast.
  - With neither I(paths) nor I(manifests) the module only checks that the Kubernetes version is supported.
  - Validation reads I(manifests) from their content, so check mode (which writes nothing) validates the same.
version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: Validates the manifests and reports the files it would write, without writing them.
options:
  paths:
    description: Manifest files to validate.
    type: list
    elements: path
    default: []
  manifests:
    description: Rendered manifests to write and then validate.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Destination file on the controller.
        type: path
        required: true
      content:
        description: YAML text (one or more documents).
        type: str
        required: true
  kubernetes_version:
    description:
      - Kubernetes version to validate against, C(major.minor) (a leading C(v) and a patch level are accepted).
      - Must be one kubernetes-validate ships schemas for and not older than I(minimum_version).
    type: str
    required: true
  minimum_version:
    description: Oldest Kubernetes version gpuforge supports (its manifests use APIs that are GA from there).
    type: str
    default: "1.30"
  strict:
    description: Use the strict schemas (unknown fields are errors).
    type: bool
    default: true
  crd_schema_dir:
    description:
      - Controller directory holding stored CRD schemas, one C(<group>_<version>_<Kind>.json) each.
      - When empty, custom resources get only their structural checks.
    type: path
    default: ""
requirements:
  - kubernetes-validate (python, on the controller)
  - jsonschema (python, on the controller; only when a stored CRD schema is used)
  - PyYAML
"""

EXAMPLES = r"""
- name: Validate the RDMA device plugin manifests for Kubernetes 1.33
  gpuforge.cluster.k8s_manifest_validate:
    paths:
      - artifacts/k8s/lab/rdma_shared_device_plugin/configmap.yaml
      - artifacts/k8s/lab/rdma_shared_device_plugin/daemonset.yaml
    kubernetes_version: "1.33"

- name: Write rendered manifests and validate them
  gpuforge.cluster.k8s_manifest_validate:
    manifests:
      - path: artifacts/k8s/lab/mpi_operator/namespace.yaml
        content: "{{ lookup('ansible.builtin.template', 'namespace.yaml.j2') }}"
    kubernetes_version: "1.30"

- name: Only check that the configured Kubernetes version is supported
  gpuforge.cluster.k8s_manifest_validate:
    kubernetes_version: "{{ gpuforge_k8s_version }}"
"""

RETURN = r"""
kubernetes_version:
  description: The major.minor version validated against.
  returned: always
  type: str
  sample: "1.33"
supported_versions:
  description: Kubernetes versions this controller can validate against.
  returned: always
  type: list
  elements: str
  sample: ["1.30", "1.31", "1.32", "1.33"]
written:
  description: Paths of I(manifests) whose content was (or in check mode would be) written.
  returned: always
  type: list
  elements: str
objects:
  description: One entry per validated object.
  returned: always
  type: list
  elements: dict
  sample:
    - path: artifacts/k8s/lab/mpi_operator/crd.yaml
      kind: CustomResourceDefinition
      name: mpijobs.kubeflow.org
      namespace: null
      validated_by: schema
    - path: artifacts/k8s/lab/openshift_gpu_operators/clusterpolicy.yaml
      kind: ClusterPolicy
      name: gpu-cluster-policy
      namespace: null
      validated_by: crd-schema
errors:
  description: "Validation errors, each C(<path>: <kind>/<name>: <message>)."
  returned: on failure
  type: list
  elements: str
"""

import json
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_k8s_structural import (
    check_object,
    crd_json_schema,
    embedded_pod_templates,
    error_location,
    has_check,
)

try:
    import yaml

    # libyaml's loader where PyYAML has it: the pure-Python one is about ten times slower on large files.
    SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    YAML_IMPORT_ERROR = None
except ImportError:
    YAML_IMPORT_ERROR = traceback.format_exc()

try:
    import kubernetes_validate
    from kubernetes_validate import utils as kv_utils

    KV_IMPORT_ERROR = None
except ImportError:
    KV_IMPORT_ERROR = traceback.format_exc()

try:
    import jsonschema

    JSONSCHEMA_IMPORT_ERROR = None
except ImportError:
    JSONSCHEMA_IMPORT_ERROR = traceback.format_exc()


def crd_schema_file(directory, obj):
    """Path of the stored schema for an object's apiVersion/kind (None for core kinds: no group)."""
    api_version = str(obj.get("apiVersion", ""))
    if "/" not in api_version:
        return None
    group, version = api_version.split("/", 1)
    return os.path.join(directory, f"{group}_{version}_{obj.get('kind')}.json")


def _major_minor(version):
    parts = str(version).lstrip("v").split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


def _version_key(version):
    major, minor = version.split(".")
    return int(major), int(minor)


class ManifestValidator:
    """Validate manifest files; collects errors instead of stopping at the first."""

    def __init__(self, module):
        self.module = module
        self.result = {"changed": False, "objects": [], "errors": []}
        self.crd_validators = {}

    def crd_validator(self, obj):
        """jsonschema validator of the stored CRD schema for obj, or None when none is stored."""
        directory = self.module.params["crd_schema_dir"]
        if directory and not os.path.isdir(directory):
            self.module.fail_json(msg=f"crd_schema_dir {directory} is not a directory", **self.result)
        path = crd_schema_file(directory, obj) if directory else None
        if path is None or not os.path.isfile(path):
            return None
        if path not in self.crd_validators:
            if JSONSCHEMA_IMPORT_ERROR:
                self.module.fail_json(
                    msg=missing_required_lib("jsonschema") + f" (needed to validate against {path})",
                    exception=JSONSCHEMA_IMPORT_ERROR,
                )
            try:
                with open(path, encoding="utf-8") as handle:
                    schema = crd_json_schema(json.load(handle))
                jsonschema.Draft7Validator.check_schema(schema)
            except (OSError, ValueError, jsonschema.SchemaError) as exc:
                self.module.fail_json(msg=f"cannot use the stored CRD schema {path}: {exc}", **self.result)
            self.crd_validators[path] = jsonschema.Draft7Validator(schema)
        return self.crd_validators[path]

    def crd_errors(self, validator, obj):
        errors = []
        for error in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]):
            errors.append(f"{error_location(error)}: {error.message} (stored CRD schema)")
        return errors

    def supported_versions(self, minimum):
        versions = {_major_minor(v) for v in kv_utils.all_versions()}
        return sorted((v for v in versions if v and _version_key(v) >= _version_key(minimum)), key=_version_key)

    def check_version(self):
        params = self.module.params
        minimum = _major_minor(params["minimum_version"])
        if minimum is None:
            self.module.fail_json(msg=f"minimum_version {params['minimum_version']!r} is not major.minor")
        supported = self.supported_versions(minimum)
        self.result["supported_versions"] = supported
        version = _major_minor(params["kubernetes_version"])
        if version not in supported:
            self.module.fail_json(
                msg=(
                    f"Unknown Kubernetes version {params['kubernetes_version']!r}: gpuforge validates against "
                    f"{', '.join(supported)} (schemas of kubernetes-validate {kubernetes_validate.__version__}, "
                    f"minimum {minimum})"
                ),
                **self.result,
            )
        self.result["kubernetes_version"] = version
        return version

    def load(self, path, content=None):
        try:
            if content is None:
                with open(path, encoding="utf-8") as handle:
                    content = handle.read()
            return [doc for doc in yaml.load_all(content, Loader=SAFE_LOADER) if doc is not None]
        except UnicodeError as exc:  # a binary file, or text that is not UTF-8
            self.result["errors"].append(f"{path}: cannot read YAML: not UTF-8 text ({exc.reason})")
            return []
        except (OSError, yaml.YAMLError) as exc:
            self.result["errors"].append(f"{path}: cannot read YAML: {exc}")
            return []

    def schema_errors(self, obj, version):
        try:
            kubernetes_validate.validate(obj, version, strict=self.module.params["strict"])
        except kubernetes_validate.ValidationError as exc:
            location = ".".join(str(p) for p in exc.path) or "(root)"
            return [f"{location}: {exc.message}"]
        except kubernetes_validate.SchemaNotFoundError:
            return None
        return []

    def validate_object(self, path, obj, version):
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
            self.result["errors"].append(f"{path}: document is not a Kubernetes object (apiVersion/kind)")
            return
        metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        label = f"{path}: {obj['kind']}/{metadata.get('name')}"
        validator = self.crd_validator(obj)
        if validator is not None or has_check(obj):
            errors, checks = [], []
            if validator is not None:
                errors += self.crd_errors(validator, obj)
                checks.append("crd-schema")
            if has_check(obj):
                errors += check_object(obj)
                checks.append("structural")
            for template in embedded_pod_templates(obj):
                errors += [f"{template['metadata']['name']}: {e}" for e in self.schema_errors(template, version) or []]
            validated_by = "+".join(checks)
        else:
            errors = self.schema_errors(obj, version)
            validated_by = "schema"
            if errors is None:
                errors = [
                    f"apiVersion {obj['apiVersion']} is not in the Kubernetes {version} schema and has no "
                    "stored CRD schema or gpuforge structural check"
                ]
        self.result["errors"].extend(f"{label}: {error}" for error in errors)
        self.result["objects"].append(
            {
                "path": path,
                "kind": obj["kind"],
                "name": metadata.get("name"),
                "namespace": metadata.get("namespace"),
                "validated_by": validated_by,
            }
        )

    def write(self, path, content):
        try:
            with open(path, encoding="utf-8") as handle:
                if handle.read() == content:
                    return
        except (OSError, UnicodeError):  # absent, unreadable or not text: it is (re)written
            pass
        self.result["changed"] = True
        self.result["written"].append(path)
        if self.module.check_mode:
            return
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(content)
        except UnicodeError as exc:
            self.module.fail_json(msg=f"cannot write {path}: its content is not text ({exc.reason})", **self.result)
        except OSError as exc:
            self.module.fail_json(msg=f"cannot write {path}: {exc}", **self.result)

    def run(self):
        version = self.check_version()
        self.result["written"] = []
        for manifest in self.module.params["manifests"]:
            self.write(manifest["path"], manifest["content"])
        sources = [(m["path"], m["content"]) for m in self.module.params["manifests"]]
        sources += [(path, None) for path in self.module.params["paths"]]
        for path, content in sources:
            errors_before = len(self.result["errors"])
            documents = self.load(path, content)
            if not documents and len(self.result["errors"]) == errors_before:
                self.module.warn(f"{path} holds no YAML document: nothing in it is validated or applied")
            for obj in documents:
                self.validate_object(path, obj, version)
        if self.result["errors"]:
            count = len(self.result["errors"])
            self.module.fail_json(
                msg=f"{count} manifest validation error(s): " + "; ".join(self.result["errors"]), **self.result
            )
        del self.result["errors"]
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "path", "default": []},
            "manifests": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {"path": {"type": "path", "required": True}, "content": {"type": "str", "required": True}},
            },
            "kubernetes_version": {"type": "str", "required": True},
            "minimum_version": {"type": "str", "default": "1.30"},
            "strict": {"type": "bool", "default": True},
            "crd_schema_dir": {"type": "path", "default": ""},
        },
        supports_check_mode=True,
    )
    if YAML_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMPORT_ERROR)
    if KV_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("kubernetes-validate"), exception=KV_IMPORT_ERROR)
    ManifestValidator(module).run()


if __name__ == "__main__":
    main()
