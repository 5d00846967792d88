"""spectrum_scale_client: the DGX-1 client joined the cluster, carries IBM Redpaper REDP-5610's values, runs and
mounts."""

import pytest

testinfra_hosts = ["ansible://scale-client"]

SEED_DGX = {
    "pagepool": "128G",
    "workerThreads": "1024",
    "ignorePrefetchLUNCount": "yes",
    "maxFilesToCache": "1M",
    "maxStatCache": "1M",
    "subnets": "10.10.11.0/ess3000.bda.scale.ibm.com;SpectrumScale.ocp4.scale.ibm.com",
    "verbsRdma": "enable",
    "verbsRdmaSend": "yes",
}
MM = "/usr/lpp/mmfs/bin"


def _stanza(text, name):
    lines = text.splitlines()
    start = lines.index(f"[{name}]") + 1
    values = {}
    for line in lines[start:]:
        if line.startswith("[") or not line.strip():
            break
        key, _, value = line.partition(" ")
        values[key] = value
    return values


@pytest.mark.parametrize(
    ("name", "version"),
    [("gpfs.base", "5.1.9-3"), ("gpfs.gpl", "5.1.9-3"), ("gpfs.gskit", "8.0.55-19.1"), ("gpfs.docs", "5.1.9-3")],
)
def test_packages_pinned_from_lab_repo(host, name, version):
    assert host.package(name).version == version


def test_node_is_cluster_member_with_client_license(host):
    out = host.check_output(f"{MM}/mmlscluster")
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[1] for row in rows] == ["scale-storage", "scale-client"]
    assert host.check_output(f"{MM}/mmlsnodeclass dgx").splitlines()[-1].split() == ["dgx", "scale-client"]


def test_mmlsconfig_has_seed_values(host):
    out = host.check_output(f"{MM}/mmlsconfig")
    assert _stanza(out, "dgx") == SEED_DGX
    # verbsPorts is the node's own: every Active port of the DGX-1's four EDR HCAs.
    assert _stanza(out, "scale-client") == {"verbsPorts": "mlx5_0/1 mlx5_1/1 mlx5_2/1 mlx5_3/1"}
    common = _stanza(out, "common")
    assert common["maxMBpS"] == "20000"
    assert common["enforceFilesetQuotaOnRoot"] == "yes"
    assert common["controlSetxattrImmutableSELinux"] == "yes"


def test_portability_layer_stamped_for_running_kernel(host):
    kernel = host.check_output("uname -r")
    assert host.file(f"/var/lib/gpuforge/gpfs-gpl-{kernel}-5.1.9-3").exists


def test_daemon_active(host):
    rows = [line.split() for line in host.check_output(f"{MM}/mmgetstate -a").splitlines()[3:]]
    assert rows == [["1", "scale-storage", "active"], ["2", "scale-client", "active"]]


def test_remote_filesystem_mounted(host):
    out = host.check_output(f"{MM}/mmlsmount ess3000_4M -L")
    assert out.splitlines()[0].startswith(
        "File system ess3000_4M (ess3000.bda.scale.ibm.com:ess3000_4M) is mounted on 1"
    )
    assert out.splitlines()[1].split()[1] == "scale-client"
    assert host.file("/gpfs/ess3000_4M").is_directory
