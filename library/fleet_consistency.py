#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: compare HCA firmware, OFED, GPU driver, VBIOS, kernel and P_Keys across nodes; name the outliers."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_consistency
short_description: Name the nodes whose HCA firmware, OFED, GPU driver, VBIOS, kernel or P_Keys differ from the fleet
description:
  - Each node looks fine on its own; a node flashed with other HCA firmware, or left on another OFED or
    driver release, is found only by comparing it with the others (ibdiagnet checks uniform firmware
    across the fabric; Imbue and Meta's GCM compare firmware and VBIOS with a golden config).
  - Takes the facts of every node and returns the C(fleet_consistency) check per group of nodes of the
    same system (C(system) of each node) - for every property the majority value, and each node that
    differs from it by name. HCA firmware is compared per HCA name, VBIOS per GPU bus ID, P_Keys per HCA port.
  - Pure computation on the given facts; run it once (C(run_once), C(delegate_to localhost)).
options:
  nodes:
    description:
      - Node name to its facts - C(infiniband) (infiniband_facts), C(nvidia_smi) (nvidia_smi_facts), C(ofed)
        (the output of C(ofed_info -s)), C(kernel) (C(ansible_kernel)), C(pkeys) (the C(pkeys) of
        C(gpu_node_check) - the P_Keys in use per HCA port, compared per port so that every node of a rail is
        in the same partitions), C(system) (the expected system name; nodes are compared within one system).
    type: dict
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: Computes on the given facts only.
"""

EXAMPLES = r"""
- name: Compare firmware, OFED, driver, VBIOS and kernel across the validated nodes
  gpuforge.cluster.fleet_consistency:
    nodes: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'gpuforge_fleet_facts'))) }}"
  run_once: true
  delegate_to: localhost
  register: fleet
"""

RETURN = r"""
healthy:
  description: True when no group has an outlier.
  returned: always
  type: bool
checks:
  description:
    - System name to its C(fleet_consistency) check (name, status, observed, expected, fault, remedy,
      caused_by). observed is property to {node - value} of the outliers; expected is property to the
      majority value.
  returned: always
  type: dict
outliers:
  description: Names of the nodes that differ from their group in any property.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perfquery import fleet_facts, judge_fleet


def judge(nodes) -> dict:
    groups: dict = {}
    for host, facts in sorted((nodes or {}).items()):
        facts = facts if isinstance(facts, dict) else {}
        system = str(facts.get("system") or "all")
        groups.setdefault(system, {})[host] = fleet_facts(
            facts.get("infiniband") if isinstance(facts.get("infiniband"), dict) else None,
            facts.get("nvidia_smi") if isinstance(facts.get("nvidia_smi"), dict) else None,
            facts.get("ofed"),
            facts.get("kernel"),
            facts.get("pkeys") if isinstance(facts.get("pkeys"), dict) else None,
        )
    checks = {system: judge_fleet(members) for system, members in sorted(groups.items())}
    outliers = sorted({h for c in checks.values() for per_host in c["observed"].values() for h in per_host})
    return {"checks": checks, "outliers": outliers, "healthy": not outliers}


def main():
    module = AnsibleModule(argument_spec={"nodes": {"type": "dict", "required": True}}, supports_check_mode=True)
    module.exit_json(changed=False, **judge(module.params["nodes"]))


if __name__ == "__main__":
    main()
