"""Bring the lab up, down, and report on it. Every step first looks, then acts only on a difference."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuforge.lab import image, inventory, mirror, os_shapes, ssh, wheelhouse
from gpuforge.lab.podman import PodmanError, exists, inspect, podman
from gpuforge.lab.spec import LabSpec, NodeSpec
from gpuforge.paths import FACT_CACHE_DIR, LAB_STATE_DIR, STATE_DIR

NETWORK = "gpuforge-lab"
# Static addresses (.2-.127) for the mirror and nodes; podman hands out .129-.191 to others (Molecule).
# Not .128/25: podman 4.3 turns that range into leases .129-.255 and so gives a container the subnet's
# broadcast address, which can send but never gets a TCP answer (Molecule's first download from the
# mirror timed out for minutes whenever a scenario's container drew .255).
SUBNET = "10.242.0.0/24"
DYNAMIC_RANGE = "10.242.0.128/26"
MIRROR_IP = "10.242.0.2"
MIRROR_CONTAINER = "gpuforge-lab-mirror"
FIRST_NODE_HOST = 11
LABEL = "io.gpuforge.lab"
NODES_DIR = LAB_STATE_DIR / "nodes"
SHARED_DIR = LAB_STATE_DIR / "shared"
# scripts/molecule_lanes.sh writes its PID here while its lanes run. Their scenarios install from the mirror on the lab
# network, so `lab down` (make smoke, when it runs beside the lanes) leaves both to them: a scenario between
# its destroy and the next create has no container on the network, and the network check alone would miss it.
MOLECULE_LANES_PID_FILE = STATE_DIR / "molecule" / "lanes.pid"


@contextlib.contextmanager
def lab_lock() -> Iterator[None]:
    """One lab change at a time on this machine (image, mirror and nodes are shared state)."""
    LAB_STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(LAB_STATE_DIR / "lock", "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def container_name(node: str) -> str:
    return f"gpuforge-lab-{node}"


def forget_facts(hosts: list[str], cache_dir: Path = FACT_CACHE_DIR) -> list[str]:
    """Drop the controller's cached facts of `hosts`: a new lab node is a new machine (addresses, packages, units).

    The jsonfile cache names a host's file after it, with a schema prefix (`s1_<host>` with ansible-core 2.19);
    both forms are removed so that a cache written by another ansible-core is dropped too. Returns the files removed.
    """
    if not cache_dir.is_dir():
        return []
    wanted = set(hosts)
    removed = []
    for path in sorted(cache_dir.iterdir()):
        match = re.fullmatch(r"(?:s\d+_)?(.+)", path.name)
        if match and match.group(1) in wanted and path.is_file():
            path.unlink()
            removed.append(path.name)
    return removed


def node_ip(index: int) -> str:
    return f"10.242.0.{FIRST_NODE_HOST + index}"


@dataclass
class NodeStatus:
    name: str
    container: str
    profile: str
    ip: str
    state: str


def network_faults(info: dict) -> list[str]:
    """What an existing lab network lacks: internal, and leases that stop short of the broadcast address."""
    faults = [] if info.get("internal") else ["is not internal"]
    broadcast = str(ipaddress.ip_network(SUBNET).broadcast_address)
    for subnet in info.get("subnets") or []:
        if (subnet.get("lease_range") or {}).get("end_ip", broadcast) == broadcast:
            faults.append(f"leases the broadcast address {broadcast}")
    return faults


def ensure_network(log=print) -> bool:
    """The lab network is internal: nodes reach each other and the mirror, nothing outside the lab."""
    if exists("network", NETWORK):
        faults = network_faults(inspect("network", [NETWORK])[0])
        if not faults:
            return False
        users = podman("ps", "-a", "--filter", f"network={NETWORK}", "--format", "{{.Names}}").split()
        nodes = [user for user in users if user != MIRROR_CONTAINER]
        if nodes:
            # Recreating it would cut running containers off.
            log(f"lab: WARNING network {NETWORK} {' and '.join(faults)} (older gpuforge); used by {', '.join(nodes)};")
            log("lab: run 'gpuforge lab down' when they are done so that it is recreated")
            return False
        if users:
            # The mirror is ours: ensure_mirror starts it again on the new network.
            podman("rm", "-f", "-t", "5", MIRROR_CONTAINER)
        log(f"lab: recreating network {NETWORK}, it {' and '.join(faults)}")
        podman("network", "rm", NETWORK)
    podman(
        "network", "create", "--internal", "--subnet", SUBNET, "--ip-range", DYNAMIC_RANGE,
        "--label", f"{LABEL}=1", NETWORK,
    )  # fmt: skip
    return True


def _serves(info: dict, root: Path, tag: str) -> bool:
    mounts = {mount.get("Destination"): mount.get("Source") for mount in info.get("Mounts", [])}
    return mounts.get("/srv/mirror") == str(root) and info.get("ImageName") == tag


def _server_gone(info: dict) -> bool:
    """Podman says running but the server process is gone: with cgroupfs and no systemd, killing the
    session that started the mirror kills its processes without podman noticing (seen after a CI job
    was stopped: `podman ps` said Up, connections were refused, `podman exec` said stopped)."""
    state = info.get("State", {})
    pid = state.get("Pid") or 0
    return bool(state.get("Running")) and not (pid > 0 and Path(f"/proc/{pid}").exists())


def ensure_mirror(tag: str, log=print) -> str:
    """Build the signed package mirror if its inputs changed, and serve it on the lab network."""
    repo = mirror.build(tag, log=log)
    if exists("container", MIRROR_CONTAINER):
        info = inspect("container", [MIRROR_CONTAINER])[0]
        if not _serves(info, repo.root, tag):
            # Another checkout's (or an older image's) mirror: its key is not the one this lab's nodes trust.
            log(f"lab: replacing {MIRROR_CONTAINER}, it served another checkout or image")
            podman("rm", "-f", "-t", "5", MIRROR_CONTAINER)
        elif _server_gone(info):
            log(f"lab: replacing {MIRROR_CONTAINER}, podman lists it running but its server process is gone")
            podman("rm", "-f", "-t", "5", MIRROR_CONTAINER)
        elif info["State"]["Running"]:
            return repo.url
        else:
            podman("start", MIRROR_CONTAINER)
            return repo.url
    podman(
        "run", "-d", "--name", MIRROR_CONTAINER, "--hostname", "mirror",
        "--network", NETWORK, "--ip", MIRROR_IP, "--label", f"{LABEL}=mirror",
        "-v", f"{repo.root}:/srv/mirror:ro",
        tag, "python3", "-m", "http.server", "80", "--directory", "/srv/mirror",
    )  # fmt: skip
    return repo.url


def _config_hash(node: NodeSpec, tag: str, ip: str, peers: list[str]) -> str:
    payload = json.dumps(
        {
            "tag": tag,
            "ip": ip,
            "peers": peers,
            "name": node.name,
            "options": _kind_options(node),
            "ssh": ssh.NODE_MOUNT,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def _write_hardware(spec: LabSpec, node: NodeSpec) -> str:
    path = NODES_DIR / node.name / "hardware.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(spec.hardware(node), indent=2, sort_keys=True) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return str(path)


def _wait_for_systemd(container: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = podman("exec", container, "systemctl", "is-system-running", check=False).strip()
        if state in ("running", "degraded"):
            return
        time.sleep(0.5)
    raise PodmanError(f"{container}: systemd did not finish booting within {timeout:.0f}s (state: {state or '?'})")


def _kind_options(node: NodeSpec) -> list[str]:
    """NFS servers (the lab's nfs-ganesha, lab/playbooks/nfs_server.yml) export a tmpfs: ganesha needs file
    handles, which the overlay root lacks, and CAP_DAC_READ_SEARCH to open them."""
    if "nfs_servers" in node.groups:
        return ["--tmpfs", "/srv/nfs:rw,mode=0755,size=64m", "--cap-add", "DAC_READ_SEARCH"]
    return []


def ensure_node(spec: LabSpec, node: NodeSpec, index: int, tag: str, hosts: list[str]) -> bool:
    container = container_name(node.name)
    ip = node_ip(index)
    hardware = _write_hardware(spec, node)
    keys = ssh.ensure_node_keys(node.name)
    wanted = _config_hash(node, tag, ip, hosts)
    if exists("container", container):
        info = inspect("container", [container])[0]
        if info["Config"]["Labels"].get(f"{LABEL}.config") == wanted:
            if info["State"]["Running"]:
                return False
            podman("start", container)
            _wait_for_systemd(container)
            ssh.wait_for_port(ip)
            return True
        podman("rm", "-f", "-t", "5", container)
    # A fact cache of the node this one replaces (of this lab or an earlier one) would tell the playbooks its
    # address, packages and units: stale facts once failed the demo's NFS check against another node's address.
    forget_facts([node.name])
    SHARED_DIR.mkdir(parents=True, exist_ok=True)
    args = [
        "run", "-d", "--name", container, "--hostname", node.name,
        "--network", NETWORK, "--ip", ip, "--systemd", "always",
        # NET_ADMIN: tc netem and IPoIB-style interface changes inside the node's own namespace.
        "--cap-add", "NET_ADMIN",
        "--label", f"{LABEL}=node", "--label", f"{LABEL}.profile={node.profile}",
        "--label", f"{LABEL}.config={wanted}",
        "-v", f"{hardware}:/etc/gpuforge-lab/hardware.json:ro",
        # This node's host key and the lab's authorized key (gpuforge.lab.ssh): the controller reaches it by ssh.
        "-v", f"{keys}:{ssh.NODE_MOUNT}:ro",
        # Stand-in for Spectrum Scale's replicated cluster configuration (CCR), shared by all nodes.
        "-v", f"{SHARED_DIR}:/var/lib/gpuforge-lab/shared",
        "--add-host", f"mirror:{MIRROR_IP}",
        *_kind_options(node),
    ]  # fmt: skip
    for peer in hosts:
        if not peer.startswith(node.name + ":"):
            args += ["--add-host", peer]
    podman(*args, tag)
    _wait_for_systemd(container)
    ssh.wait_for_port(ip)
    return True


def prepare(log=print) -> str:
    """Image, network, mirror, OS-shape layers, the benchmark wheels, generated vars and one hardware document per
    profile (for Molecule)."""
    from gpuforge.lab.profiles import hardware_document, load_profile
    from gpuforge.paths import PROFILES_DIR

    with lab_lock():
        tag = image.build(mirror.signing_key().path.read_bytes(), log=log)
        ensure_network(log)
        mirror_url = ensure_mirror(tag, log=log)
        # One layer per OS shape on the shared image (Molecule platforms read .gpuforge/lab/os-shape-images.env).
        os_shapes.build(tag, mirror.signing_key().path.read_bytes(), log=log)
        # The ResNet-50 benchmark's wheels: molecule/bench_os installs them as the demo does.
        wheelhouse.ensure(log=log)
        inventory.write_generated_vars(mirror_url)
    out = LAB_STATE_DIR / "hardware"
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(PROFILES_DIR.glob("*.yml")):
        document = hardware_document(load_profile(path.stem), [])
        (out / f"{path.stem}.json").write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return tag


def up(spec: LabSpec, log=print) -> list[NodeStatus]:
    with lab_lock():
        return _up(spec, log)


def _up(spec: LabSpec, log) -> list[NodeStatus]:
    tag = image.build(mirror.signing_key().path.read_bytes(), log=log)
    changed = ensure_network(log)
    mirror_url = ensure_mirror(tag, log=log)
    shape_tags = os_shapes.build(tag, mirror.signing_key().path.read_bytes(), log=log)
    # The demo's benchmarks install the wheels (`lab prepare` fetches them too, for molecule/bench_os).
    wheelhouse.ensure(log=log)
    ssh.ensure_client_key()
    hosts = [f"{node.name}:{node_ip(i)}" for i, node in enumerate(spec.nodes)]
    wanted = {
        container_name(n.name): _config_hash(n, shape_tags[n.os], node_ip(i), hosts) for i, n in enumerate(spec.nodes)
    }
    # Nodes that go or change are removed first: a changed lab may give their addresses to other nodes.
    removed = _remove_stale_nodes(wanted)
    for index, node in enumerate(spec.nodes):
        if ensure_node(spec, node, index, shape_tags[node.os], hosts):
            changed = True
            log(f"lab: node {node.name} ({node.profile}, {node.os}) started at {node_ip(index)}")
    ips = [node_ip(i) for i in range(len(spec.nodes))]
    ssh.write_known_hosts({node.name: ip for node, ip in zip(spec.nodes, ips, strict=True)})
    inventory.write(spec, ips, mirror_url)
    if not changed and not removed:
        log("lab: already up, nothing changed")
    return status()


def _remove_stale_nodes(wanted: dict[str, str]) -> list[str]:
    """Remove node containers not in `wanted` (container name -> config hash) or with another config."""
    names = podman("ps", "-a", "--filter", f"label={LABEL}=node", "--format", "{{.Names}}").split()
    stale = [
        info["Name"]
        for info in inspect("container", names)
        if wanted.get(info["Name"]) != info["Config"]["Labels"].get(f"{LABEL}.config")
    ]
    if stale:
        podman("rm", "-f", "-t", "5", *stale)
    return stale


def status() -> list[NodeStatus]:
    names = podman("ps", "-a", "--filter", f"label={LABEL}=node", "--format", "{{.Names}}").split()
    result = []
    for info in inspect("container", names):
        labels = info["Config"]["Labels"]
        networks = info["NetworkSettings"].get("Networks", {})
        ip = networks.get(NETWORK, {}).get("IPAddress", "")
        result.append(
            NodeStatus(
                name=info["Config"]["Hostname"],
                container=info["Name"],
                profile=labels.get(f"{LABEL}.profile", "?"),
                ip=ip,
                state=info["State"]["Status"],
            )
        )
    return sorted(result, key=lambda node: node.name)


def down(log=print) -> None:
    with lab_lock():
        _down(log)


def molecule_lanes_pid(pid_file: Path | None = None) -> int | None:
    """The PID of the Molecule lanes that are running now (their PID file names a live process), else None."""
    try:
        pid = int((pid_file or MOLECULE_LANES_PID_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        return pid
    return pid


def _down(log) -> None:
    lanes = molecule_lanes_pid()
    # While Molecule lanes run, only the nodes go; the mirror and the network stay for the lanes' scenarios.
    selector = f"label={LABEL}=node" if lanes else f"label={LABEL}"
    names = podman("ps", "-a", "--filter", selector, "--format", "{{.Names}}").split()
    if names:
        podman("rm", "-f", "-t", "5", *names)
        log(f"lab: removed {', '.join(sorted(names))}")
        forget_facts([name.removeprefix(container_name("")) for name in names])
    if lanes:
        log(f"lab: mirror and network {NETWORK} kept, the Molecule lanes (pid {lanes}) use them")
    elif exists("network", NETWORK):
        others = podman("ps", "-a", "--filter", f"network={NETWORK}", "--format", "{{.Names}}").split()
        if others:
            # Molecule instances may share the lab network; leave it to them rather than kill their runs.
            log(f"lab: network {NETWORK} kept, still used by {', '.join(sorted(others))}")
        else:
            podman("network", "rm", NETWORK)
            log(f"lab: removed network {NETWORK}")
    # The shared directory holds cluster state (the Storage Scale CCR stand-in) of the nodes just removed.
    shutil.rmtree(SHARED_DIR, ignore_errors=True)
    # The mirror's variables go with the mirror: a Molecule scenario that starts after this reads them.
    inventory.remove(mirror_vars=not lanes)
    # The next lab's nodes are new machines: new host keys, a new authorized key.
    ssh.remove()
