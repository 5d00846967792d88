"""Per-lab SSH keys and the lab's known_hosts file (gpuforge.lab.ssh)."""

from __future__ import annotations

import shutil
import stat

import pytest

from gpuforge.lab import ssh

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen (openssh-client)")


@pytest.fixture
def lab_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(ssh, "SSH_DIR", tmp_path / "ssh")
    monkeypatch.setattr(ssh, "CLIENT_KEY", tmp_path / "ssh" / "id_ed25519")
    monkeypatch.setattr(ssh, "KNOWN_HOSTS", tmp_path / "ssh" / "known_hosts")
    monkeypatch.setattr(ssh, "NODES_DIR", tmp_path / "nodes")
    return tmp_path


def test_each_node_has_its_own_host_key_and_the_lab_key_is_authorised(lab_dir):
    first = ssh.ensure_node_keys("gpu01")
    second = ssh.ensure_node_keys("gpu02")
    host_keys = {ssh.public_key(first / ssh.HOST_KEY_NAME), ssh.public_key(second / ssh.HOST_KEY_NAME)}
    assert len(host_keys) == 2
    client = ssh.public_key(ssh.CLIENT_KEY)
    assert client.startswith("ssh-ed25519 ")
    assert (first / "authorized_keys").read_text() == client + "\n"
    # sshd refuses a host key or authorized_keys that others can read.
    for path in (first / ssh.HOST_KEY_NAME, first / "authorized_keys", ssh.CLIENT_KEY):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_keys_are_kept_until_removed_then_new(lab_dir):
    directory = ssh.ensure_node_keys("gpu01")
    before = ssh.public_key(directory / ssh.HOST_KEY_NAME)
    assert ssh.public_key(ssh.ensure_node_keys("gpu01") / ssh.HOST_KEY_NAME) == before
    ssh.remove()
    assert not ssh.KNOWN_HOSTS.exists()
    assert not directory.exists()
    assert ssh.public_key(ssh.ensure_node_keys("gpu01") / ssh.HOST_KEY_NAME) != before


def test_known_hosts_lists_each_address_with_that_nodes_key(lab_dir):
    keys = {node: ssh.public_key(ssh.ensure_node_keys(node) / ssh.HOST_KEY_NAME) for node in ("gpu01", "head01")}
    path = ssh.write_known_hosts({"head01": "10.242.0.11", "gpu01": "10.242.0.12"})
    assert path.read_text().splitlines() == [f"10.242.0.12 {keys['gpu01']}", f"10.242.0.11 {keys['head01']}"]


def test_wait_for_port_names_the_address_when_nothing_answers():
    with pytest.raises(Exception, match=r"127\.0\.0\.1:9 did not answer"):
        ssh.wait_for_port("127.0.0.1", port=9, timeout=0.5)
