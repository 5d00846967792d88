"""Parse nccl-tests ``*_perf`` output (every era) and judge it against expectations.

Formats handled (facts from the public nccl-tests output, see tests/fixtures/nccl-tests/SOURCES.md):

* pre-2022 (nccl-tests < 2.13): no ``root`` column, an ``error`` column holding the max delta,
  device lines ``#   Rank  0 Pid  88131 on host device  0 [0x36] <name>``.
* 2022+: ``root`` and ``#wrong`` columns, ``Rank  0 Group  0 Pid`` device lines, ``agg iters`` and
  ``graph`` in the header line.
* 2.17+: ``# Collective test starting:/concluded:`` lines; 2.18+: ``# nccl-tests version ...`` line,
  ``unalign`` in the header and wider, padded columns.
* ``NCCL INFO`` lines (NCCL_DEBUG=INFO) may be interleaved anywhere, even inside the table; they are
  read for the transport NCCL used (``NET/IB`` or ``NET/Socket``, ``GDRDMA``, the IB devices).
* Options of current nccl-tests that change the table (``src/util.cu`` ``writeResultHeader``, NVIDIA/nccl-tests
  https://github.com/NVIDIA/nccl-tests/blob/cfa8a9674b467b8e200775a62b09ff11d4c363ac/src/util.cu and later):
  ``-I 1`` adds ``i_min i_max i_p99 i_cv%`` after each run's ``#wrong``, bitwise checking adds ``#bitdiff``,
  ``-C 1`` names the time column ``cputime``, ``-S 1`` appends a ``timestamp`` (date and time, two words).
* The footer: ``# Out of bounds values : N OK|FAILED`` is the correctness verdict; ``# Avg bus bandwidth : X``
  ends with ``OK`` or ``FAILED`` when NCCL_TESTS_MIN_BW is set (FAILED below 0.9 x that value, and the program
  then exits non-zero; ``writeResultFooter`` and ``main`` in ``src/common.cu`` of the same repository).
* The NCCL version as it is printed: ``NCCL version 2.18.3+cuda12.2`` (NCCL's own banner, with or without an
  ``NCCL INFO`` prefix), ``# nccl-tests version 2.18.2 nccl-headers=23007 nccl-library=23007`` (version codes),
  or ``"nccl_version": 23007`` in the JSON file.

``parse_nccl_tests_json`` reads the file ``-J FILE`` writes (see its docstring for the key names).

Stdlib only, and the gpuforge_errors/gpuforge_options files Ansible ships with it.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, bench_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import worst_status as overall_status
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError, ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import integer, number, record, string
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_integer, to_number

__all__ = [
    "EXPECT",
    "decode_nccl_version",
    "json_output_path",
    "judge_nccl",
    "overall_status",
    "parse_nccl_tests",
    "parse_nccl_tests_json",
]


# The keys judge_nccl reads (the nccl_tests module's `expect` option), coerced: EXPECT("expect", value)
# raises OptionError naming the key for a value of the wrong type and for a key judge_nccl does not know.
EXPECT = record(
    {
        "min_busbw_gbyte_per_s": number(minimum=0),
        "large_message_bytes": integer(minimum=0),
        "warn_ratio": number(above=0, maximum=1),
        "transport": string(choices=("tcp", "ib", "ib_gdr")),
        "max_small_latency_us": number(above=0),
        "small_message_bytes": integer(minimum=0),
        "max_wrong": integer(minimum=0),
        "max_iter_cv_pct": number(minimum=0),
    }
)


_HEADER_INT_KEYS = ("nThread", "nGpus", "minBytes", "maxBytes")
_HEADER_LABELLED = {
    "warmup_iters": r"warmup iters:\s*(\d+)",
    "iters": r"(?<!warmup )(?<!agg )\biters:\s*(\d+)",
    "agg_iters": r"agg iters:\s*(\d+)",
    "validation": r"validation:\s*(\d+)",
    "graph": r"graph:\s*(\d+)",
    "unalign": r"unalign:\s*(\d+)",
}
_DEVICE_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*?)\s*$"
)
# host:pid:tid [cudaDev] NCCL INFO|WARN ... ; the prefix varies, only the marker matters.
_NCCL_LOG_RE = re.compile(r"\bNCCL (INFO|WARN)\b\s?(.*)$")
_NET_USING_RE = re.compile(r"NET/(\w+)\s*:\s*Using\s+(.*)$")
_NET_DEVICE_RE = re.compile(r"\[\d+\]([^\s/;\[]+)(?:/(\w+))?")
_VIA_RE = re.compile(r"\bvia\s+(\S+)")
_NETWORK_RE = re.compile(r"Using network (\S+)")
_NCCL_VERSION_RE = re.compile(r"NCCL version (\S+)")
# NCCL 2.19+ init line "comm 0x... rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0" (init.cc)
_NNODES_RE = re.compile(r"\bnNodes (\d+)\b")
_TESTS_VERSION_RE = re.compile(r"^#\s*nccl-tests version (\S+)")
_VERSION_CODES_RE = re.compile(r"nccl-(headers|library)=(\d+)")
_JSON_PATH_RE = re.compile(r"^#\s*Writing JSON output to (\S+)", re.IGNORECASE)
_COLLECTIVE_RE = re.compile(r"^#\s*Collective test (starting|concluded):\s*(\S+)")
_RUNNING_RE = re.compile(r"(\w+_perf)\b")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)")
_FAILURE_RE = re.compile(r"(Test NCCL failure|Test CUDA failure|Test failure|NCCL error)")

# Column names as the table header spells them, mapped to result keys. "time" (or "cputime" with -C 1)
# opens a run; the per-iteration (-I 1) and bitwise columns exist only in the runs of a table that has them.
_PER_RUN_COLUMNS = {
    "time": "time_us",
    "cputime": "time_us",
    "algbw": "algbw",
    "busbw": "busbw",
    "#wrong": "wrong",
    "error": "error",
    "#bitdiff": "bitdiff",
    "i_min": "iter_min_us",
    "i_max": "iter_max_us",
    "i_p99": "iter_p99_us",
    "i_cv%": "iter_cv_pct",
}
_BASE_RUN_KEYS = ("time_us", "algbw", "busbw", "wrong", "error")


def decode_nccl_version(code) -> str | None:
    """``NCCL_VERSION_CODE`` as a dotted version: 2.9 and later code X.Y.Z as X*10000 + Y*100 + Z, earlier
    releases as X*1000 + Y*100 + Z (``NCCL_VERSION`` in NCCL's nccl.h.in,
    https://github.com/NVIDIA/nccl/blob/master/src/nccl.h.in). None for anything that is not a positive code."""
    try:
        code = int(code)
    except (TypeError, ValueError):
        return None
    if code <= 0:
        return None
    if code >= 20900:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def json_output_path(text: str) -> str | None:
    """Where nccl-tests says it wrote its ``-J`` file (it appends ``.0``, ``.1``... when the path exists)."""
    for line in text.splitlines():
        match = _JSON_PATH_RE.match(line.strip())
        if match:
            return match.group(1)
    return None


def _parse_header_line(line: str) -> dict:
    header: dict = {}
    for key in _HEADER_INT_KEYS:
        match = re.search(rf"\b{key}\s+(\d+)", line)
        if match:
            header[key] = int(match.group(1))
    step = re.search(r"step:\s*(\d+)\((\w+)\)", line)
    if step:
        header["step"] = int(step.group(1))
        header["step_kind"] = step.group(2)  # "factor" or "bytes"
    for key, pattern in _HEADER_LABELLED.items():
        match = re.search(pattern, line)
        header[key] = int(match.group(1)) if match else None
    return header


def _table_columns(line: str) -> list[str] | None:
    """Column names of the ``#  size  count ...`` header line, or None if this is not it."""
    tokens = line.lstrip("#").split()
    if len(tokens) < 4 or tokens[0] != "size" or tokens[1] != "count":
        return None
    return tokens


def _parse_row(tokens: list[str], columns: list[str]) -> dict | None:
    # A row that does not fill the header's columns is unreadable (the caller reports it); this check
    # stands in for zip(strict=True), which managed nodes' Python (3.8+) lacks.
    if columns and columns[-1] == "timestamp" and len(tokens) == len(columns) + 1:
        tokens = [*tokens[:-2], " ".join(tokens[-2:])]  # -S 1: "%Y-%m-%d %H:%M:%S" is two words
    if len(tokens) != len(columns):
        return None
    row: dict = {"size": None, "count": None, "type": None, "redop": None, "root": None}
    runs: list[dict] = []
    for name, token in zip(columns, tokens):
        if name == "timestamp":
            row["timestamp"] = token
            continue
        if name in ("size", "count", "root"):
            row[name] = to_number(token)
        elif name in ("type", "redop"):
            row[name] = token
        elif name in _PER_RUN_COLUMNS:
            # "time" opens a new run: out-of-place first, then in-place.
            if name in ("time", "cputime"):
                runs.append(dict.fromkeys(_BASE_RUN_KEYS))
            if not runs:
                return None
            runs[-1][_PER_RUN_COLUMNS[name]] = to_number(token)
    if not isinstance(row["size"], int) or len(runs) not in (1, 2):
        return None
    row["out_of_place"] = runs[0]
    row["in_place"] = runs[1] if len(runs) == 2 else None
    return row


def _transport(info_lines: list[str]) -> dict:
    """The transport NCCL used, from its INFO lines: the ``via NET/...`` channel paths first, else the network
    it picked (``Using network X``, ``NET/X : Using ...``). NCCL loads and names a network plugin on every run,
    also on one node; when its init lines say every communicator spans one node (``nNodes 1``) and no channel
    goes ``via NET/``, nothing crossed the network: ``net`` and ``mode`` are None, ``net_plugin`` names the plugin
    it loaded and ``nodes`` is 1."""
    net_using: list[str] = []
    ib_devices: list[str] = []
    socket_interfaces: list[str] = []
    via_nets: Counter = Counter()
    paths: set[str] = set()
    network = None
    nccl_version = None
    gdrdma = False
    nodes = None
    for message in info_lines:
        version = _NCCL_VERSION_RE.search(message)
        if version and nccl_version is None:
            nccl_version = version.group(1)
        match = _NETWORK_RE.search(message)
        if match:
            network = match.group(1)
        spanned = _NNODES_RE.search(message)
        if spanned:
            nodes = max(nodes or 0, int(spanned.group(1)))
        using = _NET_USING_RE.search(message)
        if using:
            kind, rest = using.group(1), using.group(2).split(";")[0]
            net_using.append(kind)
            for name, _layer in _NET_DEVICE_RE.findall(rest):
                target = ib_devices if kind == "IB" else socket_interfaces
                # Socket devices print as eth0:10.0.0.1<0>; keep the interface name only.
                entry = name if kind == "IB" else name.split(":")[0]
                if entry not in target:
                    target.append(entry)
        via = _VIA_RE.search(message)
        if via:
            # NET/IB/0/GDRDMA or NET/IB/0(1)/GDRDMA -> NET/IB/GDRDMA; P2P/IPC/read -> P2P/IPC/read
            parts = [part for part in via.group(1).split("/") if not re.match(r"^\d+(\(\d+\))?$", part)]
            if not parts:
                continue
            paths.add("/".join(parts))
            if parts[0] == "NET" and len(parts) > 1:
                via_nets[parts[1]] += 1
                gdrdma = gdrdma or "GDRDMA" in parts
    plugin = network or (net_using[-1] if net_using else None)
    if via_nets:
        net = via_nets.most_common(1)[0][0]
    elif nodes == 1:
        net = None  # one node: the plugin was loaded, no channel used it
    else:
        net = plugin
    mode = None
    if net == "Socket":
        mode = "tcp"
    elif net == "IB":
        mode = "ib_gdr" if gdrdma else "ib"
    return {
        "net": net,
        "mode": mode,
        "gdrdma": gdrdma,
        "ib_devices": ib_devices,
        "socket_interfaces": socket_interfaces,
        "paths": sorted(paths),
        "nccl_version": nccl_version,
        "info_lines": len(info_lines),
        "nodes": nodes,
        "net_plugin": plugin,
    }


def _era(tests_version, collective_marker: bool, columns: list[str] | None, header: dict) -> str | None:
    if tests_version:
        return "2.18+"
    if collective_marker:
        return "2.17+"
    if columns is not None:
        return "2022+" if "root" in columns or "#wrong" in columns else "pre-2022"
    if header:
        return "2022+" if header.get("agg_iters") is not None else "pre-2022"
    return None


def parse_nccl_tests(text: str) -> dict:
    """Parse one nccl-tests run; raise ParseError when nothing of nccl-tests is in ``text``.

    Lines that look like table rows but do not fit the column header go to ``errors`` (truncated
    or interleaved output), never raise.
    """
    header: dict = {}
    devices: list[dict] = []
    rows: list[dict] = []
    errors: list[str] = []
    failures: list[str] = []
    info_lines: list[str] = []
    warnings: list[str] = []
    columns: list[str] | None = None
    collective = None
    tests_version = None
    collective_marker = False
    concluded = False
    avg_busbw = None
    min_bw_check = None
    oob = None
    oob_ok = None
    version_codes: dict = {}
    banner_version = None

    for line_number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        log = _NCCL_LOG_RE.search(line)
        if log:
            (info_lines if log.group(1) == "INFO" else warnings).append(log.group(2))
            continue
        if not line.strip():
            continue
        version = _NCCL_VERSION_RE.search(line)
        if version and not line.startswith("#"):
            # NCCL's banner without the INFO prefix (printed by rank 0 at NCCL_DEBUG=VERSION/WARN).
            banner_version = banner_version or version.group(1)
            continue
        if _FAILURE_RE.search(line):
            failures.append(line.strip())
            continue
        if line.startswith("Running:") or (not line.startswith("#") and "_perf" in line and not rows):
            match = _RUNNING_RE.search(line)
            if match and collective is None:
                collective = match.group(1)
            continue
        if line.startswith("#"):
            if "nThread" in line and "nGpus" in line:
                header = _parse_header_line(line)
                continue
            match = _TESTS_VERSION_RE.match(line)
            if match:
                tests_version = match.group(1)
                version_codes.update({kind: int(code) for kind, code in _VERSION_CODES_RE.findall(line)})
                continue
            match = _COLLECTIVE_RE.match(line)
            if match:
                collective_marker = True
                collective = collective or match.group(2)
                concluded = concluded or match.group(1) == "concluded"
                continue
            match = _DEVICE_RE.match(line)
            if match:
                devices.append(
                    {
                        "rank": int(match.group("rank")),
                        "group": int(match.group("group")) if match.group("group") else None,
                        "pid": int(match.group("pid")),
                        "host": match.group("host"),
                        "device": int(match.group("device")),
                        "bus_id": match.group("bus"),
                        "name": match.group("name"),
                    }
                )
                continue
            match = _AVG_RE.match(line)
            if match:
                avg_busbw = to_number(match.group(1))
                min_bw_check = match.group(2)
                continue
            match = _OOB_RE.match(line)
            if match:
                oob, oob_ok = int(match.group(1)), match.group(2) == "OK"
                continue
            found = _table_columns(line)
            if found:
                columns = found
            continue
        tokens = line.split()
        if not tokens[0].isdigit():
            continue
        row = _parse_row(tokens, columns) if columns else None
        if row is None:
            errors.append(f"line {line_number}: unreadable result row: {line.strip()}")
        else:
            rows.append(row)

    if not header and not devices and not rows and columns is None:
        raise ParseError("no nccl-tests header, device list or result table found")
    if not rows:
        errors.append("no result rows")

    has_wrong = columns is not None and "#wrong" in columns
    wrong_total = None
    if has_wrong:
        cells = [run["wrong"] for row in rows for run in (row["out_of_place"], row["in_place"]) if run]
        counted = [cell for cell in cells if isinstance(cell, int)]
        # -c 0 prints N/A in every #wrong cell: nothing was checked, so no count (not 0).
        wrong_total = sum(counted) if counted else None
    elif oob is not None:
        wrong_total = oob
    busbws = [run["busbw"] for row in rows for run in (row["out_of_place"], row["in_place"]) if run]
    busbws = [value for value in busbws if value is not None]
    max_errors = [run["error"] for row in rows for run in (row["out_of_place"], row["in_place"]) if run]
    max_errors = [value for value in max_errors if value is not None]

    transport = _transport(info_lines)
    nccl_version, nccl_version_source = _nccl_version(version_codes, banner_version, transport["nccl_version"])
    return {
        "kind": "nccl-tests",
        "format": "text",
        "collective": collective,
        "tests_version": tests_version,
        "era": _era(tests_version, collective_marker, columns, header),
        "header": header,
        "devices": devices,
        "columns": columns or [],
        "rows": rows,
        "avg_busbw": avg_busbw,
        "min_bw_check": min_bw_check,
        "peak_busbw": max(busbws) if busbws else None,
        "out_of_bounds": oob,
        "out_of_bounds_ok": oob_ok,
        "wrong_total": wrong_total,
        "max_error": max(max_errors) if max_errors else None,
        "correctness": _correctness(header.get("validation"), has_wrong, wrong_total, oob, oob_ok),
        "per_iteration": _per_iteration(rows),
        "nccl_version": nccl_version,
        "nccl_version_source": nccl_version_source,
        "json_output": json_output_path(text),
        "complete": avg_busbw is not None and (concluded or not collective_marker),
        "transport": transport,
        "nccl_warnings": warnings,
        "failures": failures,
        "errors": errors,
    }


# The -J file (nccl-tests src/util.cu, JSON_FILE_VERSION 1 and 2; NVIDIA/nccl-tests
# https://github.com/NVIDIA/nccl-tests/blob/cfa8a9674b467b8e200775a62b09ff11d4c363ac/src/util.cu). The first
# releases with -J spelt the average "average_bus_bandwidith": {"bandwidith": ...} (as in a fork of that code,
# hershys-aws/nccl-tests src/util.cu @b06b86c1; corrected upstream, "Fix typos in the JSON output",
# https://github.com/NVIDIA/nccl-tests/pull/370); both spellings are read. Booleans are written as the strings
# "true"/"false", the average's "okay" as "unchecked" without NCCL_TESTS_MIN_BW, NaN as the string "nan".
_JSON_AVERAGE_KEYS = (("average_bus_bandwidth", "bandwidth"), ("average_bus_bandwidith", "bandwidith"))
_JSON_CONFIG_KEYS = {
    "nthreads": "nThread",
    "ngpus": "nGpus",
    "minimum_bytes": "minBytes",
    "maximum_bytes": "maxBytes",
    "warmup_iters": "warmup_iters",
    "iterations": "iters",
    "aggregated_iterations": "agg_iters",
    "validation": "validation",
    "graph": "graph",
}
_JSON_PER_ITER_KEYS = {
    "min_us": "iter_min_us",
    "max_us": "iter_max_us",
    "p50_us": "iter_p50_us",
    "p95_us": "iter_p95_us",
    "p99_us": "iter_p99_us",
    "avg_us": "iter_avg_us",
    "stdev_us": "iter_stdev_us",
    "cv_pct": "iter_cv_pct",
}


def _json_flag(value):
    """nccl-tests' jsonBool writes the strings "true"/"false"; accept real booleans too. Else None."""
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False}.get(value) if isinstance(value, str) else None


def _json_run(entry, per_iter) -> dict | None:
    if not isinstance(entry, dict):
        return None
    wrong = to_number(entry.get("nwrong"))
    run = {
        "time_us": to_number(entry.get("time", entry.get("cpu_time"))),
        "algbw": to_number(entry.get("alg_bw")),
        "busbw": to_number(entry.get("bus_bw")),
        "wrong": int(wrong) if wrong is not None else None,
        "error": None,
    }
    if isinstance(per_iter, dict):
        for key, name in _JSON_PER_ITER_KEYS.items():
            run[name] = to_number(per_iter.get(key))
    return run


def parse_nccl_tests_json(data, text: str = "") -> dict:
    """Parse the file nccl-tests ``-J FILE`` writes into the shape ``parse_nccl_tests`` returns.

    ``data`` is the file's text or its decoded object. ``text``, the run's stdout when there is one, adds
    what only the log says: the transport from NCCL INFO lines, NCCL warnings and failure lines.
    Keys read (top level): ``version`` (file format), ``nccl_version`` (NCCL_VERSION_CODE), ``args``,
    ``env``, ``config`` (with ``devices``), ``results`` (rows: ``size count type redop root``,
    ``out_of_place``/``in_place`` with ``time`` or ``cpu_time``, ``alg_bw``, ``bus_bw``, ``nwrong``, and with
    ``-I 1`` ``out_of_place_per_iter``/``in_place_per_iter``), ``out_of_bounds {count, okay}``,
    ``average_bus_bandwidth {bandwidth, okay}`` (or the misspelt ``average_bus_bandwidith {bandwidith}``),
    ``errors``. A file cut short (the program aborted before closing it) raises ParseError.
    """
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise ParseError(f"nccl-tests JSON output is not complete JSON: {exc}") from exc
    if not isinstance(data, dict) or not ({"results", "config"} & set(data)):
        raise ParseError("no nccl-tests JSON output: neither 'config' nor 'results' found")
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    header = {name: config.get(key) for key, name in _JSON_CONFIG_KEYS.items() if key in config}
    if "step_factor" in config:
        header["step"], header["step_kind"] = config["step_factor"], "factor"
    elif "step_bytes" in config:
        header["step"], header["step_kind"] = config["step_bytes"], "bytes"
    devices = [
        {
            "rank": device.get("rank"),
            "group": device.get("group"),
            "pid": device.get("pid"),
            "host": device.get("hostname"),
            "device": device.get("device"),
            "bus_id": device.get("device_hex"),
            "name": device.get("device_info"),
        }
        for device in config.get("devices") or []
        if isinstance(device, dict)
    ]
    rows: list[dict] = []
    errors: list[str] = []
    for index, entry in enumerate(data.get("results") or []):
        size = entry.get("size") if isinstance(entry, dict) else None
        if not isinstance(size, int) or isinstance(size, bool):
            errors.append(f"results[{index}]: no size")
            continue
        rows.append(
            {
                "size": size,
                "count": entry.get("count"),
                "type": entry.get("type"),
                "redop": entry.get("redop"),
                "root": to_integer(entry.get("root")),
                "out_of_place": _json_run(entry.get("out_of_place"), entry.get("out_of_place_per_iter")),
                "in_place": _json_run(entry.get("in_place"), entry.get("in_place_per_iter")),
            }
        )
    if not rows:
        errors.append("no result rows")
    oob_block = data.get("out_of_bounds") if isinstance(data.get("out_of_bounds"), dict) else {}
    oob = oob_block.get("count") if isinstance(oob_block.get("count"), int) else None
    oob_ok = _json_flag(oob_block.get("okay"))
    avg_busbw = min_bw_check = None
    average_key = None
    for key, value_key in _JSON_AVERAGE_KEYS:
        block = data.get(key)
        if isinstance(block, dict):
            average_key = key
            avg_busbw = to_number(block.get(value_key))
            okay = _json_flag(block.get("okay"))
            min_bw_check = None if okay is None else ("OK" if okay else "FAILED")
            break
    runs = [run for row in rows for run in (row["out_of_place"], row["in_place"]) if run]
    counted = [run["wrong"] for run in runs if run["wrong"] is not None]
    wrong_total = sum(counted) if counted else None
    busbws = [run["busbw"] for run in runs if run["busbw"] is not None]
    logged = None
    if text.strip():
        try:
            logged = parse_nccl_tests(text)
        except ParseError:
            logged = None  # stdout with no nccl-tests lines (a launcher's complaint): the file is the result
    transport = logged["transport"] if logged else _transport([])
    code_version = decode_nccl_version(data.get("nccl_version"))
    args = [str(arg) for arg in data.get("args") or []]
    env = dict(item.split("=", 1) for item in data.get("env") or [] if isinstance(item, str) and "=" in item)
    failures = [str(error) for error in data.get("errors") or [] if error]
    return {
        "kind": "nccl-tests",
        "format": "json",
        "json_version": data.get("version"),
        "json_average_key": average_key,
        "collective": os.path.basename(args[0]) if args else None,
        "tests_version": logged["tests_version"] if logged else None,
        "era": "json",
        "header": header,
        "devices": devices,
        "columns": [],
        "rows": rows,
        "avg_busbw": avg_busbw,
        "min_bw_check": min_bw_check,
        "min_bw_env": env.get("NCCL_TESTS_MIN_BW"),
        "peak_busbw": max(busbws) if busbws else None,
        "out_of_bounds": oob,
        "out_of_bounds_ok": oob_ok,
        "wrong_total": wrong_total,
        "max_error": None,
        "correctness": _correctness(header.get("validation"), True, wrong_total, oob, oob_ok),
        "per_iteration": _per_iteration(rows),
        "nccl_version": code_version or (logged["nccl_version"] if logged else None),
        "nccl_version_source": "JSON nccl_version" if code_version else (logged or {}).get("nccl_version_source"),
        "json_output": None,
        "complete": "end_time" in data and avg_busbw is not None,
        "transport": transport,
        "nccl_warnings": logged["nccl_warnings"] if logged else [],
        "failures": failures + (logged["failures"] if logged else []),
        "errors": errors,
    }


def _nccl_version(codes: dict, banner, info_version):
    """(version, where it was read): the library code nccl-tests reports first, then NCCL's own banner."""
    if codes.get("library"):
        return decode_nccl_version(codes["library"]), "nccl-tests version line (nccl-library)"
    for value, source in ((banner, "NCCL banner"), (info_version, "NCCL INFO banner")):
        if value:
            return value.split("+")[0], source
    if codes.get("headers"):
        return decode_nccl_version(codes["headers"]), "nccl-tests version line (nccl-headers)"
    return None, None


def _correctness(validation, has_wrong: bool, wrong_total, oob, oob_ok) -> dict:
    """The correctness verdict of a run: ``ok``, ``fail`` or ``unchecked`` (``-c 0`` or no count printed)."""
    if oob_ok is False or (wrong_total or 0) > 0:
        verdict = "fail"
    elif validation == 0 or (wrong_total is None and oob_ok is None) or (has_wrong and wrong_total is None):
        verdict = "unchecked"
    else:
        verdict = "ok"
    return {"verdict": verdict, "validation": validation, "wrong_total": wrong_total, "out_of_bounds": oob}


def _per_iteration(rows: list[dict]) -> dict | None:
    """Worst per-iteration figures over the table (``-I 1``), or None when the table has none."""
    runs = [run for row in rows for run in (row["out_of_place"], row["in_place"]) if run and "iter_cv_pct" in run]
    if not runs:
        return None

    def worst(key):
        values = [run[key] for run in runs if isinstance(run.get(key), (int, float))]
        return max(values) if values else None

    return {
        "max_cv_pct": worst("iter_cv_pct"),
        "max_p99_us": worst("iter_p99_us"),
        "max_us": worst("iter_max_us"),
    }


def _large_busbw(rows: list[dict], large_bytes) -> float | None:
    if not rows:
        return None
    if large_bytes:
        chosen = [row for row in rows if row["size"] >= large_bytes]
    else:
        largest = max(row["size"] for row in rows)
        chosen = [row for row in rows if row["size"] == largest]
    values = [
        run["busbw"]
        for row in chosen
        for run in (row["out_of_place"], row["in_place"])
        if run and run["busbw"] is not None
    ]
    return max(values) if values else None


def _small_latency(rows: list[dict], small_bytes: int) -> float | None:
    values = [
        run["time_us"]
        for row in rows
        if row["size"] <= small_bytes
        for run in (row["out_of_place"], row["in_place"])
        if run and run["time_us"] is not None
    ]
    return max(values) if values else None


def judge_nccl(result: dict, expect: dict | None = None) -> list[dict]:
    """Checks of one parsed run against ``expect``.

    ``expect`` keys (all optional):
      min_busbw_gbyte_per_s     bus bandwidth (GB/s) the largest messages must reach;
      large_message_bytes       rows >= this size count as large (default: the largest size run);
      warn_ratio (0.9)          busbw within this fraction of min_busbw_gbyte_per_s is a warning, below a failure;
      transport                 tcp | ib | ib_gdr, the transport NCCL must have used;
      max_small_latency_us      latency bound for small messages; default 100 (two-digit µs, IBM Redpaper REDP-5610)
                                when transport is ib or ib_gdr;
      small_message_bytes (1024) rows up to this size are "small";
      max_wrong (0)             tolerated wrong values;
      max_iter_cv_pct           bound on the per-iteration coefficient of variation (``-I 1`` tables).
    A run that printed ``Avg bus bandwidth ... FAILED`` (NCCL_TESTS_MIN_BW) gets a failed ``nccl_tests_min_bw``
    check whatever ``expect`` says; one that printed ``OK`` a passed one. ``wrong_values`` is the correctness
    verdict of ``#wrong`` and the ``Out of bounds values`` footer: a run with ``-c 0`` (nothing checked) warns.
    A value of the wrong type or an unknown key raises OptionError (see EXPECT).
    """
    if isinstance(expect, dict) and "min_busbw" in expect:
        # Renamed to say its unit (issue 47): a caller still passing the old key gets the new name, not "unknown key".
        raise OptionError("expect.min_busbw", "was renamed to min_busbw_gbyte_per_s (the unit in its name)")
    expect = EXPECT("expect", expect or {})
    rows = result.get("rows") or []
    checks: list[dict] = []

    if not rows:
        checks.append(
            bench_check(
                "result_rows",
                FAIL,
                0,
                ">= 1",
                "the run printed no result table: read the raw output for NCCL WARN or test failure lines",
            )
        )

    min_busbw_gbyte_per_s = expect.get("min_busbw_gbyte_per_s")
    if min_busbw_gbyte_per_s is not None:
        observed = _large_busbw(rows, expect.get("large_message_bytes"))
        ratio = expect.get("warn_ratio", 0.9)
        if observed is not None and observed >= min_busbw_gbyte_per_s:
            status = PASS
        elif observed is not None and observed >= min_busbw_gbyte_per_s * ratio:
            status = WARN
        else:
            status = FAIL
        checks.append(
            bench_check(
                "large_message_busbw",
                status,
                observed,
                f">= {min_busbw_gbyte_per_s} GB/s",
                ""
                if status == PASS
                else "check the fabric: port rate and state (ibstat), NCCL_DEBUG=INFO transport lines, "
                "GPU-NIC affinity (nvidia-smi topo -m), and that every rank reached the same switch tier",
            )
        )

    transport = expect.get("transport")
    bound = expect.get("max_small_latency_us")
    if bound is None and transport in ("ib", "ib_gdr"):
        bound = 100.0  # IBM Redpaper REDP-5610: small-message latency must be two-digit µs over EDR IB
    if bound is not None:
        observed = _small_latency(rows, expect.get("small_message_bytes", 1024))
        if observed is None:
            status = FAIL
        elif observed < bound:
            status = PASS
        elif observed < 1000:
            status = WARN
        else:
            status = FAIL  # IBM Redpaper REDP-5610: thousands of µs means Ethernet, not InfiniBand
        checks.append(
            bench_check(
                "small_message_latency",
                status,
                observed,
                f"< {bound} us",
                ""
                if status == PASS
                else "latency in the thousands of microseconds means NCCL is not using InfiniBand: "
                "check the RDMA device plugin, IPC_LOCK/memlock and the NET/IB lines in the log",
            )
        )

    max_wrong = expect.get("max_wrong", 0)
    wrong = result.get("wrong_total")
    oob_ok = result.get("out_of_bounds_ok")
    unchecked = (result.get("correctness") or {}).get("validation") == 0
    if unchecked or (wrong is None and oob_ok is None):
        status = WARN  # -c 0, or an old format without the summary: nothing says the values were checked
    elif (wrong or 0) <= max_wrong and oob_ok is not False:
        status = PASS
    else:
        status = FAIL
    if status == PASS:
        remedy = ""
    elif status == WARN:
        remedy = "the values were not checked: rerun with -c 1 so #wrong and the Out of bounds footer count them"
    else:
        remedy = (
            "wrong results point at broken GPU memory, PCIe/NVLink errors or a bad NIC: "
            "check Xid/ECC errors and rerun with -c 1"
        )
    checks.append(bench_check("wrong_values", status, wrong, f"<= {max_wrong}", remedy))

    gate = result.get("min_bw_check")
    if gate in ("OK", "FAILED"):
        checks.append(
            bench_check(
                "nccl_tests_min_bw",
                PASS if gate == "OK" else FAIL,
                result.get("avg_busbw"),
                ">= 0.9 x NCCL_TESTS_MIN_BW"
                + (f" ({result['min_bw_env']} GB/s)" if result.get("min_bw_env") else "")
                + " (Avg bus bandwidth)",
                ""
                if gate == "OK"
                else "nccl-tests judged the average bus bandwidth below 0.9 x NCCL_TESTS_MIN_BW and exited "
                "non-zero: compare with the single-node runs to tell a slow node from the fabric",
            )
        )

    cv_bound = expect.get("max_iter_cv_pct")
    if cv_bound is not None:
        observed = (result.get("per_iteration") or {}).get("max_cv_pct")
        if observed is None:
            status, remedy = WARN, "run with -I 1 so nccl-tests prints the per-iteration columns"
        elif observed <= cv_bound:
            status, remedy = PASS, ""
        else:
            status = FAIL
            remedy = (
                "iteration times vary: look for throttling GPUs (nvidia-smi -q -d PERFORMANCE), "
                "congested links and noisy neighbours on the nodes"
            )
        checks.append(bench_check("iteration_variation", status, observed, f"<= {cv_bound} % (i_cv%)", remedy))

    if transport:
        observed = (result.get("transport") or {}).get("mode")
        if observed == transport:
            status, remedy = PASS, ""
        elif observed is None and (result.get("transport") or {}).get("nodes") == 1:
            status = WARN
            remedy = "the run stayed on one node (NCCL nNodes 1): no network transport was used; run it across nodes"
        elif observed is None:
            status, remedy = WARN, "run with NCCL_DEBUG=INFO so the log says which transport NCCL used"
        else:
            status = FAIL
            remedy = {
                "tcp": "set NCCL_IB_DISABLE=1 for a TCP measurement",
                "ib": "NCCL fell back to sockets: check the HCAs (ibstat), /dev/infiniband in the "
                "container, memlock limits and NCCL_IB_DISABLE",
                "ib_gdr": "GPUDirect RDMA not used: load nvidia-peermem (nv_peer_mem), set "
                "NCCL_NET_GDR_LEVEL and check GPU-NIC affinity",
            }.get(transport, "")
        checks.append(bench_check("transport", status, observed, transport, remedy))
    return checks
