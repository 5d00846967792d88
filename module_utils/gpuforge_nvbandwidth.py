"""Parser and judge for NVIDIA nvbandwidth output (github.com/NVIDIA/nvbandwidth; stdlib only, Python 3.8).

The text format (fixtures and their sources: tests/fixtures/nvbandwidth/SOURCES.md): an optional header
(``nvbandwidth Version: v0.10``, ``Driver Version: ...``, ``Device 0: <name> (<bus>)`` lines), then per
testcase::

    Running host_to_device_memcpy_ce.
    memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
              0         1
    0     26.03     25.94

    SUM host_to_device_memcpy_ce 51.97
    COEFFICIENT_OF_VARIATION host_to_device_memcpy_ce 0.01

The matrix header holds the column indices; each row starts with its index; ``N/A`` marks a pair that is not
measured (a GPU with itself). Host<->device testcases have one host row and one column per GPU; device to
device testcases have a row and a column per GPU. ``SUM`` and ``COEFFICIENT_OF_VARIATION`` lines appear from
v0.5 / v0.10 on; the oldest README output has neither.

nvbandwidth v0.8 (NVIDIA/nvbandwidth v0.8: ``output.cpp``, ``testcases_ce.cpp``, ``testcases_sm.cpp``,
``inline_common.h``; tests/fixtures/nvbandwidth/gpuforge-device_1xh200_*) also prints:

* matrices in ns as well as GB/s: ``memory latency SM CPU(row) <-> GPU(column) (ns)`` (host_device_latency_sm),
  ``Device to Device Latency SM GPU(row) <-> GPU(column) (ns)``, ``memcpy local GPU(column) bandwidth (GB/s)``;
* three matrices for a bidirectional device-to-device testcase, ``... Read1 bandwidth (GB/s)``, ``... Read2 ...``
  and ``... Total ...`` (or Write1/Write2/Total), each followed by its own ``SUM <testcase>_read1`` (``_read2``,
  ``_write1``, ``_write2``, ``_total``) line;
* for a testcase the system cannot run (device to device on one GPU), ``Waived: `` with no testcase name and no
  ``Running`` line before it (``Output::addTestcase``). Such a line belongs to no testcase the output names: it
  is counted (``waived_unnamed``), not pinned on the testcase printed before it. The lab simulator's older form,
  ``Running <name>.`` directly followed by ``Waived: <why>``, still marks that testcase waived.

Built with MULTINODE and run under MPI, one rank per GPU of an NVLink multi-node clique (``nvbandwidth -p
multinode``; v0.8 ``output.cpp`` printGPUsMultinode, ``multinode_testcases.cpp``, ``inline_common.h``), rank 0 prints:

* one ``Process <rank> (<host>): device <ordinal>: <name> (<bus>)`` line per rank instead of the ``Device`` lines
  (the rank right-aligned to the width of the largest, ``getPaddedProcessId``), and a ``Warning: there are more
  processes than GPUs on <host>. ...`` line where a node has more ranks than GPUs;
* the ``multinode_*`` testcases, whose matrix rows and columns are ranks, not device ordinals;
* for ``multinode_bisect_write_ce``, the title ``Bisect benchmarking, simultaneous write CE BW`` (no unit: the
  bandwidths are GB/s as in every memcpy testcase, memcpy.cpp) over one column, each row labelled ``<rank>-><peer>``
  with both ranks padded the same way (`` 0-> 8``). Parsed as a matrix of rank -> {peer: GB/s}.

Device numbers are CUDA device ordinals. The module runs nvbandwidth with CUDA_DEVICE_ORDER=PCI_BUS_ID, so
ordinal N is the GPU nvidia-smi shows as index N ("CUDA_DEVICE_ORDER ... PCI_BUS_ID orders devices by PCI bus
ID in ascending order", CUDA C++ Programming Guide, CUDA Environment Variables).
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = [
    "HOST_TESTCASES",
    "MULTINODE_PREFIX",
    "P2P_TESTCASES",
    "TESTCASES",
    "ParseError",
    "is_pairs",
    "judge_bandwidth",
    "parse_output",
    "per_gpu",
]

# Short names the module takes -> nvbandwidth testcase names (the ones Azure's check_gpu_bw runs).
TESTCASES = {
    "h2d": "host_to_device_memcpy_ce",
    "d2h": "device_to_host_memcpy_ce",
    "p2p": "device_to_device_memcpy_read_ce",
}
HOST_TESTCASES = ("host_to_device", "device_to_host")
P2P_TESTCASES = ("device_to_device",)

_RUNNING = re.compile(r"^Running (?P<name>[A-Za-z0-9_]+)\.?\s*$")
# A matrix title: the README's and v0.10's are ``memcpy ... bandwidth (GB/s)``; v0.8 adds ``memory latency SM ...
# (ns)`` and ``Device to Device Latency SM ... (ns)`` (testcases_sm.cpp) and, built with MULTINODE, ``multicast SM
# ... bandwidth (GB/s)`` (multinode_testcases.cpp).
_LABEL = re.compile(
    r"^(?:memcpy|multicast|memory latency|device to device latency)\s.*\((?P<unit>[A-Za-z/]+)\)\s*$", re.IGNORECASE
)
# multinode_bisect_write_ce's title names no unit (multinode_testcases.cpp): GB/s, as its copies are measured.
_BISECT = re.compile(r"^Bisect benchmarking\b", re.IGNORECASE)
_BISECT_UNIT = "GB/s"
# A bisect row: "<rank>-><peer>" (each padded to the width of the largest rank), then the values.
_PAIR_ROW = re.compile(r"^(?P<src>\d+)\s*->\s*(?P<dst>\d+)(?:\s+(?P<values>\S.*))?$")
_WARNING = re.compile(r"^Warning: (?P<text>.+)$")
_SUM = re.compile(r"^SUM (?P<name>[A-Za-z0-9_]+) (?P<value>[0-9.]+)\s*$")
_CV = re.compile(r"^COEFFICIENT_OF_VARIATION (?P<name>[A-Za-z0-9_]+) (?P<value>[0-9.]+)\s*$")
_WAIVED = re.compile(r"^Waived\b")
# The SUM key of each matrix of a bidirectional device-to-device testcase: <testcase>_<part>.
_PARTS = ("read1", "read2", "write1", "write2", "total")
_VERSION = re.compile(r"^nvbandwidth Version:\s*(?P<v>\S+)")
_DRIVER = re.compile(r"^Driver Version:\s*(?P<v>\S+)")
_BUS = r"[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?"
_DEVICE = re.compile(r"^Device (?P<n>\d+): (?P<name>.*?)(?: \((?P<bus>" + _BUS + r")\))?\s*$")
_PROCESS = re.compile(
    r"^Process\s+(?P<rank>\d+) \((?P<host>[^)]*)\): device (?P<device>\d+): (?P<name>.*?)"
    r"(?: \((?P<bus>" + _BUS + r")\))?\s*$"
)


def _value(text: str, where: str):
    if text == "N/A":
        return None
    try:
        return float(text)
    except ValueError:
        raise ParseError(f"{where}: {text!r} is not a bandwidth") from None


def _bus(text):
    """nvbandwidth's "00000000:1b:00" -> nvidia-smi's "00000000:1B:00.0" (None stays None)."""
    if not text:
        return None
    bus = text.upper()
    return bus if "." in bus else bus + ".0"


def _matrix(lines: list, start: int, name: str):
    """(matrix {row: {column: value}}, columns, next line index) from the header line at start."""
    header = lines[start].split()
    if not header or not all(h.isdigit() for h in header):
        raise ParseError(f"{name}: expected the column indices after the matrix title, got {lines[start]!r}")
    columns = [int(h) for h in header]
    matrix = {}
    i = start + 1
    pairs = _PAIR_ROW.match(lines[i]) if i < len(lines) else None
    if pairs:
        return _pair_matrix(lines, i, name, columns)
    while i < len(lines):
        fields = lines[i].split()
        if not fields or not fields[0].isdigit():
            break
        if len(fields) != len(columns) + 1:
            raise ParseError(
                f"{name}: row {fields[0]} has {len(fields) - 1} values for {len(columns)} columns (truncated?)"
            )
        matrix[int(fields[0])] = {c: _value(v, f"{name} row {fields[0]}") for c, v in zip(columns, fields[1:])}
        i += 1
    if not matrix:
        raise ParseError(f"{name}: the matrix has a header but no rows")
    return matrix, columns, i


def _pair_matrix(lines: list, start: int, name: str, columns: list):
    """A matrix whose rows are labelled ``<rank>-><peer>`` over one column (multinode_bisect_write_ce) ->
    ({rank: {peer: value}}, the peers in order, next line index)."""
    if len(columns) != 1:
        raise ParseError(f"{name}: rows labelled <rank>-><peer> over {len(columns)} columns; nvbandwidth prints one")
    matrix = {}
    i = start
    while i < len(lines):
        row = _PAIR_ROW.match(lines[i])
        if not row:
            break
        values = (row.group("values") or "").split()
        src, dst = int(row.group("src")), int(row.group("dst"))
        if len(values) != 1:
            raise ParseError(f"{name}: row {src}->{dst} has {len(values)} values for 1 column (truncated?)")
        matrix.setdefault(src, {})[dst] = _value(values[0], f"{name} row {src}->{dst}")
        i += 1
    peers = sorted({peer for row in matrix.values() for peer in row})
    return matrix, peers, i


def _sum_key(testcase: str, title: str) -> str:
    """The key nvbandwidth prints on the SUM line of this matrix: <testcase>, or <testcase>_read1 (read2,
    write1, write2, total) for the matrices of a bidirectional device-to-device testcase."""
    words = [word.lower() for word in title.split()]
    for part in _PARTS:
        if part in words:
            return f"{testcase}_{part}"
    return testcase


def _headline(name: str, case: dict) -> None:
    """The testcase's title/unit/columns/matrix/sum: its only matrix, or of several the ``_total`` one (both
    directions added, Read1 + Read2 or Write1 + Write2 in testcases_ce.cpp/testcases_sm.cpp), else the first."""
    matrices = case["matrices"]
    if not matrices:
        return
    key = name if name in matrices else f"{name}_total" if f"{name}_total" in matrices else next(iter(matrices))
    chosen = matrices[key]
    for field in ("title", "unit", "columns", "matrix"):
        case[field] = chosen[field]
    if case["sum"] is None:
        case["sum"] = chosen["sum"]


def parse_output(text: str) -> dict:
    """Parse nvbandwidth's text output.

    Returns {version, driver_version, devices: {ordinal: {name, bus_id}}, processes (a multinode run's ranks:
    {rank: {host, device, name, bus_id}}), warnings (its ``Warning:`` lines), waived_unnamed (the count of
    ``Waived:`` lines that name no testcase), testcases: {name: {title, unit, columns, matrix {row: {column:
    GB/s, ns or None}}, sum, cv, waived, matrices}}}. ``matrices`` holds every matrix of the testcase, keyed by
    the key of its SUM line: {key: {title, unit, columns, matrix, sum}}; title..matrix and sum are those of its
    only (or its ``_total``) matrix. Raises ParseError on output with neither a testcase nor a waiver, a
    testcase with neither a matrix nor a waiver, or a malformed matrix.
    """
    lines = [line.strip() for line in (text or "").splitlines()]
    result = {
        "version": None,
        "driver_version": None,
        "devices": {},
        "processes": {},
        "warnings": [],
        "testcases": {},
        "waived_unnamed": 0,
    }
    current = None
    current_name = None
    just_started = False  # the previous non-blank line was this testcase's Running line
    sums = {}  # SUM key -> matrix entry waiting for its SUM line
    i = 0
    while i < len(lines):
        line = lines[i]
        match = _RUNNING.match(line)
        if match:
            current_name = match.group("name")
            current = {"title": None, "unit": None, "columns": [], "matrix": {}, "sum": None, "cv": None}
            current["waived"] = False
            current["matrices"] = {}
            result["testcases"][current_name] = current
            just_started = True
            i += 1
            continue
        label = _LABEL.match(line)
        unit = label.group("unit") if label else _BISECT_UNIT if _BISECT.match(line) else None
        if unit and current is not None:
            if i + 1 >= len(lines):
                raise ParseError(f"output ends after the matrix title {line!r}")
            matrix, columns, i = _matrix(lines, i + 1, line)
            key = _sum_key(current_name, line)
            entry = {"title": line, "unit": unit, "columns": columns, "matrix": matrix, "sum": None}
            if key not in current["matrices"]:
                current["matrices"][key] = entry
                sums[key] = entry
            just_started = False
            continue
        found = _SUM.match(line)
        if found and found.group("name") in sums:
            sums.pop(found.group("name"))["sum"] = float(found.group("value"))
        elif found and found.group("name") in result["testcases"]:
            result["testcases"][found.group("name")]["sum"] = float(found.group("value"))
        found = _CV.match(line)
        if found and found.group("name") in result["testcases"]:
            result["testcases"][found.group("name")]["cv"] = float(found.group("value"))
        if _WAIVED.match(line):
            if just_started and current is not None and not current["matrices"]:
                current["waived"] = True
            else:
                result["waived_unnamed"] += 1
        for pattern, key in ((_VERSION, "version"), (_DRIVER, "driver_version")):
            found = pattern.match(line)
            if found:
                result[key] = found.group("v")
        process = _PROCESS.match(line)
        if process:
            result["processes"][int(process.group("rank"))] = {
                "host": process.group("host"),
                "device": int(process.group("device")),
                "name": process.group("name"),
                "bus_id": _bus(process.group("bus")),
            }
        warning = _WARNING.match(line)
        if warning:
            result["warnings"].append(warning.group("text"))
        device = _DEVICE.match(line)
        if device:
            result["devices"][int(device.group("n"))] = {
                "name": device.group("name"),
                "bus_id": _bus(device.group("bus")),
            }
        if line:
            just_started = False
        i += 1
    if not result["testcases"] and not result["waived_unnamed"]:
        raise ParseError("no 'Running <testcase>.' line: not nvbandwidth output, or it failed to start")
    for name, case in result["testcases"].items():
        if not case["matrices"] and not case["waived"]:
            raise ParseError(f"{name}: no bandwidth matrix (the run stopped before printing it?)")
        _headline(name, case)
    return result


# Testcases that measure one value per device, in a single row with one column per device, whatever their name
# says of the peers: every device's total to or from all others, and the multicast ones (testcase.h,
# multinode_testcases.cpp).
_PER_COLUMN = ("all_to_one", "all_from_one", "broadcast")
MULTINODE_PREFIX = "multinode_"


def is_pairs(name: str) -> bool:
    """Whether the testcase's values are per device pair: device to device copies (on one node, or between the
    ranks of a multinode clique) and the multinode bisection's simultaneous pairs."""
    base = name[len(MULTINODE_PREFIX) :] if name.startswith(MULTINODE_PREFIX) else name
    if any(kind in base for kind in _PER_COLUMN):
        return False
    return base.startswith((*P2P_TESTCASES, "bisect"))


def per_gpu(name: str, case: dict) -> dict:
    """Host<->device testcase (and a per-device total) -> {gpu ordinal or rank: GB/s} (the lowest row of its
    column); device<->device (and the bisection) -> {(src, dst): GB/s} for the measured pairs."""
    if is_pairs(name):
        return {(r, c): v for r, row in case["matrix"].items() for c, v in row.items() if v is not None}
    values = {}
    for column in case["columns"]:
        measured = [row[column] for row in case["matrix"].values() if row.get(column) is not None]
        if measured:
            values[column] = min(measured)
    return values


def _low(testcase, gpu, bus_id, peer, gbyte_per_s, minimum) -> dict:
    return {
        "testcase": testcase,
        "gpu": gpu,
        "bus_id": bus_id,
        "peer": peer,
        "gbyte_per_s": gbyte_per_s,
        "min": minimum,
    }


def judge_bandwidth(parsed: dict, thresholds: dict, gpus=None) -> dict:
    """The ``nvbandwidth`` check. thresholds: {testcase name: minimum GB/s per GPU (host testcases) or per
    GPU pair (device to device)}. A GPU or pair below its minimum fails, named by PCI bus ID (``gpus``: the
    nvidia-smi facts' list of {index, bus_id}; nvbandwidth's own ``Device N: ... (bus)`` lines win when
    printed). A testcase asked for but waived or missing warns.
    observed: {testcases: {name: {<bus id or pair>: GB/s}}, low: [{testcase, gpu, bus_id, peer, gbyte_per_s, min}],
    waived: [...], missing: [...]}."""
    buses = {}
    for gpu in gpus or []:
        if isinstance(gpu, dict) and gpu.get("index") is not None and gpu.get("bus_id"):
            buses[int(gpu["index"])] = str(gpu["bus_id"])
    for ordinal, device in (parsed.get("devices") or {}).items():
        if device.get("bus_id"):
            buses[int(ordinal)] = device["bus_id"]
    # A multinode run's matrices count ranks: each named by its node and GPU (``host:bus``).
    ranks = {
        int(rank): f"{process['host']}:{process.get('bus_id') or 'GPU ' + str(process['device'])}"
        for rank, process in (parsed.get("processes") or {}).items()
    }

    def board(n: int, name: str = "") -> str:
        if name.startswith(MULTINODE_PREFIX) and n in ranks:
            return ranks[n]
        return buses.get(n, f"GPU {n}")

    low, waived, missing, table = [], [], [], {}
    for name, given in sorted(thresholds.items()):
        minimum = float(given)
        case = parsed["testcases"].get(name)
        if case is None:
            missing.append(name)
            continue
        if case["waived"]:
            waived.append(name)
            continue
        values = per_gpu(name, case)
        if is_pairs(name):
            table[name] = {f"{board(a, name)}->{board(b, name)}": v for (a, b), v in sorted(values.items())}
            low += [
                _low(name, a, board(a, name), board(b, name), v, minimum)
                for (a, b), v in sorted(values.items())
                if v < minimum
            ]
        else:
            table[name] = {board(g, name): v for g, v in sorted(values.items())}
            low += [_low(name, g, board(g, name), None, v, minimum) for g, v in sorted(values.items()) if v < minimum]
    observed = {"testcases": table, "low": low, "waived": waived, "missing": missing}
    expected = {name: f">= {minimum} GB/s" for name, minimum in sorted(thresholds.items())}
    if low:
        named = "; ".join(
            f"{entry['testcase']} {entry['bus_id']}"
            + (f"->{entry['peer']}" if entry["peer"] else "")
            + f" {entry['gbyte_per_s']:.2f} GB/s < {entry['min']}"
            for entry in low
        )
        return node_check(
            "nvbandwidth",
            FAIL,
            observed,
            expected,
            f"host/GPU bandwidth below the SKU minimum: {named}",
            "Check the GPU's PCIe link (nvidia-smi -q -d PCI: current generation and width against the maximum; "
            "a downtrained x8 or Gen3 link halves the bandwidth), the NUMA placement of the test and the BIOS "
            "settings (IOMMU passthrough, ACS, max payload); reseat the GPU or its riser if the link is degraded; "
            "a low device-to-device pair points at NVLink (nvidia-smi nvlink -s); a low pair of a multinode run "
            "at the NVLink switch trays and the IMEX service of its nodes (nvidia-imex, nodes_config.cfg)",
        )
    if waived or missing:
        return node_check(
            "nvbandwidth",
            WARN,
            observed,
            expected,
            "nvbandwidth did not measure " + ", ".join(waived + missing),
            "A waived testcase is not supported on this system (e.g. no peer access between the GPUs); "
            "check nvidia-smi topo -m and the nvbandwidth version",
        )
    return node_check("nvbandwidth", PASS, observed, expected)
