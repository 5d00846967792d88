"""How the Molecule lanes reach their nodes over ssh (gpuforge.lab.molecule_ssh): which address, which container
start, which host key; the node side runs in every Molecule scenario."""

import json

import pytest

from gpuforge.lab import molecule_ssh
from gpuforge.lab.podman import PodmanError


def inspected(networks, started="2026-12-05T12:00:01.123456789Z", name="gpuforge-mol-x"):
    return {
        "Id": "0123456789abcdef0123456789abcdef",
        "Name": name,
        "State": {"StartedAt": started},
        "NetworkSettings": {"Networks": networks},
    }


def test_the_lab_network_address_is_taken_before_any_other():
    record = inspected({"podman": {"IPAddress": "10.88.0.5"}, "gpuforge-lab": {"IPAddress": "10.242.0.140"}})
    assert molecule_ssh.instance_of(record) == ("0123456789abcdef-20261205120001123456789", "10.242.0.140")


def test_a_restarted_container_is_another_instance():
    first = molecule_ssh.instance_of(inspected({"gpuforge-lab": {"IPAddress": "10.242.0.140"}}))
    again = molecule_ssh.instance_of(
        inspected({"gpuforge-lab": {"IPAddress": "10.242.0.140"}}, started="2026-12-05T12:03:00Z")
    )
    assert first[0] != again[0]


def test_a_container_without_an_address_is_a_clear_error():
    with pytest.raises(PodmanError, match="gpuforge-mol-x has no address on the lab network gpuforge-lab"):
        molecule_ssh.instance_of(inspected({"gpuforge-lab": {"IPAddress": ""}}))


def test_the_host_key_is_checked_against_that_container_starts_own_line():
    found = molecule_ssh.Endpoint("gpuforge-mol-x", "abc-1", "10.242.0.140", "/state/nodes/abc-1/known_hosts")
    options = found.ssh_options()
    pairs = dict(options[i + 1].split("=", 1) for i in range(0, len(options), 2))
    assert pairs["StrictHostKeyChecking"] == "yes"
    assert pairs["UserKnownHostsFile"] == "/state/nodes/abc-1/known_hosts"
    assert pairs["ControlMaster"] == "auto" and pairs["ControlPath"].endswith("/%C")


def test_a_cache_entry_that_does_not_parse_is_no_endpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(molecule_ssh, "STATE_DIR", tmp_path)
    assert molecule_ssh.cached("gpuforge-mol-x") is None
    (tmp_path / "by-name").mkdir()
    (tmp_path / "by-name" / "gpuforge-mol-x").write_text("{not json")
    assert molecule_ssh.cached("gpuforge-mol-x") is None
    (tmp_path / "by-name" / "gpuforge-mol-x").write_text(json.dumps({"container": "gpuforge-mol-x"}))
    assert molecule_ssh.cached("gpuforge-mol-x") is None


def test_the_node_sshd_is_no_login_session_and_serves_sftp():
    config = dict(line.split(" ", 1) for line in molecule_ssh.SSHD_CONFIG.splitlines() if not line.startswith("#"))
    assert config["Port"] == str(molecule_ssh.PORT)
    assert config["UsePAM"] == "no" and config["PasswordAuthentication"] == "no"
    assert config["Subsystem"] == "sftp internal-sftp"
    assert config["HostKey"].startswith(molecule_ssh.NODE_DIR + "/")


def test_sessions_get_the_umask_systemd_gives_the_nodes_own_sshd():
    # The key files are written under umask 077; sshd, and every module run it starts, under 022: with 077 a role's
    # pip install of JupyterHub was unreadable to the user the notebook server runs as (CI run of 2026-12-05).
    lines = molecule_ssh.BOOTSTRAP_SCRIPT.splitlines()
    start = lines.index('/usr/sbin/sshd -f "$1/sshd_config"')
    assert lines[start - 1] == "umask 022"
    assert [line.strip() for line in lines[:start]].count("umask 077") == 1


def test_control_sockets_leave_a_deep_checkout_for_a_path_a_unix_socket_can_have():
    # control_dir only computes a path: nothing is made.
    state = molecule_ssh.Path("/check/work/main/.gpuforge/molecule/ssh")
    assert molecule_ssh.control_dir(state) == state / "cm"
    deep = molecule_ssh.Path("/home/someone/" + "d" * 60 + "/gpuforge/.gpuforge/molecule/ssh")
    moved = molecule_ssh.control_dir(deep)
    assert moved.parent == molecule_ssh.Path("/tmp") and moved.name.startswith("gpuforge-cm-")
    assert len(str(moved)) + 1 + 40 + 17 <= 107
    assert moved != molecule_ssh.control_dir(molecule_ssh.Path("/home/someone/" + "e" * 60 + "/.gpuforge/molecule/ssh"))
