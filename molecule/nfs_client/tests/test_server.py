"""nfs_server on the storage nodes: nfs-ganesha from Debian on nfs-storage, from the CentOS Storage SIG's repository
through dnf on nfs-storage-rhel9, from Ubuntu 24.04's and 22.04's universe through apt on nfs-storage-ubuntu2404 and
nfs-storage-ubuntu2204, serving the role's exports (Dell EMC Ready Solutions for AI's shares)."""

import re

import pytest

testinfra_hosts = [
    "ansible://nfs-storage",
    "ansible://nfs-storage-rhel9",
    "ansible://nfs-storage-ubuntu2404",
    "ansible://nfs-storage-ubuntu2204",
]

# Each OS's packages (roles/nfs_server/vars/<OS>.yml): on RHEL, nfs-utils carries showmount.
PACKAGES = {
    "nfs-storage": ["nfs-ganesha", "nfs-ganesha-vfs", "netbase"],
    "nfs-storage-rhel9": ["nfs-ganesha", "nfs-ganesha-vfs", "nfs-utils"],
    "nfs-storage-ubuntu2404": ["nfs-ganesha", "nfs-ganesha-vfs", "netbase"],
    "nfs-storage-ubuntu2204": ["nfs-ganesha", "nfs-ganesha-vfs", "netbase"],
}
# Ubuntu 24.04's and 22.04's builds (vendor_facts/ubuntu/noble.yml, jammy.yml), as apt installed them from the lab's
# Ubuntu archive subset.
UBUNTU_VERSIONS = {
    "nfs-storage-ubuntu2404": {
        "nfs-ganesha": "4.3-8ubuntu1",
        "nfs-ganesha-vfs": "4.3-8ubuntu1",
        "libntirpc4.3t64": "4.3-3.1build2",
    },
    "nfs-storage-ubuntu2204": {
        "nfs-ganesha": "3.5-1ubuntu1",
        "nfs-ganesha-vfs": "3.5-1ubuntu1",
        "libntirpc3.5": "3.5-2",
    },
}


def test_ganesha_installed_enabled_and_running(host):
    name = host.backend.get_hostname()
    for package in PACKAGES[name]:
        assert host.package(package).is_installed, package
    for package, version in UBUNTU_VERSIONS.get(name, {}).items():
        assert host.package(package).version == version, package
    service = host.service("nfs-ganesha")
    assert service.is_enabled
    assert service.is_running


def test_rhel_ganesha_comes_from_the_storage_sig_repository_signed(host):
    if host.backend.get_hostname() != "nfs-storage-rhel9":
        pytest.skip("Debian's and Ubuntu's nfs-ganesha come from their archives (apt)")
    # The builds the registry records for the Storage SIG's nfsganesha-5 (vendor_facts/centos-storage-sig/
    # nfsganesha5-el9.yml), installed by dnf from the repository the role added, gpgcheck on.
    versions = host.check_output("rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE}\\n' nfs-ganesha nfs-ganesha-vfs libntirpc")
    assert versions.splitlines() == ["nfs-ganesha 5.9-1.el9s", "nfs-ganesha-vfs 5.9-1.el9s", "libntirpc 5.8-1.el9s"]
    repo = host.file("/etc/yum.repos.d/nfs-ganesha.repo").content_string
    assert "/centos-sigs/9-stream/storage/x86_64/nfsganesha-5/" in repo
    assert re.search(r"^gpgcheck\s*=\s*1$", repo, re.M)
    for name in ("nfs-ganesha", "nfs-ganesha-vfs", "libntirpc"):
        assert host.check_output(f"dnf -q repoquery --installed --qf '%{{from_repo}}' {name}") == "nfs-ganesha", name
        # rpmsign's header signature, which dnf checked against the key the role imported.
        assert host.check_output(f"rpm -q --qf '%{{RSAHEADER:pgpsig}}' {name}").startswith("RSA/SHA256, "), name


def test_each_export_grants_the_lab_network_read_write_with_root_squash(host):
    config = host.file("/etc/ganesha/ganesha.conf").content_string
    exports = re.findall(r"EXPORT \{(.*?)\n\}", config, re.S)
    assert [re.search(r"Path = ([^;]+);", block).group(1) for block in exports] == ["/srv/nfs/home", "/srv/nfs/apps"]
    for block in exports:
        assert "Access_Type = None;" in block
        client = dict(re.findall(r"(\w+) = ([^;]+);", re.search(r"CLIENT \{(.*?)\}", block, re.S).group(1)))
        assert client == {"Clients": "10.242.0.0/24", "Access_Type": "RW", "Squash": "Root_Squash"}


def test_the_server_itself_lists_every_export(host):
    name = host.backend.get_hostname()
    served = sorted(line.split()[0] for line in host.check_output(f"showmount --no-headers -e {name}").splitlines())
    assert served == ["/srv/nfs/apps", "/srv/nfs/home"]
