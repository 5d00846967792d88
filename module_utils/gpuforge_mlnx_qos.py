"""RoCE QoS on the host: `mlnx_qos -i <netdev>` output, and the judgement of a RoCE port's lossless settings.

Stdlib only; runs on the managed node's Python 3.8+.

Format: NVIDIA's mlnx_qos (Mellanox/mlnx-tools, python/mlnx_qos, pretty_print) prints, in this order:
``DCBX mode: OS controlled`` (or ``Firmware controlled``), ``Priority trust state: <pcp|dscp|none>``, when the
trust is dscp ``dscp2prio mapping:`` with ``prio:<p> dscp:<dd>,<dd>,...`` lines (a priority with more than eight
DSCP values is continued on another ``prio:<p>`` line), in newer releases ``default priority:`` and
``Receive buffer size (bytes): <b0>,...,<b7>,[total_size=<n>]``, then ``Cable len: <n>``, ``PFC configuration:``
with a ``priority 0 1 ... 7`` header, the ``enabled`` row (one 0/1 per priority) and, with receive buffers, a
``buffer`` row; then per traffic class ``tc: <n> ratelimit: <unlimited|x.y Gbps>, tsa: <vendor|strict|ets, bw:
<n>%>`` followed by one ``priority: <p>`` line per priority mapped to it. A running lldpad adds a warning line
first. Real outputs the tests read are listed in tests/fixtures/mlnx_qos/SOURCES.md; one of them was reflowed by
the page that published it (indentation lost, blank lines added), so leading whitespace and blank lines are not
significant.

Judging a RoCE port (judge_roce_port): NVIDIA's lossless RoCE host configuration (MLNX_OFED/DOCA documentation,
"Explicit Congestion Notification" and "Quality of Service"; facts in vendor_facts/mlnx-tools/roce-qos.yml) is trust
dscp, PFC enabled on the RoCE priority (and only there: PFC on other priorities pauses traffic that was not meant
to be lossless), ECN enabled for that priority at both the notification point (roce_np) and the reaction point
(roce_rp), the RDMA-CM default ToS (configfs default_roce_tos) and the verbs traffic class (tc/<port>/traffic_class)
set to the ToS whose DSCP maps to that priority, and a RoCE v2 GID at the index the benchmarks use.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = [
    "PRIORITIES",
    "ParseError",
    "dscp_of_tos",
    "judge_roce_port",
    "parse_mlnx_qos",
    "read_gid_type",
    "read_number",
    "read_traffic_class",
]

PRIORITIES = 8  # IEEE 802.1p priorities 0-7; mlnx_qos prints one column per priority
TSA = ("vendor", "strict", "ets", "unknown")
ROCE_V2 = "RoCE v2"  # the kernel's name of the RoCE v2 GID type (drivers/infiniband/core/cache.c gid_type_str)

_DCBX = re.compile(r"DCBX mode:\s*(?P<mode>OS controlled|Firmware controlled)$")
_TRUST = re.compile(r"Priority trust state:\s*(?P<trust>\S+)$")
_DSCP_LINE = re.compile(r"prio:(?P<prio>\d+)\s+dscp:(?P<dscps>[\d,]*)$")
_BUFFER_SIZE = re.compile(r"Receive buffer size \(bytes\):\s*(?P<sizes>[\d,]*)(?:total_size=(?P<total>\d+))?$")
_CABLE = re.compile(r"Cable len:\s*(?P<len>\d+)$")
_TC = re.compile(
    r"tc:\s*(?P<tc>\d+)\s+ratelimit:\s*(?P<rate>unlimited|[\d.]+ Gbps),\s*tsa:\s*(?P<tsa>vendor|strict|unknown|ets)"
    r"(?:,\s*bw:\s*(?P<bw>\d+)%)?$"
)
_TC_PRIORITY = re.compile(r"priority:\s+(?P<prio>\d+)$")
_ROW = re.compile(r"(?P<name>priority|enabled|buffer)\s+(?P<values>\d(?:\s+\d+)*)$")


def _ints(text: str, what: str) -> list:
    values = [item for item in text.split(",") if item != ""]
    try:
        return [int(item) for item in values]
    except ValueError:
        raise ParseError(f"{what}: {text!r} is not a comma-separated list of numbers") from None


def _row(match, what: str, maximum: int) -> list:
    values = [int(item) for item in match["values"].split()]
    if len(values) != PRIORITIES or any(value > maximum for value in values):
        raise ParseError(f"PFC {what} row {match['values']!r}: {PRIORITIES} values of 0-{maximum} expected")
    return values


def parse_mlnx_qos(text: str) -> dict:
    """The QoS state one `mlnx_qos -i <netdev>` run printed.

    Returns {"dcbx_mode": "os"|"firmware"|None, "trust": "dscp"|"pcp"|"none", "dscp2prio": {dscp: priority}
    (empty unless trust is dscp), "receive_buffer_size_bytes": [8 ints] or None, "cable_len": int or None,
    "pfc_enabled": [8 x 0/1], "pfc_priorities": [priorities with PFC on], "pfc_buffer": [8 ints] or None,
    "tcs": [{"tc", "ratelimit", "tsa", "bw_percent", "priorities"}], "prio_tc": {priority: tc}, "warnings": [...]}.
    ParseError when the trust state or the PFC enabled row is missing, a row is malformed, or a priority is
    mapped to two traffic classes."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty mlnx_qos output")
    result = {
        "dcbx_mode": None,
        "trust": None,
        "dscp2prio": {},
        "receive_buffer_size_bytes": None,
        "cable_len": None,
        "pfc_enabled": None,
        "pfc_priorities": [],
        "pfc_buffer": None,
        "tcs": [],
        "prio_tc": {},
        "warnings": [],
    }
    section = None
    current_tc = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("*"):  # '****** WARNING: lldpad service is running ... ******'
            result["warnings"].append(line.strip("* ").strip())
            continue
        if line.endswith("is not supported on your system"):  # trust or buffer commands the driver lacks
            result["warnings"].append(line)
            continue
        match = _DCBX.match(line)
        if match:
            result["dcbx_mode"] = "os" if match["mode"].startswith("OS") else "firmware"
            continue
        match = _TRUST.match(line)
        if match:
            result["trust"] = match["trust"]
            continue
        if line == "dscp2prio mapping:":
            section = "dscp2prio"
            continue
        if line == "default priority:":
            section = "default_priority"  # printed by newer releases; its entries are not judged
            continue
        if line == "PFC configuration:":
            section = "pfc"
            continue
        match = _DSCP_LINE.match(line)
        if match and section == "dscp2prio":
            prio = int(match["prio"])
            for dscp in _ints(match["dscps"], f"dscp2prio of priority {prio}"):
                if dscp > 63 or prio >= PRIORITIES:
                    raise ParseError(f"dscp2prio line {line!r}: DSCP 0-63 and priority 0-7 expected")
                result["dscp2prio"][dscp] = prio
            continue
        match = _BUFFER_SIZE.match(line)
        if match:
            sizes = _ints(match["sizes"], "Receive buffer size")
            if len(sizes) != PRIORITIES:
                raise ParseError(f"Receive buffer size lists {len(sizes)} buffers, mlnx_qos prints {PRIORITIES}")
            result["receive_buffer_size_bytes"] = sizes
            section = None
            continue
        match = _CABLE.match(line)
        if match:
            result["cable_len"] = int(match["len"])
            section = None
            continue
        match = _ROW.match(line)
        if match and section == "pfc":
            if match["name"] == "priority":
                if _row(match, "priority", PRIORITIES - 1) != list(range(PRIORITIES)):
                    raise ParseError(f"PFC priority header {match['values']!r} is not 0 1 2 3 4 5 6 7")
            elif match["name"] == "enabled":
                result["pfc_enabled"] = _row(match, "enabled", 1)
            else:
                result["pfc_buffer"] = _row(match, "buffer", PRIORITIES - 1)
            continue
        match = _TC.match(line)
        if match:
            section = "tc"
            current_tc = {
                "tc": int(match["tc"]),
                "ratelimit": match["rate"],
                "tsa": match["tsa"],
                "bw_percent": int(match["bw"]) if match["bw"] is not None else None,
                "priorities": [],
            }
            result["tcs"].append(current_tc)
            continue
        match = _TC_PRIORITY.match(line)
        if match and section == "tc" and current_tc is not None:
            prio = int(match["prio"])
            if prio >= PRIORITIES:
                raise ParseError(f"tc {current_tc['tc']}: priority {prio} is outside 0-7")
            if prio in result["prio_tc"]:
                raise ParseError(f"priority {prio} is mapped to tc {result['prio_tc'][prio]} and tc {current_tc['tc']}")
            current_tc["priorities"].append(prio)
            result["prio_tc"][prio] = current_tc["tc"]
            continue
        if section == "default_priority":
            continue
        raise ParseError(f"unexpected line in mlnx_qos output: {line[:120]!r}")
    if result["trust"] is None:
        raise ParseError("no 'Priority trust state:' line: not the output of mlnx_qos -i <netdev>")
    if result["pfc_enabled"] is None:
        raise ParseError("no PFC 'enabled' row under 'PFC configuration:'")
    if result["trust"] == "dscp" and not result["dscp2prio"]:
        raise ParseError("trust state dscp without a 'dscp2prio mapping:' section")
    result["pfc_priorities"] = [prio for prio, on in enumerate(result["pfc_enabled"]) if on]
    return result


def read_number(text, what: str) -> int:
    """A sysfs/configfs file that holds one decimal number (ecn/roce_np/enable/<prio>, default_roce_tos)."""
    value = str(text).strip()
    if not re.fullmatch(r"\d+", value):
        raise ParseError(f"{what}: {value[:60]!r} is not a number")
    return int(value)


def read_traffic_class(text) -> int | None:
    """/sys/class/infiniband/<dev>/tc/<port>/traffic_class: MLNX_OFED's mlx5_ib prints ``Global tclass=<n>`` once
    one was written, and nothing before (None: no global traffic class set)."""
    value = str(text).strip()
    if not value:
        return None
    match = re.fullmatch(r"(?:Global tclass=)?(\d+)", value)
    if not match or int(match.group(1)) > 255:
        raise ParseError(f"traffic_class: {value[:60]!r} is not 'Global tclass=<0-255>'")
    return int(match.group(1))


def read_gid_type(text) -> str:
    """/sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index>: ``IB/RoCE v1`` or ``RoCE v2``."""
    value = str(text).strip()
    if value not in ("IB/RoCE v1", ROCE_V2):
        raise ParseError(f"GID type {value[:60]!r} is neither 'IB/RoCE v1' nor 'RoCE v2'")
    return value


def dscp_of_tos(tos: int) -> int:
    """The DSCP of an IP ToS byte: its upper six bits (the lower two are ECN; 106 = DSCP 26 with ECT(0))."""
    return int(tos) >> 2


def judge_roce_port(port: dict, expected: dict) -> list:
    """Problems (strings naming the port and the fix) of one RoCE port; [] when it is lossless as expected.

    port: {"netdev", "hca", "port", "qos": parse_mlnx_qos result, "ecn_np": {prio: 0/1}, "ecn_rp": {prio: 0/1},
    "roce_tos": int or None, "traffic_class": int or None, "gid_type": str or None (the type at the expected index)}.
    expected: {"roce_trust" ("dscp"), "roce_pfc_priority" (0-7), "roce_ecn" (bool, default true: ECN on that
    priority), "roce_tos" (0-255), "roce_gid_index"}; a key not given is not judged.
    """
    name = f"{port['netdev']} ({port['hca']} port {port['port']})"
    problems = []
    qos = port["qos"]
    trust = expected.get("roce_trust")
    if trust is not None and qos["trust"] != trust:
        fix = f"mlnx_qos -i {port['netdev']} --trust {trust}"
        problems.append(f"{name}: priority trust state {qos['trust']}, expected {trust}: {fix}")
    prio = expected.get("roce_pfc_priority")
    if prio is not None:
        if qos["pfc_priorities"] != [prio]:
            wanted = ",".join("1" if index == prio else "0" for index in range(PRIORITIES))
            shown = ",".join(str(p) for p in qos["pfc_priorities"]) or "none"
            fix = f"mlnx_qos -i {port['netdev']} --pfc {wanted}"
            problems.append(f"{name}: PFC enabled on priority {shown}, expected only {prio}: {fix}")
        for point in ("np", "rp") if expected.get("roce_ecn", True) else ():
            enabled = port.get(f"ecn_{point}", {}).get(prio)
            if enabled != 1:
                problems.append(
                    f"{name}: ECN roce_{point} on priority {prio} is {'unreadable' if enabled is None else enabled}, "
                    f"expected 1: echo 1 > /sys/class/net/{port['netdev']}/ecn/roce_{point}/enable/{prio}"
                )
    tos = expected.get("roce_tos")
    if tos is not None:
        if port.get("roce_tos") != tos:
            problems.append(
                f"{name}: RDMA-CM default ToS {port.get('roce_tos')}, expected {tos}: cma_roce_tos -d {port['hca']} "
                f"-p {port['port']} -t {tos}"
            )
        if port.get("traffic_class") != tos:
            problems.append(
                f"{name}: verbs traffic class {port.get('traffic_class')}, expected {tos}: echo {tos} > "
                f"/sys/class/infiniband/{port['hca']}/tc/{port['port']}/traffic_class"
            )
        if qos["trust"] == "dscp" and prio is not None:
            mapped = qos["dscp2prio"].get(dscp_of_tos(tos))
            if mapped != prio:
                problems.append(
                    f"{name}: DSCP {dscp_of_tos(tos)} (ToS {tos}) maps to priority {mapped}, expected {prio}: "
                    f"mlnx_qos -i {port['netdev']} --dscp2prio set,{dscp_of_tos(tos)},{prio}"
                )
    index = expected.get("roce_gid_index")
    if index is not None and port.get("gid_type") != ROCE_V2:
        problems.append(
            f"{name}: GID index {index} is {port.get('gid_type') or 'absent'}, not RoCE v2: give the port an IP "
            "address (RoCE v2 GIDs follow the netdev's addresses) or set NCCL_IB_GID_INDEX/ib_write_bw -x to a RoCE v2 "
            "index (show_gids)"
        )
    return problems
