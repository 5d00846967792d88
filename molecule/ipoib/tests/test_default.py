"""ipoib: persistent configuration for mlx5_1 port 1 (found through ibdev2netdev) and ib3 by name, through each OS
shape's backend: ifupdown (Debian 12), NetworkManager keyfiles (RHEL 9), netplan (Ubuntu 22.04 and 24.04)."""

import configparser
import ipaddress

import pytest
import yaml


def _shape(host):
    return host.backend.get_hostname().removeprefix("ipoib-")


def _only_on(host, *shapes):
    if _shape(host) not in shapes:
        pytest.skip(f"{_shape(host)}: not its backend")


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
    _only_on(host, "debian12")
    assert host.package("ifupdown").is_installed
    assert "source /etc/network/interfaces.d/*" in host.file("/etc/network/interfaces").content_string.splitlines()


def test_ib1_stanza_has_lab_address_datagram_and_2044(host):
    _only_on(host, "debian12")
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
    _only_on(host, "debian12")
    assert _stanza(host.file("/etc/network/interfaces.d/ib3").content_string) == [
        "auto ib3",
        "iface ib3 inet static",
        "address 10.10.13.21/24",
        "mtu 65520",
        "pre-up echo connected > /sys/class/net/ib3/mode",
    ]


def test_ifupdown_parses_the_stanzas(host):
    _only_on(host, "debian12")
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
    assert not host.file("/etc/NetworkManager/system-connections/gpuforge-ipoib-ib9.nmconnection").exists
    assert not host.file("/etc/netplan/60-gpuforge-ipoib-ib9.yaml").exists


# RHEL 9: NetworkManager from the lab's RHEL 9 BaseOS through dnf, one keyfile per interface, root-only (NetworkManager
# ignores keyfiles others can read).
KEYFILES = "/etc/NetworkManager/system-connections"


def _keyfile(host, netdev):
    conf = host.file(f"{KEYFILES}/gpuforge-ipoib-{netdev}.nmconnection")
    assert (conf.user, conf.group, conf.mode) == ("root", "root", 0o600)
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(conf.content_string)
    return {section: dict(parser[section]) for section in parser.sections()}


def test_networkmanager_installed_by_dnf(host):
    _only_on(host, "rhel9")
    assert host.run("rpm -q NetworkManager").rc == 0


@pytest.mark.parametrize(("netdev", "mode", "mtu"), [("ib1", "datagram", "2044"), ("ib3", "connected", "65520")])
def test_networkmanager_keyfile(host, netdev, mode, mtu):
    _only_on(host, "rhel9")
    address = _lab_ipoib_address(host) if netdev == "ib1" else "10.10.13.21/24"
    assert _keyfile(host, netdev) == {
        "connection": {
            "id": f"gpuforge-ipoib-{netdev}",
            "type": "infiniband",
            "interface-name": netdev,
            "autoconnect": "true",
        },
        "infiniband": {"mtu": mtu, "transport-mode": mode},
        "ipv4": {"method": "manual", "address1": address},
        "ipv6": {"method": "disabled"},
    }


# Ubuntu: netplan.io from the lab's Ubuntu archive subset through apt; netplan itself reads the files back.
@pytest.mark.parametrize(("netdev", "mode", "mtu"), [("ib1", "datagram", 2044), ("ib3", "connected", 65520)])
def test_netplan_reads_the_interface(host, netdev, mode, mtu):
    _only_on(host, "ubuntu2204", "ubuntu2404")
    assert host.package("netplan.io").is_installed
    conf = host.file(f"/etc/netplan/60-gpuforge-ipoib-{netdev}.yaml")
    assert (conf.user, conf.mode) == ("root", 0o600)
    parsed = yaml.safe_load(host.check_output(f"netplan get ethernets.{netdev}"))
    address = _lab_ipoib_address(host) if netdev == "ib1" else "10.10.13.21/24"
    assert parsed["addresses"] == [address]
    assert parsed["mtu"] == mtu
    assert parsed["infiniband-mode"] == mode
    assert parsed["dhcp4"] is False


def test_netplan_generates_the_backend_configuration(host):
    _only_on(host, "ubuntu2204", "ubuntu2404")
    # netplan generate renders every file under /etc/netplan for its renderer (systemd-networkd by default); it
    # refuses a file it cannot parse.
    host.run_expect([0], "netplan generate")
    network = host.file("/run/systemd/network/10-netplan-ib1.network").content_string
    assert "Name=ib1" in network
    assert f"Address={_lab_ipoib_address(host)}" in network
