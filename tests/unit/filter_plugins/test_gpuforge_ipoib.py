"""gpuforge_ipoib_problems: every problem of a host's ipoib_interfaces in one list (the ipoib role's one check after
it resolved the devices). Port maps in the shape the role builds from `ibdev2netdev` lines ("mlx5_1 port 1 ==> ib1
(Up)") on a DGX-1 (four EDR ports, ib0-ib3)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_ipoib import (
    FilterModule,
    gpuforge_ipoib_port_netdevs,
    gpuforge_ipoib_problems,
)

DGX1_PORTS = {f"mlx5_{n} port 1": f"ib{n}" for n in range(4)}
MAX_MTU = {"datagram": 4092, "connected": 65520}


def problems(interfaces, ports=None, kernel=(), brought_up=False, mode="datagram", mtu=2044):
    ports = DGX1_PORTS if ports is None else ports
    return gpuforge_ipoib_problems(interfaces, "gpu01", ports, list(kernel), brought_up, mode, mtu, MAX_MTU)


def test_usable_entries_give_nothing():
    entries = [
        {"hca": "mlx5_1", "address": "10.10.11.21/24"},
        {"hca": "mlx5_2", "port": 1, "address": "10.10.12.21/24", "mode": "connected", "mtu": 65520},
        {"name": "ib3", "address": "10.10.13.21/24"},
    ]
    assert problems(entries) == []
    assert problems([]) == []


@pytest.mark.parametrize(
    "entry",
    [
        {"address": "10.10.11.21/24"},  # neither name nor hca
        {"hca": "mlx5_1", "address": "10.10.11.21"},  # no prefix length
        {"hca": "mlx5_1", "address": "10.10.11.21/24", "mode": "bonded"},
        {"hca": "mlx5_1", "address": "10.10.11.21/24", "mtu": 65520},  # datagram's largest is 4092
        {"hca": "mlx5_1", "address": "10.10.11.21/24", "mtu": "jumbo"},
    ],
)
def test_a_malformed_entry_is_named_and_not_looked_up(entry):
    (message,) = problems([entry], ports={})
    assert message.startswith(f"gpu01: ipoib_interfaces entry {entry} is invalid:")
    assert "an MTU of at most 4092 (datagram) or 65520 (connected)" in message


def test_an_hca_port_without_a_device_names_the_ports_found_and_the_fix():
    (message,) = problems([{"hca": "mlx5_7", "port": 1, "address": "10.10.17.21/24"}])
    assert message.startswith("gpu01: mlx5_7 port 1 has no IPoIB network device (IB ports with a netdev: ")
    assert "mlx5_1 port 1 -> ib1" in message
    assert "(ibstat mlx5_7)" in message and "modprobe ib_ipoib" in message


def test_a_missing_named_interface_and_no_ports_at_all():
    (message,) = problems([{"name": "ib9", "address": "10.10.19.21/24"}], ports={})
    assert message.startswith("gpu01: IPoIB interface ib9 does not exist")
    assert "none found by ibdev2netdev or rdma link" in message
    # A named interface the kernel has (no IB tools) is fine.
    assert problems([{"name": "ib9", "address": "10.10.19.21/24"}], ports={}, kernel=["lo", "ib9"]) == []


def test_brought_up_devices_must_exist_in_the_kernel():
    entry = {"hca": "mlx5_1", "address": "10.10.11.21/24"}
    assert problems([entry], kernel=["lo", "eth0"]) == []  # written only: the lab's simulated HCAs
    (message,) = problems([entry], kernel=["lo", "eth0"], brought_up=True)
    assert message.startswith("gpu01: ib1 is listed by the IB tools but the kernel has no such network device")
    assert "set ipoib_apply: false" in message
    assert problems([entry], kernel=["ib1"], brought_up=True) == []


def test_every_problem_of_every_entry_in_the_entries_order():
    entries = [
        {"hca": "mlx5_7", "address": "10.10.17.21/24"},
        {"hca": "mlx5_1", "address": "10.10.11.21/24"},
        {"name": "ib1"},
        {"hca": "mlx5_2", "address": "10.10.12.21/24"},
    ]
    found = problems(entries, kernel=["ib2"], brought_up=True)
    assert [message.split(" ", 2)[1] for message in found] == ["mlx5_7", "ib1", "ipoib_interfaces"]
    assert all(message.startswith("gpu01: ") for message in found)


def test_registered_as_a_filter():
    assert FilterModule().filters()["gpuforge_ipoib_problems"] is gpuforge_ipoib_problems


def test_port_netdevs_from_infiniband_facts_of_a_dgx1():
    # infiniband_facts' shape (library/infiniband_facts.py RETURN): netdev from ibdev2netdev, null without it.
    facts = {
        "hcas": [
            {"name": f"mlx5_{n}", "ports": [{"port": 1, "state": "Active", "netdev": f"ib{n}", "netdev_state": "Up"}]}
            for n in range(4)
        ]
    }
    assert gpuforge_ipoib_port_netdevs(facts) == DGX1_PORTS
    # The map reads as the role's ibdev2netdev one does: the usable entries stay usable.
    assert gpuforge_ipoib_problems(
        [{"hca": "mlx5_1", "address": "10.10.11.21/24"}], "gpu01", gpuforge_ipoib_port_netdevs(facts), [], False,
        "datagram", 2044, MAX_MTU,
    ) == []  # fmt: skip


def test_port_netdevs_without_ibdev2netdev_or_facts_is_empty():
    no_netdev = {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "netdev": None}, {"port": 2}]}, {"name": "mlx5_1"}]}
    assert gpuforge_ipoib_port_netdevs(no_netdev) == {}
    assert gpuforge_ipoib_port_netdevs({"available": False, "hcas": []}) == {}
    assert gpuforge_ipoib_port_netdevs({}) == {}
    assert gpuforge_ipoib_port_netdevs(None) == {}


def test_port_netdevs_is_a_filter():
    assert FilterModule().filters()["gpuforge_ipoib_port_netdevs"] is gpuforge_ipoib_port_netdevs
