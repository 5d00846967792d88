"""Parsers for Slurm command output: `scontrol show node -o` and `sinfo -h -N -o "%N %T"`.

Pure functions over text, stdlib only (and gpuforge_errors, shipped with it).

`scontrol show node -o` prints one line per node of space-separated Key=Value pairs. Two values can
hold spaces: OS= ("Linux 6.1.0-18-amd64 #1 SMP ...") and Reason= ("gpu 3 xid 79 [root@2024-05-01T10:00:00]");
a word that looks like Key=Value but whose key is not a node field (e.g. "xid=79" inside a reason) is
kept in the preceding value.
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_integer

# Node fields of `scontrol show node` in Slurm 20.11-23.11 (man scontrol, "NODES - SPECIFICATIONS FOR
# SHOW NODE"). Only these start a new field; anything else continues the previous value.
NODE_FIELDS = frozenset(
    [
        "NodeName",
        "Arch",
        "CoresPerSocket",
        "CPUAlloc",
        "CPUEfctv",
        "CPUErr",
        "CPUTot",
        "CPULoad",
        "AvailableFeatures",
        "ActiveFeatures",
        "Gres",
        "GresDrain",
        "GresUsed",
        "NodeAddr",
        "NodeHostName",
        "Port",
        "Version",
        "OS",
        "RealMemory",
        "AllocMem",
        "FreeMem",
        "Sockets",
        "Boards",
        "State",
        "ThreadsPerCore",
        "TmpDisk",
        "Weight",
        "Owner",
        "MCS_label",
        "Partitions",
        "BootTime",
        "SlurmdStartTime",
        "LastBusyTime",
        "ResumeAfterTime",
        "CfgTRES",
        "AllocTRES",
        "CapWatts",
        "CurrentWatts",
        "AveWatts",
        "LowestJoules",
        "ConsumedJoules",
        "ExtSensorsJoules",
        "ExtSensorsWatts",
        "ExtSensorsTemp",
        "Reason",
        "Comment",
        "Extra",
        "InstanceId",
        "InstanceType",
        "CoreSpecCount",
        "CPUSpecList",
        "MemSpecLimit",
        "NextState",
        "Topology",
    ]
)
_TOKEN = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z_]*)=")
_REASON_STAMP = re.compile(r"\s*\[[^\]\s]+@[^\]\s]+\]\s*$")
# Base states of man sinfo/scontrol; flags follow after '+'.
BASE_STATES = {
    "ALLOCATED",
    "BLOCKED",
    "COMPLETING",
    "DOWN",
    "ERROR",
    "FUTURE",
    "IDLE",
    "MIXED",
    "UNKNOWN",
}
_BUSY_STATES = {"ALLOCATED", "MIXED", "COMPLETING"}


def _split_fields(line: str) -> dict:
    fields: dict[str, str] = {}
    matches = [m for m in _TOKEN.finditer(line) if m.group(1) in NODE_FIELDS]
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        fields[match.group(1)] = line[match.end() : end].strip()
    return fields


def parse_state(text: str) -> dict:
    """'IDLE+DRAIN' / 'DOWN*+DRAIN' / 'MIXED' -> {base, flags, responding, drain, drained, draining}.

    scontrol marks a node that does not answer slurmctld with '*' after the base state.
    """
    raw = (text or "").strip()
    if not raw:
        raise ParseError("empty node state")
    parts = raw.upper().split("+")
    base = parts[0].rstrip("*~#!%$@^-")
    if base not in BASE_STATES:
        raise ParseError(f"unknown node state {raw!r}")
    flags = [p.rstrip("*") for p in parts[1:] if p]
    drain = "DRAIN" in flags or "DRAINED" in flags or "DRAINING" in flags
    return {
        "base": base.lower(),
        "flags": [f.lower() for f in flags],
        "responding": "*" not in parts[0],
        "drain": drain,
        "drained": drain and base not in _BUSY_STATES,
        "draining": drain and base in _BUSY_STATES,
    }


def parse_gres(text: str) -> list[dict]:
    """'gpu:v100:4(S:0-1),gpu:a100:2' -> [{name, type, count}]; '(null)' or '' -> []."""
    value = (text or "").strip()
    if value in ("", "(null)"):
        return []
    out = []
    for item in re.split(r",(?![^()]*\))", value):
        spec = re.sub(r"\(.*\)$", "", item.strip())
        parts = spec.split(":")
        if not parts[0]:
            raise ParseError(f"unreadable Gres entry {item!r}")
        count = 1
        kind = None
        if len(parts) >= 2 and parts[-1].isdigit():
            count = int(parts[-1])
            kind = parts[1] if len(parts) == 3 else None
        elif len(parts) == 2:
            kind = parts[1]
        out.append({"name": parts[0], "type": kind, "count": count})
    return out


def parse_node_line(line: str) -> dict:
    """One `scontrol show node -o` line -> node dict (see parse_show_node)."""
    fields = _split_fields(line.strip())
    if "NodeName" not in fields or "State" not in fields:
        raise ParseError(f"not a 'scontrol show node -o' line (NodeName= and State= expected): {line[:120]!r}")
    reason = fields.get("Reason", "")
    reason_text = _REASON_STAMP.sub("", reason).strip()
    gres = parse_gres(fields.get("Gres", ""))
    return {
        "name": fields["NodeName"],
        "state": parse_state(fields["State"]),
        "state_raw": fields["State"],
        "reason": reason_text or None,
        "reason_raw": reason or None,
        "gres": gres,
        "gpus": sum(g["count"] for g in gres if g["name"] == "gpu"),
        "cpus": to_integer(fields.get("CPUTot")),
        "real_memory_mb": to_integer(fields.get("RealMemory")),
        "partitions": [p for p in fields.get("Partitions", "").split(",") if p],
        "version": fields.get("Version"),
        "fields": fields,
    }


def parse_show_node(text: str) -> list[dict]:
    """Every node of `scontrol show node -o` output.

    Each node: name, state {base, flags, responding, drain, drained, draining}, state_raw, reason
    (without the trailing '[user@time]' stamp), reason_raw, gres [{name, type, count}], gpus, cpus,
    real_memory_mb, partitions, version, fields (all Key=Value pairs).
    Raises ParseError on empty output or a line without NodeName=/State=.
    """
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        raise ParseError("no node lines in 'scontrol show node -o' output")
    return [parse_node_line(line) for line in lines]


def parse_sinfo_states(text: str) -> dict:
    """`sinfo -h -N -o "%N %T"` -> {node: state dict}. A node in several partitions is listed once."""
    nodes: dict[str, dict] = {}
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ParseError(f"expected '<node> <state>' from sinfo -h -N -o '%N %T', got {line!r}")
        # sinfo -o %T prints long names with suffixes: "idle", "drained", "down*", "mixed-" ...
        name, state = parts
        nodes[name] = {"state": state.lower(), "responding": not state.endswith("*")}
    if not nodes:
        raise ParseError("sinfo listed no nodes")
    return nodes
