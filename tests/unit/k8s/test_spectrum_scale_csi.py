"""spectrum_scale_csi: CSIScaleOperator from the cluster facts, redacted secrets, static PV/PVC (seed 001)."""


def test_custom_resource_from_the_seed_clusters(dgx1_k8s):
    cr = dgx1_k8s.get("CSIScaleOperator", "ibm-spectrum-scale-csi", "ibm-spectrum-scale-csi-driver")
    local, remote = cr["spec"]["clusters"]
    assert local == {
        "id": "16217308676014575381",
        "primary": {"primaryFs": "fs0", "primaryFset": "csifset"},
        "restApi": [{"guiHost": "192.168.1.30"}],
        "secrets": "csisecret-local",
        "secureSslMode": False,
    }
    assert (remote["id"], remote["restApi"], remote["secrets"]) == (
        "215057217487177715",
        [{"guiHost": "192.168.1.52"}],
        "csisecret-remote",
    )
    for field in ("attacherNodeSelector", "provisionerNodeSelector", "pluginNodeSelector"):
        assert cr["spec"][field] == [{"key": "scale", "value": "true"}]


def test_secrets_artifact_is_redacted(dgx1_k8s):
    text = (dgx1_k8s.root / "spectrum_scale_csi" / "secrets.redacted.yaml").read_text()
    assert "fixture-local-secret" not in text and "fixture-remote-secret" not in text
    secret = dgx1_k8s.get("Secret", "csisecret-local", "ibm-spectrum-scale-csi-driver")
    assert secret["metadata"]["labels"] == {"product": "ibm-spectrum-scale-csi"}
    assert secret["stringData"] == {"username": "REDACTED", "password": "REDACTED"}


def test_static_pv_volume_handle_and_per_namespace_claims(dgx1_k8s):
    for ns in ("ai-team", "benchmarks"):
        pv = dgx1_k8s.get("PersistentVolume", f"adas-data-pv-{ns}")
        assert pv["spec"]["csi"] == {
            "driver": "spectrumscale.csi.ibm.com",
            "volumeHandle": "16217308676014575381;099B6A7A:5EB99743;path=/gpfs/ess3000_4M/adas",
        }
        assert pv["spec"]["claimRef"] == {"namespace": ns, "name": "adas-data-pvc"}
        assert pv["metadata"]["labels"] == {"type": "data", "dept": "adas"}
        pvc = dgx1_k8s.get("PersistentVolumeClaim", "adas-data-pvc", ns)
        assert pvc["spec"]["storageClassName"] == "static"
        assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
        assert pvc["spec"]["selector"]["matchLabels"] == {"type": "data", "dept": "adas"}
