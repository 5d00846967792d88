"""ipoib per OS: port-to-netdev mapping, config file paths and the netplan / NetworkManager / ifupdown renders."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fabric_role_vars import ROOT, render, render_file

ROLE_VARS = yaml.safe_load((ROOT / "roles" / "ipoib" / "vars" / "main.yml").read_text(encoding="utf-8"))
IBDEV2NETDEV = "mlx5_0 port 1 ==> ib0 (Up)\nmlx5_1 port 1 ==> ib1 (Up)\nmlx5_2 port 1 ==> ib2 (Down)\n"
RDMA_LINK = (
    "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ibp12s0\n"
    "link mlx5_1/1 state ACTIVE physical_state LINK_UP netdev ibp75s0\n"
)
REDP5610 = {"hca": "mlx5_1", "port": 1, "address": "10.10.11.21/24"}


def _tools(ibdev2netdev=(0, IBDEV2NETDEV), rdma_link=(127, "")):
    """What the role's one command_reads run of both tools registers (rc, stdout of each)."""
    return {
        "outputs": {
            "ibdev2netdev": {"rc": ibdev2netdev[0], "stdout": ibdev2netdev[1]},
            "rdma_link": {"rc": rdma_link[0], "stdout": rdma_link[1]},
        }
    }


def _vars(item, **extra):
    return {**ROLE_VARS, "item": item, "ipoib_port_tools": _tools(), **extra}


def test_ibdev2netdev_map():
    ports = render("ipoib", "Debian", "{{ ipoib_port_netdevs }}", **_vars(REDP5610))
    assert ports == {"mlx5_0 port 1": "ib0", "mlx5_1 port 1": "ib1", "mlx5_2 port 1": "ib2"}


def test_rdma_link_fallback_without_ofed():
    extra = _vars(REDP5610, ipoib_port_tools=_tools(ibdev2netdev=(127, ""), rdma_link=(0, RDMA_LINK)))
    assert render("ipoib", "RedHat", "{{ ipoib_item_netdev }}", **extra) == "ibp75s0"


# What the mlnx_ofed role registered earlier in the same run (site.yml): infiniband_facts with ibdev2netdev's devices.
SAME_RUN_READ = {
    "ansible_facts": {
        "infiniband": {
            "hcas": [
                {"name": f"mlx5_{n}", "ports": [{"port": 1, "state": "Active", "netdev": f"ib{n}"}]} for n in range(3)
            ]
        }
    }
}


def test_the_same_run_read_stands_for_ibdev2netdev():
    extra = _vars(REDP5610, mlnx_ofed_infiniband=SAME_RUN_READ, ipoib_port_tools={"skipped": True})
    ports = render("ipoib", "Debian", "{{ ipoib_port_netdevs }}", **extra)
    assert ports == {"mlx5_0 port 1": "ib0", "mlx5_1 port 1": "ib1", "mlx5_2 port 1": "ib2"}
    assert render("ipoib", "Debian", "{{ ipoib_item_netdev }}", **extra) == "ib1"


@pytest.mark.parametrize(
    ("same_run", "runs_ibdev2netdev"),
    [
        ({}, True),
        ({"mlnx_ofed_infiniband": {"skipped": True}}, True),
        # mlnx_ofed read the ports without ibdev2netdev (no devices): the role runs its own tools.
        ({"mlnx_ofed_infiniband": {"ansible_facts": {"infiniband": {"hcas": [{"name": "mlx5_0", "ports": [{}]}]}}}},
         True),
        ({"mlnx_ofed_infiniband": SAME_RUN_READ}, False),
    ],
)  # fmt: skip
def test_ibdev2netdev_runs_only_without_a_same_run_read(same_run, runs_ibdev2netdev):
    from gpu_stack_render import RoleRender

    role = RoleRender("ipoib", "debian12", ipoib_interfaces=[REDP5610], **same_run)
    assert all(role.conditions("resolve.yml", "Map HCA ports to network devices")) is runs_ibdev2netdev


def test_name_wins_over_hca():
    assert (
        render("ipoib", "Debian", "{{ ipoib_item_netdev }}", **_vars({"name": "ib3", "address": "10.10.13.1/24"}))
        == "ib3"
    )


def test_unknown_port_resolves_to_nothing():
    assert (
        render("ipoib", "Debian", "{{ ipoib_item_netdev }}", **_vars({"hca": "mlx5_7", "address": "10.0.0.1/24"})) == ""
    )


@pytest.mark.parametrize(
    ("os_name", "path", "mode"),
    [
        ("Debian", "/etc/network/interfaces.d/ib1", "0644"),
        ("Ubuntu", "/etc/netplan/60-gpuforge-ipoib-ib1.yaml", "0600"),
        ("RedHat", "/etc/NetworkManager/system-connections/gpuforge-ipoib-ib1.nmconnection", "0600"),
    ],
)
def test_config_file_per_os(os_name, path, mode):
    assert render("ipoib", os_name, "{{ ipoib_item_config_file }}", **_vars(REDP5610)) == path
    assert render("ipoib", os_name, "{{ ipoib_config_mode }}") == mode


def test_netplan_render_ubuntu():
    text = render_file("ipoib", "Ubuntu", "netplan.yaml.j2", **_vars(REDP5610))
    assert yaml.safe_load(text) == {
        "network": {
            "version": 2,
            "ethernets": {
                "ib1": {
                    "dhcp4": False,
                    "dhcp6": False,
                    "addresses": ["10.10.11.21/24"],
                    "mtu": 2044,
                    "infiniband-mode": "datagram",
                }
            },
        }
    }


def test_nmconnection_render_rhel_connected():
    item = {"name": "ib0", "address": "10.10.11.1/24", "mode": "connected", "mtu": 65520}
    text = render_file("ipoib", "RedHat", "nmconnection.j2", **_vars(item))
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
        elif "=" in line and current is not None:
            key, value = line.split("=", 1)
            current[key] = value
    assert sections == {
        "connection": {
            "id": "gpuforge-ipoib-ib0",
            "type": "infiniband",
            "interface-name": "ib0",
            "autoconnect": "true",
        },
        "infiniband": {"mtu": "65520", "transport-mode": "connected"},
        "ipv4": {"method": "manual", "address1": "10.10.11.1/24"},
        "ipv6": {"method": "disabled"},
    }


def test_ifupdown_render_debian():
    text = render_file("ipoib", "Debian", "ifupdown.j2", **_vars(REDP5610))
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "auto ib1",
        "iface ib1 inet static",
        "    address 10.10.11.21/24",
        "    mtu 2044",
        "    pre-up echo datagram > /sys/class/net/ib1/mode",
    ]


@pytest.mark.parametrize(
    ("os_name", "backend"), [("Debian", "ifupdown"), ("Ubuntu", "netplan"), ("RedHat", "networkmanager")]
)
def test_backend_per_os(os_name, backend):
    assert render("ipoib", os_name, "{{ ipoib_backend }}") == backend
    assert (Path(ROOT) / "roles" / "ipoib" / "tasks" / f"{backend}.yml").is_file()


CHECK = "Every interface is well formed and has its network device"


@pytest.mark.parametrize(
    ("interfaces", "apply", "kernel", "problems"),
    [
        ([REDP5610], False, ["lo"], []),
        ([REDP5610, {"hca": "mlx5_7", "address": "10.10.17.21/24"}], False, ["lo"], ["mlx5_7 port 1 has no IPoIB"]),
        ([REDP5610], True, ["lo"], ["ib1 is listed by the IB tools but the kernel has no such network device"]),
        ([{"hca": "mlx5_1", "address": "10.10.11.21/24", "mtu": 9000}], False, ["lo"], ["is invalid"]),
    ],
)
def test_one_check_after_the_devices_are_resolved(interfaces, apply, kernel, problems):
    # The role's task hands the filter the port map it built from ibdev2netdev and the kernel's interfaces.
    from gpu_stack_render import OS_FACTS, RoleRender

    role = RoleRender(
        "ipoib",
        "debian12",
        ipoib_interfaces=interfaces,
        ipoib_apply=apply,
        ipoib_port_tools=_tools(),
        ansible_facts={**OS_FACTS["debian12"], "interfaces": kernel},
    )
    role.assert_problems("resolve.yml", CHECK, problems)
