"""PCIe health of GPUs and HCAs: lspci link and ACS lines, the kernel's link-limited message, AER counters, and
the InfiniBand P_Key table (pure parsers and judges, stdlib only, Python 3.8; no I/O).

Formats (fixtures and their sources: tests/fixtures/lspci/SOURCES.md):
- `lspci -vvv`: a device header at column 0 (`[dddd:]bb:dd.f <class>: <name>`), then indented capability lines;
  `LnkCap: Port #0, Speed 16GT/s, Width x16, ...` (what the device can do) and `LnkSta: Speed 2.5GT/s
  (downgraded), Width x16` (what the link negotiated; newer pciutils mark `(ok)`/`(downgraded)`), and for
  bridges with Access Control Services `ACSCtl: SrcValid+ TransBlk- ReqRedir+ ...` (pciutils ls-caps.c,
  ls-ecaps.c). Capabilities are only shown to root (lspci prints `Capabilities: <access denied>` otherwise).
- The kernel's link report (Linux drivers/pci/pci.c __pcie_print_link_status, printed for a downtrained device
  at enumeration and by mlx5_core): `<driver> <address>: %u.%03u Gb/s available PCIe bandwidth, limited by %s
  x%d link at %s (capable of %u.%03u Gb/s with %s x%d link)`, %s being `8.0 GT/s PCIe` (older kernels `8 GT/s`).
- AER counters (Linux Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats):
  /sys/bus/pci/devices/<dev>/aer_dev_{correctable,nonfatal,fatal}, one `<error name> <count>` line per error
  and a `TOTAL_ERR_COR` / `TOTAL_ERR_NONFATAL` / `TOTAL_ERR_FATAL` line.
- P_Keys (Linux Documentation/ABI/stable/sysfs-class-infiniband): /sys/class/infiniband/<hca>/ports/<p>/pkeys/<n>,
  one file per table entry holding `0x%04x`; unused entries are 0x0000.

Why ACS matters: with ACS redirection on a PCIe switch or root port, peer-to-peer requests between a GPU and an
HCA (GPUDirect RDMA) or between GPUs are sent up to the root complex, which slows them or makes them fail; NCCL's
troubleshooting guide tells bare-metal users to disable ACS ("PCI Access Control Services (ACS)",
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs).
In a virtual machine the hypervisor owns ACS (it is needed for device isolation), so it is not judged there.
"""

from __future__ import annotations

import re

__all__ = [
    "ACS_FLAGS",
    "AER_KINDS",
    "acs_enabled",
    "aer_total",
    "link_degraded",
    "parse_acsctl_lines",
    "parse_aer",
    "parse_link_limited",
    "parse_lspci",
    "parse_pkey",
    "pci_address",
]

# ACSCtl flags as lspci prints them (pciutils ls-ecaps.c); any of them enabled counts as ACS on.
ACS_FLAGS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# sysfs AER files and the name of their total line.
AER_KINDS = {"correctable": "TOTAL_ERR_COR", "nonfatal": "TOTAL_ERR_NONFATAL", "fatal": "TOTAL_ERR_FATAL"}

_ADDRESS = re.compile(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")
_HEADER = re.compile(r"^(?P<address>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<rest>.*)$")
_LNKCAP = re.compile(r"^LnkCap:\s*Port #\d+,\s*Speed (?P<speed>[\d.]+|unknown)(?:GT/s)?,\s*Width x(?P<width>\d+)")
_LNKSTA = re.compile(
    r"^LnkSta:\s*Speed (?P<speed>[\d.]+|unknown)(?:GT/s)?(?: \((?P<speed_note>\w+)\))?,\s*"
    r"Width x(?P<width>\d+)(?: \((?P<width_note>\w+)\))?"
)
_ACSCTL = re.compile(r"^ACSCtl:\s*(?P<flags>.*)$")
# Status registers lspci -vvv prints as `Name+`/`Name-` flags (pciutils ls-caps.c, ls-ecaps.c): the device
# status of the Express capability, and the uncorrectable and correctable error status of the AER capability.
_STATUS_REGISTERS = {"DevSta": "dev_sta", "UESta": "ue_sta", "CESta": "ce_sta"}
_STATUS = re.compile(r"^(?P<register>DevSta|UESta|CESta):\s*(?P<flags>.*)$")
_FLAG = re.compile(r"([A-Za-z]+)([+-])")
_LIMITED = re.compile(
    r"(?P<address>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):\s*(?P<available>[\d.]+) Gb/s available "
    r"PCIe bandwidth, limited by (?P<speed>[\d.]+) GT/s(?: PCIe)? x(?P<width>\d+) link at (?P<limiting>\S+) "
    r"\(capable of (?P<capable>[\d.]+) Gb/s with (?P<cap_speed>[\d.]+) GT/s(?: PCIe)? x(?P<cap_width>\d+) link\)"
)
_DRIVER_BEFORE = re.compile(r"(?P<driver>[\w-]+)\s+$")


def pci_address(text):
    """A PCI address in one spelling, `dddd:bb:dd.f` in lower case: 00000000:1B:00.0, 0000:1b:00.0 and 1b:00.0
    all give 0000:1b:00.0 (lspci leaves out domain 0000 unless -D); None when text holds no address."""
    match = _ADDRESS.search(str(text or ""))
    if not match:
        return None
    domain = int(match.group(1), 16) if match.group(1) else 0
    return f"{domain:04x}:{match.group(2).lower()}:{match.group(3).lower()}.{match.group(4)}"


def _speed(text):
    return None if text in (None, "unknown") else float(text)


def parse_lspci(text) -> dict:
    """{address: device} of `lspci -vvv` text (addresses as pci_address spells them). A device is
    {address, description, bridge, link_cap: {speed_gts, width} or None, link_sta: {speed_gts, width,
    speed_downgraded, width_downgraded} or None, acs_ctl: {flag: bool} or None, dev_sta, ue_sta, ce_sta:
    {flag: bool} or None (DevSta of the Express capability; UESta and CESta of AER, e.g. CorrErr, UnsupReq,
    RxErr, BadTLP set)}. Lines before the first header (an excerpt) belong to the device None."""
    devices: dict = {}
    current = None
    for raw in str(text or "").splitlines():
        header = _HEADER.match(raw) if raw[:1] not in (" ", "\t") else None
        if header:
            address = pci_address(header.group("address"))
            rest = header.group("rest")
            current = {
                "address": address,
                "description": rest,
                "bridge": rest.lower().startswith(("pci bridge", "host bridge")),
                "link_cap": None,
                "link_sta": None,
                "acs_ctl": None,
                **dict.fromkeys(_STATUS_REGISTERS.values()),
            }
            devices[address] = current
            continue
        line = raw.strip()
        if not line:
            continue
        if current is None:
            current = {
                "address": None,
                "description": "",
                "bridge": False,
                "link_cap": None,
                "link_sta": None,
                "acs_ctl": None,
                **dict.fromkeys(_STATUS_REGISTERS.values()),
            }
            devices[None] = current
        cap = _LNKCAP.match(line)
        if cap:
            current["link_cap"] = {"speed_gts": _speed(cap.group("speed")), "width": int(cap.group("width"))}
            continue
        sta = _LNKSTA.match(line)
        if sta:
            current["link_sta"] = {
                "speed_gts": _speed(sta.group("speed")),
                "width": int(sta.group("width")),
                "speed_downgraded": sta.group("speed_note") == "downgraded",
                "width_downgraded": sta.group("width_note") == "downgraded",
            }
            continue
        status = _STATUS.match(line)
        if status:
            flags = {name: sign == "+" for name, sign in _FLAG.findall(status.group("flags"))}
            current[_STATUS_REGISTERS[status.group("register")]] = flags
            continue
        acs = _ACSCTL.match(line)
        if acs:
            flags = {name: sign == "+" for name, sign in _FLAG.findall(acs.group("flags"))}
            # A second ACS capability (multi-function devices) adds to the first: ACS is on if any flag is.
            previous = current["acs_ctl"] or {}
            current["acs_ctl"] = {k: previous.get(k, False) or flags.get(k, False) for k in {**previous, **flags}}
    return devices


def parse_acsctl_lines(text) -> list:
    """[{flag: bool}] for each ACSCtl line of a text (e.g. `lspci -vvv | grep ACSCtl`)."""
    found = []
    for raw in str(text or "").splitlines():
        match = _ACSCTL.match(raw.strip())
        if match:
            found.append({name: sign == "+" for name, sign in _FLAG.findall(match.group("flags"))})
    return found


def acs_enabled(flags) -> list:
    """The ACSCtl flags that are on (of ACS_FLAGS), [] when ACS is off or not shown."""
    return [name for name in ACS_FLAGS if (flags or {}).get(name)]


def link_degraded(device, judge_speed=True) -> str:
    """Why a device's negotiated link is below its capability (LnkSta against LnkCap), '' when it is not or
    either line is missing. judge_speed=False ignores a lower speed (GPUs lower their link speed when idle)."""
    cap, sta = (device or {}).get("link_cap"), (device or {}).get("link_sta")
    if not cap or not sta:
        return ""
    found = []
    if sta["width"] < cap["width"]:
        found.append(f"width x{sta['width']} of x{cap['width']}")
    if judge_speed and None not in (sta["speed_gts"], cap["speed_gts"]) and sta["speed_gts"] < cap["speed_gts"]:
        found.append(f"speed {sta['speed_gts']:g} GT/s of {cap['speed_gts']:g} GT/s")
    return ", ".join(found)


def parse_link_limited(log) -> list:
    """The kernel's `... available PCIe bandwidth, limited by ...` reports in a log: [{address, driver,
    available_gbit_per_s, speed_gts, width, limited_at, capable_gbit_per_s, capable_speed_gts, capable_width}], one per
    line (the same device may be reported again after a reset or reload)."""
    found = []
    for line in str(log or "").splitlines():
        match = _LIMITED.search(line)
        if not match:
            continue
        driver = _DRIVER_BEFORE.search(line[: match.start()])
        found.append(
            {
                "address": pci_address(match.group("address")),
                "driver": driver.group("driver") if driver else None,
                "available_gbit_per_s": float(match.group("available")),
                "speed_gts": float(match.group("speed")),
                "width": int(match.group("width")),
                "limited_at": pci_address(match.group("limiting")) or match.group("limiting"),
                "capable_gbit_per_s": float(match.group("capable")),
                "capable_speed_gts": float(match.group("cap_speed")),
                "capable_width": int(match.group("cap_width")),
            }
        )
    return found


def parse_aer(text) -> dict:
    """{error name: count} of one sysfs aer_dev_* file, the TOTAL_ERR_* line included under its own name.
    Lines that do not end in a number are left out."""
    counts = {}
    for line in str(text or "").splitlines():
        name, _sep, value = line.strip().rpartition(" ")
        if name and value.isdigit():
            counts[name.strip()] = int(value)
    return counts


def aer_total(counts, kind) -> int:
    """The total of one AER file: its TOTAL_ERR_* line, else the sum of its counters."""
    counts = counts or {}
    total = counts.get(AER_KINDS.get(kind, ""))
    if isinstance(total, int):
        return total
    return sum(v for v in counts.values() if isinstance(v, int))


def parse_pkey(text):
    """The P_Key of one sysfs pkeys/<n> file as `0x%04x`, None when empty, unreadable or 0x0000 (unused)."""
    value = str(text or "").strip()
    try:
        number = int(value, 16) if value.lower().startswith("0x") else int(value, 0)
    except ValueError:
        return None
    return None if number & 0x7FFF == 0 else f"0x{number:04x}"
