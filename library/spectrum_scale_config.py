#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: apply IBM Storage Scale (GPFS) settings with mmchconfig only where mmlsconfig differs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: spectrum_scale_config
short_description: Set IBM Storage Scale (GPFS) configuration attributes idempotently
description:
  - Reads the cluster configuration with C(mmlsconfig -Y) (falling back to plain C(mmlsconfig) output
    when the machine-readable format is unavailable), compares the value that applies to O(node_class)
    (its own stanza, else the cluster-wide C([common]) value) with O(settings), and runs
    C(mmchconfig attr=value,... -N <node_class>) for the attributes that differ, and only those.
  - Must run on a node that belongs to the cluster (delegate to a member node when the target is
    not yet one).
  - Supports check mode and diff mode (the before/after lines of the changed attributes).
options:
  settings:
    description:
      - "Attributes to set, as C(name: value). Numbers are passed as written; booleans become C(yes)/C(no)."
      - List values (C(verbsPorts)) are one space-separated string.
    type: dict
    required: true
  node_class:
    description:
      - Node class or comma-separated node list the settings apply to (C(mmchconfig -N)).
      - Empty or C(common) sets cluster-wide values.
    type: str
    default: ""
  immediate:
    description: Pass C(-i) so the change takes effect immediately and persists (attributes that allow it).
    type: bool
    default: false
  mmfs_bin:
    description: Directory holding the mm* commands.
    type: path
    default: /usr/lpp/mmfs/bin
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports the attributes it would change (C(mmchconfig) is not run).
  diff_mode:
    support: full
  platform:
    platforms: posix
author:
  - gpuforge maintainers (@gpuforge)
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Seed 001 values for the DGX node class
  gpuforge.cluster.spectrum_scale_config:
    node_class: dgx
    settings:
      pagepool: 128G
      workerThreads: 1024
      verbsRdma: enable
      verbsPorts: "mlx5_0/1 mlx5_1/1 mlx5_2/1 mlx5_3/1"
  delegate_to: "{{ groups['spectrum_scale_cluster'][0] }}"

- name: Cluster-wide values
  gpuforge.cluster.spectrum_scale_config:
    settings:
      maxMBpS: 20000
      enforceFilesetQuotaOnRoot: true
"""

RETURN = r"""
changes:
  description: Attributes that differed, with the value before (null when unset) and the value set.
  returned: always
  type: dict
  sample: {"pagepool": {"before": "1G", "after": "128G"}}
command:
  description: The mmchconfig command line that was run (or would run in check mode); empty when nothing changed.
  returned: always
  type: list
  elements: str
scope:
  description: The mmlsconfig stanza compared against (C(common) or the node class).
  returned: always
  type: str
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import mapping_of, scalar_text
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import run_tool
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_spectrum_scale import (
    COMMON,
    MISSING_HINT,
    ParseError,
    config_changes,
    parse_mmlsconfig,
    parse_mmlsconfig_y,
)

_ATTRIBUTE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


def _attribute(path: str, name) -> str:
    if not isinstance(name, str) or not _ATTRIBUTE.fullmatch(name):
        raise OptionError(path, "is not a configuration attribute name (letters, digits, _ . -)")
    return name


def _setting(path: str, value) -> str:
    text = scalar_text(lists=True)(path, value)
    if not text.strip():
        raise OptionError(path, "must not be empty (DEFAULT resets an attribute)")
    if "," in text:
        raise OptionError(path, f"cannot hold ',' (mmchconfig separates attributes with it), got {text!r}")
    return text


# settings: name -> value as mmchconfig takes it (booleans yes/no, lists space-separated); None is refused.
SETTINGS = mapping_of(_setting, key=_attribute)


class SpectrumScaleConfig:
    def __init__(self, module):
        self.module = module
        self.bin = module.params["mmfs_bin"]
        self.scope = module.params["node_class"] or COMMON
        self.result = {"changed": False, "changes": {}, "command": [], "scope": self.scope}
        settings = module.params["settings"]
        try:
            for name, value in settings.items():
                if value is None:
                    raise OptionError(f"settings.{name}", "has no value (null): give one, or DEFAULT to reset it")
            self.wanted = SETTINGS("settings", settings)
        except OptionError as exc:
            module.fail_json(msg=str(exc), **self.result)

    def run_mm(self, *args):
        command = [os.path.join(self.bin, args[0]), *args[1:]]
        rc, out, err = run_tool(self.module, command, MISSING_HINT, result=self.result)
        return command, rc, out, err

    def current(self) -> dict:
        _cmd, rc, out, err = self.run_mm("mmlsconfig", "-Y")
        try:
            if rc == 0:
                return parse_mmlsconfig_y(out)
            _cmd, rc, out, err = self.run_mm("mmlsconfig")
            if rc == 0:
                return parse_mmlsconfig(out)
        except ParseError as exc:
            self.module.fail_json(msg=f"could not read the cluster configuration from mmlsconfig: {exc}", **self.result)
        self.module.fail_json(
            msg=f"mmlsconfig failed (rc={rc}): {(err or out).strip()} - run this on a node of the cluster "
            "(delegate_to a member of spectrum_scale_cluster)",
            **self.result,
        )
        return {}

    def run(self):
        changes = config_changes(self.current(), self.scope, self.wanted)
        self.result["changes"] = changes
        if not changes:
            self.module.exit_json(**self.result)
        command = [
            os.path.join(self.bin, "mmchconfig"),
            ",".join(f"{key}={self.wanted[key]}" for key in changes),
        ]
        if self.scope != COMMON:
            command += ["-N", self.scope]
        if self.module.params["immediate"]:
            command.append("-i")
        self.result.update(changed=True, command=command)
        if self.module._diff:
            label = f"[{self.scope}]"
            before = "".join(f"{k} {v['before']}\n" for k, v in changes.items() if v["before"] is not None)
            after = "".join(f"{k} {v['after']}\n" for k, v in changes.items())
            self.result["diff"] = {
                "before": before,
                "after": after,
                "before_header": f"mmlsconfig {label}",
                "after_header": f"mmlsconfig {label}",
            }
        if not self.module.check_mode:
            rc, out, err = run_tool(self.module, command, MISSING_HINT, result=self.result)
            if rc != 0:
                self.module.fail_json(
                    msg=f"mmchconfig failed (rc={rc}): {(err or out).strip()}", stdout=out, stderr=err, **self.result
                )
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "settings": {"type": "dict", "required": True},
            "node_class": {"type": "str", "default": ""},
            "immediate": {"type": "bool", "default": False},
            "mmfs_bin": {"type": "path", "default": "/usr/lpp/mmfs/bin"},
        },
        supports_check_mode=True,
    )
    SpectrumScaleConfig(module).run()


if __name__ == "__main__":
    main()
