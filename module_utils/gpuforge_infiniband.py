"""Parsers for the InfiniBand/RoCE status tools: ibstat, ibstatus, ibv_devinfo, ibdev2netdev.

Pure functions over the tools' text, stdlib only (and gpuforge_errors, which Ansible ships with it).
The returned shapes are documented in docs/parsers-infiniband.md; their key names are a stable
interface. Common conventions:

* every parser returns a dict with an ``errors`` list (messages the tool printed, such as ibstat's
  ``ibpanic:`` line, and blocks that were cut short), so a partial output still yields what it has;
* states are normalised to ibstat's words (``Active``/``Down``/``Initializing``/``Armed`` and
  ``LinkUp``/``Polling``/``Disabled``/...) with the numeric code beside them;
* GUIDs are normalised to ibstat's ``0x`` + 16 lowercase hex digits;
* rates are Gb/s numbers (int when whole, 2.5 for 1X SDR).

ParseError is raised only when the text is non-empty yet holds nothing the parser recognises.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_number

__all__ = [
    "PHYS_STATE_CODES",
    "STATE_CODES",
    "ParseError",
    "parse",
    "parse_ibdev2netdev",
    "parse_ibstat",
    "parse_ibstatus",
    "parse_ibv_devinfo",
    "parse_ofed_info_release",
]


# Port logical states (IB spec PortInfo:PortState) and physical states, in ibstat's spelling.
STATE_CODES = {"Down": 1, "Initializing": 2, "Armed": 3, "Active": 4}
PHYS_STATE_CODES = {
    "Sleep": 1,
    "Polling": 2,
    "Disabled": 3,
    "PortConfigurationTraining": 4,
    "LinkUp": 5,
    "LinkErrorRecovery": 6,
    "PhyTest": 7,
}
_STATE_BY_CODE = {code: name for name, code in STATE_CODES.items()}
_PHYS_BY_CODE = {code: name for name, code in PHYS_STATE_CODES.items()}


def _guid(text: str) -> str:
    """Any GUID spelling ('0x248a...', 'a088:c203:007e:1dba') -> '0x' + 16 lowercase hex digits."""
    digits = text.strip().lower().replace(":", "")
    if digits.startswith("0x"):
        digits = digits[2:]
    if not re.fullmatch(r"[0-9a-f]{1,16}", digits):
        raise ValueError(f"not a GUID: {text!r}")
    return "0x" + digits.rjust(16, "0")


def _state_from_code(code: int) -> str:
    return _STATE_BY_CODE.get(code, "Unknown")


def _phys_from_code(code: int) -> str:
    return _PHYS_BY_CODE.get(code, "Unknown")


# --------------------------------------------------------------------------------------------- ibstat

_IBSTAT_CA = re.compile(r"^CA:? '(?P<name>[^']+)'$")
_IBSTAT_PORT = re.compile(r"^Port (?P<port>\d+):$")
_IBSTAT_CA_KEYS = {
    "CA type": "ca_type",
    "Number of ports": "num_ports",
    "Firmware version": "fw_ver",
    "Hardware version": "hw_ver",
    "Node GUID": "node_guid",
    "System image GUID": "sys_image_guid",
}
_IBSTAT_PORT_KEYS = {
    "State": "state",
    "Physical state": "phys_state",
    "Rate": "rate_gbit_per_s",
    "Base lid": "lid",
    "LMC": "lmc",
    "SM lid": "sm_lid",
    "Capability mask": "capability_mask",
    "Port GUID": "port_guid",
    "Link layer": "link_layer",
}
_IBSTAT_REQUIRED_PORT_KEYS = ("state", "phys_state", "rate_gbit_per_s", "link_layer")


def _ibstat_port_value(key: str, value: str, port: dict) -> None:
    if key == "rate_gbit_per_s":
        # 'Rate: 40 (FDR10)' marks FDR10 links; the number is still the Gb/s rate.
        match = re.fullmatch(r"([\d.]+)(?:\s+\((\w+)\))?", value)
        if not match:
            raise ValueError(f"unreadable Rate {value!r}")
        port["rate_gbit_per_s"] = to_number(match.group(1))
        if match.group(2):
            port["speed"] = match.group(2)
    elif key in ("lid", "lmc", "sm_lid"):
        port[key] = int(value, 0)
    elif key == "port_guid":
        port[key] = _guid(value)
    elif key == "state":
        port["state"] = value
        port["state_code"] = STATE_CODES.get(value)
    elif key == "phys_state":
        port["phys_state"] = value
        port["phys_state_code"] = PHYS_STATE_CODES.get(value)
    else:
        port[key] = value


def _ibstat_ca_value(key: str, value: str, ca: dict) -> None:
    if key == "num_ports":
        ca[key] = int(value)
    elif key in ("node_guid", "sys_image_guid"):
        ca[key] = _guid(value)
    else:
        ca[key] = value


# A runaway tool (a debug build, a wrapper printing a log) can print millions of lines: each parser keeps the first
# UNRECOGNISED_LINES_KEPT unrecognised lines verbatim and counts the rest in one message, so the facts and the
# module's warnings stay readable and bounded.
UNRECOGNISED_LINES_KEPT = 10


def _bound_unrecognised(result: dict) -> dict:
    """Keep the first UNRECOGNISED_LINES_KEPT "unrecognised" errors of result, and one line counting the others."""
    kept: list = []
    unrecognised = 0
    for error in result["errors"]:
        if ": unrecognised: " in error:
            unrecognised += 1
            if unrecognised > UNRECOGNISED_LINES_KEPT:
                continue
        kept.append(error)
    dropped = unrecognised - UNRECOGNISED_LINES_KEPT
    if dropped > 0:
        kept.append(f"{dropped} more unrecognised lines not listed")
    result["errors"] = kept
    return result


def parse_ibstat(text: str) -> dict:
    """Parse `ibstat` (all CAs, one CA, or `ibstat CA PORT`) into {cas: [...], errors: [...]}.

    A run that ended in ``ibpanic:`` (ibstat exit 255) keeps every CA printed before the panic and
    reports the panic line in ``errors``.
    """
    result: dict = {"cas": [], "errors": []}
    ca: dict | None = None
    port: dict | None = None
    recognised = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(("ibpanic:", "ibwarn:", "ibstat: ")):
            result["errors"].append(line)
            recognised = True
            continue
        match = _IBSTAT_CA.match(line)
        if match:
            ca = {"name": match.group("name"), "ports": []}
            result["cas"].append(ca)
            port = None
            recognised = True
            continue
        match = _IBSTAT_PORT.match(line)
        if match and ca is not None:
            port = {"port": int(match.group("port"))}
            ca["ports"].append(port)
            continue
        key, sep, value = line.partition(":")
        if not sep or ca is None:
            result["errors"].append(f"line {lineno}: unrecognised: {line}")
            continue
        key, value = key.strip(), value.strip()
        try:
            if port is not None and key in _IBSTAT_PORT_KEYS:
                _ibstat_port_value(_IBSTAT_PORT_KEYS[key], value, port)
            elif port is None and key in _IBSTAT_CA_KEYS:
                _ibstat_ca_value(_IBSTAT_CA_KEYS[key], value, ca)
            else:
                result["errors"].append(f"line {lineno}: unrecognised: {line}")
        except ValueError as exc:
            result["errors"].append(f"line {lineno}: {exc}")
    if text.strip() and not recognised:
        raise ParseError("no `CA '<name>'` block in ibstat output")
    _check_ports(result, _IBSTAT_REQUIRED_PORT_KEYS)
    return _bound_unrecognised(result)


def _check_ports(result: dict, required: tuple[str, ...]) -> None:
    """Report ports whose block was cut short (truncated output) instead of failing on them."""
    for ca in result["cas"]:
        for port in ca["ports"]:
            missing = [key for key in required if key not in port]
            if missing:
                result["errors"].append(
                    f"{ca['name']} port {port.get('port')}: incomplete block, missing {', '.join(missing)}"
                )


# ------------------------------------------------------------------------------------------- ibstatus

_IBSTATUS_HEADER = re.compile(r"^Infiniband device '(?P<ca>[^']+)' port (?P<port>\d+) status:$")
_SYSFS_RATE = re.compile(r"^(?P<rate>[\d.]+) Gb/sec(?: \((?P<width>\d+X) ?(?P<speed>\w+)?\))?$")
_SYSFS_STATE = re.compile(r"^(?P<code>\d+): ?(?P<name>.+)$")


def _sysfs_rate(value: str, port: dict) -> None:
    match = _SYSFS_RATE.match(value)
    if not match:
        raise ValueError(f"unreadable rate {value!r}")
    port["rate_gbit_per_s"] = to_number(match.group("rate"))
    if match.group("width"):
        port["width"] = match.group("width")
    if match.group("speed"):
        port["speed"] = match.group("speed")


def _ibstatus_value(key: str, value: str, port: dict) -> None:
    if key == "default gid":
        port["default_gid"] = value
        # The default GID's low 64 bits are the port GUID (IB) or the MAC-derived EUI-64 (RoCE).
        if re.fullmatch(r"[0-9a-fA-F]{4}(:[0-9a-fA-F]{4}){7}", value):
            port["port_guid"] = _guid("".join(value.split(":")[4:]))
    elif key in ("base lid", "sm lid"):
        port["lid" if key == "base lid" else "sm_lid"] = int(value, 0)
    elif key in ("state", "phys state"):
        match = _SYSFS_STATE.match(value)
        if not match:
            raise ValueError(f"unreadable {key} {value!r}")
        code = int(match.group("code"))
        if key == "state":
            port["state"], port["state_code"] = _state_from_code(code), code
        else:
            port["phys_state"], port["phys_state_code"] = _phys_from_code(code), code
    elif key == "rate":
        _sysfs_rate(value, port)
    elif key in ("link_layer", "link layer"):
        port["link_layer"] = value
    else:
        raise ValueError(f"unknown field {key!r}")


def parse_ibstatus(text: str) -> dict:
    """Parse `ibstatus` ("Infiniband device 'mlx5_0' port 1 status:" blocks) into {cas, errors}.

    ``Fatal error:`` lines (unknown device) go to ``errors``.
    """
    result: dict = {"cas": [], "errors": []}
    by_name: dict[str, dict] = {}
    port: dict | None = None
    recognised = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(("Fatal error:", "Usage:")):
            result["errors"].append(line)
            recognised = True
            continue
        match = _IBSTATUS_HEADER.match(line)
        if match:
            name = match.group("ca")
            if name not in by_name:
                by_name[name] = {"name": name, "ports": []}
                result["cas"].append(by_name[name])
            port = {"port": int(match.group("port"))}
            by_name[name]["ports"].append(port)
            recognised = True
            continue
        key, sep, value = line.partition(":")
        if not sep or port is None:
            result["errors"].append(f"line {lineno}: unrecognised: {line}")
            continue
        try:
            _ibstatus_value(key.strip(), value.strip(), port)
        except ValueError as exc:
            result["errors"].append(f"line {lineno}: {exc}")
    if text.strip() and not recognised:
        raise ParseError("no `Infiniband device '<ca>' port <n> status:` block in ibstatus output")
    _check_ports(result, ("state", "phys_state", "rate_gbit_per_s"))
    return _bound_unrecognised(result)


# ---------------------------------------------------------------------------------------- ibv_devinfo

_DEVINFO_HCA = re.compile(r"^hca_id:\s*(?P<name>\S+)$")
_DEVINFO_PORT = re.compile(r"^port:\s*(?P<port>\d+)$")
_DEVINFO_CODED = re.compile(r"^(?P<name>.*?)\s*\((?P<code>\d+)\)$")
_DEVINFO_PORT_STATES = {"PORT_DOWN": 1, "PORT_INIT": 2, "PORT_ARMED": 3, "PORT_ACTIVE": 4}
_DEVINFO_HCA_INT = {"vendor_part_id", "phys_port_cnt"}
_DEVINFO_PORT_INT = {"sm_lid": "sm_lid", "port_lid": "lid", "port_lmc": "lmc"}
# ibv_devinfo -v: active_width codes -> width, active_speed codes -> speed name and per-lane Gb/s.
_DEVINFO_SPEEDS = {
    1: ("SDR", 2.5),
    2: ("DDR", 5.0),
    4: ("QDR", 10.0),
    8: ("FDR10", 10.0),
    16: ("FDR", 14.0),
    32: ("EDR", 25.0),
    64: ("HDR", 50.0),
    128: ("NDR", 100.0),
    256: ("XDR", 200.0),
}


def _devinfo_coded(value: str) -> tuple[str, int | None]:
    match = _DEVINFO_CODED.match(value)
    if not match:
        return value, None
    return match.group("name"), int(match.group("code"))


def _devinfo_port_value(key: str, value: str, port: dict) -> None:
    if key == "state":
        name, code = _devinfo_coded(value)
        code = code if code is not None else _DEVINFO_PORT_STATES.get(name)
        port["state"], port["state_code"] = _state_from_code(code or 0), code
    elif key in ("max_mtu", "active_mtu"):
        name, _code = _devinfo_coded(value)
        port[key] = int(name) if name.isdigit() else None
    elif key in _DEVINFO_PORT_INT:
        port[_DEVINFO_PORT_INT[key]] = int(value, 0)
    elif key == "link_layer":
        port["link_layer"] = value
    elif key == "phys_state":
        _name, code = _devinfo_coded(value)
        port["phys_state"], port["phys_state_code"] = _phys_from_code(code or 0), code
    elif key == "active_width":
        name, _code = _devinfo_coded(value)
        port["width"] = name
    elif key == "active_speed":
        _name, code = _devinfo_coded(value)
        if code in _DEVINFO_SPEEDS:
            port["speed"], port["lane_gbit_per_s"] = _DEVINFO_SPEEDS[code]
    elif key == "port_cap_flags":
        port["capability_mask"] = value
    # Other -v port attributes (max_msg_sz, pkey_tbl_len, GID[n], ...) are not part of the interface.


def _devinfo_hca_value(key: str, value: str, hca: dict) -> None:
    if key in ("node_guid", "sys_image_guid"):
        hca[key] = _guid(value)
    elif key == "transport":
        hca["transport"], _code = _devinfo_coded(value)
    elif key == "phys_port_cnt":
        hca["num_ports"] = int(value)
    elif key in _DEVINFO_HCA_INT:
        hca[key] = int(value)
    elif key in ("fw_ver", "vendor_id", "hw_ver", "board_id"):
        hca[key] = value
    # Device-wide -v attributes (max_qp, max_cq, ...) are not part of the interface.


def _devinfo_rates(result: dict) -> None:
    # -v gives width and lane speed; the link rate is their product (4X x 25 Gb/s = 100 for EDR).
    for hca in result["cas"]:
        for port in hca["ports"]:
            lanes = re.fullmatch(r"(\d+)X", port.get("width") or "")
            if lanes and "lane_gbit_per_s" in port:
                port["rate_gbit_per_s"] = to_number(str(int(lanes.group(1)) * port["lane_gbit_per_s"]))
            port.pop("lane_gbit_per_s", None)


def parse_ibv_devinfo(text: str) -> dict:
    """Parse `ibv_devinfo` (plain or -v) into {cas, errors}.

    Plain output has no rate or physical state; with ``-v`` the ports also carry width, speed,
    rate_gbit_per_s and phys_state. Lines on stderr-like messages ("No IB devices found",
    "IB device 'x' wasn't found") go to ``errors``.
    """
    result: dict = {"cas": [], "errors": []}
    hca: dict | None = None
    port: dict | None = None
    recognised = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = _DEVINFO_HCA.match(line)
        if match:
            hca = {"name": match.group("name"), "ports": []}
            result["cas"].append(hca)
            port = None
            recognised = True
            continue
        if line.startswith(("No IB devices found", "IB device ", "Failed to")):
            result["errors"].append(line)
            recognised = True
            continue
        if hca is None:
            continue
        match = _DEVINFO_PORT.match(line)
        if match:
            port = {"port": int(match.group("port"))}
            hca["ports"].append(port)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue  # -v capability flag lists (RESIZE_MAX_WR, ...) are bare words
        try:
            if port is not None:
                _devinfo_port_value(key.strip(), value.strip(), port)
            else:
                _devinfo_hca_value(key.strip(), value.strip(), hca)
        except ValueError as exc:
            result["errors"].append(f"{hca['name']}: {exc}")
    if text.strip() and not recognised:
        raise ParseError("no `hca_id:` block in ibv_devinfo output")
    _devinfo_rates(result)
    _check_ports(result, ("state", "link_layer"))
    return result


# --------------------------------------------------------------------------------------- ibdev2netdev

_IBDEV2NETDEV = re.compile(
    r"^(?:(?P<bus_id>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)\s+)?"
    r"(?P<ca>\S+)\s+(?:\(.*?\)\s+.*?fw\s+(?P<fw_ver>\S+)\s+)?"
    r"port\s+(?P<port>\d+)(?:\s+\((?P<port_state>[A-Z_]+)\s*\))?"
    r"\s+==>\s+(?P<netdev>\S+)\s+\((?P<netdev_state>\w+)\)$"
)


def parse_ibdev2netdev(text: str) -> dict:
    """Parse `ibdev2netdev` (plain or -v) lines like `mlx5_0 port 1 ==> ib0 (Up)` into {mappings, errors}."""
    result: dict = {"mappings": [], "errors": []}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        match = _IBDEV2NETDEV.match(line)
        if not match:
            result["errors"].append(f"line {lineno}: unrecognised: {line}")
            continue
        mapping = {
            "ca": match.group("ca"),
            "port": int(match.group("port")),
            "netdev": match.group("netdev"),
            "netdev_state": match.group("netdev_state"),
        }
        for key in ("bus_id", "fw_ver", "port_state"):
            if match.group(key):
                mapping[key] = match.group(key)
        result["mappings"].append(mapping)
    if text.strip() and not result["mappings"]:
        raise ParseError("no `<ca> port <n> ==> <netdev> (<state>)` line in ibdev2netdev output")
    return _bound_unrecognised(result)


def parse_ofed_info_release(text: str) -> str | None:
    """The release line of `ofed_info -s`, as printed: "MLNX_OFED_LINUX-24.10-1.1.4.0:" from the MLNX_OFED
    tarball installer, "OFED-internal-24.10-1.1.4.0.200:" from DOCA-OFED packages (vendor_facts/mlnx-ofed/
    tarball.yml and vendor_facts/nvidia-doca/*.yml, ofed_info_s, with their sources). None when it printed nothing;
    a first line that is not one token ending in ":" is a ParseError (another tool answered, or an error)."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    if not lines:
        return None
    if not re.fullmatch(r"[A-Za-z][\w.+-]*-\d[\w.+-]*:", lines[0]):
        example = "MLNX_OFED_LINUX-24.10-1.1.4.0:"
        raise ParseError(f"ofed_info -s printed {lines[0][:80]!r}, not a release such as {example!r}")
    return lines[0]


_PARSERS = {
    "ibstat": parse_ibstat,
    "ibstatus": parse_ibstatus,
    "ibv-devinfo": parse_ibv_devinfo,
    "ibdev2netdev": parse_ibdev2netdev,
}


def parse(kind: str, text: str) -> dict:
    """Dispatch by kind name: ibstat, ibstatus, ibv-devinfo, ibdev2netdev."""
    try:
        parser = _PARSERS[kind]
    except KeyError:
        raise ParseError(f"unknown kind {kind!r}; known: {', '.join(sorted(_PARSERS))}") from None
    return parser(text)
