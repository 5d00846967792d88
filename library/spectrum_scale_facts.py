#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: the IBM Storage Scale cluster this node belongs to, as facts (mmlscluster -Y)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: spectrum_scale_facts
short_description: Read the IBM Storage Scale (GPFS) cluster of this node into ansible_facts
description:
  - Runs C(mmlscluster -Y) and returns the cluster name, cluster id and nodes as C(ansible_facts.spectrum_scale).
  - The cluster id is what the Spectrum Scale CSI driver's C(clusters[].id) and every static
    C(volumeHandle) start with (role spectrum_scale_csi).
  - With O(filesystems), also runs C(mmlsfs <fs> --uid) for each and returns the file system UIDs, the second
    part of a static C(volumeHandle).
  - A node that belongs to no cluster fails with the reason, unless O(allow_no_cluster) is set.
  - Reads only; supports check mode.
version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads state only; check mode runs the same reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
author:
  - gpuforge maintainers (@gpuforge)
options:
  mmfs_bin:
    description: Directory of the Storage Scale commands.
    type: path
    default: /usr/lpp/mmfs/bin
  allow_no_cluster:
    description: Return C(spectrum_scale.member=false) instead of failing when the node belongs to no cluster.
    type: bool
    default: false
  filesystems:
    description:
      - File system device names (as this node knows them, for example C(ess3000_4M)) whose UIDs to read with
        C(mmlsfs <fs> --uid).
      - A file system the cluster does not know, or output without a UID, fails naming the file system.
    type: list
    elements: str
    default: []
requirements:
  - Storage Scale installed on the node (gpfs.base)
notes:
  - Supports check mode (nothing is changed either way).
"""

EXAMPLES = r"""
- name: Read the Storage Scale cluster from a client node
  gpuforge.cluster.spectrum_scale_facts:
  delegate_to: "{{ groups['spectrum_scale_clients'][0] }}"
  delegate_facts: true

- name: Cluster id and file system UID for static CSI volumes
  gpuforge.cluster.spectrum_scale_facts:
    filesystems: [ess3000_4M]

- name: Cluster id for the CSI custom resource
  ansible.builtin.debug:
    msg: "{{ ansible_facts.spectrum_scale.cluster.id }}"
"""

RETURN = r"""
ansible_facts:
  description: >-
    C(spectrum_scale) = C({member, cluster: {name, id, uid_domain, repository_type, nodes}, filesystems:
    {<fs>: {uid}}}).
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
        filesystems:
          ess3000_4M: {uid: "099B6A7A:5EB99743"}
        nodes:
          - {number: 1, name: scale00.ocp4.scale.com, ip: 192.168.1.30, admin_name: scale00.ocp4.scale.ibm.com,
             designation: [quorum, manager, perfmon]}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import missing_tool, run_tool
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_spectrum_scale import (
    MISSING_HINT,
    ParseError,
    filesystem_uid,
    parse_mmlscluster_y,
)


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
                self.result["ansible_facts"] = {"spectrum_scale": {"member": False, "cluster": None, "filesystems": {}}}
                self.module.exit_json(**self.result)
            self.module.fail_json(
                msg=f"mmlscluster -Y failed (rc={rc}): {(err or out).strip()} - run it on a node of the cluster",
                **self.result,
            )
        try:
            cluster = parse_mmlscluster_y(out)
        except ParseError as exc:
            self.module.fail_json(msg=f"could not read mmlscluster -Y: {exc}", **self.result)
        filesystems = {name: {"uid": self.uid(name)} for name in self.module.params["filesystems"]}
        self.result["ansible_facts"] = {
            "spectrum_scale": {"member": True, "cluster": cluster, "filesystems": filesystems}
        }
        self.module.exit_json(**self.result)

    def uid(self, name):
        command = [os.path.join(self.module.params["mmfs_bin"], "mmlsfs"), name, "--uid"]
        rc, out, err = run_tool(self.module, command, MISSING_HINT, result=self.result)
        if rc != 0:
            self.module.fail_json(
                msg=f"mmlsfs {name} --uid failed (rc={rc}): {(err or out).strip()} - is {name} the device name "
                "this node knows the file system by (mmremotefs show / mmlsfs all)?",
                **self.result,
            )
        try:
            return filesystem_uid(out)
        except ParseError as exc:
            self.module.fail_json(msg=f"could not read the UID of file system {name}: {exc}", **self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "mmfs_bin": {"type": "path", "default": "/usr/lpp/mmfs/bin"},
            "allow_no_cluster": {"type": "bool", "default": False},
            "filesystems": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    SpectrumScaleFacts(module).run()


if __name__ == "__main__":
    main()
