"""Parsers for kernel state: `lsmod` output and NVIDIA Xid lines from the kernel log.

Pure functions over text, stdlib only (and gpuforge_errors, shipped with it). Shapes are documented in
docs/parsers.md (sections lsmod, xid). Malformed lsmod input raises ParseError.
"""

from __future__ import annotations

import re

try:
    from ansible.module_utils.gpuforge_errors import ParseError as _BaseParseError
except ImportError:  # module_utils/ is on sys.path (unit tests, CLI, filter plugins)
    from gpuforge_errors import ParseError as _BaseParseError

__all__ = ["XID_DESCRIPTIONS", "ParseError", "parse_lsmod", "parse_xid_events"]


class ParseError(_BaseParseError):
    """The text is not the output the parser expects (message says which part)."""


# Short meaning of the Xid codes a cluster check acts on (NVIDIA Xid catalogue).
XID_DESCRIPTIONS = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}

_LSMOD_RE = re.compile(r"^(?P<name>\S+)\s+(?P<size>\d+)\s+(?P<count>-?\d+)(?:\s+(?P<used_by>\S+))?\s*$")


def parse_lsmod(text: str) -> dict:
    """Parse `lsmod`: {modules: {name: {size, use_count, used_by}}, names: [in output order]}."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines or not lines[0].startswith("Module"):
        raise ParseError("lsmod: missing the 'Module Size Used by' header")
    modules: dict[str, dict] = {}
    for number, line in enumerate(lines[1:], start=2):
        match = _LSMOD_RE.match(line)
        if not match:
            raise ParseError(f"lsmod: line {number} is not 'name size count [users]': {line!r}")
        used_by = [u for u in (match["used_by"] or "").split(",") if u and u != "-"]
        modules[match["name"]] = {"size": int(match["size"]), "use_count": int(match["count"]), "used_by": used_by}
    return {"modules": modules, "names": list(modules)}


# NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.
# NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error ...
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.\d)?\): "
    r"(?P<code>\d+)(?:, pid=(?P<pid>'[^']*'|[^,\s]+))?(?:, name=(?P<name>[^,]*))?(?:, (?P<message>.*?))?\s*$"
)
_DMESG_TS_RE = re.compile(r"^\[\s*(?P<ts>[^\]]+)\]\s*")
_JOURNAL_RE = re.compile(r"^(?P<ts>.+?)\s+(?P<host>\S+)\s+kernel:\s*")


def parse_xid_events(text: str) -> list[dict]:
    """Xid events in dmesg (`[ 12.34]` or `dmesg -T`) or `journalctl -k` text; other lines are ignored.

    Each event: {timestamp, host, pci_bus, code, pid, process, message, description, line}.
    """
    events = []
    for line in (text or "").splitlines():
        match = _XID_RE.search(line)
        if not match:
            continue
        prefix = line[: match.start()]
        timestamp = host = None
        dmesg = _DMESG_TS_RE.match(prefix)
        journal = _JOURNAL_RE.match(prefix)
        if dmesg:
            timestamp = dmesg["ts"].strip()
        elif journal:
            timestamp, host = journal["ts"].strip(), journal["host"]
        pid = (match["pid"] or "").strip("'")
        code = int(match["code"])
        events.append(
            {
                "timestamp": timestamp,
                "host": host,
                "pci_bus": match["pci"].lower(),
                "code": code,
                "pid": int(pid) if pid.isdigit() else None,
                "process": None if match["name"] in (None, "<unknown>") else match["name"],
                "message": (match["message"] or "").strip(),
                "description": XID_DESCRIPTIONS.get(code),
                "line": line.strip(),
            }
        )
    return events
