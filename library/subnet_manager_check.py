#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: ask the InfiniBand subnet manager which SM is master (sminfo) and judge it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: subnet_manager_check
short_description: Judge the InfiniBand subnet manager a node sees (sminfo)
description:
  - Runs C(sminfo) (infiniband-diags; the SM the node's port names, that is the master it sees) and C(sminfo -G
    <guid>) for each configured subnet manager, and returns the C(subnet_manager) check of the gpu_node_check
    result contract (module_utils/gpuforge_sminfo.py judge_subnet_manager).
  - "Fails the check when no SM answers (sminfo prints C(sminfo: iberror: failed: query) and exits 255), when the SM
    the node sees is not master, when two SMs are master, or when the master is not the configured preferred SM
    (the highest priority) or runs at another priority than configured; warns when a configured SM does not answer."
  - A failed check is a result, not a module failure; the module fails, naming the fix, when C(sminfo) is not
    installed, unless O(require_sminfo=false).
options:
  subnet_managers:
    description:
      - The configured subnet managers, each C(host), C(guid) (the port GUID OpenSM binds, as C(ibstat -p) prints
        it) and C(priority) (0-15). Empty where the switches run the SM or the SM hosts' GUIDs are not in the
        inventory; then only a single answering master is required.
    type: list
    elements: dict
    default: []
  executable:
    description: sminfo command name or path.
    type: str
    default: sminfo
  require_sminfo:
    description:
      - When false and C(sminfo) is not installed, the module returns no check (RV(check) null) with a warning that
        names the fix, instead of failing.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
notes:
  - C(sminfo) comes with infiniband-diags (Debian's in-box package, MLNX_OFED and DOCA).
"""

EXAMPLES = r"""
- name: Which subnet manager is master
  gpuforge.cluster.subnet_manager_check:
    subnet_managers:
      - {host: head01, guid: "0x0002c90300a1b2c3", priority: 14}
      - {host: dgx01, guid: "0x0002c90300a1b2d4", priority: 10}
  register: subnet_manager
"""

RETURN = r"""
check:
  description:
    - The C(subnet_manager) check (name, status, observed, expected, fault, remedy, caused_by). observed holds
      master (the SMInfo of the master the node sees, null when none answers) and sms (every SM that answered).
    - Null when C(sminfo) is not installed and O(require_sminfo=false).
  returned: always
  type: dict
runs:
  description: Each sminfo run, C(argv), C(rc), C(stdout), C(stderr).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_sminfo import (
    judge_subnet_manager,
    normalize_guid,
)

FIX = "install infiniband-diags (sminfo), or leave the subnet manager check out (gpuforge_validate_subnet_manager)"


def main():
    module = AnsibleModule(
        argument_spec={
            "subnet_managers": {"type": "list", "elements": "dict", "default": []},
            "executable": {"type": "str", "default": "sminfo"},
            "require_sminfo": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    configured = []
    for sm in module.params["subnet_managers"]:
        try:
            configured.append(
                {"host": str(sm["host"]), "guid": normalize_guid(sm["guid"]), "priority": int(sm["priority"])}
            )
        except (KeyError, TypeError, ValueError) as exc:
            module.fail_json(msg=f"subnet_managers: each entry needs host, guid (0x + 16 hex digits), priority: {exc}")
    tool = Tool(module, module.params["executable"], FIX)
    if not module.params["require_sminfo"] and tool.find() is None:
        module.warn(f"{tool.missing()}; which subnet manager is master was not checked")
        module.exit_json(changed=False, check=None, runs=[])
    tool.require()
    runs = []

    def sminfo(args):
        ran = tool.run(args)
        runs.append({"argv": tool.argv(args), "rc": ran.rc, "stdout": ran.out, "stderr": ran.err})
        return ran.rc, ran.out, ran.err

    plain = sminfo([])
    asked = [(sm["guid"], *sminfo(["-G", sm["guid"]])) for sm in configured]
    module.exit_json(changed=False, check=judge_subnet_manager(plain, asked, configured), runs=runs)


if __name__ == "__main__":
    main()
