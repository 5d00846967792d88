"""k8s_manifest_validate: writes manifests, validates core kinds by schema and CRs structurally."""

import k8s_manifest_validate
import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

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


class Exit(Exception):
    pass


def run(monkeypatch, check_mode=False, **args):
    args.setdefault("kubernetes_version", "1.33")
    args["_ansible_check_mode"] = check_mode
    result = {}

    def finish(self, **kwargs):
        result.update(kwargs)
        raise Exit

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", finish)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", lambda self, **kw: finish(self, failed=True, **kw))
    with patch_module_args(args), pytest.raises(Exit):
        k8s_manifest_validate.main()
    return result


def test_writes_and_validates(monkeypatch, tmp_path):
    path = tmp_path / "labels" / "nodes.yaml"
    result = run(monkeypatch, manifests=[{"path": str(path), "content": NODE}])
    assert result["changed"] is True and result["written"] == [str(path)]
    assert path.read_text() == NODE
    assert result["objects"] == [
        {"path": str(path), "kind": "Node", "name": "dgx01", "namespace": None, "validated_by": "schema"}
    ]
    again = run(monkeypatch, manifests=[{"path": str(path), "content": NODE}])
    assert again["changed"] is False and again["written"] == []


def test_check_mode_writes_nothing_but_validates(monkeypatch, tmp_path):
    path = tmp_path / "x.yaml"
    result = run(
        monkeypatch, check_mode=True, manifests=[{"path": str(path), "content": NODE.replace("labels", "lables")}]
    )
    assert result["failed"] is True and not path.exists()
    assert "Additional properties are not allowed ('lables' was unexpected)" in result["msg"]


def test_schema_and_structural_errors_are_collected(monkeypatch, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SCC + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 1}\n")
    result = run(monkeypatch, paths=[str(bad)])
    assert result["failed"] is True
    assert result["msg"].startswith("2 manifest validation error(s): ")
    assert f"{bad}: SecurityContextConstraints/scc-for-mpi: allowPrivilegedContainer: must be false" in result["errors"]
    assert any(e.startswith(f"{bad}: ConfigMap/x: data.a: 1 is not of type 'string'") for e in result["errors"])


def test_unknown_kind_and_unreadable_yaml(monkeypatch, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\n[unclosed\n")
    result = run(monkeypatch, paths=[str(path)])
    assert result["failed"] is True
    assert result["errors"][0].startswith(f"{path}: cannot read YAML")


def test_unknown_kubernetes_version(monkeypatch):
    result = run(monkeypatch, kubernetes_version="1.24")
    assert result["failed"] is True
    assert result["msg"].startswith("Unknown Kubernetes version '1.24': gpuforge validates against 1.30, 1.31,")
    assert result["supported_versions"][-1] == "1.37"
    assert run(monkeypatch, kubernetes_version="v1.31.4")["kubernetes_version"] == "1.31"
