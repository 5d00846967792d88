"""Parser for perftest bandwidth output (ib_write_bw, ib_read_bw, ib_send_bw).

Pure function over the tool's text, stdlib only (and gpuforge_errors, which Ansible ships with it).
Shape documented in docs/parsers-infiniband.md ("perftest-bw"); key names are a stable interface.

perftest prints a header (test name, then "Key : value" lines, two per line when a tab pair
separates them), the QP address lines, and a table whose header names the unit:
``BW peak[MB/sec]`` by default (MB = 2^20 bytes, perftest's format factor 0x100000) or
``BW peak[Gb/sec]`` with ``--report_gbits`` (Gb = 10^9 bits). Warnings such as
``Conflicting CPU frequency values detected: ...`` may appear anywhere, even inside the table.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = ["ParseError", "mib_per_s_to_gbit_per_s", "parse_perftest_bw"]

# perftest divides bytes/s by 0x100000 for MB/sec and by 125000000 for Gb/sec.
_MIB_BYTES = 0x100000
_GBIT_BYTES = 125_000_000


def mib_per_s_to_gbit_per_s(mib_per_s: float) -> float:
    """perftest MB/sec (2^20 bytes/s) -> Gb/s (10^9 bits/s)."""
    return mib_per_s * _MIB_BYTES / _GBIT_BYTES


_TITLE = re.compile(r"^(?P<verb>Send|RDMA_Write|RDMA_Read|Atomic)\s+(?P<rest>.*\bTest)$")
_TABLE_HEADER = re.compile(r"^#bytes\s+#iterations\s+BW peak\[(?P<unit>MB/sec|Gb/sec)\]\s+BW average\[")
_ROW = re.compile(r"^(?P<bytes>\d+)\s+(?P<iters>\d+)\s+(?P<peak>[\d.]+)\s+(?P<avg>[\d.]+)\s+(?P<rate>[\d.]+)")
_ADDRESS = re.compile(r"^(?P<side>local|remote) address:\s*(?P<fields>.*)$")
_WARNING_PREFIXES = ("Conflicting CPU frequency", "Test integrity may be harmed", "Warning:", "CPU Frequency")
# Messages perftest prints when a run cannot start or breaks; they make the run a failure.
_ERROR_PATTERNS = re.compile(
    r"(Port number \d+ state is|Couldn't|Unable to|Failed|failed|not found|Completion with error|"
    r"wasn't found|No IB devices|Can't produce a report|Error|error)"
)

# Header labels -> keys (values converted where the tool prints units).
_HEADER_KEYS = {
    "Dual-port": "dual_port",
    "Device": "device",
    "Number of qps": "num_qps",
    "Transport type": "transport_type",
    "Connection type": "connection_type",
    "Using SRQ": "using_srq",
    "PCIe relax order": "pcie_relax_order",
    "ibv_wr* API": "ibv_wr_api",
    "TX depth": "tx_depth",
    "RX depth": "rx_depth",
    "CQ Moderation": "cq_moderation",
    "Mtu": "mtu",
    "Link type": "link_type",
    "GID index": "gid_index",
    "Gid index": "gid_index",
    "Max inline data": "max_inline_data",
    "Outstand reads": "outstand_reads",
    "rdma_cm QPs": "rdma_cm_qps",
    "Data ex. method": "data_ex_method",
    "Post List": "post_list",
}
_HEADER_INTS = {
    "num_qps",
    "tx_depth",
    "rx_depth",
    "cq_moderation",
    "gid_index",
    "outstand_reads",
    "post_list",
}
_HEADER_BYTES = {"mtu", "max_inline_data"}


def _header_pairs(line: str) -> list[tuple[str, str]]:
    """' Dual-port       : OFF\t\tDevice         : mlx5_0' -> [(Dual-port, OFF), (Device, mlx5_0)].

    The tool separates the two pairs with tabs; copies from web pages turn those into runs of
    spaces, so two or more spaces before a known label also split.
    """
    pairs = []
    # 'rdma_cm QPs\t : OFF': a tab before the colon is padding, not a pair separator.
    line = re.sub(r"\t+(?=\s*:)", " ", line.strip())
    for chunk in re.split(r"\t+|\s{2,}(?=[A-Z][\w .*-]*?\s*:)", line):
        key, sep, value = chunk.partition(":")
        if sep:
            pairs.append((key.strip(), value.strip()))
    return pairs


def _header_value(key: str, value: str):
    if key in _HEADER_INTS:
        return int(value) if value.isdigit() else value
    if key in _HEADER_BYTES:
        match = re.fullmatch(r"(\d+)\s*\[?B\]?", value)
        return int(match.group(1)) if match else value
    return value


def _address(fields: str) -> dict:
    """'LID 0x0d QPN 0x16cb PSN 0xa2ff90 RKey 0x038f5c VAddr 0x007fa65e670000' -> dict."""
    tokens = fields.split()
    address = {}
    for name, value in zip(tokens[::2], tokens[1::2]):
        key = name.lower()
        if key == "lid":
            address["lid"] = int(value, 16) if re.fullmatch(r"(0x)?[0-9a-fA-F]+", value) else value
        else:
            address[key] = value
    return address


def _summary(result: dict) -> None:
    """Top-level figures from the last (largest) row, plus both units for threshold checks."""
    if not result["results"]:
        return
    row = result["results"][-1]
    result.update(
        bytes=row["bytes"],
        iterations=row["iterations"],
        bw_peak=row["bw_peak"],
        bw_average=row["bw_average"],
        msg_rate_mpps=row["msg_rate_mpps"],
    )
    if result["bw_unit"] == "MB/sec":
        result["bw_average_mib_per_s"] = row["bw_average"]
        result["bw_average_gbit_per_s"] = round(mib_per_s_to_gbit_per_s(row["bw_average"]), 2)
    else:
        result["bw_average_gbit_per_s"] = row["bw_average"]
        result["bw_average_mib_per_s"] = round(row["bw_average"] * _GBIT_BYTES / _MIB_BYTES, 2)


def parse_perftest_bw(text: str) -> dict:
    """Parse one perftest BW run (client or server side) into a dict (see module docstring)."""
    result: dict = {
        "test": None,
        "header": {},
        "local_addresses": [],
        "remote_addresses": [],
        "bw_unit": None,
        "results": [],
        "warnings": [],
        "errors": [],
    }
    in_table = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or set(line) <= {"-", "*"} or line.startswith(("* Waiting", "GID:")):
            continue
        if line.startswith(_WARNING_PREFIXES):
            result["warnings"].append(line)
            continue
        match = _TITLE.match(line)
        if match:
            result["test"] = f"{match.group('verb')} {match.group('rest')}"
            result["verb"] = match.group("verb")
            continue
        match = _TABLE_HEADER.match(line)
        if match:
            result["bw_unit"] = match.group("unit")
            in_table = True
            continue
        if in_table:
            match = _ROW.match(line)
            if match:
                result["results"].append(
                    {
                        "bytes": int(match.group("bytes")),
                        "iterations": int(match.group("iters")),
                        "bw_peak": float(match.group("peak")),
                        "bw_average": float(match.group("avg")),
                        "msg_rate_mpps": float(match.group("rate")),
                    }
                )
                continue
        match = _ADDRESS.match(line)
        if match:
            result[f"{match.group('side')}_addresses"].append(_address(match.group("fields")))
            continue
        pairs = _header_pairs(line)
        known = [(key, value) for key, value in pairs if key in _HEADER_KEYS]
        if known and len(known) == len(pairs):
            for key, value in known:
                name = _HEADER_KEYS[key]
                result["header"][name] = _header_value(name, value)
            continue
        if _ERROR_PATTERNS.search(line):
            result["errors"].append(line)
    if not (result["test"] or result["results"] or result["errors"]):
        raise ParseError("no perftest header, result row or error message found")
    _summary(result)
    return result
