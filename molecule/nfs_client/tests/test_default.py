"""nfs_client: fstab entries for Dell EMC Ready Solutions for AI's shares, exports checked against a real NFS server,
no fake mount."""

import pytest

testinfra_hosts = [
    "ansible://nfs-client",
    "ansible://nfs-client-rhel9",
    "ansible://nfs-client-ubuntu2404",
    "ansible://nfs-client-ubuntu2204",
]

# The RHEL 9, Ubuntu 24.04 and 22.04 clients mount from the storage node of their OS (host_vars/), the other from
# nfs-storage.
SERVERS = {
    "nfs-client-rhel9": "nfs-storage-rhel9",
    "nfs-client-ubuntu2404": "nfs-storage-ubuntu2404",
    "nfs-client-ubuntu2204": "nfs-storage-ubuntu2204",
}


def _server(host):
    return SERVERS.get(host.backend.get_hostname(), "nfs-storage")


OPTIONS = "rw,hard,noatime,_netdev,nofail"
SHARES = [("/shared/home", "/srv/nfs/home"), ("/shared/apps", "/srv/nfs/apps")]


def _fstab(host):
    return [line.split() for line in host.file("/etc/fstab").content_string.splitlines() if line.strip()[:1] not in "#"]


# Each OS's own package names (roles/nfs_client/vars/<OS>.yml), installed by its own package manager.
PACKAGES = {
    "nfs-client": ["nfs-common", "netbase"],
    "nfs-client-rhel9": ["nfs-utils"],
    "nfs-client-ubuntu2404": ["nfs-common", "netbase"],
    "nfs-client-ubuntu2204": ["nfs-common", "netbase"],
}
# The Ubuntu releases' builds (vendor_facts/ubuntu-main/<release>.yml), as apt installed them from the lab's archive.
UBUNTU_NFS_COMMON = {"nfs-client-ubuntu2404": "1:2.6.4-3ubuntu5", "nfs-client-ubuntu2204": "1:2.6.1-1ubuntu1.2"}


def test_client_packages(host):
    name = host.backend.get_hostname()
    for package in PACKAGES[name]:
        assert host.package(package).is_installed, package
    if name.endswith("-rhel9"):
        # dnf installed it: the RPM database has it.
        assert host.run("rpm -q nfs-utils").rc == 0
    if name in UBUNTU_NFS_COMMON:
        assert host.package("nfs-common").version == UBUNTU_NFS_COMMON[name]


def test_nfs_client_target_enabled_and_active(host):
    target = host.service("nfs-client.target")
    assert target.is_enabled
    assert target.is_running


@pytest.mark.parametrize(("path", "export"), SHARES)
def test_fstab_entry(host, path, export):
    entries = [fields for fields in _fstab(host) if fields[1] == path]
    assert entries == [[f"{_server(host)}:{export}", path, "nfs", OPTIONS, "0", "0"]]


@pytest.mark.parametrize(("path", "export"), SHARES)
def test_systemd_mount_unit_generated_from_fstab(host, path, export):
    unit = path.strip("/").replace("/", "-") + ".mount"
    assert host.check_output(f"systemctl show -p What --value {unit}") == f"{_server(host)}:{export}"
    assert host.check_output(f"systemctl show -p Options --value {unit}") == OPTIONS


def test_server_exports_both_shares(host):
    # A real MOUNT-protocol call to nfs-ganesha on the storage node this client mounts from.
    server = _server(host)
    exports = [line.split()[0] for line in host.check_output(f"showmount -e --no-headers {server}").splitlines()]
    assert sorted(exports) == ["/srv/nfs/apps", "/srv/nfs/home"]
    assert "ready and waiting" in host.check_output(f"rpcinfo -T tcp {server} nfs 3")


@pytest.mark.parametrize(("path", "export"), SHARES)
def test_mount_point_exists_but_nothing_is_mounted(host, path, export):
    assert host.file(path).is_directory
    assert not host.mount_point(path).exists


def test_kernel_refuses_nfs(host):
    # The evidence behind nfs_client_mount_state: present in the lab: no nfs in the kernel's file system
    # list, and mount.nfs (with CAP_SYS_ADMIN) gets ENODEV from the kernel.
    assert "nfs" not in host.file("/proc/filesystems").content_string.split()
    result = host.run("mount /shared/home")
    assert result.rc == 32
    assert "No such device" in result.stderr
    assert not host.mount_point("/shared/home").exists
