"""Parsers for IBM Storage Scale (GPFS) command output, and the diff the config module applies.

Pure functions, stdlib only (and gpuforge_errors, shipped with it). The configuration is returned as
{scope: {attribute: value}}: scope "common" for cluster-wide values, else the node list or node class
of an mmlsconfig stanza (`[dgx]` -> "dgx"). The cluster's state (mmlscluster -Y, mmgetstate -Y,
mmlsnodeclass, mmremotecluster show, mmremotefs show, mmlsmount -L) is what spectrum_scale_facts reads for
the spectrum_scale_client role in one call (docs/parsers.md, "storage-scale").
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_integer

COMMON = "common"
# The fix the modules name when an mm command is missing (gpuforge_run.missing_tool).
MISSING_HINT = "is IBM Storage Scale (gpfs.base) installed? If it is, set mmfs_bin to the directory of its mm commands"
_Y_HEADER = ["mmlsconfig", "", "HEADER", "version", "reserved", "reserved", "configParameter", "value", "nodeList"]


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


def is_default(value: str) -> bool:
    """mmchconfig's reset value: "To restore the GPFS default setting for any given attribute, specify DEFAULT
    as its value" (mmchconfig man page)."""
    return value.strip().upper() == "DEFAULT"


def config_changes(config: dict[str, dict[str, str]], scope: str, wanted: dict[str, str]) -> dict[str, dict]:
    """Attributes whose effective value for `scope` differs from `wanted`: {attr: {before, after}}.

    DEFAULT asks that `scope` has no value of its own: mmchconfig removes the attribute from the scope's stanza
    (mmlsconfig lists only attributes set away from their default), so it is met when the scope's own stanza does
    not list the attribute, whatever [common] says for a node class. Compared with the effective value instead,
    DEFAULT would never match and every run would reset the attribute again."""
    changes = {}
    for attribute, value in wanted.items():
        if is_default(value):
            own = config.get(scope, {}).get(attribute)
            if own is not None:
                changes[attribute] = {"before": own, "after": value}
            continue
        current = effective_value(config, scope, attribute)
        if not _same(current, value):
            changes[attribute] = {"before": current, "after": value}
    return changes


def apply_changes(config: dict[str, dict[str, str]], scope: str, changes: dict[str, dict]) -> dict[str, dict[str, str]]:
    """The configuration as mmlsconfig shows it once `mmchconfig` has set `changes` (as config_changes returns
    them) for `scope`: a new {scope: {attribute: value}}, `config` left as it was. Each attribute's value goes
    into the scope's own stanza (the cluster-wide one for "common"); DEFAULT removes it from that stanza, so the
    value that applies falls back to [common], as mmchconfig does."""
    updated = {name: dict(values) for name, values in config.items()}
    stanza = updated.setdefault(scope, {})
    for attribute, change in changes.items():
        if is_default(change["after"]):
            stanza.pop(attribute, None)
        else:
            stanza[attribute] = change["after"]
    return updated


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


# --- The cluster's state as the spectrum_scale_client role decides on it (spectrum_scale_facts) ---------------


def _show(line: str) -> str:
    """repr(line), shortened for a message (a line of binary garbage can be kilobytes long)."""
    text = repr(line)
    return text if len(text) <= 120 else text[:117] + "..."


def same_node(listed: str, node: str) -> bool:
    """Whether a node name as a Storage Scale command prints it names `node`: the same name, or one of them
    the other with more of its domain. mmlscluster prints the daemon name in full (dgx01.ocp4.scale.com),
    mmlsmount -L a shortened one (worker01.ocp4 for worker01.ocp4.scale.ibm.com), an inventory the short host
    name (dgx01). Case-insensitive, as host names are."""
    listed, node = listed.strip().lower(), node.strip().lower()
    if not listed or not node:
        return False
    return listed == node or listed.startswith(node + ".") or node.startswith(listed + ".")


def parse_mmgetstate_y(text: str) -> list[dict]:
    """Parse `mmgetstate -Y` into [{name, number, state, quorum, nodes_up, total_nodes, remarks}], one per node
    (fields by the HEADER's names; newer releases add daemonShortName and daemonNodeName, not read here)."""
    records = _y_sections(text, "mmgetstate").get("", [])
    if not records:
        raise ParseError("mmgetstate -Y output has no node record (only its HEADER)")
    nodes = []
    for record in records:
        if not record.get("nodeName") or not record.get("state"):
            raise ParseError(f"mmgetstate -Y record without nodeName or state: {_show(record)}")
        nodes.append(
            {
                "name": record["nodeName"],
                "number": to_integer(record.get("nodeNumber", "")),
                "state": record["state"],
                "quorum": to_integer(record.get("quorum", "")),
                "nodes_up": to_integer(record.get("nodesUp", "")),
                "total_nodes": to_integer(record.get("totalNodes", "")),
                "remarks": record.get("remarks", ""),
            }
        )
    return nodes


# A node or node class name as the mm commands print them (host names, FQDNs, class names).
_NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


def _names(text: str) -> list[str]:
    return [name for name in re.split(r"[,\s]+", text.strip()) if name]


def _members(text: str, number: int, line: str) -> list[str]:
    """A comma-separated member list (one field: no blanks inside), every member a node or class name."""
    fields = text.split()
    members = _names(text)
    if len(fields) > 1 or not all(_NODE_NAME.fullmatch(name) for name in members):
        raise ParseError(f"mmlsnodeclass line {number} is not 'class  member,member,...': {_show(line)}")
    return members


def parse_mmlsnodeclass(text: str) -> dict[str, list[str]]:
    """Parse plain `mmlsnodeclass [Class,...]` into {class: [member, ...]}.

    The table is `Node Class Name  Members` over a dashed rule, one class per row with its members
    comma-separated; a row that starts with blanks continues the members of the class above it.
    """
    classes: dict[str, list[str]] = {}
    current = None
    header_seen = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if not header_seen:
            if line.split()[:4] != ["Node", "Class", "Name", "Members"]:
                raise ParseError(
                    f"mmlsnodeclass line {number} is not its 'Node Class Name  Members' header: {_show(line)}"
                )
            header_seen = True
            continue
        if set(line.strip()) <= {"-", " "}:
            continue
        if line[0].isspace():
            if current is None:
                raise ParseError(f"mmlsnodeclass line {number}: members before a node class: {_show(line)}")
            classes[current] += _members(line, number, line)
            continue
        name, _blank, members = line.strip().partition(" ")
        if not _NODE_NAME.fullmatch(name):
            raise ParseError(f"mmlsnodeclass line {number} is not 'class  member,member,...': {_show(line)}")
        current = name
        classes[name] = _members(members, number, line)
    if not header_seen:
        raise ParseError("mmlsnodeclass output has no 'Node Class Name  Members' header (empty or truncated output)")
    return classes


# "File systems:    fs1 (ess3k_fs1) fs2 (fs2)": local name, then the owning cluster's name in parentheses.
# Other lines are kept when their label is written as IBM writes them (a capital, then words).
_LABEL = re.compile(r"[A-Z][A-Za-z]*(?: [A-Za-z]+)*")
_REMOTE_CLUSTER_FS = re.compile(r"([^\s()]+)\s*\(([^\s()]+)\)")


def parse_mmremotecluster_show(text: str) -> dict[str, dict]:
    """Parse `mmremotecluster show [all]` into {cluster: {contact_nodes: [...], sha_digest, filesystems:
    {local name: remote name}}}: one `Key:  value` block per remote cluster, each starting at `Cluster name:`.
    Lines of other keys are kept under their snake_case name."""
    clusters: dict[str, dict] = {}
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, separator, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not separator or not key:
            raise ParseError(f"mmremotecluster show line {number} is not a 'Key: value' line: {_show(line)}")
        if key == "cluster name":
            if not value:
                raise ParseError(f"mmremotecluster show line {number}: empty cluster name")
            current = clusters.setdefault(value, {"contact_nodes": [], "sha_digest": "", "filesystems": {}})
        elif current is None:
            raise ParseError(f"mmremotecluster show line {number}: {_show(line)} before a 'Cluster name:' line")
        elif key == "contact nodes":
            current["contact_nodes"] = _names(value)
        elif key == "sha digest":
            current["sha_digest"] = value
        elif key == "file systems":
            current["filesystems"] = dict(_REMOTE_CLUSTER_FS.findall(value))
        elif _LABEL.fullmatch(line.partition(":")[0].strip()):
            current[re.sub(r"\W+", "_", key)] = value
        else:
            raise ParseError(f"mmremotecluster show line {number} is not a 'Label: value' line: {_show(line)}")
    if not clusters:
        raise ParseError("mmremotecluster show output has no 'Cluster name:' line (empty or truncated output)")
    return clusters


_REMOTEFS_COLUMNS = ("remote", "cluster", "mount_point", "mount_options", "automount", "drive", "priority")


def parse_mmremotefs_show(text: str) -> dict[str, dict[str, str]]:
    """Parse `mmremotefs show [all]` into {local name: {remote, cluster, mount_point, mount_options,
    automount, drive, priority}}: the `Local Name  Remote Name  Cluster name  Mount Point ...` table, one
    file system per row (no column holds blanks)."""
    filesystems: dict[str, dict[str, str]] = {}
    header_seen = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        if not header_seen:
            if fields[:2] != ["Local", "Name"]:
                raise ParseError(
                    f"mmremotefs show line {number} is not its 'Local Name  Remote Name' header: {_show(line)}"
                )
            header_seen = True
            continue
        if len(fields) < 4:
            raise ParseError(
                f"mmremotefs show line {number} has {len(fields)} columns, not local name, remote name, cluster "
                f"and mount point at least: {_show(line)}"
            )
        if not fields[3].startswith("/"):
            raise ParseError(f"mmremotefs show line {number}: mount point {fields[3]!r} is not a path: {_show(line)}")
        filesystems[fields[0]] = dict(zip(_REMOTEFS_COLUMNS, fields[1:]))
    if not header_seen:
        raise ParseError("mmremotefs show output has no 'Local Name  Remote Name' header (empty or truncated output)")
    return filesystems


# "File system fs1 (ess3000.bda.scale.ibm.com:ess3k_fs1) is mounted on 7 nodes:" (a remote one names its owning
# cluster and remote name), "File system gpfs0 is mounted on 2 nodes.", "File system fs1 is not mounted."
_MOUNT_HEADER = re.compile(
    r"^File system (\S+?)(?: \(([^\s():]+):([^\s()]+)\))? is (?:mounted on (\d+) nodes?[:.]?|not mounted\.?)$"
)


def parse_mmlsmount(text: str) -> dict[str, dict]:
    """Parse `mmlsmount {Device | all} [-L]` into {device: {cluster, remote, count, nodes: [{ip, name,
    cluster}]}}: a `File system ... is mounted on N nodes:` line per file system, with -L one `ip  node
    name  cluster` line per mounting node under it (the node name as the cluster knows it, its domain possibly
    shortened: compare with same_node). cluster and remote are empty for a file system of this cluster."""
    mounts: dict[str, dict] = {}
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        header = _MOUNT_HEADER.match(line.strip())
        if header:
            device, owner, remote, count = header.groups()
            current = mounts[device] = {
                "cluster": owner or "",
                "remote": remote or "",
                "count": int(count) if count else 0,
                "nodes": [],
            }
            continue
        fields = line.split()
        if current is None or not line[0].isspace() or len(fields) < 2:
            raise ParseError(
                f"mmlsmount line {number} is neither a 'File system ... mounted' line nor an indented "
                f"'address  node  cluster' line under one: {_show(line)}"
            )
        current["nodes"].append({"ip": fields[0], "name": fields[1], "cluster": fields[2] if len(fields) > 2 else ""})
    if not mounts:
        raise ParseError("mmlsmount output has no 'File system ... mounted' line (empty or truncated output)")
    return mounts
