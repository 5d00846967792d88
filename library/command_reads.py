#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: several read-only commands in one module run, each one's exit status and output returned."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: command_reads
short_description: Run several read-only commands in one call and return each one's exit status and output
description:
  - Runs each command of I(commands), in order, as an argument vector (no shell) in the C locale, and returns
    each one's exit status, output and error output under its name in RV(outputs).
  - "Replaces the C(ansible.builtin.command) tasks of reads a role makes one after the other (C(apptainer --version)
    and a C(stat) of the bind paths; C(nvidia-container-cli -k list) and C(nvidia-container-cli info); a C(stat),
    C(/proc/filesystems) and C(showmount -e)) with one task."
  - Every command runs, then the task fails when one exited with a status not in its I(ok_rcs), naming the host,
    each such command, its status and the end of its error output. A command that cannot be started (not
    installed, not executable) counts as exit status 127, as in a shell, with the reason as its error output.
  - For commands that only read. The module cannot tell a read from a change, so it reports no change and runs
    the commands in check mode too, as an C(ansible.builtin.command) task with its check_mode set to false does.
options:
  commands:
    description:
      - The commands, in the order they run.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - The key of the command's outcome in RV(outputs); unique among the commands.
        type: str
        required: true
      argv:
        description:
          - The command and its arguments, passed as given - no shell, and no expansion of C(~) or C($VARIABLES)
            (C(ansible.builtin.command) expands them by default). The command is looked up in C(PATH) unless it is
            a path.
        type: list
        elements: str
        required: true
      ok_rcs:
        description:
          - The exit statuses that do not fail the task (C(stat) exits 1 when a path is missing). An empty list
            accepts every status, a command that could not be started (127) included.
        type: list
        elements: int
        default: [0]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: The commands run in check mode too (they only read); nothing is reported changed.
seealso:
  - module: ansible.builtin.command
"""

EXAMPLES = r"""
- name: Read the installed release and look for the bind paths' sources
  gpuforge.cluster.command_reads:
    commands:
      - {name: version, argv: [apptainer, --version]}
      # stat prints each path that is there and exits 1 when one is missing.
      - {name: bind_sources, argv: [stat, --format=%n, --, /scratch, /datasets], ok_rcs: [0, 1]}
  register: apptainer_reads

- name: The installed release is the pinned one
  ansible.builtin.assert:
    that: apptainer_reads.outputs.version.stdout | trim == 'apptainer version 1.5.3'
"""

RETURN = r"""
outputs:
  description:
    - Each command's outcome, under its name. (Not C(results) - Ansible keeps that key for the items of a loop and
      renames it in a module's return, to C(ansible_module_results).)
  returned: always
  type: dict
  contains:
    argv:
      description: The command as run.
      type: list
      elements: str
    rc:
      description: Exit status; 127 when the command could not be started.
      type: int
    stdout:
      description: Standard output.
      type: str
    stdout_lines:
      description: Standard output, one item per line.
      type: list
      elements: str
    stderr:
      description: Standard error; the reason when the command could not be started.
      type: str
  sample:
    version: {argv: [apptainer, --version], rc: 0, stdout: "apptainer version 1.5.3\n",
              stdout_lines: [apptainer version 1.5.3], stderr: ""}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import (
    Tool,
    ToolNotRun,
    output_tail,
    this_host,
)

# What a shell reports for a command it could not start.
NOT_STARTED_RC = 127


class CommandReads:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.commands = module.params["commands"]
        self.result = {"changed": False, "outputs": {}}

    def check_names(self) -> None:
        names = [command["name"] for command in self.commands]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            self.module.fail_json(
                msg=f"{this_host()}: command_reads needs a unique name per command; repeated: {', '.join(repeated)}",
                **self.result,
            )
        empty = [command["name"] for command in self.commands if not command["argv"]]
        if empty:
            self.module.fail_json(msg=f"{this_host()}: command_reads: no argv for {', '.join(empty)}", **self.result)

    def read(self, command: dict) -> dict:
        argv = command["argv"]
        try:
            tool = Tool(self.module, argv[0], "install it or give its full path", on_error="raise")
            rc, out, err = tool.run(argv[1:], expand=False)
        except ToolNotRun as exc:
            rc, out, err = NOT_STARTED_RC, "", str(exc)
        out, err = out or "", err or ""
        return {"argv": argv, "rc": rc, "stdout": out, "stdout_lines": out.splitlines(), "stderr": err}

    def apply(self) -> dict:
        self.check_names()
        rejected = []
        for command in self.commands:
            outcome = self.read(command)
            self.result["outputs"][command["name"]] = outcome
            ok_rcs = command["ok_rcs"]
            if ok_rcs and outcome["rc"] not in ok_rcs:
                rejected.append(
                    f"`{' '.join(outcome['argv'])}` exited {outcome['rc']} (accepted: "
                    f"{', '.join(str(rc) for rc in ok_rcs)}): {output_tail(outcome['stderr'] or outcome['stdout'])}"
                )
        if rejected:
            self.module.fail_json(msg=f"{this_host()}: " + "; ".join(rejected), **self.result)
        return self.result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "commands": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "argv": {"type": "list", "elements": "str", "required": True},
                    "ok_rcs": {"type": "list", "elements": "int", "default": [0]},
                },
            },
        },
        supports_check_mode=True,
    )
    module.exit_json(**CommandReads(module).apply())


if __name__ == "__main__":
    main()
