"""Parsers for IBM Storage Scale (GPFS) configuration output, and the diff the config module applies.

Pure functions, stdlib only (and gpuforge_errors, shipped with it). The configuration is returned as
{scope: {attribute: value}}: scope "common" for cluster-wide values, else the node list or node class
of an mmlsconfig stanza (`[dgx]` -> "dgx").
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError as _BaseParseError

COMMON = "common"
# The fix the modules name when an mm command is missing (gpuforge_run.missing_tool).
MISSING_HINT = "is IBM Storage Scale (gpfs.base) installed? If it is, set mmfs_bin to the directory of its mm commands"
_Y_HEADER = ["mmlsconfig", "", "HEADER", "version", "reserved", "reserved", "configParameter", "value", "nodeList"]


class ParseError(_BaseParseError):
    """mmlsconfig output that could not be read; the message names the line."""


def parse_mmlsconfig_y(text: str) -> dict[str, dict[str, str]]:
    """Parse `mmlsconfig -Y` (colon-separated, %-encoded fields) into {scope: {attribute: value}}."""
    config: dict[str, dict[str, str]] = {COMMON: {}}
    header_seen = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split(":")
        if fields[0] != "mmlsconfig" or len(fields) < 9:
            raise ParseError(f"mmlsconfig -Y line {number} is not an mmlsconfig record: {line!r}")
        if fields[2] == "HEADER":
            if fields[: len(_Y_HEADER)] != _Y_HEADER:
                raise ParseError(f"mmlsconfig -Y line {number}: unexpected header {line!r}")
            header_seen = True
            continue
        if not header_seen:
            raise ParseError(f"mmlsconfig -Y line {number}: data before the HEADER record")
        attribute, value, nodes = fields[6], unquote(fields[7]), unquote(fields[8])
        if not attribute:
            raise ParseError(f"mmlsconfig -Y line {number}: empty configParameter")
        config.setdefault(nodes or COMMON, {})[attribute] = value
    if not header_seen:
        raise ParseError("mmlsconfig -Y output has no HEADER record (empty or truncated output)")
    return config


def parse_mmlsconfig(text: str) -> dict[str, dict[str, str]]:
    """Parse plain `mmlsconfig` output: the value lines, `[stanza]` switches, up to the file system list."""
    config: dict[str, dict[str, str]] = {COMMON: {}}
    scope = COMMON
    started = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("Configuration data for cluster"):
            started = True
            continue
        if not started:
            continue
        if line.startswith("File systems in cluster"):
            return config
        if not line or set(line) == {"-"}:
            continue
        if line.startswith("[") and line.endswith("]"):
            scope = line[1:-1] or COMMON
            config.setdefault(scope, {})
            continue
        attribute, _separator, value = line.partition(" ")
        if not value.strip():
            raise ParseError(f"mmlsconfig line {number} has no value: {raw!r}")
        config[scope][attribute] = value.strip()
    if not started:
        raise ParseError("mmlsconfig output has no 'Configuration data for cluster' header")
    return config


def effective_value(config: dict[str, dict[str, str]], scope: str, attribute: str) -> str | None:
    """The value that applies to `scope`: its own stanza's, else the cluster-wide one."""
    if attribute in config.get(scope, {}):
        return config[scope][attribute]
    return config.get(COMMON, {}).get(attribute)


def _same(current: str | None, wanted: str) -> bool:
    if current is None:
        return False
    # Spaces inside list values (verbsPorts) are not significant; yes/no are case-insensitive.
    return " ".join(current.split()).lower() == " ".join(wanted.split()).lower()


def config_changes(config: dict[str, dict[str, str]], scope: str, wanted: dict[str, str]) -> dict[str, dict]:
    """Attributes whose effective value for `scope` differs from `wanted`: {attr: {before, after}}."""
    changes = {}
    for attribute, value in wanted.items():
        current = effective_value(config, scope, attribute)
        if not _same(current, value):
            changes[attribute] = {"before": current, "after": value}
    return changes


def _y_sections(text: str, command: str) -> dict[str, list[dict[str, str]]]:
    """Read `<command> -Y` output: {section: [record as {field: value}]}, fields named by each HEADER."""
    headers: dict[str, list[str]] = {}
    sections: dict[str, list[dict[str, str]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split(":")
        if fields[0] != command or len(fields) < 4:
            raise ParseError(f"{command} -Y line {number} is not an {command} record: {line!r}")
        section = fields[1]
        if fields[2] == "HEADER":
            headers[section] = fields
            continue
        if section not in headers:
            raise ParseError(f"{command} -Y line {number}: {section or 'record'} data before its HEADER")
        names = headers[section]
        sections.setdefault(section, []).append(
            {name: unquote(value) for name, value in zip(names[3:], fields[3:]) if name}
        )
    if not headers:
        raise ParseError(f"{command} -Y output has no HEADER record (empty or truncated output)")
    return sections


def parse_mmlscluster_y(text: str) -> dict:
    """Parse `mmlscluster -Y` into {name, id, uid_domain, repository_type, nodes: [{number, name, ip,
    admin_name, designation}]}: the cluster id is what the CSI driver's clusters[].id must be."""
    sections = _y_sections(text, "mmlscluster")
    summary = (sections.get("clusterSummary") or [None])[0]
    if not summary or not summary.get("clusterId"):
        raise ParseError("mmlscluster -Y output has no clusterSummary record with a clusterId")
    nodes = [
        {
            "number": int(node["nodeNumber"]) if node.get("nodeNumber", "").isdigit() else None,
            "name": node.get("daemonNodeName", ""),
            "ip": node.get("ipAddress", ""),
            "admin_name": node.get("adminNodeName", ""),
            "designation": [part for part in node.get("designation", "").split("-") if part],
        }
        for node in sections.get("clusterNode", [])
    ]
    return {
        "name": summary.get("clusterName", ""),
        "id": summary["clusterId"],
        "uid_domain": summary.get("uidDomain", ""),
        "repository_type": summary.get("repositoryType", ""),
        "nodes": nodes,
    }


# A file system UID as `mmlsfs <fs> --uid` prints it and the CSI driver's volumeHandle takes it: two 8-digit
# hexadecimal words (IBM Redpaper REDP-5610: "099B6A7A:5EB99743, as shown by mmlsfs ess3000_4M --uid").
_FILESYSTEM_UID = re.compile(r"^[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}$")


def parse_mmlsfs(text: str) -> dict[str, dict[str, str]]:
    """Parse the plain `mmlsfs <fs> [flags]` table into {flag: {value, description}}.

    The table is `flag  value  description` under a dashed rule; a value may hold spaces
    (`35.00 (5.1.9.0)`), and a long value pushes its description right, so a row is split at its first run
    of two or more blanks after the value.
    """
    rows: dict[str, dict[str, str]] = {}
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[0].split()[:3] != ["flag", "value", "description"]:
        raise ParseError("mmlsfs output has no 'flag value description' header (empty or not mmlsfs output)")
    for number, line in enumerate(lines[1:], 2):
        if set(line.strip()) <= {"-", " "}:
            continue
        match = re.match(r"^\s*(-{1,2}[A-Za-z][\w-]*)\s+(\S.*?)(?:\s{2,}(\S.*))?\s*$", line)
        if not match:
            raise ParseError(f"mmlsfs line {number} is not a 'flag value description' row: {line!r}")
        rows[match.group(1)] = {"value": match.group(2), "description": match.group(3) or ""}
    return rows


def filesystem_uid(text: str) -> str:
    """The UID from `mmlsfs <fs> --uid` output; ParseError when the row is missing or not a UID."""
    value = parse_mmlsfs(text).get("--uid", {}).get("value")
    if value is None:
        raise ParseError("mmlsfs output has no --uid row")
    if not _FILESYSTEM_UID.match(value):
        raise ParseError(f"mmlsfs --uid printed {value!r}, not a file system UID (8 hex digits:8 hex digits)")
    return value.upper()
