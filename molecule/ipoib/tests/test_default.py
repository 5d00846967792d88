"""ipoib: persistent ifupdown configuration for mlx5_1 port 1 (found through ibdev2netdev) and ib3 by name."""

import ipaddress

import pytest


def _lab_ipoib_address(host):
    """10.10.11.<last octet of the node's lab address>/24 (inventories/lab/group_vars/all/ipoib_nfs.yml)."""
    route = host.check_output("ip -4 -o route get 10.242.0.2").split()
    source = ipaddress.ip_address(route[route.index("src") + 1])
    return f"10.10.11.{str(source).rsplit('.', 1)[1]}/24"


def _stanza(text):
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_ibdev2netdev_maps_mlx5_1_to_ib1(host):
    assert "mlx5_1 port 1 ==> ib1 (Up)" in host.check_output("ibdev2netdev").splitlines()


def test_ifupdown_installed_and_sources_interfaces_d(host):
    assert host.package("ifupdown").is_installed
    assert "source /etc/network/interfaces.d/*" in host.file("/etc/network/interfaces").content_string.splitlines()


def test_ib1_stanza_has_lab_address_datagram_and_2044(host):
    conf = host.file("/etc/network/interfaces.d/ib1")
    assert conf.mode == 0o644
    assert "# IPoIB ib1 (mlx5_1 port 1)" in conf.content_string
    assert _stanza(conf.content_string) == [
        "auto ib1",
        "iface ib1 inet static",
        f"address {_lab_ipoib_address(host)}",
        "mtu 2044",
        "pre-up echo datagram > /sys/class/net/ib1/mode",
    ]


def test_ib3_by_name_connected_mode(host):
    assert _stanza(host.file("/etc/network/interfaces.d/ib3").content_string) == [
        "auto ib3",
        "iface ib3 inet static",
        "address 10.10.13.21/24",
        "mtu 65520",
        "pre-up echo connected > /sys/class/net/ib3/mode",
    ]


def test_ifupdown_parses_the_stanzas(host):
    # ifquery reads the same files ifup would and prints the options it understood (CIDR split up).
    parsed = dict(line.split(": ", 1) for line in host.check_output("ifquery ib1").splitlines())
    address = _lab_ipoib_address(host)
    assert parsed["address"] == address.split("/")[0]
    assert parsed["netmask"] == "255.255.255.0"
    assert parsed["mtu"] == "2044"
    assert parsed["pre-up"] == "echo datagram > /sys/class/net/ib1/mode"
    assert set(host.check_output("ifquery --list").split()) >= {"ib1", "ib3"}


@pytest.mark.parametrize("netdev", ["ib1", "ib3"])
def test_not_brought_up_in_the_lab(host, netdev):
    # The lab HCAs are simulated: no kernel netdev exists, so nothing was (or could be) brought up,
    # and the missing-device side effect wrote no file.
    assert not host.file(f"/sys/class/net/{netdev}").exists
    assert not host.file("/etc/network/interfaces.d/ib9").exists
