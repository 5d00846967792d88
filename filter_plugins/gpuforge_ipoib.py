"""Jinja2 filter of the ipoib role: every problem of a host's ``ipoib_interfaces`` in one list, for one assert.

An entry is checked in the order its use needs: well formed (a name or an HCA, an address in CIDR form, a mode
and an MTU that mode allows), then resolved to a network device (``ibdev2netdev`` / ``rdma link`` ports, or the
kernel's interfaces for a named one), then, when the role brings the interfaces up, present in the kernel. A
malformed entry is not looked up. One assert task with every problem of every entry replaces a looped assert per
check (each a task round on every run, issue 18).

Stdlib only and free of Ansible imports so the checks are unit-testable as plain functions.
"""

from __future__ import annotations

import re

# The address of an entry: dotted quad and prefix length (10.10.11.21/24).
_CIDR = re.compile(r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$")


def _netdev(entry: dict, port_netdevs: dict[str, str]) -> str:
    """An entry's network device: its name, else its HCA port's ("<hca> port <n>") device ('' when none)."""
    if "name" in entry:
        return str(entry["name"])
    return str(port_netdevs.get(f"{entry.get('hca', '')} port {entry.get('port', 1)}", ""))


def gpuforge_ipoib_problems(
    interfaces: list[dict],
    host: str,
    port_netdevs: dict[str, str],
    kernel_interfaces: list[str],
    brought_up: bool,
    default_mode: str,
    default_mtu: int,
    max_mtu: dict[str, int],
) -> list[str]:
    """One message per problem, each naming the host, the entry and the fix; [] when every entry is usable.

    ``port_netdevs`` maps "mlx5_1 port 1" to the device the IB tools list (ib1); ``kernel_interfaces`` is
    ``ansible_facts.interfaces``; ``brought_up`` is ``ipoib_apply`` (the device must exist in the kernel then).
    """
    problems: list[str] = []
    listed = ", ".join(f"{port} -> {dev}" for port, dev in port_netdevs.items())
    listed = listed or "none found by ibdev2netdev or rdma link"
    for entry in interfaces or []:
        mode = entry.get("mode", default_mode)
        mtu = entry.get("mtu", default_mtu)
        try:
            mtu_fits = mode in max_mtu and int(mtu) <= int(max_mtu[mode])
        except (TypeError, ValueError):
            mtu_fits = False
        well_formed = (
            ("name" in entry or "hca" in entry) and bool(_CIDR.match(str(entry.get("address", "")))) and mtu_fits
        )
        if not well_formed:
            problems.append(
                f"{host}: ipoib_interfaces entry {entry} is invalid: give `name` (ib1) or `hca` (mlx5_1), an address "
                "in CIDR form (10.10.11.21/24), mode datagram or connected, and an MTU of at most 4092 (datagram) or "
                "65520 (connected)."
            )
            continue
        netdev = _netdev(entry, port_netdevs)
        if not netdev or (netdev not in port_netdevs.values() and netdev not in (kernel_interfaces or [])):
            what = (
                f"IPoIB interface {entry['name']} does not exist"
                if "name" in entry
                else f"{entry['hca']} port {entry.get('port', 1)} has no IPoIB network device"
            )
            ibstat = f"ibstat {entry['hca']}" if "hca" in entry else "ibstat"
            problems.append(
                f"{host}: {what} (IB ports with a netdev: {listed}). Fix: check that the HCA is present and its port "
                f"is InfiniBand ({ibstat}), that ib_ipoib is loaded (modprobe ib_ipoib), and that the entry in "
                "ipoib_interfaces names an existing interface or HCA port of this host."
            )
            continue
        if brought_up and netdev not in (kernel_interfaces or []):
            problems.append(
                f"{host}: {netdev} is listed by the IB tools but the kernel has no such network device, so it cannot "
                f"be brought up. Fix: load ib_ipoib (modprobe ib_ipoib) and check `ip link show {netdev}`; to write "
                "the configuration without bringing it up (gpuforge lab nodes: simulated HCAs, no kernel netdev) "
                "set ipoib_apply: false."
            )
    return problems


def gpuforge_ipoib_port_netdevs(infiniband: dict) -> dict[str, str]:
    """HCA ports with a network device, ``{"mlx5_1 port 1": "ib1"}``, from the ``infiniband`` facts of
    gpuforge.cluster.infiniband_facts (its ports' ``netdev`` comes from the same ``ibdev2netdev`` the role would run);
    empty when no port has one (no ``ibdev2netdev``, or no facts)."""
    port_netdevs = {}
    for hca in (infiniband or {}).get("hcas") or []:
        for port in hca.get("ports") or []:
            if port.get("netdev"):
                port_netdevs[f"{hca.get('name')} port {port.get('port')}"] = str(port["netdev"])
    return port_netdevs


class FilterModule:
    def filters(self):
        return {
            "gpuforge_ipoib_problems": gpuforge_ipoib_problems,
            "gpuforge_ipoib_port_netdevs": gpuforge_ipoib_port_netdevs,
        }
