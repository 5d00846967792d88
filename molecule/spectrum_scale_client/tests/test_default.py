"""spectrum_scale_client: each DGX-1 client (Debian 12, RHEL 9, Ubuntu 24.04, Ubuntu 22.04) joined the cluster,
carries IBM Redpaper REDP-5610's values, runs and mounts."""

import os
from pathlib import Path

import pytest
import yaml

testinfra_hosts = ["ansible://spectrum_scale_clients"]

_PLATFORMS = yaml.safe_load(
    (Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "molecule.yml").read_text(encoding="utf-8")
)["platforms"]
CLIENTS = sorted(p["name"] for p in _PLATFORMS if "spectrum_scale_clients" in p["groups"])
STORAGE = "scale-storage"

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
    if host.system_info.distribution == "rhel":
        # rpm splits version and release; IBM's RPMs come from the gpfs_rpms/ repository with their signature checked.
        assert host.check_output(f"rpm -q --qf '%{{VERSION}}-%{{RELEASE}}' {name}") == version
        assert host.check_output(f"dnf -q repoquery --installed --qf '%{{from_repo}}' {name}") == "gpuforge-gpfs"
        assert host.check_output(f"rpm -q --qf '%{{RSAHEADER:pgpsig}}' {name}").startswith("RSA/SHA256, ")
        assert host.file("/etc/yum.repos.d/gpuforge-gpfs.repo").contains("^gpgcheck = 1")
    else:
        assert host.package(name).version == version
        assert "http://mirror/gpfs/5.1.9.3/debian12" in host.check_output(f"apt-cache policy {name}")


def test_node_is_cluster_member_with_client_license(host):
    out = host.check_output(f"{MM}/mmlscluster")
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    # The storage node made the cluster; the clients joined one at a time (throttle 1), in no order the test relies on.
    assert rows[0][1] == STORAGE
    assert sorted(row[1] for row in rows[1:]) == CLIENTS
    node_class = host.check_output(f"{MM}/mmlsnodeclass dgx").splitlines()[-1].split()
    assert node_class[0] == "dgx" and sorted(node_class[1].split(",")) == CLIENTS


def test_mmlsconfig_has_seed_values(host):
    out = host.check_output(f"{MM}/mmlsconfig")
    assert _stanza(out, "dgx") == SEED_DGX
    # verbsPorts is the node's own: every Active port of the DGX-1's four EDR HCAs.
    assert _stanza(out, host.backend.get_hostname()) == {"verbsPorts": "mlx5_0/1 mlx5_1/1 mlx5_2/1 mlx5_3/1"}
    common = _stanza(out, "common")
    assert common["maxMBpS"] == "20000"
    assert common["enforceFilesetQuotaOnRoot"] == "yes"
    assert common["controlSetxattrImmutableSELinux"] == "yes"


def test_portability_layer_stamped_for_running_kernel(host):
    kernel = host.check_output("uname -r")
    assert host.file(f"/var/lib/gpuforge/gpfs-gpl-{kernel}-5.1.9-3").exists


def test_daemon_active(host):
    rows = [line.split() for line in host.check_output(f"{MM}/mmgetstate -a").splitlines()[3:]]
    assert sorted(rows, key=lambda row: int(row[0])) == rows
    assert [row[0] for row in rows] == [str(number) for number in range(1, len(CLIENTS) + 2)]
    assert sorted(row[1] for row in rows) == sorted([STORAGE, *CLIENTS])
    assert {row[2] for row in rows} == {"active"}


def test_remote_filesystem_mounted(host):
    out = host.check_output(f"{MM}/mmlsmount ess3000_4M -L")
    assert out.splitlines()[0].startswith(
        f"File system ess3000_4M (ess3000.bda.scale.ibm.com:ess3000_4M) is mounted on {len(CLIENTS)}"
    )
    assert sorted(line.split()[1] for line in out.splitlines()[1:] if line.strip()) == CLIENTS
    assert host.file("/gpfs/ess3000_4M").is_directory
