"""k8s_manifest_validate: writes manifests, validates core kinds by schema and CRs structurally."""

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import k8s_manifest_validate

NODE = "apiVersion: v1\nkind: Node\nmetadata:\n  name: dgx01\n  labels: {scale: 'true'}\n"
SCC = """apiVersion: security.openshift.io/v1
kind: SecurityContextConstraints
metadata: {name: scc-for-mpi}
allowHostDirVolumePlugin: false
allowHostIPC: false
allowHostNetwork: false
allowHostPID: false
allowHostPorts: false
allowPrivilegedContainer: true
defaultAddCapabilities: [IPC_LOCK]
runAsUser: {type: MustRunAsRange}
seLinuxContext: {type: MustRunAs}
fsGroup: {type: MustRunAs}
supplementalGroups: {type: RunAsAny}
volumes: [emptyDir]
"""


@pytest.fixture
def run_module(ansible_module):
    def run(check_mode=False, **args):
        args.setdefault("kubernetes_version", "1.33")
        return ansible_module(k8s_manifest_validate, args, expect_failure=None, check_mode=check_mode)

    return run


def test_writes_and_validates(run_module, tmp_path):
    path = tmp_path / "labels" / "nodes.yaml"
    result = run_module(manifests=[{"path": str(path), "content": NODE}])
    assert result["changed"] is True and result["written"] == [str(path)]
    assert path.read_text() == NODE
    assert result["objects"] == [
        {"path": str(path), "kind": "Node", "name": "dgx01", "namespace": None, "validated_by": "schema"}
    ]
    again = run_module(manifests=[{"path": str(path), "content": NODE}])
    assert again["changed"] is False and again["written"] == []


def test_check_mode_writes_nothing_but_validates(run_module, tmp_path):
    path = tmp_path / "x.yaml"
    result = run_module(check_mode=True, manifests=[{"path": str(path), "content": NODE.replace("labels", "lables")}])
    assert result["failed"] is True and not path.exists()
    assert "Additional properties are not allowed ('lables' was unexpected)" in result["msg"]


def test_schema_and_structural_errors_are_collected(run_module, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SCC + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 1}\n")
    result = run_module(paths=[str(bad)])
    assert result["failed"] is True
    assert result["msg"].startswith("2 manifest validation error(s): ")
    assert f"{bad}: SecurityContextConstraints/scc-for-mpi: allowPrivilegedContainer: must be false" in result["errors"]
    assert any(e.startswith(f"{bad}: ConfigMap/x: data.a: 1 is not of type 'string'") for e in result["errors"])


def test_unknown_kind_and_unreadable_yaml(run_module, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\n[unclosed\n")
    result = run_module(paths=[str(path)])
    assert result["failed"] is True
    assert result["errors"][0].startswith(f"{path}: cannot read YAML")


def test_unknown_kubernetes_version(run_module):
    result = run_module(kubernetes_version="1.24")
    assert result["failed"] is True
    assert result["msg"].startswith("Unknown Kubernetes version '1.24': gpuforge validates against 1.30, 1.31,")
    assert result["supported_versions"][-1] == "1.37"
    assert run_module(kubernetes_version="v1.31.4")["kubernetes_version"] == "1.31"
