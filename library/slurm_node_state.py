#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: drain or resume a Slurm node with a reason (scontrol update)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_node_state
short_description: Drain or resume a Slurm node
description:
  - Reads the node with C(scontrol show node -o NAME) and, when needed, runs
    C(scontrol update nodename=NAME state=drain reason=REASON) or C(state=resume).
  - Idempotent - a node already drained with the same reason, or already in service, is not touched.
    A drained node whose reason differs gets the new reason.
  - Runs where C(scontrol) can reach slurmctld (the controller or a login node) as a Slurm administrator.
options:
  name:
    description: Node name as Slurm knows it (NodeName in slurm.conf).
    type: str
    required: true
  state:
    description:
      - C(drain) - no new jobs start on the node; running jobs finish (the node is DRAINING, then DRAINED).
      - C(resume) - return a drained or down node to service.
      - C(query) - only read the node.
    type: str
    choices: [drain, resume, query]
    default: query
  reason:
    description: Why the node is drained (required with C(state=drain)); shown by C(sinfo -R).
    type: str
  executable:
    description: scontrol command name or path.
    type: str
    default: scontrol
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details: Reports the state change it would make (C(scontrol update) is not run).
  diff_mode:
    support: full
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Take a node with a failing GPU out of service (runbook)
  gpuforge.cluster.slurm_node_state:
    name: node008
    state: drain
    reason: "gpu 3 xid 79"
  delegate_to: "{{ groups['slurm_controller'][0] }}"

- name: Return it after the repair
  gpuforge.cluster.slurm_node_state:
    name: node008
    state: resume
  delegate_to: "{{ groups['slurm_controller'][0] }}"
"""

RETURN = r"""
node:
  description: The node as read after the change (parse_show_node in module_utils/gpuforge_slurm.py).
  returned: always
  type: dict
  contains:
    name:
      description: Node name.
      type: str
    state:
      description: base (idle, mixed, allocated, down, ...), flags (drain, ...), responding, drain, drained, draining.
      type: dict
    reason:
      description: Drain/down reason without the trailing [user@time] stamp, or null.
      type: str
    gpus:
      description: GPUs the node offers as GRES.
      type: int
state:
  description: Node state string after the change, as scontrol prints it (e.g. IDLE+DRAIN).
  returned: always
  type: str
reason:
  description: Reason after the change.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_slurm import ParseError, parse_show_node

SCONTROL_FIX = "install the Slurm client (slurm-client, or slurm on EL), or set executable to its path"


class SlurmNodeState:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.result = {"changed": False}
        self.scontrol = Tool(module, self.params["executable"], SCONTROL_FIX, result=self.result)
        self.scontrol.require()

    def scontrol_run(self, args: list[str]):
        return self.scontrol.run(args)

    def read(self) -> dict:
        name = self.params["name"]
        rc, out, err = self.scontrol_run(["show", "node", "-o", name])
        if rc != 0:
            self.module.fail_json(
                msg=f"scontrol show node {name} failed (exit {rc}): {(err or out).strip()}. "
                "Check the node name (sinfo -N) and that slurmctld answers (scontrol ping).",
                **self.result,
            )
        try:
            nodes = parse_show_node(out)
        except ParseError as exc:
            self.module.fail_json(msg=f"could not read 'scontrol show node -o {name}': {exc}", **self.result)
        for node in nodes:
            if node["name"] == name:
                return node
        self.module.fail_json(msg=f"scontrol show node listed no node named {name}", **self.result)
        return {}  # not reached

    @staticmethod
    def summary(node: dict) -> dict:
        return {"state": node["state_raw"], "reason": node["reason"]}

    def wanted_update(self, node: dict) -> list[str] | None:
        state = self.params["state"]
        name = self.params["name"]
        if state == "drain":
            reason = self.params["reason"]
            if node["state"]["drain"] and node["reason"] == reason:
                return None
            return ["update", f"nodename={name}", "state=drain", f"reason={reason}"]
        if state == "resume":
            if (
                not node["state"]["drain"]
                and node["state"]["base"] not in ("down", "error")
                and "fail" not in (node["state"]["flags"])
            ):
                return None
            return ["update", f"nodename={name}", "state=resume"]
        return None

    def main(self):
        if self.params["state"] == "drain" and not (self.params["reason"] or "").strip():
            self.module.fail_json(msg="state=drain needs a reason (sinfo -R shows it to the operators)")
        before = self.read()
        update = self.wanted_update(before)
        after = before
        if update:
            self.result["changed"] = True
            if not self.module.check_mode:
                rc, out, err = self.scontrol_run(update)
                if rc != 0:
                    self.module.fail_json(
                        msg=f"scontrol {' '.join(update)} failed (exit {rc}): {(err or out).strip()}",
                        **self.result,
                    )
                after = self.read()
        predicted = self.summary(after)
        if update and self.module.check_mode:
            base = before["state"]["base"].upper()
            if self.params["state"] == "drain":
                predicted = {"state": f"{base}+DRAIN", "reason": self.params["reason"]}
            else:
                predicted = {"state": "IDLE" if base in ("DOWN", "ERROR") else base, "reason": None}
        self.result["diff"] = {"before": self.summary(before), "after": predicted}
        self.result.update(node=after, state=after["state_raw"], reason=after["reason"])
        if self.params["state"] == "resume" and not self.module.check_mode and not after["state"]["responding"]:
            self.module.warn(
                f"{self.params['name']} was resumed but does not respond to slurmctld ({after['state_raw']}): "
                "check that slurmd runs on it (systemctl status slurmd) and the munge key matches"
            )
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["drain", "resume", "query"], "default": "query"},
            "reason": {"type": "str"},
            "executable": {"type": "str", "default": "scontrol"},
        },
        required_if=[("state", "drain", ["reason"])],
        supports_check_mode=True,
    )
    SlurmNodeState(module).main()


if __name__ == "__main__":
    main()
