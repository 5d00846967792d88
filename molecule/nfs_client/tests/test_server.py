"""nfs_server on the storage node: nfs-ganesha from Debian, serving the role's exports (Dell EMC Ready Solutions for
AI's shares)."""

import re

testinfra_hosts = ["ansible://nfs-storage"]


def test_ganesha_installed_enabled_and_running(host):
    for name in ("nfs-ganesha", "nfs-ganesha-vfs", "netbase"):
        assert host.package(name).is_installed
    service = host.service("nfs-ganesha")
    assert service.is_enabled
    assert service.is_running


def test_each_export_grants_the_lab_network_read_write_with_root_squash(host):
    config = host.file("/etc/ganesha/ganesha.conf").content_string
    exports = re.findall(r"EXPORT \{(.*?)\n\}", config, re.S)
    assert [re.search(r"Path = ([^;]+);", block).group(1) for block in exports] == ["/srv/nfs/home", "/srv/nfs/apps"]
    for block in exports:
        assert "Access_Type = None;" in block
        client = dict(re.findall(r"(\w+) = ([^;]+);", re.search(r"CLIENT \{(.*?)\}", block, re.S).group(1)))
        assert client == {"Clients": "10.242.0.0/24", "Access_Type": "RW", "Squash": "Root_Squash"}


def test_the_server_itself_lists_every_export(host):
    served = sorted(line.split()[0] for line in host.check_output("showmount --no-headers -e nfs-storage").splitlines())
    assert served == ["/srv/nfs/apps", "/srv/nfs/home"]
