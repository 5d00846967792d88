#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: load or unload a kernel module, deciding from `lsmod` output."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kernel_module
short_description: Load or unload a Linux kernel module, optionally at every boot
description:
  - Reads the loaded modules from C(lsmod) output, then runs C(modprobe NAME [PARAMS]) or
    C(modprobe -r NAME) only when the state differs.
  - With I(persistent=present) writes C(/etc/modules-load.d/NAME.conf) so systemd-modules-load loads the
    module at boot, and C(/etc/modprobe.d/NAME.conf) with C(options NAME PARAMS) when I(params) is set.
    With I(persistent=absent) removes those files.
  - gpuforge has its own module instead of C(community.general.modprobe) because that module reads
    C(/proc/modules) directly; the gpuforge lab runs its nodes in containers with a simulated kernel whose
    module table only C(lsmod)/C(modprobe) know about, so a C(/proc/modules) reader would report the host
    kernel and never converge. On real hosts C(lsmod) reads C(/proc/modules) itself, so the decision is
    the same.
  - Names are compared the way the kernel does, with C(-) and C(_) equal (C(nvidia-uvm) is C(nvidia_uvm)).
options:
  name:
    description: Module name.
    type: str
    required: true
  state:
    description: Whether the module is loaded (C(present)) or not (C(absent)).
    type: str
    choices: [present, absent]
    default: present
  params:
    description: Module parameters (C(key=value) words) passed to modprobe when loading.
    type: str
    default: ""
  persistent:
    description:
      - C(present) also loads the module at boot (modules-load.d) with I(params) (modprobe.d);
        C(absent) removes those files; C(disabled) leaves boot configuration alone.
    type: str
    choices: [present, absent, disabled]
    default: disabled
  modules_load_dir:
    description: Directory for the modules-load.d file.
    type: path
    default: /etc/modules-load.d
  modprobe_dir:
    description: Directory for the modprobe.d options file.
    type: path
    default: /etc/modprobe.d
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details: Reports what would be loaded and which files would change, and changes nothing.
  diff_mode:
    support: full
notes:
  - Supports check mode and diff mode (the module table line and the boot files).
"""

EXAMPLES = r"""
- name: Load the NVIDIA unified memory module now and at boot
  gpuforge.cluster.kernel_module:
    name: nvidia-uvm
    persistent: present

- name: Unload nouveau (blacklisting is a modprobe.d file, see the nvidia_driver role)
  gpuforge.cluster.kernel_module:
    name: nouveau
    state: absent

- name: Load a module with parameters
  gpuforge.cluster.kernel_module:
    name: nvidia
    params: NVreg_EnableStreamMemOPs=1
    persistent: present
"""

RETURN = r"""
name:
  description: Module name as given.
  returned: always
  type: str
  sample: nvidia-uvm
loaded_before:
  description: Whether lsmod listed the module before the change.
  returned: always
  type: bool
  sample: false
loaded:
  description: Whether the module is loaded afterwards (in check mode, what it would be).
  returned: always
  type: bool
  sample: true
used_by:
  description: Modules lsmod listed as users of this module before the change.
  returned: always
  type: list
  elements: str
  sample: [nvidia_uvm, nvidia_modeset]
files_changed:
  description: Boot configuration files written or removed.
  returned: always
  type: list
  elements: str
  sample: [/etc/modules-load.d/nvidia-uvm.conf]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_kernel import ParseError, parse_lsmod
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool

HEADER = "# Managed by gpuforge (kernel_module)\n"
KMOD_FIX = "install kmod (it provides lsmod and modprobe)"
# Where lsmod and modprobe live when sbin is not on PATH (modprobe: not /usr/sbin, kmod installs it in /sbin).
SBIN_DIRS = ["/usr/local/sbin", "/sbin", "/usr/sbin"]


def _norm(name: str) -> str:
    return name.replace("-", "_")


class KernelModule:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.name = self.params["name"]
        self.result = {
            "changed": False,
            "name": self.name,
            "loaded_before": False,
            "loaded": False,
            "used_by": [],
            "files_changed": [],
            "diff": {"before": "", "after": ""},
        }
        self.before: list[str] = []
        self.after: list[str] = []

    def run(self, argv: list[str]):
        return Tool(self.module, argv[0], KMOD_FIX, result=self.result).run(argv[1:])

    def loaded_modules(self) -> dict:
        lsmod = Tool(self.module, "lsmod", KMOD_FIX, opt_dirs=SBIN_DIRS, result=self.result).require()
        rc, out, err = self.run([lsmod])
        if rc != 0:
            self.module.fail_json(msg=f"lsmod failed (exit {rc}): {err.strip()}", **self.result)
        try:
            return parse_lsmod(out)["modules"]
        except ParseError as exc:
            self.module.fail_json(msg=f"could not read the loaded modules from lsmod: {exc}", **self.result)
        return {}

    def set_loaded(self) -> None:
        modules = self.loaded_modules()
        entry = modules.get(_norm(self.name))
        loaded = entry is not None
        self.result["loaded_before"] = loaded
        self.result["used_by"] = entry["used_by"] if entry else []
        wanted = self.params["state"] == "present"
        self.before.append(f"loaded: {loaded}")
        self.after.append(f"loaded: {wanted}")
        self.result["loaded"] = wanted
        if loaded == wanted:
            self.result["loaded"] = loaded
            return
        self.result["changed"] = True
        if self.module.check_mode:
            return
        modprobe = Tool(self.module, "modprobe", KMOD_FIX, opt_dirs=SBIN_DIRS[:2], result=self.result).require()
        argv = [modprobe, self.name, *self.params["params"].split()] if wanted else [modprobe, "-r", self.name]
        rc, out, err = self.run(argv)
        if rc != 0:
            action = "load" if wanted else "unload"
            used = f" (used by {', '.join(self.result['used_by'])})" if self.result["used_by"] else ""
            self.module.fail_json(
                msg=f"could not {action} kernel module {self.name}{used}: {(err or out).strip()}",
                rc=rc,
                **self.result,
            )
        if (_norm(self.name) in self.loaded_modules()) != wanted:
            self.module.fail_json(
                msg=f"modprobe succeeded but lsmod still shows kernel module {self.name} as "
                f"{'not loaded' if wanted else 'loaded'}",
                **self.result,
            )

    def _file(self, path: str, content: str | None) -> None:
        """Make path hold content (None: absent); records the change and the diff."""
        current = None
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                current = handle.read()
        if content is None and current is not None and not current.startswith(HEADER):
            return  # not written by this module (e.g. shipped by a package): leave it alone
        self.before.append(f"{path}:\n{current or '(absent)'}")
        self.after.append(f"{path}:\n{content or '(absent)'}")
        if current == content:
            return
        self.result["changed"] = True
        self.result["files_changed"].append(path)
        if self.module.check_mode:
            return
        try:
            if content is None:
                os.remove(path)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = path + ".gpuforge-tmp"
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(content)
                os.chmod(tmp, 0o644)
                self.module.atomic_move(tmp, path)
        except OSError as exc:
            self.module.fail_json(msg=f"could not write {path}: {exc}", **self.result)

    def set_persistent(self) -> None:
        mode = self.params["persistent"]
        if mode == "disabled":
            return
        load_file = os.path.join(self.params["modules_load_dir"], f"{self.name}.conf")
        options_file = os.path.join(self.params["modprobe_dir"], f"{self.name}.conf")
        if mode == "present":
            self._file(load_file, f"{HEADER}{self.name}\n")
            params = self.params["params"].strip()
            self._file(options_file, f"{HEADER}options {self.name} {params}\n" if params else None)
        else:
            self._file(load_file, None)
            self._file(options_file, None)

    def apply(self) -> dict:
        self.set_loaded()
        self.set_persistent()
        self.result["diff"] = {"before": "\n".join(self.before) + "\n", "after": "\n".join(self.after) + "\n"}
        return self.result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "params": {"type": "str", "default": ""},
            "persistent": {"type": "str", "choices": ["present", "absent", "disabled"], "default": "disabled"},
            "modules_load_dir": {"type": "path", "default": "/etc/modules-load.d"},
            "modprobe_dir": {"type": "path", "default": "/etc/modprobe.d"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**KernelModule(module).apply())


if __name__ == "__main__":
    main()
