"""The connection Molecule's podman driver names (`ansible_connection: podman`), pipelined: the lab's Molecule scenarios
only (.config/molecule/config.yml puts this folder first on connection_plugins; the collection does not ship it).

containers.podman's connection runs five podman commands for one module on one host: `podman mount` when a task's
worker connects, then `podman exec` to make a temporary folder, to make the module executable, to run it and to
remove the folder. podman 4 passes standard input to `podman exec -i`, so with pipelining the module goes to the
container's Python on standard input: one `podman exec` per module run. Files (copy, template) still go through the
container's mount, made on the first transfer.
"""

from __future__ import annotations

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

DOCUMENTATION = """
name: podman
short_description: Run modules in a podman container, one podman exec each (gpuforge's Molecule lanes)
description:
  - The connection of containers.podman with pipelining, for the Molecule podman driver's instances on the lab.
options:
  remote_addr:
    description: The container's name or ID.
    default: inventory_hostname
    vars:
      - name: ansible_host
      - name: inventory_hostname
      - name: ansible_podman_host
  remote_user:
    description: The user commands run as in the container; the container's default user when unset.
    ini:
      - section: defaults
        key: remote_user
    env:
      - name: ANSIBLE_REMOTE_USER
    vars:
      - name: ansible_user
  podman_extra_args:
    description: Arguments given to podman before its command.
    default: ""
    vars:
      - name: ansible_podman_extra_args
  podman_executable:
    description: The podman program.
    default: podman
    vars:
      - name: ansible_podman_executable
  pipelining:
    description: Send modules to the container's Python on standard input instead of copying them in.
    type: boolean
    default: true
    vars:
      - name: ansible_pipelining
"""


class Connection(PodmanConnection):
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._mount_tried = False

    def _connect(self):
        # ConnectionBase's, without containers.podman's `podman mount`: a pipelined module run transfers no file.
        super(PodmanConnection, self)._connect()
        self._connected = True
        return self

    def _mount_once(self) -> None:
        if not self._mount_tried:
            self._mount_tried = True
            super()._connect()  # containers.podman's: the mount

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        super(PodmanConnection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        exec_args = ["exec", "--interactive"] if in_data else ["exec"]
        if self.user:
            exec_args += ["--user", self.user]
        return self._podman(exec_args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)

    def put_file(self, in_path, out_path):
        self._mount_once()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mount_once()
        super().fetch_file(in_path, out_path)
