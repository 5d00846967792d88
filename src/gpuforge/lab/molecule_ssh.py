"""The Molecule lanes reach their lab nodes (podman containers on the lab network) over ssh, as a site's servers are
reached, instead of one `podman exec` per module run and per testinfra command.

Why: a `podman exec` costs about 150 ms of CPU (the podman CLI, conmon, runc exec), an ssh command over a
ControlPersist master about 20 ms (measured on the 2-core CI machine, 2026-12-05). The 23 scenarios of make test ran
about 4,700 of them, about 640 core-seconds of the lanes' 4,160 (molecule/plugins/connection/podman.py).

A Molecule node gets, once per container start (`bootstrap`): a host key of its own, generated here, and a second
sshd of its own beside the node's (which the roles own and a Molecule node has no host key for): on port
`PORT`, from a configuration in the node's /run (gone when the container stops), without PAM, so that an ssh
command is not a login session that roles (PAM, logind) would see. The controller keeps, under `STATE_DIR`:
- `id_ed25519`: its key, authorised in every Molecule node's sshd;
- `nodes/<container id>-<start time>/`: that container start's host key and known_hosts line, so that ssh checks
  the host key and a container that took another one's address is refused, never used in its place;
- `by-name/<container name>`: the last endpoint found for a container name, used while the ControlPersist master
  to it is alive (an ssh `-O check`: no podman command per module run); else the container is inspected again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpuforge.lab.podman import PodmanError, inspect, podman
from gpuforge.lab.ssh import keygen, public_key, wait_for_port
from gpuforge.paths import STATE_DIR as GPUFORGE_STATE_DIR

STATE_DIR = GPUFORGE_STATE_DIR / "molecule" / "ssh"
CLIENT_KEY = STATE_DIR / "id_ed25519"


def control_dir(state_dir: Path) -> Path:
    """Where the ControlPersist sockets go: under state_dir unless a socket's path (this folder, a 40-character %C
    and the 17 characters ssh appends while it binds) would pass the 107 bytes a Unix socket's path may have; then
    in a folder of /tmp named after state_dir."""
    inside = state_dir / "cm"
    if len(os.fsencode(str(inside))) + 1 + 40 + 17 <= 107:
        return inside
    return Path("/tmp") / f"gpuforge-cm-{hashlib.sha256(os.fsencode(str(state_dir))).hexdigest()[:12]}"


CONTROL_DIR = control_dir(STATE_DIR)
PORT = 2222
USER = "root"
LAB_NETWORK = "gpuforge-lab"
# The node's side: its sshd's files, in /run so that they go with the container start that made them.
NODE_DIR = "/run/gpuforge-molecule-ssh"
# How long an idle master stays: longer than the gap between two Molecule stages of one scenario.
CONTROL_PERSIST_S = 600

SSHD_CONFIG = f"""\
# gpuforge's Molecule lanes: the controller's way in (src/gpuforge/lab/molecule_ssh.py), not the node's sshd.
Port {PORT}
HostKey {NODE_DIR}/ssh_host_ed25519_key
AuthorizedKeysFile {NODE_DIR}/authorized_keys
PidFile {NODE_DIR}/sshd.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PrintMotd no
Subsystem sftp internal-sftp
"""

# Run in the node by one `podman exec -i`: the host key comes on standard input, the rest as arguments.
BOOTSTRAP_SCRIPT = """\
set -eu
mkdir -p /run/sshd
(
  umask 077
  mkdir -p "$1"
  cat > "$1/ssh_host_ed25519_key"
  printf '%s\\n' "$2" > "$1/authorized_keys"
  printf '%s' "$3" > "$1/sshd_config"
)
if [ -f "$1/sshd.pid" ] && kill -0 "$(cat "$1/sshd.pid")" 2>/dev/null; then kill "$(cat "$1/sshd.pid")"; sleep 0.2; fi
# The sessions inherit sshd's umask: 022, as systemd starts the node's own sshd (a module's pip, mkdir and the like
# make what other users read and run).
umask 022
/usr/sbin/sshd -f "$1/sshd_config"
"""


@dataclass(frozen=True)
class Endpoint:
    """Where and how the controller reaches one Molecule node over ssh."""

    container: str
    instance: str  # container id and start time: one container start
    address: str
    known_hosts: str

    @property
    def control_path(self) -> str:
        """The ControlPersist socket (ssh expands %C: a hash of address, port and user)."""
        return str(CONTROL_DIR / "%C")

    def ssh_options(self) -> list[str]:
        """ssh's options for this node, besides the user and the port."""
        return [
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "IdentitiesOnly=yes",
            "-o", f"IdentityFile={CLIENT_KEY}",
            "-o", "ControlMaster=auto",
            "-o", f"ControlPersist={CONTROL_PERSIST_S}s",
            "-o", f"ControlPath={self.control_path}",
            # A master to a container that went away without closing its connections ends within 15 s.
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3",
        ]  # fmt: skip


class _Lock:
    """An exclusive lock on a file of STATE_DIR: one lane's workers at a time set up the same thing."""

    def __init__(self, name: str):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        STATE_DIR.chmod(0o700)
        self._path = STATE_DIR / "locks" / name
        self._path.parent.mkdir(exist_ok=True)

    def __enter__(self):
        self._file = open(self._path, "w", encoding="utf-8")  # closed in __exit__
        fcntl.flock(self._file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self._file.close()


def instance_of(inspected: dict) -> tuple[str, str]:
    """(container id and start time, address on the lab network) of `podman inspect`'s record of one container."""
    networks = (inspected.get("NetworkSettings") or {}).get("Networks") or {}
    network = networks.get(LAB_NETWORK) or next((n for n in networks.values() if n.get("IPAddress")), {})
    address = network.get("IPAddress") or ""
    if not address:
        name = inspected.get("Name", "?")
        raise PodmanError(f"container {name} has no address on the lab network {LAB_NETWORK}: is it running?")
    started = (inspected.get("State") or {}).get("StartedAt", "")
    digits = "".join(c for c in started if c.isdigit())
    return f"{inspected['Id'][:16]}-{digits}", address


def _by_name(container: str) -> Path:
    return STATE_DIR / "by-name" / container


def cached(container: str) -> Endpoint | None:
    """The endpoint last found for `container`, or None."""
    try:
        return Endpoint(**json.loads(_by_name(container).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def master_alive(endpoint: Endpoint) -> bool:
    """Whether a ControlPersist master to the node is up (it checked the host key when it connected)."""
    completed = subprocess.run(
        ["ssh", "-O", "check", "-p", str(PORT), *endpoint.ssh_options(), f"{USER}@{endpoint.address}"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return completed.returncode == 0


def endpoint(container: str) -> Endpoint:
    """How to reach Molecule node `container` over ssh; bootstraps its sshd when this container start has none.

    Without a podman command while a master to the node is alive."""
    known = cached(container)
    if known is not None and master_alive(known):
        return known
    with _Lock(container):
        (inspected,) = inspect("container", [container])
        instance, address = instance_of(inspected)
        node = STATE_DIR / "nodes" / instance
        if not (node / "ready").is_file() or not _answers(address):
            bootstrap(container, node, address)
        found = Endpoint(container, instance, address, str(node / "known_hosts"))
        by_name = _by_name(container)
        by_name.parent.mkdir(parents=True, exist_ok=True)
        by_name.write_text(json.dumps(asdict(found)), encoding="utf-8")
        return found


def _answers(address: str) -> bool:
    try:
        wait_for_port(address, PORT, timeout=3)
    except PodmanError:
        return False
    return True


def bootstrap(container: str, node: Path, address: str) -> None:
    """Start the node's controller sshd on PORT with a new host key; record its known_hosts line."""
    with _Lock("client-key"):
        keygen(CLIENT_KEY, "gpuforge-molecule-controller")
    CONTROL_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    host_key = node / "ssh_host_ed25519_key"
    keygen(host_key, f"root@{container}")
    podman(
        "exec", "-i", container, "/bin/sh", "-c", BOOTSTRAP_SCRIPT, "bootstrap",
        NODE_DIR, public_key(CLIENT_KEY), SSHD_CONFIG,
        stdin=host_key.read_bytes(),
    )  # fmt: skip
    wait_for_port(address, PORT, timeout=30)
    (node / "known_hosts").write_text(f"[{address}]:{PORT} {public_key(host_key)}\n", encoding="utf-8")
    (node / "ready").write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"), encoding="utf-8")
