#!/usr/bin/python
"""Ansible module: the IBM Storage Scale cluster this node belongs to, as facts (mmlscluster -Y)."""

from __future__ import annotations

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpuforge_run import missing_tool, run_tool
from ansible.module_utils.gpuforge_spectrum_scale import MISSING_HINT, ParseError, parse_mmlscluster_y

DOCUMENTATION = r"""
---
module: spectrum_scale_facts
short_description: Read the IBM Storage Scale (GPFS) cluster of this node into ansible_facts
description:
  - Runs C(mmlscluster -Y) and returns the cluster name, cluster id and nodes as C(ansible_facts.spectrum_scale).
  - The cluster id is what the Spectrum Scale CSI driver's C(clusters[].id) and every static
    C(volumeHandle) start with (role spectrum_scale_csi).
  - A node that belongs to no cluster fails with the reason, unless O(allow_no_cluster) is set.
  - Reads only; supports check mode.
version_added: "0.1.0"
author: gpuforge
options:
  mmfs_bin:
    description: Directory of the Storage Scale commands.
    type: path
    default: /usr/lpp/mmfs/bin
  allow_no_cluster:
    description: Return C(spectrum_scale.member=false) instead of failing when the node belongs to no cluster.
    type: bool
    default: false
requirements:
  - Storage Scale installed on the node (gpfs.base)
notes:
  - Supports check mode (nothing is changed either way).
"""

EXAMPLES = r"""
- name: Read the Storage Scale cluster from a client node
  spectrum_scale_facts:
  delegate_to: "{{ groups['spectrum_scale_clients'][0] }}"
  delegate_facts: true

- name: Cluster id for the CSI custom resource
  ansible.builtin.debug:
    msg: "{{ ansible_facts.spectrum_scale.cluster.id }}"
"""

RETURN = r"""
ansible_facts:
  description: "C(spectrum_scale) = C({member, cluster: {name, id, uid_domain, repository_type, nodes}})."
  returned: always
  type: dict
  sample:
    spectrum_scale:
      member: true
      cluster:
        name: SpectrumScale.ocp4.scale.ibm.com
        id: "16217308676014575381"
        uid_domain: SpectrumScale.ocp4.scale.ibm.com
        repository_type: CCR
        nodes:
          - {number: 1, name: scale00.ocp4.scale.com, ip: 192.168.1.30, admin_name: scale00.ocp4.scale.ibm.com,
             designation: [quorum, manager, perfmon]}
"""


class SpectrumScaleFacts:
    def __init__(self, module):
        self.module = module
        self.result = {"changed": False}

    def run(self):
        command = [os.path.join(self.module.params["mmfs_bin"], "mmlscluster"), "-Y"]
        if not os.path.exists(command[0]):
            self.module.fail_json(msg=missing_tool(command[0], MISSING_HINT), **self.result)
        rc, out, err = run_tool(self.module, command, MISSING_HINT, result=self.result)
        if rc != 0:
            if self.module.params["allow_no_cluster"]:
                self.result["ansible_facts"] = {"spectrum_scale": {"member": False, "cluster": None}}
                self.module.exit_json(**self.result)
            self.module.fail_json(
                msg=f"mmlscluster -Y failed (rc={rc}): {(err or out).strip()} - run it on a node of the cluster",
                **self.result,
            )
        try:
            cluster = parse_mmlscluster_y(out)
        except ParseError as exc:
            self.module.fail_json(msg=f"could not read mmlscluster -Y: {exc}", **self.result)
        self.result["ansible_facts"] = {"spectrum_scale": {"member": True, "cluster": cluster}}
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "mmfs_bin": {"type": "path", "default": "/usr/lpp/mmfs/bin"},
            "allow_no_cluster": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    SpectrumScaleFacts(module).run()


if __name__ == "__main__":
    main()
