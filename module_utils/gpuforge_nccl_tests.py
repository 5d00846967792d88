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

Stdlib only, and the gpuforge_errors/gpuforge_options files Ansible ships with it.
"""

from __future__ import annotations

import re
from collections import Counter

try:
    from ansible.module_utils.gpuforge_errors import ParseError as _BaseParseError
    from ansible.module_utils.gpuforge_options import integer, number, record, string
except ImportError:  # module_utils/ is on sys.path (unit tests, CLI, filter plugins)
    from gpuforge_errors import ParseError as _BaseParseError
    from gpuforge_options import integer, number, record, string

__all__ = ["EXPECT", "NcclTestsParseError", "judge_nccl", "overall_status", "parse_nccl_tests"]


class NcclTestsParseError(_BaseParseError):
    """Raised when the text holds neither an nccl-tests header, device list nor result table."""


# The keys judge_nccl reads (the nccl_tests module's `expect` option), coerced: EXPECT("expect", value)
# raises OptionError naming the key for a value of the wrong type and for a key judge_nccl does not know.
EXPECT = record(
    {
        "min_busbw": number(minimum=0),
        "large_message_bytes": integer(minimum=0),
        "warn_ratio": number(above=0, maximum=1),
        "transport": string(choices=("tcp", "ib", "ib_gdr")),
        "max_small_latency_us": number(above=0),
        "small_message_bytes": integer(minimum=0),
        "max_wrong": integer(minimum=0),
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
_TESTS_VERSION_RE = re.compile(r"^#\s*nccl-tests version (\S+)")
_COLLECTIVE_RE = re.compile(r"^#\s*Collective test (starting|concluded):\s*(\S+)")
_RUNNING_RE = re.compile(r"(\w+_perf)\b")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)")
_FAILURE_RE = re.compile(r"(Test NCCL failure|Test CUDA failure|Test failure|NCCL error)")

# Column names as the table header spells them, mapped to result keys.
_PER_RUN_COLUMNS = {"time": "time_us", "algbw": "algbw", "busbw": "busbw", "#wrong": "wrong", "error": "error"}


def _to_number(token: str):
    """Return int/float for a numeric cell, None for N/A or anything unreadable."""
    try:
        return int(token)
    except ValueError:
        pass
    try:
        return float(token)
    except ValueError:
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
    if len(tokens) != len(columns):
        return None
    row: dict = {"size": None, "count": None, "type": None, "redop": None, "root": None}
    runs: list[dict] = []
    for name, token in zip(columns, tokens):
        if name in ("size", "count", "root"):
            row[name] = _to_number(token)
        elif name in ("type", "redop"):
            row[name] = token
        elif name in _PER_RUN_COLUMNS:
            # "time" opens a new run: out-of-place first, then in-place.
            if name == "time":
                runs.append({"time_us": None, "algbw": None, "busbw": None, "wrong": None, "error": None})
            if not runs:
                return None
            runs[-1][_PER_RUN_COLUMNS[name]] = _to_number(token)
    if not isinstance(row["size"], int) or len(runs) not in (1, 2):
        return None
    row["out_of_place"] = runs[0]
    row["in_place"] = runs[1] if len(runs) == 2 else None
    return row


def _transport(info_lines: list[str]) -> dict:
    net_using: list[str] = []
    ib_devices: list[str] = []
    socket_interfaces: list[str] = []
    via_nets: Counter = Counter()
    paths: set[str] = set()
    network = None
    nccl_version = None
    gdrdma = False
    for message in info_lines:
        version = _NCCL_VERSION_RE.search(message)
        if version and nccl_version is None:
            nccl_version = version.group(1)
        match = _NETWORK_RE.search(message)
        if match:
            network = match.group(1)
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
    if via_nets:
        net = via_nets.most_common(1)[0][0]
    elif network:
        net = network
    elif net_using:
        net = net_using[-1]
    else:
        net = None
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
    """Parse one nccl-tests run; raise NcclTestsParseError when nothing of nccl-tests is in ``text``.

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
    oob = None
    oob_ok = None

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        log = _NCCL_LOG_RE.search(line)
        if log:
            (info_lines if log.group(1) == "INFO" else warnings).append(log.group(2))
            continue
        if not line.strip():
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
                avg_busbw = _to_number(match.group(1))
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
            errors.append(f"line {number}: unreadable result row: {line.strip()}")
        else:
            rows.append(row)

    if not header and not devices and not rows and columns is None:
        raise NcclTestsParseError("no nccl-tests header, device list or result table found")
    if not rows:
        errors.append("no result rows")

    has_wrong = columns is not None and "#wrong" in columns
    wrong_total = None
    if has_wrong:
        cells = [run["wrong"] for row in rows for run in (row["out_of_place"], row["in_place"]) if run]
        wrong_total = sum(cell for cell in cells if isinstance(cell, int))
    elif oob is not None:
        wrong_total = oob
    busbws = [run["busbw"] for row in rows for run in (row["out_of_place"], row["in_place"]) if run]
    busbws = [value for value in busbws if value is not None]
    max_errors = [run["error"] for row in rows for run in (row["out_of_place"], row["in_place"]) if run]
    max_errors = [value for value in max_errors if value is not None]

    return {
        "kind": "nccl-tests",
        "collective": collective,
        "tests_version": tests_version,
        "era": _era(tests_version, collective_marker, columns, header),
        "header": header,
        "devices": devices,
        "columns": columns or [],
        "rows": rows,
        "avg_busbw": avg_busbw,
        "peak_busbw": max(busbws) if busbws else None,
        "out_of_bounds": oob,
        "out_of_bounds_ok": oob_ok,
        "wrong_total": wrong_total,
        "max_error": max(max_errors) if max_errors else None,
        "complete": avg_busbw is not None and (concluded or not collective_marker),
        "transport": _transport(info_lines),
        "nccl_warnings": warnings,
        "failures": failures,
        "errors": errors,
    }


_RANK = {"ok": 0, "warn": 1, "fail": 2}


def overall_status(checks: list[dict]) -> str:
    """Worst status of a list of checks (``ok`` when the list is empty)."""
    return max((check["status"] for check in checks), key=_RANK.__getitem__, default="ok")


def _check(name, status, observed, expected, remedy=""):
    return {"name": name, "status": status, "observed": observed, "expected": expected, "remedy": remedy}


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
      min_busbw (GB/s)          bus bandwidth the largest messages must reach;
      large_message_bytes       rows >= this size count as large (default: the largest size run);
      warn_ratio (0.9)          busbw within this fraction of min_busbw is a warning, below is a failure;
      transport                 tcp | ib | ib_gdr, the transport NCCL must have used;
      max_small_latency_us      latency bound for small messages; default 100 (two-digit µs, seed 001)
                                when transport is ib or ib_gdr;
      small_message_bytes (1024) rows up to this size are "small";
      max_wrong (0)             tolerated wrong values.
    A value of the wrong type or an unknown key raises OptionError (see EXPECT).
    """
    expect = EXPECT("expect", expect or {})
    rows = result.get("rows") or []
    checks: list[dict] = []

    if not rows:
        checks.append(
            _check(
                "result_rows",
                "fail",
                0,
                ">= 1",
                "the run printed no result table: read the raw output for NCCL WARN or test failure lines",
            )
        )

    min_busbw = expect.get("min_busbw")
    if min_busbw is not None:
        observed = _large_busbw(rows, expect.get("large_message_bytes"))
        ratio = expect.get("warn_ratio", 0.9)
        if observed is not None and observed >= min_busbw:
            status = "ok"
        elif observed is not None and observed >= min_busbw * ratio:
            status = "warn"
        else:
            status = "fail"
        checks.append(
            _check(
                "large_message_busbw",
                status,
                observed,
                f">= {min_busbw} GB/s",
                ""
                if status == "ok"
                else "check the fabric: port rate and state (ibstat), NCCL_DEBUG=INFO transport lines, "
                "GPU-NIC affinity (nvidia-smi topo -m), and that every rank reached the same switch tier",
            )
        )

    transport = expect.get("transport")
    bound = expect.get("max_small_latency_us")
    if bound is None and transport in ("ib", "ib_gdr"):
        bound = 100.0  # seed 001: small-message latency must be two-digit µs over EDR IB
    if bound is not None:
        observed = _small_latency(rows, expect.get("small_message_bytes", 1024))
        if observed is None:
            status = "fail"
        elif observed < bound:
            status = "ok"
        elif observed < 1000:
            status = "warn"
        else:
            status = "fail"  # seed 001: thousands of µs means Ethernet, not InfiniBand
        checks.append(
            _check(
                "small_message_latency",
                status,
                observed,
                f"< {bound} us",
                ""
                if status == "ok"
                else "latency in the thousands of microseconds means NCCL is not using InfiniBand: "
                "check the RDMA device plugin, IPC_LOCK/memlock and the NET/IB lines in the log",
            )
        )

    max_wrong = expect.get("max_wrong", 0)
    wrong = result.get("wrong_total")
    oob_ok = result.get("out_of_bounds_ok")
    if wrong is None and oob_ok is None:
        status = "warn"  # old format without the summary: nothing says the values were checked
    elif (wrong or 0) <= max_wrong and oob_ok is not False:
        status = "ok"
    else:
        status = "fail"
    checks.append(
        _check(
            "wrong_values",
            status,
            wrong,
            f"<= {max_wrong}",
            ""
            if status == "ok"
            else "wrong results point at broken GPU memory, PCIe/NVLink errors or a bad NIC: "
            "check Xid/ECC errors and rerun with -c 1",
        )
    )

    if transport:
        observed = (result.get("transport") or {}).get("mode")
        if observed == transport:
            status, remedy = "ok", ""
        elif observed is None:
            status, remedy = "warn", "run with NCCL_DEBUG=INFO so the log says which transport NCCL used"
        else:
            status = "fail"
            remedy = {
                "tcp": "set NCCL_IB_DISABLE=1 for a TCP measurement",
                "ib": "NCCL fell back to sockets: check the HCAs (ibstat), /dev/infiniband in the "
                "container, memlock limits and NCCL_IB_DISABLE",
                "ib_gdr": "GPUDirect RDMA not used: load nvidia-peermem (nv_peer_mem), set "
                "NCCL_NET_GDR_LEVEL and check GPU-NIC affinity",
            }.get(transport, "")
        checks.append(_check("transport", status, observed, transport, remedy))
    return checks
