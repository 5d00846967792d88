"""spectrum_scale_csi: CSIScaleOperator from the cluster facts, redacted secrets, static PV/PVC (IBM Redpaper
REDP-5610)."""

from conftest import load, run_scenario


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


LOCAL_WITHOUT_ID = {
    "primary_fs": "fs0",
    "gui_hosts": ["192.168.1.30"],
    "secret": "csisecret-local",
    "username": "csiadmin",
    "password": "fixture-local-secret",
}


def test_local_cluster_id_comes_from_the_scale_facts(tmp_path):
    extravars = {
        "gpuforge_k8s_enabled_addons": ["spectrum_scale_csi"],
        "spectrum_scale_csi_clusters": [LOCAL_WITHOUT_ID],
    }
    paths = run_scenario(tmp_path, "dgx1_edr", "kubernetes", "1.33", extravars)
    rendered = load(paths, tmp_path / "out" / "dgx1-edr")
    cr = rendered.get("CSIScaleOperator", "ibm-spectrum-scale-csi", "ibm-spectrum-scale-csi-driver")
    assert [cluster["id"] for cluster in cr["spec"]["clusters"]] == ["16217308676014575381"]


def test_cluster_without_id_and_without_facts_is_a_clear_error(render_error):
    message = render_error(
        "dgx1_edr",
        gpuforge_k8s_enabled_addons=["spectrum_scale_csi"],
        spectrum_scale_csi_clusters=[LOCAL_WITHOUT_ID],
        spectrum_scale_csi_facts_host="dgx02",
    )
    assert "has no id and dgx02 has no spectrum_scale facts" in message


def test_an_inventory_uid_wins_over_the_one_read_from_the_cluster(tmp_path):
    # The fixture's static volume UID comes from the facts (mmlsfs --uid on the first scale client); a site
    # that sets spectrum_scale_csi_filesystem_uids gets its own value.
    extravars = {
        "gpuforge_k8s_enabled_addons": ["spectrum_scale_csi"],
        "spectrum_scale_csi_filesystem_uids": {"ess3000_4M": "0A0B0C0D:01020304"},
    }
    paths = run_scenario(tmp_path, "dgx1_edr", "kubernetes", "1.33", extravars)
    rendered = load(paths, tmp_path / "out" / "dgx1-edr")
    pv = rendered.get("PersistentVolume", "adas-data-pv-ai-team")
    assert pv["spec"]["csi"]["volumeHandle"] == "16217308676014575381;0A0B0C0D:01020304;path=/gpfs/ess3000_4M/adas"


def test_a_static_volume_without_a_uid_is_a_clear_error(render_error):
    message = render_error(
        "dgx1_edr",
        gpuforge_k8s_enabled_addons=["spectrum_scale_csi"],
        spectrum_scale_csi_static_volumes=[
            {"name": "scratch", "filesystem": "fs9", "path": "/gpfs/fs9/scratch", "size": "1Ti", "namespaces": ["x"]}
        ],
    )
    assert "static volume scratch: no UID for file system fs9" in message
    assert "mmlsfs fs9 --uid" in message
