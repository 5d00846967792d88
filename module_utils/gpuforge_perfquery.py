"""InfiniBand port error counters (perfquery), link flaps from the log, and cross-node version consistency.

Stdlib only; runs on the managed node's Python 3.8+.

perfquery format (infiniband-diags, rdma-core): a header `# Port counters: Lid <lid> port <n> (CapMask: 0x..)`
followed by one `<Name>:<dots><value>` line per field; libibmad pads the name and colon with dots to a fixed
column. Field names and widths are those of rdma-core libibmad/fields.c (PortCounters attribute):
https://github.com/linux-rdma/rdma-core/blob/master/libibmad/fields.c ; the header is printed by
infiniband-diags/perfquery.c; usage in perfquery(8): https://man7.org/linux/man-pages/man8/perfquery.8.html .
Counters of the PortCounters attribute stop at all ones instead of wrapping (InfiniBand Architecture
Specification vol. 1, Performance Management), so a counter at its maximum cannot show growth: it is
reported as saturated and the remedy is to reset it (perfquery -R) and read again.

Judging growth: every error counter may grow by at most the limit in the spec (default 0): ibqueryerrors(8)
"The default threshold is zero (0)"
(https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/man/ibqueryerrors.8.in.rst); taking
snapshots before and after the IB load and flagging ports whose errors grew is the procedure Imbue publishes
for its cluster-health checks (ib_burn.py docstring; summarised in the project's acceptance-anchors review,
section 2 row 9).

Link flaps: a `<netdev>: Lost carrier` line for an IB netdev is what Azure's azurehpc-health-checks
customTests/azure_ib_link_flapping.nhc looks for (grep -i "ib.*lost carrier"; more than one event in its
window fails: https://github.com/Azure/azurehpc-health-checks/blob/main/customTests/azure_ib_link_flapping.nhc);
on RoCE ports the mlx5 Ethernet driver logs `<netdev>: Link down` (Linux
drivers/net/ethernet/mellanox/mlx5/core/en_main.c, mlx5e_update_carrier).
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_integer

__all__ = [
    "COUNTER_BITS",
    "ERROR_COUNTERS",
    "ParseError",
    "counter_growth",
    "fleet_facts",
    "fleet_outliers",
    "judge_counter_growth",
    "judge_fleet",
    "judge_link_flaps",
    "parse_link_flaps",
    "parse_perfquery",
]

# PortCounters fields and their width in bits (rdma-core libibmad/fields.c, IB_PC_* fields).
COUNTER_BITS = {
    "SymbolErrorCounter": 16,
    "LinkErrorRecoveryCounter": 8,
    "LinkDownedCounter": 8,
    "PortRcvErrors": 16,
    "PortRcvRemotePhysicalErrors": 16,
    "PortRcvSwitchRelayErrors": 16,
    "PortXmitDiscards": 16,
    "PortXmitConstraintErrors": 8,
    "PortRcvConstraintErrors": 8,
    "LocalLinkIntegrityErrors": 4,
    "ExcessiveBufferOverrunErrors": 4,
    "VL15Dropped": 16,
    "PortXmitData": 32,
    "PortRcvData": 32,
    "PortXmitPkts": 32,
    "PortRcvPkts": 32,
    "PortXmitWait": 32,
}
# The error counters of PortCounters (the data, packet and wait counters measure traffic, not faults).
ERROR_COUNTERS = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortRcvSwitchRelayErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "VL15Dropped",
)
# What a growing counter most often means, for the remedy (counter semantics: IBA vol. 1 PortCounters;
# ibdiagnet manual, Port Counters).
_CAUSES = {
    "SymbolErrorCounter": "bit errors on the wire (cable, connector or transceiver)",
    "LinkErrorRecoveryCounter": "the link retrained (marginal cable or port)",
    "LinkDownedCounter": "the link went down (flap: cable, transceiver or switch port)",
    "PortRcvErrors": "malformed packets received (bad link)",
    "PortRcvRemotePhysicalErrors": "errors passed on from elsewhere in the fabric",
    "LocalLinkIntegrityErrors": "the link exceeded its local error threshold (bad link)",
    "ExcessiveBufferOverrunErrors": "flow-control buffer overruns (bad link or credit problem)",
    "PortXmitDiscards": "packets dropped on transmit (congestion or a port that went down)",
}

_HEADER = re.compile(
    r"^#\s*Port (?:extended )?counters:\s*(?:Lid\s+(?P<lid>\d+)|(?P<other>\S+(?:\s+\S+)?))\s+"
    r"(?:port\s+(?P<port>\d+)|(?P<all>all ports))(?:\s*\(CapMask:\s*(?P<cap>0x[0-9a-fA-F]+))?",
    re.IGNORECASE,
)
_FIELD = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*):\.*(?P<value>\S+)\s*$")


def parse_perfquery(text: str) -> list:
    """[{extended, lid, port, cap_mask, counters: {name: int}}] for each `# Port [extended ]counters:` block of
    perfquery output (extended: `-x`, 64-bit counters). Fields whose value is not a number and the select
    fields are left out; ParseError when the text holds no block."""
    blocks: list = []
    current = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        header = _HEADER.match(line)
        if header:
            current = {
                "extended": "extended" in line.lower(),
                "lid": int(header.group("lid")) if header.group("lid") else None,
                "port": int(header.group("port")) if header.group("port") else 255,
                "cap_mask": header.group("cap"),
                "counters": {},
            }
            blocks.append(current)
            continue
        field = _FIELD.match(line)
        if field and current is not None:
            value = to_integer(field.group("value"))
            if value is not None and field.group("name") not in ("PortSelect", "CounterSelect", "CounterSelect2"):
                current["counters"][field.group("name")] = value
    if not blocks:
        raise ParseError("no `# Port counters: Lid <lid> port <n>` block in perfquery output")
    return blocks


def _saturated(name: str, value) -> bool:
    bits = COUNTER_BITS.get(name)
    return bits is not None and isinstance(value, int) and value >= (1 << bits) - 1


def counter_growth(before: dict, after: dict, counters=ERROR_COUNTERS) -> dict:
    """{counter: growth} for one port; a counter lower after than before was reset in between, so its
    whole after value is growth; a counter at its maximum (saturated) is 'saturated'."""
    growth = {}
    for name in counters:
        old, new = before.get(name), after.get(name)
        if not isinstance(new, int):
            continue
        if _saturated(name, new):
            growth[name] = "saturated"
            continue
        old = old if isinstance(old, int) else 0
        growth[name] = new - old if new >= old else new
    return growth


def judge_counter_growth(before: dict, after: dict, limits=None) -> dict:
    """The `ib_port_counters` check: before/after are {"<hca>/<port>": {counter: value}} snapshots; a port
    fails when an error counter grew by more than limits[counter] (default 0), warns when a counter is
    saturated (cannot show growth) or a port is in only one of the snapshots."""
    limits = dict(limits or {})
    grew, saturated, unpaired = {}, {}, []
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            unpaired.append(key)
            continue
        growth = counter_growth(before[key] or {}, after[key] or {})
        over = {
            n: g for n, g in growth.items() if isinstance(g, int) and g > int(limits.get(n, 0)) and n in ERROR_COUNTERS
        }
        full = sorted(n for n, g in growth.items() if g == "saturated")
        if over:
            grew[key] = over
        if full:
            saturated[key] = full
    expected = {n: f"growth <= {int(limits.get(n, 0))}" for n in ERROR_COUNTERS}
    if grew:
        causes = sorted({_CAUSES[n] for port in grew.values() for n in port if n in _CAUSES})
        return node_check(
            "ib_port_counters",
            FAIL,
            {"grew": grew, "saturated": saturated, "unpaired": unpaired},
            expected,
            "error counters grew during the run on "
            + "; ".join(f"{k} ({', '.join(f'{n} +{g}' for n, g in sorted(v.items()))})" for k, v in grew.items()),
            "Likely: " + "; ".join(causes) + ". Reseat or replace the cable/transceiver of that port, check the "
            "switch side (ibqueryerrors, ibdiagnet), reset the counters (perfquery -R -C <hca> -P <port>) and "
            "rerun the benchmark; drain the node if they grow again",
        )
    status = WARN if saturated or unpaired else PASS
    return node_check(
        "ib_port_counters",
        status,
        {"grew": {}, "saturated": saturated, "unpaired": unpaired},
        expected,
        (f"counters at their maximum cannot show growth: {saturated}; " if saturated else "")
        + (f"ports read only before or after: {unpaired}" if unpaired else ""),
        "Reset the saturated counters (perfquery -R -C <hca> -P <port>) before the next run; a port read only "
        "once was down or absent during one of the reads (see ib_port_state)",
    )


_LOST_CARRIER = re.compile(r"\b(?P<dev>ib[\w.]*):\s*lost carrier\b", re.IGNORECASE)
_LINK_DOWN = re.compile(r"\bmlx5_core\s+\S+\s+(?P<dev>[\w.]+):\s*Link down\b")


def parse_link_flaps(log: str, netdevs=None) -> dict:
    """{netdev: number of link-down events} in a log: `ib*: Lost carrier` (IPoIB netdevs, as the Azure
    check reads it) and mlx5 `<netdev>: Link down` (RoCE netdevs). netdevs, when given, adds other IB
    netdev names to look for (e.g. ibp12s0 is matched already; an IPoIB netdev renamed otherwise is not)."""
    extra = {str(n) for n in netdevs or [] if n}
    counts: dict = {}
    for line in (log or "").splitlines():
        match = _LOST_CARRIER.search(line) or _LINK_DOWN.search(line)
        dev = match.group("dev") if match else None
        if dev is None and extra:
            found = re.search(r"\b([\w.]+):\s*lost carrier\b", line, re.IGNORECASE)
            dev = found.group(1) if found and found.group(1) in extra else None
        if dev:
            counts[dev] = counts.get(dev, 0) + 1
    return counts


def judge_link_flaps(flaps: dict, max_flaps: int = 1) -> dict:
    """The `ib_link_flaps` check: more than max_flaps link-down events of one netdev in the log fail,
    one or more up to the limit warn (a single event can be a planned cable move or switch reboot)."""
    over = {dev: n for dev, n in sorted(flaps.items()) if n > max_flaps}
    seen = {dev: n for dev, n in sorted(flaps.items()) if 0 < n <= max_flaps}
    status = FAIL if over else (WARN if seen else PASS)
    shown = over or seen
    return node_check(
        "ib_link_flaps",
        status,
        dict(sorted(flaps.items())),
        f"<= {max_flaps} link-down event(s) per netdev in the log",
        "link went down "
        + ", ".join(f"{n} times on {dev}" for dev, n in shown.items())
        + " (the port may be Active now, but it flapped)",
        "Check the cable and transceiver of that port and the switch port's log; compare LinkDownedCounter "
        "(perfquery) with the switch side; replace the cable if it flaps again",
    )


def fleet_outliers(values: dict) -> dict:
    """{"majority": value, "outliers": {host: value}, "hosts": n} for {host: value}; None values (not
    readable) are outliers too. Ties: the value of the first host in sorted order is taken as majority."""
    counts: dict = {}
    for host in sorted(values):
        counts[values[host]] = counts.get(values[host], 0) + 1
    readable = {v: c for v, c in counts.items() if v is not None}
    if not readable:
        return {"majority": None, "outliers": {}, "hosts": len(values)}
    best = max(readable.values())
    majority = next(values[h] for h in sorted(values) if values[h] is not None and readable[values[h]] == best)
    outliers = {h: v for h, v in sorted(values.items()) if v != majority}
    return {"majority": majority, "outliers": outliers, "hosts": len(values)}


# What each compared property is, and what to do when a node differs.
FLEET_PROPERTIES = {
    "hca_firmware": ("HCA firmware", "Flash the fleet's firmware with mlxfwmanager / flint (same PSID) and reboot"),
    "ofed": ("MLNX_OFED / DOCA-OFED release", "Install the fleet's pinned release with the gpuforge OFED role"),
    "gpu_driver": ("NVIDIA driver version", "Install the pinned driver with the gpuforge_nvidia_driver role"),
    "vbios": ("GPU VBIOS", "Update the VBIOS with the system vendor's firmware bundle"),
    "kernel": ("kernel release", "Boot the fleet's kernel (and rebuild DKMS modules for it)"),
    # P_Keys in use per HCA port (rail): every node's port of a rail must be in the same partitions, or jobs
    # across them cannot talk (Verda's cluster acceptance checks; SemiAnalysis ClusterMAX). Partition membership
    # is set by the subnet manager, not on the node.
    "pkeys": (
        "P_Keys of HCA port",
        "Add the node's port GUIDs to the same partitions as the other nodes in the subnet manager's partition "
        "configuration (OpenSM partitions.conf, or UFM PKey management) and compare "
        "/sys/class/infiniband/<hca>/ports/<n>/pkeys/* again",
    ),
}


def judge_fleet(nodes: dict) -> dict:
    """The `fleet_consistency` check over {host: {property: value}} (properties of FLEET_PROPERTIES; a
    property whose value is a dict, such as hca_firmware {hca: fw}, is compared per key). Fails naming
    each host whose value differs from the majority; a property absent on every host is not compared."""
    compared, outliers = {}, {}
    for prop in FLEET_PROPERTIES:
        keys = set()
        for facts in nodes.values():
            value = (facts or {}).get(prop)
            if isinstance(value, dict):
                keys.update(f"{prop}.{k}" for k in value)
            elif value is not None:
                keys.add(prop)
        for key in sorted(keys):
            top, _sep, sub = key.partition(".")
            per_host = {}
            for host, facts in nodes.items():
                value = (facts or {}).get(top)
                per_host[host] = value.get(sub) if sub and isinstance(value, dict) else (None if sub else value)
            found = fleet_outliers(per_host)
            compared[key] = found["majority"]
            if found["outliers"]:
                outliers[key] = found["outliers"]
    fault = "; ".join(
        f"{FLEET_PROPERTIES[k.partition('.')[0]][0]} {k.partition('.')[2] or ''} differs from the majority "
        f"({compared[k]}) on {', '.join(f'{h} ({v})' for h, v in o.items())}".replace("  ", " ")
        for k, o in outliers.items()
    )
    remedy = "; ".join(sorted({FLEET_PROPERTIES[k.partition(".")[0]][1] for k in outliers}))
    return node_check(
        "fleet_consistency",
        FAIL if outliers else PASS,
        outliers,
        compared,
        fault,
        remedy,
    )


def _ofed_release(text):
    """The release of `ofed_info -s` ('MLNX_OFED_LINUX-24.10-1.1.4.0:' or 'OFED-internal-24.10-1.1.4:'),
    None when empty."""
    line = str(text or "").strip().splitlines()
    return line[0].strip().rstrip(":") if line else None


def fleet_facts(infiniband=None, nvidia_smi=None, ofed=None, kernel=None, pkeys=None) -> dict:
    """The compared properties of one node from its infiniband_facts / nvidia_smi_facts facts, the text of
    `ofed_info -s`, the kernel release and the P_Keys per HCA port (gpu_node_check's `pkeys`: {"mlx5_0/1":
    ["0xffff"]}, compared as one comma-joined value per port); properties that cannot be read are left out."""
    facts: dict = {}
    ports = {
        str(port): ",".join(str(k) for k in keys) or "none"
        for port, keys in (pkeys or {}).items()
        if isinstance(keys, (list, tuple))
    }
    if ports:
        facts["pkeys"] = ports
    firmware = {
        str(h.get("name")): h.get("fw_ver")
        for h in (infiniband or {}).get("hcas") or []
        if isinstance(h, dict) and h.get("name") and h.get("fw_ver")
    }
    if firmware:
        facts["hca_firmware"] = firmware
    smi = nvidia_smi or {}
    if smi.get("driver_version"):
        facts["gpu_driver"] = smi["driver_version"]
    vbios = {
        str(g.get("bus_id") or g.get("index")): g.get("vbios_version")
        for g in smi.get("gpus") or []
        if isinstance(g, dict) and g.get("vbios_version")
    }
    if vbios:
        facts["vbios"] = vbios
    release = _ofed_release(ofed)
    if release:
        facts["ofed"] = release
    if kernel:
        facts["kernel"] = str(kernel)
    return facts
