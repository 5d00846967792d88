"""One view of the node's RDMA ports, shared by every simulated IB tool so faults agree everywhere.

ibstat, ibstatus, ibv_devinfo, ibdev2netdev and ib_write_bw all read their ports from
`ports_view()`: the hardware document's HCAs with `hca_missing`, `ib_port_state` and
`ib_port_rate` applied (hardware.visible_hcas), then normalised to what the kernel would expose:

* a fault state of Down or Polling is logical Down; Init is Initializing (no subnet manager: LID 0);
* a port that is not physically LinkUp reports the rate the driver falls back to (10 Gb/s 4X SDR on
  InfiniBand, 40 Gb/s 4X QDR on Ethernet, as in real ibstat output of down ports), LID 0, and on
  Ethernet a zero port GUID (empty GID table);
* RoCE port GUIDs are the EUI-64 of the MAC inside the node GUID, InfiniBand port N is node GUID + N - 1.
"""

from __future__ import annotations

import os

from gpuforge_sim.hardware import ib_speed_name, load_hardware, visible_hcas

STATE_CODES = {"Down": 1, "Initializing": 2, "Armed": 3, "Active": 4}
PHYS_CODES = {
    "Sleep": 1,
    "Polling": 2,
    "Disabled": 3,
    "PortConfigurationTraining": 4,
    "LinkUp": 5,
    "LinkErrorRecovery": 6,
    "PhyTest": 7,
}
# sysfs spellings (ibstatus prints /sys/class/infiniband/<ca>/ports/<n>/{state,phys_state}).
SYSFS_STATE = {"Down": "DOWN", "Initializing": "INIT", "Armed": "ARMED", "Active": "ACTIVE"}
SYSFS_PHYS = {"PhyTest": "Phy Test"}

# Fault `state` values (SCHEMA.md) -> (logical state, physical state when the fault gives none).
_FAULT_STATES = {
    "Down": ("Down", "Polling"),
    "Polling": ("Down", "Polling"),
    "Disabled": ("Down", "Disabled"),
    "Init": ("Initializing", "LinkUp"),
    "Initializing": ("Initializing", "LinkUp"),
    "Armed": ("Armed", "LinkUp"),
    "Active": ("Active", "LinkUp"),
}
# How mlx5 reports Ethernet speeds as IB width/speed (the ibstatus rate string of RoCE ports).
_ETH_WIDTH_SPEED = {
    10: ("1X", "QDR"),
    25: ("1X", "EDR"),
    40: ("4X", "QDR"),
    50: ("2X", "EDR"),
    100: ("4X", "EDR"),
    200: ("4X", "HDR"),
    400: ("4X", "NDR"),
    800: ("8X", "NDR"),
}
IB_CAPABILITY_MASK = 0xA651EC48  # ConnectX IB port (as real ibstat shows for CX-6/CX-7)
ETH_CAPABILITY_MASK = 0x00010000  # RoCE port


def load(path: str | None = None) -> dict:
    """The hardware document, or an empty node when the file is absent (no HCAs: tools print none)."""
    try:
        return load_hardware(path)
    except FileNotFoundError:
        return {"hcas": [], "faults": [], "network": [], "gpu": {"count": 0, "devices": []}}


def _int(value, default: int = 0) -> int:
    if value is None:
        return default
    return int(value, 0) if isinstance(value, str) else int(value)


def eui64_from_node_guid(node_guid: int) -> int:
    """RoCE GID interface id: the MAC inside a ConnectX node GUID (OUI + 2 filler bytes + NIC part)."""
    raw = node_guid.to_bytes(8, "big")
    mac = raw[:3] + raw[5:]
    return int.from_bytes(bytes([mac[0] ^ 0x02]) + mac[1:3] + b"\xff\xfe" + mac[3:], "big")


def format_rate(rate) -> str:
    value = float(rate)
    return str(int(value)) if value.is_integer() else str(value)


def _normalise_port(hca: dict, port: dict) -> dict:
    link_layer = port.get("link_layer", "InfiniBand")
    ethernet = link_layer == "Ethernet"
    state, default_phys = _FAULT_STATES.get(str(port.get("state", "Active")), ("Down", "Polling"))
    phys = port.get("phys_state") if port.get("phys_state") in PHYS_CODES else default_phys
    if state == "Down" and phys == "LinkUp":
        phys = "Polling"
    rate = float(port.get("rate_gbit_per_s", 100))
    width, speed = port.get("width", "4X"), port.get("speed", "EDR")
    if ethernet and int(rate) in _ETH_WIDTH_SPEED and rate.is_integer():
        width, speed = _ETH_WIDTH_SPEED[int(rate)]
    elif not ethernet and not speed:
        width, speed = ib_speed_name(rate, width)
    if phys != "LinkUp":
        rate, width, speed = (40.0, "4X", "QDR") if ethernet else (10.0, "4X", "SDR")
    number = _int(port.get("port"), 1)
    node_guid = _int(hca.get("node_guid"), 0)
    port_guid = node_guid + number - 1
    if ethernet:
        port_guid = eui64_from_node_guid(node_guid) if phys == "LinkUp" else 0
    lid_valid = not ethernet and state in ("Armed", "Active")
    return {
        "port": number,
        "link_layer": link_layer,
        "state": state,
        "state_code": STATE_CODES[state],
        "phys_state": phys,
        "phys_state_code": PHYS_CODES[phys],
        "rate_gbit_per_s": rate,
        "width": width,
        "speed": speed,
        "lid": _int(port.get("lid")) if lid_valid else 0,
        "sm_lid": _int(port.get("sm_lid")) if lid_valid else 0,
        "lmc": _int(port.get("lmc")),
        "mtu": _int(port.get("mtu"), 4096),
        "netdev": port.get("netdev"),
        "port_guid": port_guid,
        "capability_mask": ETH_CAPABILITY_MASK if ethernet else IB_CAPABILITY_MASK,
    }


def ports_view(hw: dict) -> list[dict]:
    """Visible HCAs (profile order), each a copy with `ports` normalised as the module docstring says."""
    result = []
    for hca in visible_hcas(hw):
        entry = dict(hca)
        entry["node_guid_int"] = _int(hca.get("node_guid"), 0)
        entry["sys_image_guid_int"] = _int(hca.get("sys_image_guid") or hca.get("node_guid"), 0)
        entry["ports"] = [_normalise_port(hca, port) for port in hca.get("ports") or []]
        result.append(entry)
    return result


def sorted_by_name(hcas: list[dict]) -> list[dict]:
    """Directory-listing order (mlx5_0, mlx5_1, mlx5_10, mlx5_2), as ibstat and ibstatus list CAs."""
    return sorted(hcas, key=lambda hca: hca["name"])


def find_port(hcas: list[dict], device: str | None, port: int = 1) -> tuple[dict | None, dict | None]:
    """(hca, port) for a device name (first HCA when None); (None, None) when the device is absent."""
    hca = next((h for h in hcas if device is None or h["name"] == device), None)
    if hca is None:
        return None, None
    return hca, next((p for p in hca["ports"] if p["port"] == port), None)


def sysfs_rate(port: dict) -> str:
    """/sys/class/infiniband/<ca>/ports/<n>/rate, e.g. '100 Gb/sec (4X EDR)'."""
    return f"{format_rate(port['rate_gbit_per_s'])} Gb/sec ({port['width']} {port['speed']})"


def sysfs_phys(port: dict) -> str:
    """/sys/.../phys_state name ('Phy Test' has a space there, unlike ibstat's PhyTest)."""
    return SYSFS_PHYS.get(port["phys_state"], port["phys_state"])


def gid0(port: dict) -> str:
    """Default GID (index 0) as sysfs prints it; all zeros when a RoCE port has no link."""
    if port["port_guid"] == 0:
        return ":".join(["0000"] * 8)
    value = (0xFE80 << 112) | port["port_guid"]
    digits = f"{value:032x}"
    return ":".join(digits[i : i + 4] for i in range(0, 32, 4))


def pid() -> int:
    return os.getpid()
