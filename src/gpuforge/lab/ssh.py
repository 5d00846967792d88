"""SSH to lab nodes as to a real site's servers: per-lab keys and the lab's known_hosts file.

`gpuforge lab up` generates, under .gpuforge/lab/ (never in the image, never in the repository):
- `ssh/id_ed25519`: the controller's key for this lab, authorised on every node;
- `nodes/<node>/ssh/ssh_host_ed25519_key`: each node's own host key, mounted read-only into the node at
  /etc/gpuforge-lab/ssh together with `authorized_keys` (lab/image/overlay/etc/ssh/sshd_config.d/);
- `ssh/known_hosts`: every node's address with its host key, so that Ansible checks host keys
  (host_key_checking stays true) against this file and nothing else.
`gpuforge lab down` removes them: the next lab's nodes are new machines with new keys.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from gpuforge.lab.podman import PodmanError
from gpuforge.paths import LAB_STATE_DIR

SSH_DIR = LAB_STATE_DIR / "ssh"
CLIENT_KEY = SSH_DIR / "id_ed25519"
KNOWN_HOSTS = SSH_DIR / "known_hosts"
NODES_DIR = LAB_STATE_DIR / "nodes"
# Where the overlay's sshd drop-in looks for the node's host key and the lab's authorized key.
NODE_MOUNT = "/etc/gpuforge-lab/ssh"
HOST_KEY_NAME = "ssh_host_ed25519_key"
USER = "root"


def keygen(path: Path, comment: str) -> None:
    if path.is_file() and path.with_name(path.name + ".pub").is_file():
        return
    if shutil.which("ssh-keygen") is None:
        raise PodmanError("ssh-keygen is not installed (Debian package openssh-client): run 'make setup' (as root)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    path.chmod(0o600)


def _write_if_changed(path: Path, text: str, mode: int) -> None:
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def public_key(path: Path) -> str:
    """The public half of key `path`, as `type base64` (no comment)."""
    return " ".join(path.with_name(path.name + ".pub").read_text(encoding="utf-8").split()[:2])


def node_dir(node: str) -> Path:
    return NODES_DIR / node / "ssh"


def ensure_client_key() -> Path:
    SSH_DIR.mkdir(parents=True, exist_ok=True)
    SSH_DIR.chmod(0o700)
    keygen(CLIENT_KEY, "gpuforge-lab-controller")
    return CLIENT_KEY


def ensure_node_keys(node: str) -> Path:
    """The directory mounted at NODE_MOUNT in `node`: its host key and the lab's authorized key."""
    directory = node_dir(node)
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    keygen(directory / HOST_KEY_NAME, f"root@{node}")
    _write_if_changed(directory / "authorized_keys", public_key(ensure_client_key()) + "\n", 0o600)
    return directory


def known_hosts_text(addresses: dict[str, str]) -> str:
    """node -> address: one line per node, the address it is reached at and its host key."""
    lines = [f"{addresses[node]} {public_key(node_dir(node) / HOST_KEY_NAME)}" for node in sorted(addresses)]
    return "".join(line + "\n" for line in lines)


def write_known_hosts(addresses: dict[str, str]) -> Path:
    SSH_DIR.mkdir(parents=True, exist_ok=True)
    _write_if_changed(KNOWN_HOSTS, known_hosts_text(addresses), 0o600)
    return KNOWN_HOSTS


def connection_vars() -> dict:
    """Inventory variables of the `lab` group: Ansible's ssh connection with ansible.cfg's ssh_args
    (pipelining, ControlPersist) plus this lab's key and known_hosts file; host keys are checked."""
    return {
        "ansible_connection": "ssh",
        "ansible_user": USER,
        "ansible_ssh_private_key_file": str(CLIENT_KEY),
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={KNOWN_HOSTS} -o IdentitiesOnly=yes",
        "ansible_python_interpreter": "/usr/bin/python3",
    }


def wait_for_port(address: str, port: int = 22, timeout: float = 30.0) -> None:
    """sshd answers (its banner) at address:port, or PodmanError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    error = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=2) as conn:
                conn.settimeout(2)
                if conn.recv(8).startswith(b"SSH-"):
                    return
        except OSError as exc:
            error = str(exc)
        time.sleep(0.3)
    raise PodmanError(f"sshd at {address}:{port} did not answer within {timeout:.0f}s ({error or 'no banner'})")


def remove() -> None:
    shutil.rmtree(SSH_DIR, ignore_errors=True)
    for directory in NODES_DIR.glob("*/ssh"):
        shutil.rmtree(directory, ignore_errors=True)
