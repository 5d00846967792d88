"""GPUDirect RDMA loopback check (``gdr_ib_write_bw``): plan, classify and judge perftest ib_write_bw runs whose
server and client sit on the same node, the same HCA port and the same GPU (pure functions, stdlib only).

What is run (library/gdr_loopback_bw.py) follows Azure/azurehpc-health-checks customTests/azure_ib_write_bw_gdr.nhc:
per HCA, a server and a client of ``ib_write_bw -s 8388608 -F --report_gbits --use_cuda=<gpu> -d <hca>`` on that
node, both under ``numactl -N <numa> -m <numa>``, the client connecting to the node itself, and the client's
average bandwidth against a per-SKU minimum in Gb/s.

Which ports: the InfiniBand ports of the expected system (``gpuforge_expected_systems[...].hcas``, link layer from
``gpuforge_expected_link_speeds``) - the compute fabric GPUDirect RDMA serves. Ethernet ports (storage, RoCE) are
measured only when listed in ``extra_ports``. Which GPU: one of the GPUs that ``numa_affinity`` puts on the HCA's
NUMA node, the closest by ``nvidia-smi topo -m`` (PIX, PXB, PHB, NODE), spreading the HCAs over the GPUs.

Not applicable (no check, as peermem_loaded is left out and a DCGM-unsupported SKU's diagnostic is not run): an
expected system with ``peermem: false`` (it runs no GPUDirect RDMA) or with no port to measure.

Messages perftest prints when GPU memory cannot be registered for RDMA (no nvidia-peermem, no dma-buf):
``Couldn't allocate MR`` (older perftest) or ``Couldn't allocate MR with error=14`` (newer), then
``failed to create mr`` / ``Failed to create MR`` / `` Couldn't create IB resources`` (linux-rdma/perftest issues
#31 "Couldn't allocate MR errors on latest WITH_CUDA perftest" and #346 "Documentation issue with cuda").
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError as _BaseParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_node_health import numa_affinity
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import (
    boolean,
    integer,
    list_of,
    mapping_of,
    number,
    record,
    string,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perftest import parse_perftest_bw

__all__ = [
    "CHECK_NAME",
    "MESSAGE_SIZE",
    "check_thresholds",
    "classify",
    "judge_gdr",
    "listening_ports",
    "not_applicable",
    "plan_ports",
    "port_result",
    "threshold_for",
]

CHECK_NAME = "gdr_ib_write_bw"
# Azure's azure_ib_write_bw_gdr.nhc: MESSAGE_SIZE=8388608.
MESSAGE_SIZE = 8388608
MIB = 0x100000  # perftest's MB (ib_write_bw's MB/sec column)
# nvidia-smi topo -m codes, closest first (a path through a PCIe switch, then the host bridge, then the socket).
TOPO_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3}
LINK_LAYERS = ("InfiniBand", "Ethernet")
TCP_LISTEN = "0A"  # /proc/net/tcp st column for LISTEN (include/net/tcp_states.h: TCP_LISTEN = 10)


_SYSTEM = record(
    {
        "hcas": list_of(
            record(
                {
                    "name": string(numbers=True, nonempty=True),
                    "ports": list_of(
                        record({"port": integer(minimum=1), "link": string(numbers=True, nonempty=True)}, extra=True)
                    ),
                },
                required=("name",),
                extra=True,
            )
        ),
        "numa_affinity": numa_affinity(extra=True),
        "peermem": boolean(),
    },
    extra=True,
)
_LINK_SPEEDS = mapping_of(
    record(
        {"rate_gbit_per_s": number(above=0), "link_layer": string(choices=LINK_LAYERS)},
        required=("rate_gbit_per_s", "link_layer"),
        extra=True,
    ),
    key=string(numbers=True),
)
_THRESHOLDS = mapping_of(
    record({"min_gbit_per_s": number(above=0), "min_mib_per_s": number(above=0)}),
    key=string(numbers=True),
)


def check_thresholds(table) -> dict:
    """gpuforge_expected_ib_write_bw coerced; each entry holds exactly one of min_gbit_per_s, min_mib_per_s."""
    table = _THRESHOLDS("thresholds", table if table is not None else {})
    for link, entry in table.items():
        if len(entry) != 1:
            raise OptionError(f"thresholds.{link}", "needs exactly one of min_gbit_per_s, min_mib_per_s")
    return table


def threshold_for(link: str, rate_gbit_per_s: float, table: dict, min_fraction: float) -> dict:
    """{min, unit (Gb/s or MiB/s), source} for one port: the link's entry of the table, else min_fraction of the
    line rate (Gb/s)."""
    entry = table.get(link) or {}
    if "min_mib_per_s" in entry:
        return {"min": float(entry["min_mib_per_s"]), "unit": "MiB/s", "source": f"thresholds.{link}"}
    if "min_gbit_per_s" in entry:
        return {"min": float(entry["min_gbit_per_s"]), "unit": "Gb/s", "source": f"thresholds.{link}"}
    return {
        "min": round(float(rate_gbit_per_s) * float(min_fraction), 2),
        "unit": "Gb/s",
        "source": f"{min_fraction:g} of the {float(rate_gbit_per_s):g} Gb/s line rate",
    }


def _extra_port(path: str, text) -> tuple:
    """'mlx5_8/1' -> ('mlx5_8', 1); 'mlx5_8' -> ('mlx5_8', 1)."""
    if not isinstance(text, str) or not text.strip():
        raise OptionError(path, f"must be '<hca>/<port>' such as 'mlx5_8/1', got {text!r}")
    name, _sep, port = text.strip().partition("/")
    if port and not port.isdigit():
        raise OptionError(path, f"must be '<hca>/<port>' such as 'mlx5_8/1', got {text!r}")
    return name, int(port or 1)


def not_applicable(system: dict):
    """Why the check does not apply to this expected system (None when it does)."""
    if system.get("peermem") is False:
        return "the expected system runs no GPUDirect RDMA (peermem: false)"
    if not system.get("hcas"):
        return "the expected system has no HCA"
    return None


def _visible(gpus) -> dict:
    """{nvidia-smi index: gpu facts} of the GPUs nvidia-smi lists (an empty list: none known)."""
    found = {}
    for gpu in gpus or []:
        if isinstance(gpu, dict) and gpu.get("index") is not None:
            try:
                found[int(gpu["index"])] = gpu
            except (TypeError, ValueError):
                continue
    return found


def plan_ports(system, link_speeds, gpus=None, extra_ports=None) -> dict:
    """The runs to make: {applicable, reason, ports: [{key, hca, port, link, link_layer, rate_gbit_per_s, gpu, bus_id,
    numa, topo}], unplanned: [{key, why}]}. Raises OptionError naming a malformed system, link speed or extra port.

    gpus: nvidia_smi facts' gpus (index, bus_id, nics {hca: topo -m code}); without them every GPU of the NUMA
    group is a candidate and the HCAs are spread over them in order."""
    system = _SYSTEM("system", system if system is not None else {})
    speeds = _LINK_SPEEDS("link_speeds", link_speeds if link_speeds is not None else {})
    wanted = {_extra_port(f"extra_ports[{i}]", text) for i, text in enumerate(extra_ports or [])}
    reason = not_applicable(system)
    plan = {"applicable": reason is None, "reason": reason, "ports": [], "unplanned": []}
    if reason:
        return plan
    known = set()
    visible = _visible(gpus)
    uses: dict = {}
    for h, hca in enumerate(system.get("hcas") or []):
        for p, port in enumerate(hca.get("ports") or [{"port": 1}]):
            number_ = port.get("port", 1)
            known.add((hca["name"], number_))
            link = port.get("link")
            if link not in speeds:
                raise OptionError(
                    f"system.hcas[{h}].ports[{p}].link", f"{link!r} is not a key of link_speeds ({', '.join(speeds)})"
                )
            speed = speeds[link]
            if speed["link_layer"] != "InfiniBand" and (hca["name"], number_) not in wanted:
                continue
            entry = {
                "key": f"{hca['name']}/{number_}",
                "hca": hca["name"],
                "port": number_,
                "link": link,
                "link_layer": speed["link_layer"],
                "rate_gbit_per_s": speed["rate_gbit_per_s"],
            }
            why = _pick_gpu(entry, system.get("numa_affinity") or [], visible, bool(gpus), uses)
            if why:
                plan["unplanned"].append({"key": entry["key"], "why": why})
            else:
                plan["ports"].append(entry)
    for i, (name, number_) in enumerate(sorted(wanted)):
        if (name, number_) not in known:
            raise OptionError(f"extra_ports[{i}]", f"{name}/{number_} is not a port of the expected system's hcas")
    if not plan["ports"] and not plan["unplanned"]:
        plan.update(
            applicable=False,
            reason="the expected system has no InfiniBand port (Ethernet and storage "
            "ports are measured only when listed in extra_ports)",
        )
    return plan


def _pick_gpu(entry: dict, groups: list, visible: dict, facts_known: bool, uses: dict):
    """Set entry's gpu, bus_id, numa and topo to the closest GPU of the HCA's NUMA group; returns why not."""
    hca = entry["hca"]
    group = next((g for g in groups if hca in (g.get("hcas") or [])), None)
    if group is None:
        return f"no numa_affinity entry lists {hca}: its NUMA-local GPU is not known"
    candidates = [g for g in group.get("gpus") or [] if not facts_known or g in visible]
    if not candidates:
        return f"none of the GPUs {group.get('gpus')} of NUMA node {group['numa']} is visible to nvidia-smi"

    def topo(index):
        nics = (visible.get(index) or {}).get("nics")
        return nics.get(hca) if isinstance(nics, dict) else None

    best = min(candidates, key=lambda g: (TOPO_RANK.get(str(topo(g)), len(TOPO_RANK)), uses.get(g, 0), g))
    uses[best] = uses.get(best, 0) + 1
    bus_id = (visible.get(best) or {}).get("bus_id")
    entry.update(gpu=best, bus_id=str(bus_id) if bus_id else None, numa=group["numa"], topo=topo(best))
    return None


def listening_ports(text: str) -> set:
    """TCP ports in LISTEN state in the text of /proc/net/tcp or /proc/net/tcp6 (Linux proc(5))."""
    ports = set()
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or ":" not in fields[1]:
            continue
        if fields[3].upper() != TCP_LISTEN:
            continue
        try:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except ValueError:
            continue
    return ports


# (kind, pattern over the run's output, what it means, remedy). First match wins; order matters.
_ERRORS = (
    (
        "gpu_memory",
        re.compile(r"Couldn't allocate MR|[Ff]ailed to create MR|Couldn't register (GPU )?MR"),
        "GPU memory could not be registered for RDMA",
        "load nvidia-peermem (modprobe nvidia-peermem; lsmod | grep nvidia_peermem - 'disagrees about version of "
        "symbol' in dmesg means the driver was built before MLNX_OFED: reinstall the driver after OFED), or with the "
        "open GPU kernel modules use dma-buf (dmabuf: true runs --use_cuda_dmabuf)",
    ),
    (
        "port_down",
        re.compile(r"Port number \d+ state is \w+"),
        "the port is not Active",
        "check the cable and switch port (ibstat), and that a subnet manager runs on the fabric",
    ),
    (
        "no_device",
        re.compile(r"IB device \S+ not found|No IB devices found|Unable to find the Infiniband/RoCE device"),
        "the HCA is not there",
        "check lspci -d 15b3:, the mlx5_core driver and the firmware (mlxfwmanager)",
    ),
    (
        "no_cuda_support",
        re.compile(r"unrecognized option '--use_cuda|invalid option.*use_cuda|use_cuda.*not supported", re.I),
        "this perftest was built without CUDA",
        "install a perftest built with CUDA (./configure CUDA_H_PATH=/usr/local/cuda/include/cuda.h)",
    ),
    (
        "cuda",
        re.compile(r"No CUDA devices? |Couldn't init GPU context|cuInit|CUDA_ERROR|cudaError", re.I),
        "CUDA could not use the GPU",
        "check the GPU with nvidia-smi and the driver (the GPU index is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID)",
    ),
    (
        "usage",
        re.compile(r"unrecognized option|invalid option|unknown option", re.I),
        "this perftest does not know an option the check passes",
        "update perftest, or turn off the option it does not know (warm_up needs perftest 4.5 or later)",
    ),
    (
        "connect",
        re.compile(
            r"Couldn't connect to|Couldn't bind to port|Unable to init the socket connection|"
            r"Unable to open file descriptor for socket connection|Failed to exchange data"
        ),
        "the server and the client did not meet over TCP on this node",
        "check that nothing else listens on the TCP port (ss -ltnp) and that loopback traffic is not filtered",
    ),
)
_TIMEOUT_REMEDY = "check that the GPU and the HCA respond (nvidia-smi, ibstat) and that no other test holds the port"
_NO_RESULT_REMEDY = "run the same ib_write_bw server and client by hand on the node and read their output"
LOW_REMEDY = (
    "check that nvidia-peermem is loaded or dma-buf is used (lsmod | grep nvidia_peermem), that ACS is off on "
    "the PCIe bridges between the GPU and the HCA (lspci -vvv | grep ACSCtl: all '-'), the PCIe link of the HCA "
    "and of the GPU (lspci -vvv LnkSta against LnkCap; nvidia-smi -q -d PCI), that the GPU and the HCA share a "
    "PCIe switch or at least a socket (nvidia-smi topo -m: PIX/PXB, not SYS) and that the test ran on their NUMA "
    "node (numactl), and the port's rate (ibstat)"
)


def _first_lines(text: str, pattern=None, count: int = 3) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if pattern is not None:
        lines = [line for line in lines if pattern.search(line)] or lines
    return " | ".join(lines[:count])[:300]


def classify(text: str):
    """(kind, meaning, remedy, detail) for a run's output that shows why it failed, else None."""
    for kind, pattern, meaning, remedy in _ERRORS:
        if pattern.search(text or ""):
            return kind, meaning, remedy, _first_lines(text, pattern)
    return None


def port_result(port: dict, threshold: dict, client: dict, server=None) -> dict:
    """One port's record. client / server: {rc, out, err, timed_out} of the two runs (server None when it was not
    collected). status: ok, low (measured below the minimum) or error (no measurement), with error_kind, error and
    remedy for an error."""
    server = server or {}
    record_ = {key: port.get(key) for key in ("hca", "port", "link", "gpu", "bus_id", "numa", "topo")}
    record_.update(
        status="error",
        gbit_per_s=None,
        mib_per_s=None,
        min=f">= {threshold['min']:g} {threshold['unit']} ({threshold['source']})",
        error_kind=None,
        error=None,
        remedy="",
    )
    client_text = (client.get("out") or "") + "\n" + (client.get("err") or "")
    server_text = (server.get("out") or "") + "\n" + (server.get("err") or "")
    parsed = None
    try:
        parsed = parse_perftest_bw(client_text)
    except _BaseParseError:
        parsed = None
    measured = parsed is not None and parsed.get("bw_average_gbit_per_s") is not None and client.get("rc") == 0
    if measured:
        record_.update(gbit_per_s=parsed["bw_average_gbit_per_s"], mib_per_s=parsed["bw_average_mib_per_s"])
        value = record_["mib_per_s"] if threshold["unit"] == "MiB/s" else record_["gbit_per_s"]
        record_["status"] = "ok" if value >= threshold["min"] else "low"
        if record_["status"] == "low":
            record_["remedy"] = LOW_REMEDY
        return record_
    found = classify(client_text) or classify(server_text)
    if found:
        record_.update(error_kind=found[0], error=f"{found[1]}: {found[3]}", remedy=found[2])
    elif client.get("timed_out"):
        record_.update(error_kind="timeout", error="ib_write_bw did not finish in time", remedy=_TIMEOUT_REMEDY)
    else:
        detail = _first_lines(client_text) or _first_lines(server_text) or "no output"
        record_.update(
            error_kind="no_result",
            error=f"no bandwidth (client rc={client.get('rc')}): {detail}",
            remedy=_NO_RESULT_REMEDY,
        )
    return record_


def _gpu_name(record_: dict) -> str:
    return f"GPU {record_.get('bus_id') or record_.get('gpu')}"


def _where(key: str, record_: dict) -> str:
    return f"{key} ({_gpu_name(record_)}, NUMA {record_.get('numa')})"


def _mentions(check: dict, words) -> bool:
    """Whether a node check's observed or fault names any of words (an HCA name, a port key, a bus address)."""
    text = json.dumps(check.get("observed"), default=str) + " " + str(check.get("fault") or "")
    return any(re.search(r"(?<!\w)" + re.escape(w) + r"(?![\w])", text, re.I) for w in words if w)


def _root(name: str, failed: dict) -> str:
    """Follow a failed node check record's own caused_by to the check that is the root cause."""
    seen = set()
    while name in failed and failed[name].get("caused_by") and name not in seen:
        seen.add(name)
        cause = failed[name]["caused_by"][0]
        if cause not in failed:
            break
        name = cause
    return name


def _cause(key: str, record_: dict, failed: dict):
    """The failed gpu_node_check check that explains this port's failure, else None."""
    kind = record_.get("error_kind")
    hca = record_.get("hca")
    bus = str(record_.get("bus_id") or "")
    short_bus = bus.split(":", 1)[1].lower() if bus.count(":") == 2 else ""
    if kind == "no_device" and "hcas_present" in failed:
        return "hcas_present"
    if kind in ("port_down", "no_device") and "ib_port_state" in failed and _mentions(failed["ib_port_state"], [key]):
        return _root("ib_port_state", failed)
    if kind == "gpu_memory" and "peermem_loaded" in failed:
        return "peermem_loaded"
    if record_.get("status") == "low":
        if "ib_port_rate" in failed and _mentions(failed["ib_port_rate"], [key]):
            return "ib_port_rate"
        for name in ("pcie_link_hca", "pcie_link", "pcie_acs", "peermem_loaded"):
            if name in failed and (name == "peermem_loaded" or _mentions(failed[name], [hca, short_bus])):
                return _root(name, failed)
    return None


def judge_gdr(records: dict, unplanned=None, node_checks=None) -> dict:
    """The gdr_ib_write_bw check over {port key: port_result()}. A port below its minimum or without a result
    fails, named with its GPU's bus ID; ports the check could not give a NUMA-local GPU warn. node_checks: the
    gpu_node_check records of the same node (node_check records); when every failed port is explained by one of
    them that failed (port down, HCA absent, wrong rate, PCIe link, ACS, nvidia-peermem), caused_by names it."""
    unplanned = list(unplanned or [])
    failed = {c.get("check"): c for c in node_checks or [] if isinstance(c, dict) and c.get("verdict") == FAIL}
    low = [k for k, r in records.items() if r["status"] == "low"]
    errors = [k for k, r in records.items() if r["status"] == "error"]
    observed = {"ports": records, "low": low, "errors": errors, "unplanned": unplanned}
    expected = {k: r["min"] for k, r in records.items()}
    if low or errors:
        parts = [
            f"{_where(k, records[k])}: {records[k]['gbit_per_s']:.2f} Gb/s "
            f"({records[k]['mib_per_s']:.2f} MiB/s), expected {records[k]['min']}"
            for k in low
        ]
        parts += [f"{_where(k, records[k])}: {records[k]['error']}" for k in errors]
        remedies = {}
        for k in low + errors:
            remedies.setdefault(records[k]["remedy"], []).append(f"{k} with {_gpu_name(records[k])}")
        remedy = "; ".join(f"{', '.join(ports)}: {text}" for text, ports in remedies.items())
        causes = [_cause(k, records[k], failed) for k in low + errors]
        caused_by = None if None in causes else ",".join(sorted(set(causes)))
        return node_check(
            CHECK_NAME,
            FAIL,
            observed,
            expected,
            "GPUDirect RDMA loopback (ib_write_bw --use_cuda) failed on " + "; ".join(parts),
            remedy,
            caused_by=caused_by,
        )
    if unplanned:
        return node_check(
            CHECK_NAME,
            WARN,
            observed,
            expected,
            "GPUDirect RDMA not measured on " + "; ".join(f"{u['key']}: {u['why']}" for u in unplanned),
            "List each HCA with its NUMA-local GPUs in the expected system's numa_affinity, and check that those "
            "GPUs are visible (nvidia-smi)",
        )
    return node_check(CHECK_NAME, PASS, observed, expected)
