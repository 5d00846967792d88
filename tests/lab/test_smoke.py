"""Lab smoke test (make smoke): bring up two nodes, reach them with Ansible over ssh, take the lab down.

Note: this reconciles the lab to exactly these two nodes, and removes it at the end.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from gpuforge.paths import PROJECT_ROOT

pytestmark = pytest.mark.lab


def _run(*command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT_ROOT / "ansible.cfg"))
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def test_lab_up_ping_second_up_is_noop_and_down():
    first = _run("gpuforge", "lab", "up", "--nodes", "2", "--profile", "dgx1-v100-edr")
    assert first.returncode == 0, first.stderr
    try:
        ping = _run("ansible", "-m", "ansible.builtin.ping", "lab")
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert ping.stdout.count("SUCCESS") == 2
        # Reached over ssh, host keys checked against the lab's own known_hosts: with an empty one (and no
        # ControlPersist master to reuse) every node is refused.
        unchecked = {
            "ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes",
            "ansible_ssh_args": "-o ControlMaster=no",
        }
        refused = _run("ansible", "-m", "ansible.builtin.ping", "lab", "-e", json.dumps(unchecked))
        assert refused.returncode != 0
        assert refused.stdout.count("UNREACHABLE") == 2, refused.stdout
        assert "Host key verification failed" in refused.stdout + refused.stderr
        again = _run("gpuforge", "lab", "up", "--nodes", "2", "--profile", "dgx1-v100-edr")
        assert again.returncode == 0, again.stderr
        assert "already up, nothing changed" in again.stdout
        status = _run("gpuforge", "lab", "status")
        assert [line.split()[0] for line in status.stdout.splitlines()[1:]] == ["gpu01", "gpu02"]
    finally:
        down = _run("gpuforge", "lab", "down")
    assert down.returncode == 0, down.stderr
    assert _run("gpuforge", "lab", "status").stdout.startswith("lab: no nodes")
