"""The connection Molecule's podman driver names (`ansible_connection: podman`) for the lab's Molecule nodes, which
runs modules over ssh: the lab's Molecule scenarios only (.config/molecule/config.yml puts this folder first on
connection_plugins; the collection does not ship it).

A `podman exec` costs about 150 ms of CPU per module run (the podman CLI, conmon, runc exec); ssh over a
ControlPersist master about 20 ms. The node's address, its host key and the controller sshd it is reached through
come from gpuforge.lab.molecule_ssh, which starts that sshd in the container (one `podman exec`) the first time a
container start is reached. Commands then go through Ansible's own ssh connection, pipelined, with the host key
checked.
"""

from __future__ import annotations

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible.plugins.loader import connection_loader

from gpuforge.lab import molecule_ssh
from gpuforge.lab.podman import PodmanError

DOCUMENTATION = """
name: podman
short_description: Run modules in a Molecule lab node (a podman container) over ssh
description:
  - For the Molecule podman driver's instances on the gpuforge lab network; Ansible's ssh connection, pipelined, to
    an sshd that gpuforge.lab.molecule_ssh starts in the container for the controller.
options:
  remote_addr:
    description: The container's name.
    default: inventory_hostname
    vars:
      - name: ansible_host
      - name: inventory_hostname
      - name: ansible_podman_host
  pipelining:
    description: Send modules to the node's Python on standard input instead of copying them in.
    type: boolean
    default: true
    vars:
      - name: ansible_pipelining
"""


class Connection(ConnectionBase):
    transport = "podman"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ssh = None

    def _connect(self):
        if self._ssh is None:
            # The play context's address, as Ansible's ssh connection takes it: for a delegated task that is the
            # delegated host's, while inventory_hostname (an option variable) stays the task's own host.
            container = self._play_context.remote_addr or self.get_option("remote_addr")
            try:
                found = molecule_ssh.endpoint(container)
            except PodmanError as exc:
                raise AnsibleConnectionFailure(f"cannot reach Molecule node {container} over ssh: {exc}") from exc
            ssh = connection_loader.get("ansible.builtin.ssh", self._play_context)
            ssh.set_options(
                var_options={
                    "ansible_host": found.address,
                    "ansible_port": molecule_ssh.PORT,
                    "ansible_user": molecule_ssh.USER,
                    "ansible_ssh_args": "",
                    "ansible_ssh_common_args": " ".join(found.ssh_options()),
                    "ansible_host_key_checking": True,
                    "ansible_pipelining": True,
                }
            )
            ssh.host = found.address
            self._ssh = ssh
        self._connected = True
        return self

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        return self._ssh.exec_command(cmd, in_data=in_data, sudoable=sudoable)

    @ensure_connect
    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        return self._ssh.put_file(in_path, out_path)

    @ensure_connect
    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        return self._ssh.fetch_file(in_path, out_path)

    def close(self):
        if self._ssh is not None:
            self._ssh.close()
        self._connected = False
