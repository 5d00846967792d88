"""Simulated `mlnx_qos` (NVIDIA mlnx-tools) and the RoCE QoS files of the node's RoCE ports.

`mlnx_qos -i <netdev> [--trust pcp|dscp] [--pfc|-f LIST] [--dscp2prio set,<dscp>,<prio>]` sets what it is given,
then prints the port's state in the format of Mellanox/mlnx-tools python/mlnx_qos (pretty_print; fixtures and
their sources in tests/fixtures/mlnx_qos/SOURCES.md), as a DOCA-OFED host prints it (with the `default priority:`
and `Receive buffer size` lines and the PFC `buffer` row). Errors are the tool's: an unknown interface exits 1
with the DCB netlink error, a bad trust value prints `Invalid trust state command. Refer to the help.`, a PFC
list that is not eight 0/1 values prints `pfc list must have 8 items` (or the `Bad value for PFC` usage line).

State lives in the simulated tree (it survives between runs and is emptied by a container restart, a reboot):
the trust state in `<sysfs>/class/net/<netdev>/qos/trust` (the MLNX_OFED file mlnx_qos itself reads), PFC and
the DSCP map in `<run>/mlnx_qos/<netdev>.json` (the real tool asks the driver over DCB netlink).

Beside them, write_tree() creates the files the mlx5 driver and the kernel expose for each RoCE port, with the
driver's defaults: ECN enable per priority (`class/net/<netdev>/ecn/roce_np|roce_rp/enable/<0-7>`, 1: DCQCN is
enabled on every priority by default, NVIDIA "DCQCN CC Parameters"), the verbs traffic class
(`class/infiniband/<hca>/tc/<port>/traffic_class`, empty until one is written), the GID types
(`class/infiniband/<hca>/ports/<port>/gid_attrs/types/<index>`: the link-local GID as RoCE v1 and v2 at 0 and 1,
the netdev's IPv4 address at 2 and 3) and the rdma_cm configfs port (`kernel/config/rdma_cm/<hca>/ports/<port>/
default_roce_tos` 0 and `default_roce_mode` RoCE v2; on a real kernel that directory appears when the device
directory is made with mkdir). The RoCE QoS faults of the hardware document are put back over what was set each
time mlnx_qos runs (apply_faults): the node is found in that state, whatever configured it before (a switch's
DCBX in firmware mode, a reboot without the settings persisted): roce_trust_pcp (trust pcp), roce_pfc_off (no
priority has PFC), roce_tos_wrong (default_roce_tos and the traffic class hold the fault's `tos`, 0 by default).
"""

from __future__ import annotations

import json
import os
import sys

from gpuforge_sim import ib_ports
from gpuforge_sim.hardware import faults_of, run_dir

PRIORITIES = 8
# mlx5's default priority -> traffic class map (priority 0 on tc 1, 1 on tc 0; real outputs in the fixtures).
DEFAULT_PRIO_TC = (1, 0, 2, 3, 4, 5, 6, 7)
PORT_BUFFER_BYTES = 262016  # a ConnectX port buffer as mlnx_qos printed it on a real host (pcp, no PFC)
LOSSLESS_BUFFER_BYTES = 130944  # the two buffers mlnx_qos showed after PFC was enabled on one priority
GID_TYPES = ("IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2")


def sysfs_root() -> str:
    return os.environ.get("GPUFORGE_LAB_SYSFS") or os.path.join(run_dir(), "sys")


def _state_path(netdev: str) -> str:
    return os.path.join(run_dir(), "mlnx_qos", f"{netdev}.json")


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def roce_ports(hw: dict) -> list:
    """[(hca, port)] of the node's Ethernet (RoCE) ports with a netdev."""
    found = []
    for hca in ib_ports.sorted_by_name(ib_ports.ports_view(hw)):
        for port in hca["ports"]:
            if port["link_layer"] == "Ethernet" and port.get("netdev"):
                found.append((hca, port))
    return found


def _fault(hw: dict, kind: str, hca: dict, port: dict):
    for fault in faults_of(hw, kind):
        if fault.get("hca") == hca["name"] and int(fault.get("port", 1)) == int(port["port"]):
            return fault
    return None


def write_tree(hw: dict, root: str | None = None) -> str:
    """Create the RoCE QoS files of every RoCE port that has none yet (a booted driver's defaults, with the
    hardware document's RoCE QoS faults); files that exist keep what was written to them. Returns root."""
    root = root or sysfs_root()
    for hca, port in roce_ports(hw):
        netdev, name, number = port["netdev"], hca["name"], str(port["port"])
        trust = os.path.join(root, "class", "net", netdev, "qos", "trust")
        if os.path.exists(trust):
            continue
        _write(trust, "pcp\n")  # mlx5's default trust state (real outputs before configuration show pcp)
        state = {"pfc": [0] * PRIORITIES, "dscp2prio": {}}
        _write(_state_path(netdev), json.dumps(state))
        for point in ("roce_np", "roce_rp"):
            for prio in range(PRIORITIES):
                _write(os.path.join(root, "class", "net", netdev, "ecn", point, "enable", str(prio)), "1\n")
        _write(os.path.join(root, "class", "infiniband", name, "tc", number, "traffic_class"), "")
        for index, kind in enumerate(GID_TYPES):
            _write(
                os.path.join(root, "class", "infiniband", name, "ports", number, "gid_attrs", "types", str(index)),
                kind + "\n",
            )
        configfs = os.path.join(root, "kernel", "config", "rdma_cm", name, "ports", number)
        _write(os.path.join(configfs, "default_roce_tos"), "0\n")
        _write(os.path.join(configfs, "default_roce_mode"), "RoCE v2\n")
    return root


def apply_faults(hw: dict, root: str | None = None) -> None:
    """Put the RoCE QoS faults' state in place over whatever was set (what the lab's boot does after write_tree:
    the fault is the state the node is found in)."""
    root = root or sysfs_root()
    for hca, port in roce_ports(hw):
        netdev, name, number = port["netdev"], hca["name"], str(port["port"])
        if _fault(hw, "roce_trust_pcp", hca, port):
            _write(os.path.join(root, "class", "net", netdev, "qos", "trust"), "pcp\n")
        if _fault(hw, "roce_pfc_off", hca, port):
            state = _load_state(netdev)
            state["pfc"] = [0] * PRIORITIES
            _write(_state_path(netdev), json.dumps(state))
        fault = _fault(hw, "roce_tos_wrong", hca, port)
        if fault:
            tos = int(fault.get("tos", 0))
            _write(
                os.path.join(root, "kernel", "config", "rdma_cm", name, "ports", number, "default_roce_tos"), f"{tos}\n"
            )
            _write(
                os.path.join(root, "class", "infiniband", name, "tc", number, "traffic_class"), f"Global tclass={tos}\n"
            )


def _load_state(netdev: str) -> dict:
    try:
        state = json.loads(_read(_state_path(netdev)))
    except (OSError, ValueError):
        state = {}
    state.setdefault("pfc", [0] * PRIORITIES)
    state.setdefault("dscp2prio", {})
    return state


def dscp2prio(state: dict) -> dict:
    """{dscp: priority}: the driver's default (DSCP 8p..8p+7 on priority p) with the --dscp2prio settings."""
    mapping = {dscp: dscp // 8 for dscp in range(64)}
    mapping.update({int(dscp): prio for dscp, prio in state["dscp2prio"].items()})
    return mapping


def render(trust: str, state: dict) -> str:
    """What mlnx_qos -i prints for this state (pretty_print of Mellanox/mlnx-tools python/mlnx_qos)."""
    lines = ["DCBX mode: OS controlled", f"Priority trust state: {trust}"]
    if trust == "dscp":
        lines.append("dscp2prio mapping:")
        by_prio = {prio: "" for prio in range(PRIORITIES)}
        for dscp, prio in sorted(dscp2prio(state).items(), key=lambda item: -item[0]):
            by_prio[prio] += f"{dscp:02d},"
        for prio in range(PRIORITIES):
            text = by_prio[prio]
            while len(text) > 24:  # pretty_print wraps a priority's list after eight values
                lines.append(f"\tprio:{prio} dscp:{text[:24]}")
                text = text[24:]
            if text:
                lines.append(f"\tprio:{prio} dscp:{text}")
    lines.append("default priority:")
    lossless = any(state["pfc"])
    sizes = [LOSSLESS_BUFFER_BYTES, LOSSLESS_BUFFER_BYTES] if lossless else [PORT_BUFFER_BYTES, 0]
    lines.append("Receive buffer size (bytes): " + "".join(f"{size}," for size in sizes + [0] * 6))
    lines.append("Cable len: 7")
    lines.append("PFC configuration:")
    lines.append("\tpriority    0   1   2   3   4   5   6   7")
    enabled = "\tenabled     " + "".join(f"{on:1d}   " for on in state["pfc"])
    buffers = "\tbuffer      " + "".join(f"{1 if on else 0:1d}   " for on in state["pfc"])
    lines.append(enabled + "\n" + buffers)
    for tc in range(PRIORITIES):
        lines.append(f"tc: {tc} ratelimit: unlimited, tsa: vendor")
        for prio, mapped in enumerate(DEFAULT_PRIO_TC):
            if mapped == tc:
                lines.append(f"\t priority:  {prio}")
    return "\n".join(lines) + "\n"


def _usage(message: str) -> int:
    sys.stdout.write(message + "\nUsage: mlnx_qos -i <interface> [options]\n")
    return 1


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    options = {"dscp2prio": []}
    while args:
        arg = args.pop(0)
        key, _, value = arg.partition("=")
        if key in ("-i", "--interface", "--trust", "-f", "--pfc", "--dscp2prio"):
            if not value:
                if not args:
                    return _usage(f"mlnx_qos: error: {key} option requires an argument")
                value = args.pop(0)
            if key == "--dscp2prio":
                options["dscp2prio"].append(value)
            else:
                options[{"-i": "intf", "--interface": "intf", "-f": "pfc"}.get(key, key.lstrip("-"))] = value
        elif key != "-a":
            return _usage("Bad arguments")
    if not options.get("intf"):
        return _usage("Interface name is required")
    hw = ib_ports.load()
    write_tree(hw)
    apply_faults(hw)
    netdevs = {port["netdev"] for _hca, port in roce_ports(hw)}
    netdev = options["intf"]
    if netdev not in netdevs:
        # The DCB netlink request for a device the kernel does not know fails in DcbController.
        sys.stderr.write("OSError: [Errno 19] No such device\n")
        return 1
    root = sysfs_root()
    state = _load_state(netdev)
    if "pfc" in options:
        items = options["pfc"].split(",")
        if len(items) > PRIORITIES:
            sys.stdout.write("Too many items for PFC\n")
            return 1
        if any(item not in ("0", "1") for item in items):
            return _usage(f"Bad value for PFC: {options['pfc']!r} is not a list of 0 and 1")
        if len(items) != PRIORITIES:
            sys.stdout.write("pfc list must have 8 items\n")
            return 1
        state["pfc"] = [int(item) for item in items]
    for entry in options["dscp2prio"]:
        parts = entry.split(",")
        if len(parts) != 3 or parts[0] not in ("set", "del") or not all(p.isdigit() for p in parts[1:]):
            sys.stdout.write("Invalid dscp2prio command. Refer to the help.\n")
            return 1
        dscp, prio = int(parts[1]), int(parts[2])
        if dscp > 63 or prio > 7:
            sys.stdout.write("Invalid dscp2prio command. Refer to the help.\n")
            return 1
        if parts[0] == "set":
            state["dscp2prio"][str(dscp)] = prio
        else:
            state["dscp2prio"].pop(str(dscp), None)  # back to the default mapping
    trust_path = os.path.join(root, "class", "net", netdev, "qos", "trust")
    if "trust" in options:
        if options["trust"] not in ("pcp", "dscp"):
            sys.stdout.write("Invalid trust state command. Refer to the help.\n")
            return 1
        _write(trust_path, options["trust"] + "\n")
    _write(_state_path(netdev), json.dumps(state))
    sys.stdout.write(render(_read(trust_path).strip(), state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
