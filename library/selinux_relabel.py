#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: restore SELinux labels with restorecon, on given paths and on the files the NVIDIA hook mounts."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: selinux_relabel
short_description: Restore the SELinux labels of paths and of the files the NVIDIA container hook mounts
description:
  - Runs C(restorecon -R -v) once on I(paths) and, with I(hook_files_from_container_cli), on the files
    C(nvidia-container-cli -k list) prints (the files the NVIDIA prestart hook mounts into a GPU container),
    when that tool is installed. Paths that do not exist are skipped and reported, a listed file inside one
    of I(paths) is left to the recursive pass.
  - Changed when restorecon reports C(Relabeled) lines (libselinux's C(restorecon -v) prints
    C(Relabeled PATH from OLD to NEW) for each file it relabels).
  - Replaces an C(ansible.builtin.stat) per path, the list and an C(ansible.builtin.command) restorecon per
    path with one task.
  - Where SELinux is disabled restorecon exits at once without output (policycoreutils setfiles.c), so
    nothing is changed or reported.
options:
  paths:
    description: Files and directories to relabel recursively (C(restorecon -R)). Missing ones are skipped.
    type: list
    elements: path
    default: []
  hook_files_from_container_cli:
    description:
      - Also relabel the files C(nvidia-container-cli -k list) prints, when C(nvidia-container-cli) is found
        (PATH or C(/usr/bin)). C(-k) loads the NVIDIA kernel modules first, as the hook does; it runs in check
        mode too (it only reads the list).
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details:
      - Runs C(restorecon -R -v -n), which changes nothing and prints C(Would relabel) for each file it would
        relabel.
  diff_mode:
    support: full
    details: The labels before and after, one line per file relabeled.
requirements:
  - restorecon (policycoreutils) on the managed node
notes:
  - Runs as root (C(become)).
seealso:
  - module: community.general.sefcontext
"""

EXAMPLES = r"""
- name: Restore the labels GPU containers rely on
  gpuforge.cluster.selinux_relabel:
    paths: [/dev, /var/lib/kubelet]
    hook_files_from_container_cli: true
  become: true
"""

RETURN = r"""
relabeled:
  description: Files whose label restorecon changed (in check mode, would change).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file.
      type: str
      sample: /dev/nvidia0
    from:
      description: Its context before (null when it had none).
      type: str
      sample: system_u:object_r:device_t:s0
    to:
      description: Its context after.
      type: str
      sample: system_u:object_r:xserver_misc_device_t:s0
hook_files:
  description: What C(nvidia-container-cli -k list) printed (empty when the tool is not installed or not asked).
  returned: always
  type: list
  elements: str
  sample: [/dev/nvidiactl, /usr/bin/nvidia-smi]
container_cli:
  description: The C(nvidia-container-cli) used, or null.
  returned: always
  type: str
  sample: /usr/bin/nvidia-container-cli
missing:
  description: Paths that do not exist on the node, not given to restorecon.
  returned: always
  type: list
  elements: str
  sample: [/var/lib/kubelet]
messages:
  description:
    - Other lines restorecon printed (a label customised by the admin, a path with no default label), the
      first 50 and a count of the rest.
  returned: always
  type: list
  elements: str
  sample: []
commands:
  description: The commands run, in order (argv lists).
  returned: always
  type: list
  elements: list
  sample: [[/usr/sbin/restorecon, -R, -v, /dev]]
"""

import os
import shlex

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, output_tail, this_host
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_selinux import (
    ParseError,
    parse_container_cli_list,
    parse_restorecon_verbose,
)

RESTORECON_FIX = "install policycoreutils"
CLI_FIX = (
    "nvidia-container-cli needs the NVIDIA driver loaded (nvidia_driver role) and libnvidia-container "
    "(nvidia_container_toolkit role); run `nvidia-container-cli -k list` as root to see why, or set "
    "gpu_selinux_restorecon: false"
)
MESSAGES_KEPT = 50


def _exists(path: str) -> bool:
    try:
        return os.path.lexists(path)
    except (ValueError, OSError):  # an embedded NUL, a name too long
        return False


def _inside(path: str, directories: list) -> bool:
    return any(path == top or path.startswith(top.rstrip("/") + "/") for top in directories)


class Relabel:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.result = {
            "changed": False,
            "relabeled": [],
            "hook_files": [],
            "container_cli": None,
            "missing": [],
            "messages": [],
            "commands": [],
        }

    def fail(self, msg: str, **extra) -> None:
        self.module.fail_json(msg=msg, **extra, **self.result)

    def run(self, argv: list, fix: str):
        self.result["commands"].append(list(argv))
        return Tool(self.module, argv[0], fix, result=self.result).run(argv[1:])

    def command_failed(self, argv: list, rc: int, out: str, err: str, fix: str) -> None:
        shown = shlex.join(argv if len(argv) <= 12 else [*argv[:12], f"... ({len(argv) - 12} more)"])
        self.fail(
            f"`{shown}` failed on {this_host()} (rc {rc}): {output_tail(err or out)}\nFix: {fix}",
            rc=rc,
            stdout=out,
            stderr=err,
        )

    def hook_files(self) -> list:
        if not self.params["hook_files_from_container_cli"]:
            return []
        cli = self.module.get_bin_path("nvidia-container-cli", opt_dirs=["/usr/bin"])
        if not cli:
            return []
        self.result["container_cli"] = cli
        argv = [cli, "-k", "list"]
        rc, out, err = self.run(argv, CLI_FIX)
        if rc != 0:
            self.command_failed(argv, rc, out, err, CLI_FIX)
        try:
            files = parse_container_cli_list(out)
        except ParseError as exc:
            self.fail(f"could not read the files the NVIDIA hook mounts on {this_host()}: {exc}")
        self.result["hook_files"] = files
        return files

    def apply(self) -> dict:
        paths = []
        for index, path in enumerate(self.params["paths"]):
            if not path.startswith("/") or "\0" in path:
                self.fail(f"paths[{index}] must be an absolute path, got {path!r}")
            if path not in paths:
                paths.append(path)
        restorecon = Tool(self.module, "restorecon", RESTORECON_FIX, result=self.result).require()
        hook = [path for path in self.hook_files() if not _inside(path, paths)]
        targets = []
        for path in paths + hook:
            if path in targets:
                continue
            if _exists(path):
                targets.append(path)
            else:
                self.result["missing"].append(path)
        if targets:
            argv = [restorecon, "-R", "-v", *(["-n"] if self.module.check_mode else []), *targets]
            rc, out, err = self.run(argv, RESTORECON_FIX)
            if rc != 0:
                self.command_failed(
                    argv,
                    rc,
                    out,
                    err,
                    "restorecon could not read or set a label (see its message); the file system must support "
                    "labels (seclabel in /proc/mounts) and restorecon must run as root",
                )
            report = parse_restorecon_verbose(out)
            self.result["relabeled"] = [
                {"path": change["path"], "from": change["from"], "to": change["to"]} for change in report["changes"]
            ]
            other = report["other"]
            self.result["messages"] = other[:MESSAGES_KEPT] + (
                [f"... ({len(other) - MESSAGES_KEPT} more lines)"] if len(other) > MESSAGES_KEPT else []
            )
        self.result["changed"] = bool(self.result["relabeled"])
        if self.module._diff:
            self.result["diff"] = {
                "before": "".join(f"{c['path']} {c['from'] or '<no context>'}\n" for c in self.result["relabeled"]),
                "after": "".join(f"{c['path']} {c['to']}\n" for c in self.result["relabeled"]),
            }
        return self.result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "path", "default": []},
            "hook_files_from_container_cli": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    module.exit_json(**Relabel(module).apply())


if __name__ == "__main__":
    main()
