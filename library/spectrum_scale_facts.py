#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: the IBM Storage Scale cluster this node belongs to, as facts (mmlscluster -Y), and on request
the state a client of it is in (node classes, daemon state, remote definitions, mounts) in the same call."""

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
  - With O(gather), reads more of the cluster's state in the same call, as the spectrum_scale_client role does
    on a member node for each client - node
    classes, a node's daemon state, the remote cluster and file system definitions and the mounts - and
    returns what it found for O(node) under C(node).
  - A node that belongs to no cluster fails with the reason, unless O(allow_no_cluster) is set.
  - Reads only; supports check mode.
version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
options:
  mmfs_bin:
    description: Directory of the Storage Scale commands.
    type: path
    default: /usr/lpp/mmfs/bin
  allow_no_cluster:
    description:
      - Return C(spectrum_scale.member=false) instead of failing when the node belongs to no cluster.
      - Nothing else is read then.
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
  gather:
    description:
      - What to read, in this order whatever the order given.
      - V(cluster) - C(mmlscluster -Y) (C(cluster), and C(node.member)).
      - V(nodeclass) - C(mmlsnodeclass <class>) for each of O(node_classes), or plain C(mmlsnodeclass) (every
        user-defined class) without them (C(node_classes), C(node.node_classes)). A class that cannot be read
        is reported with C(exists=false) and the reason under C(unread).
      - V(state) - C(mmgetstate -N <node> -Y) (C(node.state)); not run, and null, when V(cluster) shows that
        O(node) is not a member.
      - V(remote_clusters) - C(mmremotecluster show all) (C(remote_clusters)); when the command fails (it does
        when none is defined) the result is empty and the reason is under C(unread).
      - V(remote_filesystems) - C(mmremotefs show all) (C(remote_filesystems)); a failure as for
        V(remote_clusters).
      - V(mounts) - C(mmlsmount <device> -L) for each of O(devices) (C(mounts), C(node.mounted)). A failure
        fails the module, except for a device that V(remote_filesystems), gathered with it, shows is not
        defined (C(defined=false), the reason under C(unread)).
    type: list
    elements: str
    choices: [cluster, nodeclass, state, remote_clusters, remote_filesystems, mounts]
    default: [cluster]
  node:
    description:
      - Daemon node name whose membership, node classes, daemon state and mounts C(node) reports, full or short
        (C(dgx01) matches C(dgx01.ocp4.scale.com) and the shortened C(dgx01.ocp4) that C(mmlsmount -L) prints).
      - Default the short host name of the node the module runs on. The spectrum_scale_client role runs the module
        on a member node for a client that may not be one yet, and names the client here.
    type: str
  node_classes:
    description: Node classes V(nodeclass) reads.
    type: list
    elements: str
    default: []
  devices:
    description: File system device names (local names) whose mounts V(mounts) reads.
    type: list
    elements: str
    default: []
requirements:
  - Storage Scale installed on the node (gpfs.base)
notes:
  - Supports check mode (nothing is changed either way).
  - The commands other than C(mmlscluster) are administration commands; with C(adminMode=central) run the module
    on an administration node (the spectrum_scale_client role delegates it to the first member of
    C(spectrum_scale_cluster)).
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

- name: Everything spectrum_scale_client decides on for this client, in one call on a member node
  gpuforge.cluster.spectrum_scale_facts:
    gather: [cluster, nodeclass, state, remote_clusters, remote_filesystems, mounts]
    node: "{{ inventory_hostname_short }}"
    node_classes: [dgx]
    devices: [ess3000_4M]
  delegate_to: "{{ groups['spectrum_scale_cluster'][0] }}"
  register: scale

- name: Mount where the node does not mount it yet
  ansible.builtin.command: /usr/lpp/mmfs/bin/mmmount ess3000_4M
  when: "'ess3000_4M' not in scale.ansible_facts.spectrum_scale.node.mounted"
  changed_when: true
"""

RETURN = r"""
ansible_facts:
  description:
    - >-
      C(spectrum_scale) = C({member, cluster: {name, id, uid_domain, repository_type, nodes}, filesystems:
      {<fs>: {uid}}}); C(member) and C(cluster) are null when V(cluster) is not gathered.
    - >-
      With O(gather) beyond V(cluster) also C(node: {name, member, state, node_classes, mounted}) (C(member) and
      C(state) null when not read; C(node_classes) the classes read that list the node, C(mounted) the devices
      it mounts), C(unread: {<what>: <reason>}) for a tolerated failure, and as gathered C(node_classes:
      {<class>: {exists, members}}), C(remote_clusters: {<name>: {contact_nodes, sha_digest, filesystems:
      {<local>: <remote>}}}), C(remote_filesystems: {<local>: {remote, cluster, mount_point, mount_options,
      automount, drive, priority}}), C(mounts: {<device>: {defined, cluster, remote, count, nodes: [{ip, name,
      cluster}]}}).
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
          - {number: 2, name: dgx01.ocp4.scale.com, ip: 192.168.1.19, admin_name: dgx01.ocp4.scale.ibm.com,
             designation: [perfmon]}
      filesystems:
        ess3000_4M: {uid: "099B6A7A:5EB99743"}
      node: {name: dgx01, member: true, state: active, node_classes: [dgx], mounted: [ess3000_4M]}
      node_classes:
        dgx: {exists: true, members: [dgx01.ocp4.scale.com, dgx02.ocp4.scale.com]}
      remote_clusters:
        ess3000.bda.scale.ibm.com:
          contact_nodes: [fscc-fab3-3-a-priv.bda.scale.com, fscc-fab3-3-b-priv.bda.scale.com]
          sha_digest: 9c58d9df69804393571044a9f08b005db12345e4cb87637cad83870a9f74c24d
          filesystems: {ess3000_4M: ess3000_4M}
      remote_filesystems:
        ess3000_4M: {remote: ess3000_4M, cluster: ess3000.bda.scale.ibm.com, mount_point: /gpfs/ess3000_4M,
                     mount_options: rw, automount: "yes", drive: "-", priority: "0"}
      mounts:
        ess3000_4M:
          defined: true
          cluster: ess3000.bda.scale.ibm.com
          remote: ess3000_4M
          count: 2
          nodes:
            - {ip: 192.168.1.19, name: dgx01.ocp4, cluster: SpectrumScale.ocp4.scale.ibm.com}
            - {ip: 192.168.1.20, name: dgx02.ocp4, cluster: SpectrumScale.ocp4.scale.ibm.com}
      unread: {}
"""

import os
import platform
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import list_of, show
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_spectrum_scale import (
    MISSING_HINT,
    ParseError,
    filesystem_uid,
    parse_mmgetstate_y,
    parse_mmlscluster_y,
    parse_mmlsmount,
    parse_mmlsnodeclass,
    parse_mmremotecluster_show,
    parse_mmremotefs_show,
    same_node,
)

# What gather reads, in the order it is read (node membership first: the state read depends on it).
GATHER = ("cluster", "nodeclass", "state", "remote_clusters", "remote_filesystems", "mounts")
# Names handed to the mm commands as arguments: none may start with '-', where a command would take it for a flag.
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_NODE_CLASS = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_DEVICE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_REASON_MAX = 300


def _name(pattern, what: str):
    def check(path: str, value) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise OptionError(path, f"is not {what} (letters, digits, _ . -, not starting with -), got {show(value)}")
        return value

    return check


def _reason(rc: int, out: str, err: str) -> str:
    text = " ".join((err or out or "").split())
    return f"rc={rc}: {text[:_REASON_MAX]}" if text else f"rc={rc}"


class SpectrumScaleFacts:
    def __init__(self, module):
        self.module = module
        self.result = {"changed": False}
        self.bin = module.params["mmfs_bin"]
        self.gather = [what for what in GATHER if what in module.params["gather"]]
        self.unread = {}
        params = module.params
        try:
            if params["node_classes"] and "nodeclass" not in self.gather:
                raise OptionError("node_classes", "names the classes gather: nodeclass reads; add nodeclass to gather")
            if params["devices"] and "mounts" not in self.gather:
                raise OptionError("devices", "names the file systems gather: mounts reads; add mounts to gather")
            self.node_classes = list_of(_name(_NODE_CLASS, "a node class name"))("node_classes", params["node_classes"])
            self.devices = list_of(_name(_DEVICE, "a file system device name"))("devices", params["devices"])
            self.node = None
            if params["node"] is not None or any(what != "cluster" for what in self.gather):
                node = params["node"] if params["node"] is not None else platform.node().split(".")[0]
                self.node = _name(_NODE, "a node name")("node", node)
        except OptionError as exc:
            module.fail_json(msg=str(exc), **self.result)

    def mm(self, *args):
        command = [os.path.join(self.bin, args[0]), *args[1:]]
        rc, out, err = Tool(self.module, command[0], MISSING_HINT, result=self.result).run(command[1:])
        return rc, out or "", err or ""

    def fail(self, msg: str):
        self.module.fail_json(msg=msg, **self.result)

    def run(self):
        facts = {"member": None, "cluster": None, "filesystems": {}}
        if "cluster" in self.gather:
            command = os.path.join(self.bin, "mmlscluster")
            if not os.path.exists(command):
                self.fail(Tool(self.module, command, MISSING_HINT).missing())
            rc, out, err = self.mm("mmlscluster", "-Y")
            if rc != 0:
                if self.module.params["allow_no_cluster"]:
                    self.result["ansible_facts"] = {
                        "spectrum_scale": {"member": False, "cluster": None, "filesystems": {}}
                    }
                    self.module.exit_json(**self.result)
                self.fail(f"mmlscluster -Y failed (rc={rc}): {(err or out).strip()} - run it on a node of the cluster")
            try:
                facts.update(member=True, cluster=parse_mmlscluster_y(out))
            except ParseError as exc:
                self.fail(f"could not read mmlscluster -Y: {exc}")
        if self.node is not None:
            node = facts["node"] = {"name": self.node, "member": None, "state": None, "node_classes": [], "mounted": []}
            facts["unread"] = self.unread
            if facts["cluster"] is not None:
                node["member"] = any(
                    same_node(entry["name"], self.node) or same_node(entry["admin_name"], self.node)
                    for entry in facts["cluster"]["nodes"]
                )
            if "nodeclass" in self.gather:
                classes = facts["node_classes"] = self.read_node_classes()
                node["node_classes"] = [
                    name
                    for name, found in classes.items()
                    if any(same_node(member, self.node) for member in found["members"])
                ]
            if "state" in self.gather and node["member"] is not False:
                node["state"] = self.read_state()
            if "remote_clusters" in self.gather:
                facts["remote_clusters"] = self.read_listing(
                    "remote_clusters", parse_mmremotecluster_show, "mmremotecluster", "show", "all"
                )
            if "remote_filesystems" in self.gather:
                facts["remote_filesystems"] = self.read_listing(
                    "remote_filesystems", parse_mmremotefs_show, "mmremotefs", "show", "all"
                )
            if "mounts" in self.gather:
                mounts = facts["mounts"] = self.read_mounts(facts.get("remote_filesystems"))
                node["mounted"] = [
                    device
                    for device, found in mounts.items()
                    if any(same_node(entry["name"], self.node) for entry in found["nodes"])
                ]
        facts["filesystems"] = {name: {"uid": self.uid(name)} for name in self.module.params["filesystems"]}
        self.result["ansible_facts"] = {"spectrum_scale": facts}
        self.module.exit_json(**self.result)

    def parsed(self, parser, text: str, what: str):
        try:
            return parser(text)
        except ParseError as exc:
            self.fail(f"could not read {what}: {exc}")
            raise  # not reached: fail_json exits

    def read_node_classes(self) -> dict:
        if not self.node_classes:
            rc, out, err = self.mm("mmlsnodeclass")
            if rc != 0:
                self.fail(f"mmlsnodeclass failed ({_reason(rc, out, err)}) - run it on an administration node")
            found = self.parsed(parse_mmlsnodeclass, out, "mmlsnodeclass")
            return {name: {"exists": True, "members": members} for name, members in found.items()}
        classes = {}
        for name in self.node_classes:
            rc, out, err = self.mm("mmlsnodeclass", name)
            if rc != 0:
                # The class does not exist (or cannot be read): the role creates it, and mmcrnodeclass says why
                # if something else is wrong.
                classes[name] = {"exists": False, "members": []}
                self.unread[f"nodeclass {name}"] = _reason(rc, out, err)
                continue
            found = self.parsed(parse_mmlsnodeclass, out, f"mmlsnodeclass {name}")
            if name not in found:
                self.fail(
                    f"could not read mmlsnodeclass {name}: it printed no row for {name} (rows: {', '.join(found)})"
                )
            classes[name] = {"exists": True, "members": found[name]}
        return classes

    def read_state(self) -> str:
        rc, out, err = self.mm("mmgetstate", "-N", self.node, "-Y")
        if rc != 0:
            self.fail(
                f"mmgetstate -N {self.node} -Y failed ({_reason(rc, out, err)}) - is {self.node} the daemon node "
                "name of a node of this cluster (mmlscluster)?"
            )
        rows = self.parsed(parse_mmgetstate_y, out, "mmgetstate -Y")
        mine = [row for row in rows if same_node(row["name"], self.node)]
        if not mine:
            self.fail(
                f"could not read mmgetstate -N {self.node} -Y: no record for {self.node} "
                f"(records: {', '.join(row['name'] for row in rows)})"
            )
        return mine[0]["state"]

    def read_listing(self, what: str, parser, *command) -> dict:
        rc, out, err = self.mm(*command)
        if rc != 0:
            # mmremotecluster show fails when no remote cluster is defined: nothing defined, as far as the caller
            # goes (an add that follows fails loudly if the definitions exist after all).
            self.unread[what] = _reason(rc, out, err)
            return {}
        return self.parsed(parser, out, " ".join(command))

    def read_mounts(self, remote_filesystems) -> dict:
        mounts = {}
        for device in self.devices:
            rc, out, err = self.mm("mmlsmount", device, "-L")
            if rc != 0:
                if remote_filesystems is not None and device not in remote_filesystems:
                    mounts[device] = {"defined": False, "cluster": "", "remote": "", "count": 0, "nodes": []}
                    self.unread[f"mounts {device}"] = _reason(rc, out, err)
                    continue
                self.fail(
                    f"mmlsmount {device} -L failed ({_reason(rc, out, err)}) - is {device} the device name this "
                    "cluster knows the file system by (mmremotefs show all, mmlsfs all)?"
                )
            found = self.parsed(parse_mmlsmount, out, f"mmlsmount {device} -L")
            if device not in found:
                self.fail(
                    f"could not read mmlsmount {device} -L: no line for {device} (file systems: {', '.join(found)})"
                )
            mounts[device] = {"defined": True, **found[device]}
        return mounts

    def uid(self, name):
        command = [os.path.join(self.module.params["mmfs_bin"], "mmlsfs"), name, "--uid"]
        rc, out, err = Tool(self.module, command[0], MISSING_HINT, result=self.result).run(command[1:])
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
            "gather": {"type": "list", "elements": "str", "choices": list(GATHER), "default": ["cluster"]},
            "node": {"type": "str"},
            "node_classes": {"type": "list", "elements": "str", "default": []},
            "devices": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    SpectrumScaleFacts(module).run()


if __name__ == "__main__":
    main()
