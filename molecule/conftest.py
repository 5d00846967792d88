"""Testinfra's verifier for every Molecule scenario (molecule/<scenario>/tests/): the lab nodes over ssh.

Molecule hands the verifier an Ansible inventory (`--connection ansible`) whose hosts use the podman connection.
For the connections it knows (ssh, local, docker, lxc ...) testinfra's Ansible backend reads that inventory and runs
each command through its own backend for that connection; for podman it knows none and starts a whole `ansible`
process per command instead (3.7-4.4 s each with the CPU load at 5 on the 2-core CI machine): most of a scenario's
verify phase. Here the podman connection joins testinfra's ssh backend, through the endpoint the converge reached
the node at (gpuforge.lab.molecule_ssh: the controller's sshd in the container, its host key checked, the same
ControlPersist master): about 20 ms of CPU per command against 150 ms for a `podman exec`. Tests still see the
Ansible backend (get_hostname() is the inventory name, ansible_inventory is there, host.get_host("ansible://...")
works); only host.ansible() and a host that asks for privilege escalation (ansible_become) still run Ansible.
"""

import pytest
from testinfra.backend.ssh import SshBackend
from testinfra.host import Host
from testinfra.utils import ansible_runner

from gpuforge.lab import molecule_ssh

_PODMAN_CONNECTIONS = ("podman", "containers.podman.podman")
_testinfra_get_ansible_host = ansible_runner.get_ansible_host


def _get_ansible_host(config, inventory, host, ssh_config=None, ssh_identity_file=None):
    hostvars = inventory.get("_meta", {}).get("hostvars", {}).get(host, {})
    # With privilege escalation asked for, Ansible still runs the command (testinfra's ssh backend has no become).
    if hostvars.get("ansible_connection") not in _PODMAN_CONNECTIONS or hostvars.get("ansible_become"):
        return _testinfra_get_ansible_host(
            config, inventory, host, ssh_config=ssh_config, ssh_identity_file=ssh_identity_file
        )
    found = molecule_ssh.endpoint(hostvars.get("ansible_host", host))
    if found not in _hosts:
        _hosts[found] = Host(_MoleculeNodeBackend(found))
    return _hosts[found]


class _MoleculeNodeBackend(SshBackend):
    """testinfra's ssh backend to a Molecule node, except that a command's own exit status 255 is its result (apptainer
    exits 255 when it cannot create a container): ssh's own failures are told apart by the ControlPersist master,
    which is gone when the connection is."""

    def __init__(self, found):
        self.endpoint = found
        super().__init__(
            f"{molecule_ssh.USER}@{found.address}:{molecule_ssh.PORT}", ssh_extra_args=" ".join(found.ssh_options())
        )

    def run_ssh(self, command):
        try:
            return super().run_ssh(command)
        except RuntimeError as exc:
            if molecule_ssh.master_alive(self.endpoint):
                return exc.args[0]
            raise


_hosts = {}


ansible_runner.get_ansible_host = _get_ansible_host


@pytest.fixture
def shape(host):
    """The node's lab OS shape as the registry and the pin tables name it (debian12, rhel9, ubuntu2204, ubuntu2404)."""
    info = host.system_info
    if info.distribution == "ubuntu":
        return "ubuntu" + info.release.replace(".", "")
    return info.distribution + info.release.split(".")[0]
