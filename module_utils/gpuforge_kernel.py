"""Parsers for kernel state: `lsmod` output, NVIDIA Xid lines and NVSwitch SXid lines from the kernel log.

Pure functions over text, stdlib only (and gpuforge_errors, shipped with it). Shapes are documented in
docs/parsers.md (sections lsmod, xid) and parse_sxid_events. Malformed lsmod input raises ParseError.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = [
    "ACTION_REMEDIES",
    "XID_ACTIONS",
    "XID_CATALOGUE",
    "XID_DESCRIPTIONS",
    "ParseError",
    "parse_lsmod",
    "parse_sxid_events",
    "parse_xid_events",
    "xid_action",
]


# NVIDIA's Xid catalogue for Ampere and newer GPUs: code -> (description, immediate-action bucket).
# Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Xid-Catalog spreadsheet, "Resolution Bucket
# (Immediate Action)" column), https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, as of
# October 2025 (codes 1-172). Codes the catalogue marks "Unused" carry CONTACT_SUPPORT there and are listed
# by number only; codes 162-172 had no action yet (None). Volta and older GPUs use the same numbers with the
# older catalogue (https://docs.nvidia.com/deploy/xid-errors/): the actions below are applied to them too.
_UNUSED = (1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 26, 27, 28, 29, 30, 33, 34)
_UNUSED += (35, 36, 42, 47, 49, 50, 51, 52, 53, 55, 56, 57, 58, 59, 61, 65, 73, 81, 87, 90, 91, 111, 112, 113)
_UNUSED += (114, 115, 116, 117, 118, 122, 123, 124, 125, 138)
XID_CATALOGUE = {code: ("Unused", "CONTACT_SUPPORT") for code in _UNUSED}
XID_CATALOGUE.update(
    {
        8: ("GPU stopped processing", "RESTART_APP"),
        11: ("Invalid or corrupted push buffer stream", "RESTART_APP"),
        13: ("Graphics Engine Exception", "RESTART_APP"),
        14: ("Unused (fake error)", "IGNORE"),
        25: ("Invalid or illegal push buffer stream", "RESTART_APP"),
        31: ("GPU memory page fault", "RESTART_APP"),
        32: ("Invalid or corrupted push buffer stream", "RESTART_APP"),
        37: ("Driver firmware error", "IGNORE"),
        38: ("Driver firmware error", "IGNORE"),
        39: ("Copy Engine Exception", "RESTART_APP"),
        40: ("Copy Engine Exception", "RESTART_APP"),
        41: ("Copy Engine Exception", "RESTART_APP"),
        43: ("GPU stopped processing", "IGNORE"),
        44: ("Graphics Engine fault during context switch", "IGNORE"),
        45: ("Preemptive cleanup, due to previous errors", "WORKFLOW_XID_45"),
        46: ("GPU stopped processing", "RESET_GPU"),
        48: ("Double Bit ECC Error", "WORKFLOW_XID_48"),
        54: ("Auxiliary power is not connected to the GPU board", "CHECK_MECHANICALS"),
        60: ("Video processor exception", "RESTART_APP"),
        62: ("Internal micro-controller halt", "RESET_GPU"),
        63: ("GPU memory remapping event", "IGNORE"),
        64: ("GPU memory remapping failure", "RESET_GPU"),
        66: ("Illegal access by driver", "IGNORE"),
        67: ("Illegal access by driver", "IGNORE"),
        68: ("NVDEC0 Exception", "RESTART_APP"),
        69: ("Graphics Engine class error", "RESTART_APP"),
        74: ("NVLink Error", "WORKFLOW_NVLINK_ERR"),
        78: ("vGPU Start Error", "UPDATE_SWFW"),
        79: ("GPU has fallen off the bus", "RESTART_BM"),
        80: ("Corrupted data sent to GPU", "RESTART_APP"),
        92: ("High single-bit ECC error rate", "IGNORE"),
        93: ("Non-fatal violation of provisioned InfoROM wear limit", "IGNORE"),
        94: ("Contained memory error", "RESTART_APP"),
        95: ("Uncontained memory error", "RESET_GPU"),
        106: ("SMBPBI Test Message", "IGNORE"),
        107: ("SMBPBI Test Message Silent", "IGNORE"),
        108: ("NVLink remote translation error (unused)", "IGNORE"),
        109: ("Context Switch Timeout Error", "RESET_GPU"),
        110: ("Security Fault Error", "RESET_GPU"),
        119: ("GSP RPC Timeout", "RESET_GPU"),
        120: ("GSP Error", "RESET_GPU"),
        121: ("C2C Error", "IGNORE"),
        136: ("Link Training Failed", "RESET_GPU"),
        137: ("NVLink Privilege Error", "IGNORE"),
        140: ("ECC Unrecovered Error", "RESET_GPU"),
        141: ("CUDA Fast Path Error", "IGNORE"),
        142: ("NVENC3 Error", "CONTACT_SUPPORT"),
        143: ("GPU Initialization Error", "RESET_GPU"),
        151: ("Key rotation Error", "RESTART_VM"),
        152: ("DLA SMMU Error", "IGNORE"),
        153: ("DLA timeout Error", "IGNORE"),
        154: ("GPU Recovery Action Changed", "XID_154"),
        155: ("NVLink: SW Defined Error", "RESET_GPU"),
        156: ("Resource Retirement Event", "RESET_GPU"),
        157: ("Resource Retirement Failure", "IGNORE"),
        158: ("GPU Fatal Timeout", "RESET_GPU"),
        159: ("CHI Non-Data Error", "CHECK_UVM"),
        160: ("Channel Retirement Event", "IGNORE"),
        161: ("Channel Retirement Failure", "IGNORE"),
        162: ("Power Smoothing HW Circuitry capability reengaged", None),
        163: ("Power Smoothing HW Circuitry capability disengaged", None),
        164: ("Power Smoothing HW Circuitry low lifetime reached", None),
        165: ("Power Smoothing HW Circuitry lifetime exhausted", None),
        166: ("NVLink secure crypto error", None),
        167: ("PCIe fatal timeout", None),
        168: ("Reduced GPU memory capacity (errors in the write protected region)", None),
        169: ("Internal micro-controller halt (SEC2)", None),
        170: ("NVLink secure other (interrupt seen in CC mode)", None),
        171: ("Uncorrectable DRAM error (detail of Xid 48)", None),
        172: ("Uncorrectable SRAM error (detail of Xid 48)", None),
    }
)
XID_CATALOGUE.update({code: ("Copy Engine Exception", "RESTART_APP") for code in (70, 71, 72, 75, 76, 77, 85)})
XID_CATALOGUE.update({code: ("Copy Engine Exception", "RESTART_APP") for code in range(126, 136)})
XID_CATALOGUE.update({code: ("Video/JPEG/OFA engine error", "RESTART_APP") for code in (82, 83, 84, 86, 88, 89)})
XID_CATALOGUE.update({code: ("Video/JPEG/OFA engine error", "RESTART_APP") for code in (*range(96, 106), 139)})
XID_CATALOGUE.update(
    {code: ("NVLink5 error (decode the interrupt info)", "WORKFLOW_NVLINK5_ERR") for code in range(144, 151)}
)

# gpuforge's action classes for the catalogue's buckets. WORKFLOW_XID_48 and the NVLink workflows start
# with a GPU reset (catalogue workflows); Xid 45 and 154 only accompany another Xid, which is judged itself.
XID_ACTIONS = {
    "RESTART_APP": "restart_app",
    "RESET_GPU": "reset_gpu",
    "WORKFLOW_XID_48": "reset_gpu",
    "WORKFLOW_NVLINK_ERR": "reset_gpu",
    "WORKFLOW_NVLINK5_ERR": "reset_gpu",
    "RESTART_BM": "reboot",
    "RESTART_VM": "reboot",
    "CONTACT_SUPPORT": "contact_vendor",
    "CHECK_MECHANICALS": "check_mechanicals",
    "UPDATE_SWFW": "update_software",
    "CHECK_UVM": "restart_app",
    "IGNORE": "ignore",
    "WORKFLOW_XID_45": "ignore",
    "XID_154": "ignore",
    None: "not_given",
}
# What an operator does for each class (the remedy of the xid check).
ACTION_REMEDIES = {
    "restart_app": "restart the application; the node itself needs nothing unless the Xid repeats",
    "reset_gpu": "drain the node and reset the GPU (nvidia-smi -r -i <bus id>) or reboot it",
    "reboot": "drain the node and reboot it (power-cycle: a GPU off the bus does not come back on a warm reset)",
    "contact_vendor": "drain the node, collect nvidia-bug-report.sh and open a case with NVIDIA or the system vendor",
    "check_mechanicals": "drain the node and check the GPU's power cables, connectors and seating",
    "update_software": "update the driver / vGPU software to a supported release",
    "ignore": "no action (informational per the catalogue)",
    "not_given": "the catalogue gives no action for this code yet: look it up and contact NVIDIA if it repeats",
    "unknown": "code not in the catalogue gpuforge carries: look it up in NVIDIA's current Xid catalogue",
}
XID_DESCRIPTIONS = {code: description for code, (description, _bucket) in XID_CATALOGUE.items()}


def xid_action(code) -> dict:
    """{code, description, catalogue_action, action, known} for an Xid code; action `unknown` off the table."""
    if code not in XID_CATALOGUE:
        return {"code": code, "description": None, "catalogue_action": None, "action": "unknown", "known": False}
    description, bucket = XID_CATALOGUE[code]
    return {
        "code": code,
        "description": description,
        "catalogue_action": bucket,
        "action": XID_ACTIONS[bucket],
        "known": True,
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
# Xid 45 ("Preemptive cleanup, due to previous errors") names the Xid it cleans up after on newer drivers:
# "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149"
# (tests/fixtures/kernel/SOURCES.md).
_CAUSED_BY_RE = re.compile(r"\bcaused by previous Xid (?P<code>\d+)\b")
_DMESG_TS_RE = re.compile(r"^\[\s*(?P<ts>[^\]]+)\]\s*")
_JOURNAL_RE = re.compile(r"^(?P<ts>.+?)\s+(?P<host>\S+)\s+kernel:\s*")
# dmesg --decode --time-format iso: "kern  :err   : 2025-01-25T10:34:54,859532+00:00 <message>"
_DMESG_DECODE_RE = re.compile(r"^[a-z]+\s*:[a-z]+\s*:\s*(?P<ts>\S+)\s+")


def _timestamp_host(prefix: str):
    """(timestamp, host) of the text before a kernel message: dmesg `[ 12.34]` / `dmesg -T`, `journalctl -k`
    (`<time> <host> kernel:`) or `dmesg --decode --time-format iso`; (None, None) for a bare message."""
    for pattern in (_DMESG_TS_RE, _JOURNAL_RE, _DMESG_DECODE_RE):
        match = pattern.match(prefix)
        if match:
            return match["ts"].strip(), match.groupdict().get("host")
    return None, None


def parse_xid_events(text: str) -> list[dict]:
    """Xid events in dmesg (`[ 12.34]` or `dmesg -T`) or `journalctl -k` text; other lines are ignored.

    Each event: {timestamp, host, pci_bus, code, pid, process, message, description, catalogue_action,
    action, caused_by_code, line}; action is the gpuforge class of the catalogue's immediate action (xid_action);
    caused_by_code is the Xid a message says it was "caused by" (Xid 45 names it), else None.
    """
    events = []
    for line in (text or "").splitlines():
        match = _XID_RE.search(line)
        if not match:
            continue
        timestamp, host = _timestamp_host(line[: match.start()])
        pid = (match["pid"] or "").strip("'")
        code = int(match["code"])
        cause = _CAUSED_BY_RE.search(match["message"] or "")
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
                "catalogue_action": xid_action(code)["catalogue_action"],
                "action": xid_action(code)["action"],
                "caused_by_code": int(cause["code"]) if cause else None,
                "line": line.strip(),
            }
        )
    return events


# NVSwitch SXid lines. NVIDIA Fabric Manager User Guide, "Runtime NVSwitch and GPU Errors"
# (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html): the NVSwitch driver reports
#   <nvidia-nvswitchX: SXid (PCI:<switch_pci_bdf>): <SXid_Value>, <Fatal or Non-Fatal>, <Link No> <Error Description>
#   <raw error information for additional troubleshooting>
# The raw information comes as more lines with the same prefix and code ("Severity 0 Engine instance 46 ...",
# "Data {0x..., ...}"), before or after the classified line (both orders are in tests/fixtures/kernel/).
_SXID_RE = re.compile(
    r"(?P<device>nvidia-nvswitch(?P<index>\d+)): SXid \(PCI:(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
    r"(?:\.[0-7])?)\): (?P<code>\d+), (?P<rest>.*?)\s*$"
)
_SXID_CLASS_RE = re.compile(
    r"^(?P<severity>Fatal|Non-fatal)\s*,\s*(?:Link (?P<link>-?\d+)\b\s*)?(?P<message>.*)$", re.IGNORECASE
)


def parse_sxid_events(text: str) -> list[dict]:
    """NVSwitch SXid events in dmesg / `journalctl -k` text; other lines are ignored.

    One event per classified line ("<code>, Fatal|Non-fatal, Link <n> <description>"): {timestamp, host,
    switch (nvidia-nvswitchX), switch_index, pci (switch PCI address, lower case), code, fatal (bool), link (int or
    None), message, line}. A switch and code seen only in raw-information lines (Severity / Data) without a
    classified line gives one event with fatal None (the classification is not in the log), message the first
    such line's text and count the number of those lines.
    """
    events: list[dict] = []
    raw: dict = {}
    for line in (text or "").splitlines():
        match = _SXID_RE.search(line)
        if not match:
            continue
        timestamp, host = _timestamp_host(line[: match.start()])
        event = {
            "timestamp": timestamp,
            "host": host,
            "switch": match["device"],
            "switch_index": int(match["index"]),
            "pci": match["pci"].lower(),
            "code": int(match["code"]),
            "fatal": None,
            "link": None,
            "message": match["rest"],
            "line": line.strip(),
        }
        classified = _SXID_CLASS_RE.match(match["rest"])
        if classified:
            event["fatal"] = classified["severity"].lower() == "fatal"
            event["link"] = int(classified["link"]) if classified["link"] is not None else None
            event["message"] = classified["message"].strip()
            events.append(event)
            continue
        key = (event["switch"], event["pci"], event["code"])
        if key in raw:
            raw[key]["count"] += 1
        else:
            raw[key] = {**event, "count": 1}
    classified_keys = {(e["switch"], e["pci"], e["code"]) for e in events}
    events.extend(event for key, event in raw.items() if key not in classified_keys)
    return events
