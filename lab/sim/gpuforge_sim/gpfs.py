"""Simulated IBM Storage Scale (GPFS) 5.1.9.3 administration commands.

One `main(argv, prog=None)` serves every mm* command: the lab package wrapper exports
GPUFORGE_SIM_PROG=<command name> (the wrapper runs `python3 -c`, so sys.argv[0] is `-c`).

State, standing in for what the real product keeps:
- the cluster configuration repository (CCR), replicated to every member: one JSON document at
  <state>/shared/gpfs-cluster.json (lab nodes bind-mount <state>/shared from a common directory);
- node-local facts (the portability layer build) at <state>/gpfs-node.json;
<state> is $GPUFORGE_LAB_STATE (default /var/lib/gpuforge-lab). The local node is the host name
($GPUFORGE_LAB_NODE overrides it for tests).
Output follows the real commands' layouts (mmlsconfig stanzas, mmgetstate table, mmlscluster
header, mmlsfs table, -Y colon-separated records).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
import zlib
from urllib.parse import quote

CODE_LEVEL = "5.1.9.3"
MIN_RELEASE = "5.1.9.0"
# mmlsfs values of a file system created with a 4 MiB block size (IBM Redpaper REDP-5610: ess3000_4M).
FS_DEFAULTS = [
    ("-f", "8192", "Minimum fragment (subblock) size in bytes"),
    ("-i", "4096", "Inode size in bytes"),
    ("-I", "32768", "Indirect block size in bytes"),
    ("-m", "1", "Default number of metadata replicas"),
    ("-r", "1", "Default number of data replicas"),
    ("-j", "scatter", "Block allocation type"),
    ("-B", "4194304", "Block size"),
    ("-V", "35.00 (5.1.9.0)", "File system version"),
    ("-z", "no", "Is DMAPI enabled?"),
]


# `mmlsfs -Y` names each value by a field name, not by its flag. Names seen in public transcripts of the real
# command (IBM Storage Scale -Y output quoted in the test fixtures of puppet-gpfs, OpenStack Cinder's GPFS
# driver and gpfs_exporter): minFragmentSize, inodeSize, filesystemVersion, defaultMountPoint. The others
# follow the same naming but are not confirmed by a transcript; gpuforge reads none of them through -Y
# (spectrum_scale_facts reads the UID from the plain table, whose `--uid` row is keyed by its flag).
Y_FIELD_NAMES = {
    "-f": "minFragmentSize",
    "-i": "inodeSize",
    "-I": "indirectBlockSize",
    "-m": "defaultMetadataReplicas",
    "-r": "defaultDataReplicas",
    "-j": "blockAllocationType",
    "-B": "blockSize",
    "-V": "filesystemVersion",
    "-z": "DMAPIEnabled",
    "-A": "automaticMountOption",
    "-o": "additionalMountOptions",
    "-T": "defaultMountPoint",
    "--uid": "UID",
}


def filesystem_uid(fs: dict) -> str:
    """The file system's UID as mmlsfs --uid prints it: two 8-digit hex words (IBM Redpaper REDP-5610 shows
    099B6A7A:5EB99743). Real ones come from the creating node and time; the lab derives a stable one from the
    owning cluster and the file system name."""
    return f"{zlib.crc32(fs['cluster'].encode()):08X}:{zlib.crc32(fs['remote'].encode()):08X}"


class MmError(Exception):
    """A command failure: message printed to stderr, exit status."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def state_dir() -> str:
    return os.environ.get("GPUFORGE_LAB_STATE", "/var/lib/gpuforge-lab")


def cluster_path() -> str:
    return os.path.join(state_dir(), "shared", "gpfs-cluster.json")


def lock_path() -> str:
    return os.path.join(state_dir(), "shared", "gpfs-cluster.lock")


@contextlib.contextmanager
def ccr_lock():
    """One command at a time on the cluster document, across every lab node: GPFS keeps its configuration in the
    CCR, which agrees on each change among the quorum nodes, so concurrent commands from several nodes (16 clients
    running mmstartup at once) all take effect. The document here is a file every node reads, changes and writes
    back; without the lock, two nodes writing at once lose one change (a started node reads `down`). An flock on a
    file in the shared directory serialises the commands of all containers (one kernel, one inode)."""
    path = lock_path()
    if not os.path.isdir(os.path.dirname(path)):  # no cluster directory yet: nothing to serialise
        yield
        return
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def node_path() -> str:
    return os.path.join(state_dir(), "gpfs-node.json")


def local_node() -> str:
    return os.environ.get("GPUFORGE_LAB_NODE") or socket.gethostname().split(".")[0]


def _read(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def _write(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _stamp(prog: str) -> str:
    return f"{time.strftime('%a %b %d %H:%M:%S %Z %Y')}: {prog}"


def _address(name: str) -> str:
    try:
        return socket.gethostbyname(name)
    except OSError:
        return "0.0.0.0"


class Cluster:
    """The CCR document plus lookups the commands share."""

    def __init__(self, prog: str):
        self.prog = prog
        self.data = _read(cluster_path())

    def require_member(self) -> dict:
        if not self.data or not self.node(local_node()):
            raise MmError(f"{self.prog}: This node does not belong to a GPFS cluster.")
        return self.data

    def save(self) -> None:
        _write(cluster_path(), self.data)

    def node(self, name: str) -> dict | None:
        for node in (self.data or {}).get("nodes", []):
            if name in (node["name"], node["name"].split(".")[0]):
                return node
        return None

    def expand(self, spec: str | None) -> list[dict]:
        """Nodes named by a -N argument: all, a node class, or a comma-separated node list."""
        data = self.require_member()
        if spec in (None, "", "localhost"):
            return [self.node(local_node())]
        if spec in ("all", "-a"):
            return list(data["nodes"])
        result = []
        for word in spec.split(","):
            if word in data.get("nodeclasses", {}):
                result += [self.node(member) for member in data["nodeclasses"][word]]
            elif word in ("nsdnodes", "clientnodes", "managernodes", "quorumnodes"):
                role = {"nsdnodes": "nsd", "managernodes": "manager", "quorumnodes": "quorum"}.get(word)
                result += [
                    n for n in data["nodes"] if (role is None and not n["designation"]) or role in n["designation"]
                ]
            elif self.node(word):
                result.append(self.node(word))
            else:
                raise MmError(f"{self.prog}: Incorrect node {word} specified for command.")
        return result


def _options(argv: list[str], with_value: str) -> tuple[dict, list[str]]:
    """Split argv into {flag: value-or-True} (flags in with_value take a value) and positionals."""
    opts: dict = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and len(arg) > 1 and arg.lstrip("-"):
            if arg in with_value.split() and i + 1 < len(argv):
                opts[arg] = argv[i + 1]
                i += 1
            else:
                opts[arg] = True
        else:
            rest.append(arg)
        i += 1
    return opts, rest


def _success(prog: str, propagate: bool = True) -> None:
    print(f"{prog}: Command successfully completed")
    if propagate:
        print(
            f"{prog}: Propagating the cluster configuration data to all\n"
            "  affected nodes.  This is an asynchronous process."
        )


def _node_entry(spec: str) -> dict:
    name, _, designation = spec.partition(":")
    roles = [r for r in designation.replace("-", " ").split() if r in ("quorum", "manager", "nsd")]
    return {"name": name, "ip": _address(name), "designation": roles, "license": "", "state": "down", "gpl": ""}


def mmcrcluster(argv: list[str]) -> int:
    opts, _ = _options(argv, "-N -C -r -R -U -A")
    if not opts.get("-N"):
        raise MmError(
            "mmcrcluster: Missing argument -N NodeList.\nUsage: mmcrcluster -N {NodeDesc[,NodeDesc...] | NodeFile}"
        )
    current = _read(cluster_path())
    if current:
        raise MmError(f"mmcrcluster: Node {local_node()} is already a member of cluster {current['name']}.")
    specs = opts["-N"].split(",")
    if os.path.isfile(opts["-N"]):
        with open(opts["-N"], encoding="utf-8") as handle:
            specs = [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    nodes = [_node_entry(spec) for spec in specs]
    name = opts.get("-C") or nodes[0]["name"]
    for number, node in enumerate(nodes, 1):
        node["number"] = number
        if node["designation"]:
            node["license"] = "server"
    data = {
        "name": name,
        "id": str(zlib.crc32(name.encode()) * 3794951083 % 10**19 + 10**18),
        "rsh": opts.get("-r", "/usr/bin/ssh"),
        "rcp": opts.get("-R", "/usr/bin/scp"),
        "nodes": nodes,
        "config": {"common": {}},
        "config_order": ["common"],
        "nodeclasses": {},
        "remoteclusters": {},
        "remotefs": {},
        "mounts": {},
    }
    _write(cluster_path(), data)
    print(f"{_stamp('mmcrcluster')}: Performing preliminary node verification ...")
    print(f"{_stamp('mmcrcluster')}: Processing quorum and other critical nodes ...")
    _success("mmcrcluster", propagate=False)
    print("mmcrcluster: Warning: Not all nodes have proper GPFS license designations.")
    print("    Use the mmchlicense command to designate licenses as needed.")
    return 0


def mmlscluster(argv: list[str]) -> int:
    data = Cluster("mmlscluster").require_member()
    if "-Y" in argv:
        print(
            "mmlscluster:clusterSummary:HEADER:version:reserved:reserved:clusterName:clusterId:uidDomain:"
            "rshPath:rcpPath:repositoryType:"
        )
        print(
            f"mmlscluster:clusterSummary:0:1:::{data['name']}:{data['id']}:{data['name']}:"
            f"{quote(data['rsh'], safe='')}:{quote(data['rcp'], safe='')}:CCR:"
        )
        print(
            "mmlscluster:clusterNode:HEADER:version:reserved:reserved:nodeNumber:daemonNodeName:ipAddress:"
            "adminNodeName:designation:otherNodeRoles:adminLoginName:otherNodeRolesAlias:"
        )
        for node in data["nodes"]:
            print(
                f"mmlscluster:clusterNode:0:1:::{node['number']}:{node['name']}:{node['ip']}:{node['name']}:"
                f"{'-'.join(node['designation'])}::::"
            )
        return 0
    out = [
        "",
        "GPFS cluster information",
        "========================",
        f"  GPFS cluster name:         {data['name']}",
        f"  GPFS cluster id:           {data['id']}",
        f"  GPFS UID domain:           {data['name']}",
        f"  Remote shell command:      {data['rsh']}",
        f"  Remote file copy command:  {data['rcp']}",
        "  Repository type:           CCR",
        "",
        " Node  Daemon node name  IP address  Admin node name  Designation",
        "--------------------------------------------------------------------",
    ]
    for node in data["nodes"]:
        designation = "-".join(node["designation"])
        out.append(
            f"{node['number']:>4}   {node['name']:<17} {node['ip']:<11} {node['name']:<16} {designation}".rstrip()
        )
    print("\n".join(out) + "\n")
    return 0


def mmaddnode(argv: list[str]) -> int:
    cluster = Cluster("mmaddnode")
    data = cluster.require_member()
    opts, _ = _options(argv, "-N")
    if not opts.get("-N"):
        raise MmError("mmaddnode: Missing argument -N NodeList.")
    added = []
    for spec in opts["-N"].split(","):
        entry = _node_entry(spec)
        if cluster.node(entry["name"]):
            raise MmError(f"mmaddnode: Node {entry['name']} is already a member of the GPFS cluster.")
        entry["number"] = max(n["number"] for n in data["nodes"]) + 1
        data["nodes"].append(entry)
        added.append(entry["name"])
    cluster.save()
    for name in added:
        print(f"{_stamp('mmaddnode')}: Processing node {name}")
    _success("mmaddnode", propagate=False)
    print("mmaddnode: Warning: Not all nodes have proper GPFS license designations.")
    print("    Use the mmchlicense command to designate licenses as needed.")
    print("mmaddnode: Propagating the cluster configuration data to all")
    print("  affected nodes.  This is an asynchronous process.")
    return 0


def mmchlicense(argv: list[str]) -> int:
    cluster = Cluster("mmchlicense")
    cluster.require_member()
    opts, rest = _options(argv, "-N")
    kind = rest[0] if rest else ""
    if kind not in ("server", "client", "fpo"):
        raise MmError(
            "Usage: mmchlicense {client | fpo | server} [--accept] -N {Node[,Node...] | NodeFile | NodeClass}"
        )
    if "--accept" not in opts:
        raise MmError("mmchlicense: The license was not accepted (specify --accept).")
    nodes = cluster.expand(opts.get("-N"))
    print(f"\nThe following nodes will be designated as possessing {kind} licenses:")
    for node in nodes:
        node["license"] = kind
        print(f"\t{node['name']}")
    cluster.save()
    _success("mmchlicense")
    return 0


def _scope(cluster: Cluster, spec: str | None) -> str:
    """The mmlsconfig stanza a -N argument writes to: common, a node class, or a node list."""
    if spec in (None, "", "all"):
        return "common"
    cluster.expand(spec)  # validates the names
    return spec


def mmchconfig(argv: list[str]) -> int:
    cluster = Cluster("mmchconfig")
    data = cluster.require_member()
    opts, rest = _options(argv, "-N")
    if not rest:
        raise MmError(
            "Usage: mmchconfig Attribute=value[,Attribute=value...] [-i | -I] [-N {Node[,Node...] | NodeClass}]"
        )
    scope = _scope(cluster, opts.get("-N"))
    settings = data["config"].setdefault(scope, {})
    if scope not in data["config_order"]:
        data["config_order"].append(scope)
    for pair in ",".join(rest).split(","):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise MmError(f"mmchconfig: Incorrect attribute=value pair: {pair}")
        if value == "DEFAULT":
            settings.pop(key, None)
        else:
            settings[key] = value
    if not settings and scope != "common":
        del data["config"][scope]
        data["config_order"].remove(scope)
    cluster.save()
    _success("mmchconfig")
    return 0


def _config_rows(data: dict) -> list[tuple[str, str, str]]:
    """(attribute, value, node list) in mmlsconfig order: base values, stanzas, then [common]."""
    rows = [
        ("clusterName", data["name"], ""),
        ("clusterId", data["id"], ""),
        ("dmapiFileHandleSize", "32", ""),
        ("minReleaseLevel", MIN_RELEASE, ""),
        ("ccrEnabled", "yes", ""),
        ("cipherList", "AUTHONLY", ""),
    ]
    for scope in data["config_order"]:
        if scope != "common":
            rows += [(k, v, scope) for k, v in data["config"][scope].items()]
    rows += [(k, v, "") for k, v in data["config"]["common"].items()]
    return [*rows, ("adminMode", "central", "")]


def mmlsconfig(argv: list[str]) -> int:
    data = Cluster("mmlsconfig").require_member()
    opts, wanted = _options(argv, "")
    rows = _config_rows(data)
    if wanted:
        rows = [row for row in rows if row[0] in wanted]
        missing = [w for w in wanted if w not in {row[0] for row in rows}]
        for attribute in missing:
            print(f"{attribute} is not set", file=sys.stderr)  # real: "No value for ... has been set"
    if "-Y" in opts:
        print("mmlsconfig::HEADER:version:reserved:reserved:configParameter:value:nodeList:")
        for key, value, nodes in rows:
            print(f"mmlsconfig::0:1:::{key}:{quote(value, safe='')}:{quote(nodes, safe='')}:")
        return 0
    if wanted:
        for key, value, nodes in rows:
            print(f"{key} {value}" + (f" [{nodes}]" if nodes else ""))
        return 0
    title = f"Configuration data for cluster {data['name']}:"
    out = [title, "-" * len(title)]
    current = ""
    for key, value, nodes in rows:
        if nodes != current:
            out.append(f"[{nodes or 'common'}]")
            current = nodes
        out.append(f"{key} {value}")
    fs_title = f"File systems in cluster {data['name']}:"
    out += ["", fs_title, "-" * len(fs_title)]
    out += [f"(remote) /dev/{name}" for name in sorted(data["remotefs"])] or ["(none)"]
    print("\n".join(out))
    return 0


def mmbuildgpl(argv: list[str]) -> int:
    release = os.uname().release
    rule = "-" * 56
    print(rule)
    print(f"mmbuildgpl: Building GPL ({CODE_LEVEL}) module begins at {time.strftime('%a %b %d %H:%M:%S %Z %Y')}.")
    print(rule)
    print("Verifying Kernel Header...")
    print(f"  kernel version = {release}")
    print(f"  module include dir = /lib/modules/{release}/build/include")
    print("Verifying Compiler...")
    print("  make is present at /bin/make")
    print("  cpp is present at /bin/cpp")
    print("  gcc is present at /bin/gcc")
    print("Verifying Additional System Headers...")
    print(f"make World ...\nmake InstallImages ...\n{rule}")
    node = _read(node_path()) or {}
    node.update({"gpl_kernel": release, "gpl_built": time.strftime("%Y-%m-%dT%H:%M:%S")})
    _write(node_path(), node)
    cluster = Cluster("mmbuildgpl")
    if cluster.data and cluster.node(local_node()):
        cluster.node(local_node())["gpl"] = release
        cluster.save()
    print(f"mmbuildgpl: Building GPL module completed successfully at {time.strftime('%a %b %d %H:%M:%S %Z %Y')}.")
    print(rule)
    return 0


def _set_state(argv: list[str], prog: str, state: str) -> int:
    cluster = Cluster(prog)
    cluster.require_member()
    opts, _ = _options(argv, "-N")
    nodes = cluster.expand("all" if "-a" in opts else opts.get("-N"))
    release = os.uname().release
    if state == "active":
        for node in nodes:
            local = node is cluster.node(local_node())
            built = ((_read(node_path()) or {}).get("gpl_kernel") if local else node.get("gpl")) or ""
            if built != release:
                raise MmError(
                    f"{prog}: {node['name']}: The GPFS portability layer is not built for kernel {release}"
                    f"{f' (built for {built})' if built else ''}.\n"
                    f"{prog}: Run /usr/lpp/mmfs/bin/mmbuildgpl on {node['name']}, then retry."
                )
            if not node.get("license"):
                raise MmError(
                    f"{prog}: Node {node['name']} does not have a GPFS license designation.\n"
                    f"{prog}: Use the mmchlicense command to designate licenses as needed."
                )
    verb = "Starting GPFS ..." if state == "active" else "Shutting down GPFS daemons"
    print(f"{_stamp(prog)}: {verb}")
    for node in nodes:
        node["state"] = state
        if state == "down":
            for mounted in cluster.data["mounts"].values():
                if node["name"] in mounted:
                    mounted.remove(node["name"])
    cluster.save()
    if state == "down":
        print(f"{_stamp(prog)}: Finished")
    return 0


def mmgetstate(argv: list[str]) -> int:
    cluster = Cluster("mmgetstate")
    data = cluster.require_member()
    opts, _ = _options(argv, "-N")
    nodes = cluster.expand("all" if "-a" in opts else opts.get("-N"))
    quorum = len([n for n in data["nodes"] if "quorum" in n["designation"]])
    up = len([n for n in data["nodes"] if n["state"] == "active"])
    if "-Y" in opts:
        print(
            "mmgetstate::HEADER:version:reserved:reserved:nodeName:nodeNumber:state:quorum:nodesUp:totalNodes:"
            "remarks:cnfsState:"
        )
        for n in nodes:
            remarks = "quorum node" if "quorum" in n["designation"] else ""
            print(
                f"mmgetstate::0:1:::{n['name']}:{n['number']}:{n['state']}:{quorum}:{up}:{len(data['nodes'])}:"
                f"{quote(remarks)}:(undefined):"
            )
        return 0
    out = ["", " Node number  Node name        GPFS state", "-------------------------------------------"]
    out += [f"{n['number']:>8}      {n['name']:<16} {n['state']}" for n in nodes]
    print("\n".join(out))
    return 0


def mmremotecluster(argv: list[str]) -> int:
    cluster = Cluster("mmremotecluster")
    data = cluster.require_member()
    opts, rest = _options(argv, "-n -k")
    action = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else "all"
    if action == "add":
        if name in data["remoteclusters"]:
            raise MmError(f"mmremotecluster: Cluster {name} is already defined.")
        if not opts.get("-n"):
            raise MmError("mmremotecluster: Missing argument -n ContactNodes.")
        digest = f"{zlib.crc32(name.encode()):08x}" * 8
        data["remoteclusters"][name] = {"contact_nodes": opts["-n"], "sha": digest}
    elif action == "delete":
        if data["remoteclusters"].pop(name, None) is None:
            raise MmError(f"mmremotecluster: Cluster {name} is not defined.")
    elif action == "show":
        shown = sorted(data["remoteclusters"]) if name == "all" else [name]
        if not shown or shown[0] not in data["remoteclusters"]:
            raise MmError(
                f"mmremotecluster: There are no remote cluster definitions{'' if name == 'all' else ' for ' + name}."
            )
        blocks = []
        for cname in shown:
            info = data["remoteclusters"][cname]
            fss = [
                f"{local} ({fs['remote']})" for local, fs in sorted(data["remotefs"].items()) if fs["cluster"] == cname
            ]
            blocks.append(
                f"Cluster name:    {cname}\nContact nodes:   {info['contact_nodes']}\n"
                f"SHA digest:      {info['sha']}\nFile systems:    {' '.join(fss) or '(none defined)'}\n"
            )
        print("\n".join(blocks), end="")
        return 0
    else:
        raise MmError("Usage: mmremotecluster {add | update | delete | show} ...")
    cluster.save()
    _success("mmremotecluster")
    return 0


def mmremotefs(argv: list[str]) -> int:
    cluster = Cluster("mmremotefs")
    data = cluster.require_member()
    opts, rest = _options(argv, "-f -C -T -A -o")
    action = rest[0] if rest else ""
    if action == "add" and len(rest) > 1:
        device = rest[1]
        if device in data["remotefs"]:
            raise MmError(f"mmremotefs: File system {device} is already defined.")
        if opts.get("-C") not in data["remoteclusters"]:
            raise MmError(f"mmremotefs: Cluster {opts.get('-C')} is not defined. Use mmremotecluster add first.")
        data["remotefs"][device] = {
            "remote": opts.get("-f", device),
            "cluster": opts["-C"],
            "mount_point": opts.get("-T", f"/gpfs/{device}"),
            "options": opts.get("-o", "rw"),
            "automount": opts.get("-A", "no"),
        }
    elif action == "delete" and len(rest) > 1:
        if data["remotefs"].pop(rest[1], None) is None:
            raise MmError(f"mmremotefs: File system {rest[1]} is not defined.")
    elif action == "show":
        out = [
            "Local Name  Remote Name  Cluster name       Mount Point        Mount Options    Automount  Drive  Priority"
        ]
        for local, fs in sorted(data["remotefs"].items()):
            out.append(
                f"{local:<11} {fs['remote']:<12} {fs['cluster']:<18} {fs['mount_point']:<18} "
                f"{fs['options']:<16} {fs['automount']:<10} {'-':<6} 0"
            )
        print("\n".join(out))
        return 0
    else:
        raise MmError("Usage: mmremotefs {add | delete | show | update} ...")
    cluster.save()
    _success("mmremotefs")
    return 0


def _filesystem(data: dict, device: str, prog: str) -> dict:
    device = device.removeprefix("/dev/")
    if device not in data["remotefs"]:
        raise MmError(f"{prog}: File system {device} is not known to the GPFS cluster.")
    return data["remotefs"][device]


def mmmount(argv: list[str]) -> int:
    cluster = Cluster("mmmount")
    data = cluster.require_member()
    opts, rest = _options(argv, "-N -o")
    if not rest:
        raise MmError("Usage: mmmount {Device | DefaultMountPoint | all} [-a | -N {Node[,Node...] | NodeClass}]")
    devices = sorted(data["remotefs"]) if rest[0] == "all" else [rest[0].removeprefix("/dev/")]
    nodes = cluster.expand("all" if "-a" in opts else opts.get("-N"))
    for device in devices:
        fs = _filesystem(data, device, "mmmount")
        down = [n["name"] for n in nodes if n["state"] != "active"]
        if down:
            raise MmError(f"mmmount: GPFS is not ready on {', '.join(down)}: the daemon is not active (run mmstartup).")
        mounted = data["mounts"].setdefault(device, [])
        mounted += [n["name"] for n in nodes if n["name"] not in mounted]
        if any(n is cluster.node(local_node()) for n in nodes):
            os.makedirs(fs["mount_point"], exist_ok=True)
        print(f"{_stamp('mmmount')}: Mounting file systems ...")
    cluster.save()
    return 0


def mmlsmount(argv: list[str]) -> int:
    data = Cluster("mmlsmount").require_member()
    opts, rest = _options(argv, "")
    devices = sorted(data["remotefs"]) if not rest or rest[0] == "all" else [rest[0].removeprefix("/dev/")]
    for device in devices:
        fs = _filesystem(data, device, "mmlsmount")
        mounted = data["mounts"].get(device, [])
        if "-Y" in opts:
            print("mmlsmount::HEADER:version:reserved:reserved:localDevName:realDevName:owningCluster:totalNodes:")
            print(f"mmlsmount::0:1:::{device}:{fs['remote']}:{fs['cluster']}:{len(mounted)}:")
            continue
        if not mounted:
            print(f"File system {device} ({fs['cluster']}:{fs['remote']}) is not mounted.")
            continue
        print(
            f"File system {device} ({fs['cluster']}:{fs['remote']}) is mounted on {len(mounted)} nodes"
            + (":" if "-L" in opts else ".")
        )
        if "-L" in opts:
            for name in mounted:
                node = Cluster("mmlsmount").node(name) or {"ip": "0.0.0.0"}
                print(f"  {node['ip']:<15} {name:<25} {data['name']}")
    return 0


def mmlsfs(argv: list[str]) -> int:
    data = Cluster("mmlsfs").require_member()
    opts, rest = _options(argv, "")
    if not rest:
        raise MmError("Usage: mmlsfs {Device | all | all_local | all_remote} [-A] [-B] [-T] ... [-Y]")
    device = rest[0].removeprefix("/dev/")
    fs = _filesystem(data, device, "mmlsfs")
    rows = [
        *FS_DEFAULTS,
        ("-A", fs["automount"], "Automatic mount option"),
        ("-o", "none", "Additional mount options"),
        ("-T", fs["mount_point"], "Default mount point"),
        ("--uid", filesystem_uid(fs), "File system UID"),
    ]
    flags = [flag for flag in opts if flag != "-Y"]
    if flags:
        unknown = [flag for flag in flags if flag not in {row[0] for row in rows}]
        if unknown:
            raise MmError(f"mmlsfs: Incorrect option: {unknown[0]}")
        rows = [row for row in rows if row[0] in flags]
    if "-Y" in opts:
        print("mmlsfs::HEADER:version:reserved:reserved:deviceName:fieldName:data:remarks:")
        for flag, value, _ in rows:
            print(f"mmlsfs::0:1:::{device}:{Y_FIELD_NAMES[flag]}:{quote(value, safe='')}::")
        return 0
    out = [
        "flag                value                    description",
        "------------------- ------------------------ -----------------------------------",
    ]
    out += [f" {flag:<18} {value:<24} {text}" for flag, value, text in rows]
    print("\n".join(out))
    return 0


def mmlsnodeclass(argv: list[str]) -> int:
    data = Cluster("mmlsnodeclass").require_member()
    opts, rest = _options(argv, "")
    classes = data["nodeclasses"]
    names = rest or sorted(classes)
    for name in names:
        if name not in classes:
            raise MmError(f"mmlsnodeclass: Node class {name} does not exist.")
    if "-Y" in opts:
        print("mmlsnodeclass::HEADER:version:reserved:reserved:nodeclass:type:members:")
        for name in names:
            print(f"mmlsnodeclass::0:1:::{name}:user:{quote(','.join(classes[name]), safe='')}:")
        return 0
    out = [
        "Node Class Name       Members",
        "--------------------- -----------------------------------------------------------",
    ]
    out += [f"{name:<21} {','.join(classes[name])}" for name in names]
    print("\n".join(out))
    return 0


def _class_members(cluster: Cluster, spec: str | None) -> list[str]:
    if not spec:
        raise MmError(f"{cluster.prog}: Missing argument -N NodeList.")
    return [node["name"] for node in cluster.expand(spec)]


def mmcrnodeclass(argv: list[str]) -> int:
    cluster = Cluster("mmcrnodeclass")
    data = cluster.require_member()
    opts, rest = _options(argv, "-N")
    if not rest:
        raise MmError("Usage: mmcrnodeclass ClassName -N {Node[,Node...] | NodeFile | NodeClass}")
    if rest[0] in data["nodeclasses"]:
        raise MmError(f"mmcrnodeclass: Node class {rest[0]} already exists.")
    data["nodeclasses"][rest[0]] = _class_members(cluster, opts.get("-N"))
    cluster.save()
    _success("mmcrnodeclass")
    return 0


def mmchnodeclass(argv: list[str]) -> int:
    cluster = Cluster("mmchnodeclass")
    data = cluster.require_member()
    opts, rest = _options(argv, "-N")
    if len(rest) < 2 or rest[1] not in ("add", "delete", "replace"):
        raise MmError("Usage: mmchnodeclass ClassName {add | delete | replace} -N {Node[,Node...] | NodeClass}")
    name, action = rest[0], rest[1]
    if name not in data["nodeclasses"]:
        raise MmError(f"mmchnodeclass: Node class {name} does not exist.")
    members = _class_members(cluster, opts.get("-N"))
    current = data["nodeclasses"][name]
    if action == "add":
        current += [m for m in members if m not in current]
    elif action == "delete":
        current[:] = [m for m in current if m not in members]
    else:
        current[:] = members
    cluster.save()
    _success("mmchnodeclass")
    return 0


COMMANDS = {
    "mmcrcluster": mmcrcluster,
    "mmlscluster": mmlscluster,
    "mmaddnode": mmaddnode,
    "mmchlicense": mmchlicense,
    "mmchconfig": mmchconfig,
    "mmlsconfig": mmlsconfig,
    "mmbuildgpl": mmbuildgpl,
    "mmstartup": lambda argv: _set_state(argv, "mmstartup", "active"),
    "mmshutdown": lambda argv: _set_state(argv, "mmshutdown", "down"),
    "mmgetstate": mmgetstate,
    "mmmount": mmmount,
    "mmlsmount": mmlsmount,
    "mmlsfs": mmlsfs,
    "mmremotecluster": mmremotecluster,
    "mmremotefs": mmremotefs,
    "mmlsnodeclass": mmlsnodeclass,
    "mmcrnodeclass": mmcrnodeclass,
    "mmchnodeclass": mmchnodeclass,
}


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    name = prog or os.environ.get("GPUFORGE_SIM_PROG") or os.path.basename(sys.argv[0])
    command = COMMANDS.get(name)
    if command is None:
        print(f"gpuforge_sim.gpfs: unknown command {name!r} (set GPUFORGE_SIM_PROG)", file=sys.stderr)
        return 2
    try:
        with ccr_lock():
            return command(args)
    except MmError as exc:
        print(str(exc), file=sys.stderr)
        print(f"{name}: Command failed. Examine previous error messages to determine cause.", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
