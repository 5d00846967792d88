#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: lossless RoCE settings of a host's RoCE ports, read back and set where they differ."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: roce_qos
short_description: Set and check the host side of lossless RoCE (trust, PFC, ECN, ToS) on RoCE ports
description:
  - For each RoCE port reads the state first - C(mlnx_qos -i NETDEV) (trust state, PFC, DSCP map), the ECN enable
    files C(/sys/class/net/NETDEV/ecn/roce_np|roce_rp/enable/PRIO), the RDMA-CM default ToS
    C(/sys/kernel/config/rdma_cm/HCA/ports/PORT/default_roce_tos), the verbs traffic class
    C(/sys/class/infiniband/HCA/tc/PORT/traffic_class) and the GID type at I(gid_index) - as NVIDIA documents them
    (vendor_facts/mlnx-tools/roce-qos.yml).
  - With I(state=present) sets only what differs (C(mlnx_qos --trust), C(mlnx_qos --pfc), C(mlnx_qos --dscp2prio)
    when the ToS's DSCP is not on the PFC priority, the ECN files, the configfs ToS, the traffic class), then reads
    everything back and fails, naming the port and the fix, when a setting did not take.
  - With I(state=verify) changes nothing and returns the judgement as a node check (C(roce_qos)) that validation
    folds into the node's verdict.
  - None of these settings survive a reboot or a driver restart; the roce_qos role persists them with a systemd
    unit that runs after openibd.
options:
  ports:
    description: The RoCE ports, each with its network device, RDMA device and port number.
    type: list
    elements: dict
    required: true
    suboptions:
      netdev:
        description: Network device of the port (C(ibdev2netdev) shows it), e.g. C(ens224).
        type: str
        required: true
      hca:
        description: RDMA device, e.g. C(mlx5_0).
        type: str
        required: true
      port:
        description: Port number of the RDMA device.
        type: int
        default: 1
  trust:
    description: Priority trust state; RoCE v2 without VLAN tags needs C(dscp).
    type: str
    choices: [dscp, pcp]
    default: dscp
  pfc_priority:
    description: The one priority (0-7) that gets PFC and ECN; the switch ports must use the same.
    type: int
    required: true
  tos:
    description:
      - IP ToS byte of RoCE traffic (DSCP shifted left by two, ECN bits in the low two), written as the RDMA-CM default
        ToS and the verbs traffic class. C(106) is DSCP 26 with ECT(0).
    type: int
    required: true
  ecn:
    description: Enable ECN (DCQCN) notification and reaction points on I(pfc_priority).
    type: bool
    default: true
  gid_index:
    description: GID index the benchmarks and NCCL use (C(NCCL_IB_GID_INDEX)); it must be a RoCE v2 GID. Not checked
      when omitted.
    type: int
  state:
    description: C(present) sets what differs and reads it back; C(verify) only reads and judges.
    type: str
    choices: [present, verify]
    default: present
  sysfs_root:
    description: Where sysfs is mounted (configfs is read under C(SYSFS_ROOT/kernel/config)); the lab passes its
      simulated tree.
    type: path
    default: /sys
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details: Reads the state and reports what would be set; runs no mlnx_qos setting and writes no file.
  diff_mode:
    support: none
notes:
  - Needs root (sysfs and configfs writes) and mlnx_qos (package mlnx-tools of MLNX_OFED/DOCA-OFED).
"""

EXAMPLES = r"""
- name: Lossless RoCE on the RoCE port, priority 3, DSCP 26
  gpuforge.cluster.roce_qos:
    ports:
      - {netdev: ens224, hca: mlx5_0, port: 1}
    pfc_priority: 3
    tos: 106
    gid_index: 3

- name: Check it without changing anything
  gpuforge.cluster.roce_qos:
    ports: "{{ roce_qos_ports }}"
    pfc_priority: 3
    tos: 106
    state: verify
"""

RETURN = r"""
changes:
  description: What was set (in check mode, what would be), one line per setting.
  returned: always
  type: list
  elements: str
  sample: ["ens224: trust pcp -> dscp", "ens224: PFC priorities none -> 3"]
ports:
  description: What was read back per port.
  returned: always
  type: list
  elements: dict
check:
  description:
    - The C(roce_qos) node check (gpuforge_checks.node_check) of the state read back.
    - In check mode with I(state=present), of the state before the changes listed in C(changes).
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_mlnx_qos import (
    PRIORITIES,
    dscp_of_tos,
    judge_roce_port,
    parse_mlnx_qos,
    read_gid_type,
    read_number,
    read_traffic_class,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool

MLNX_QOS_FIX = "install mlnx-tools (MLNX_OFED/DOCA-OFED ships mlnx_qos), or run the mlnx_ofed role first"
REMEDY = (
    "Run the roce_qos role on the node (it sets trust, PFC, ECN and the ToS and persists them across reboots); "
    "check that the switch ports use the same PFC priority and DSCP"
)
SBIN_DIRS = ["/usr/sbin", "/sbin", "/usr/local/sbin"]


class RoceQos:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.root = self.params["sysfs_root"]
        self.result = {"changed": False, "changes": [], "ports": [], "check": None}
        self.tool = Tool(module, "mlnx_qos", MLNX_QOS_FIX, opt_dirs=SBIN_DIRS, result=self.result)

    def fail(self, msg: str):
        self.module.fail_json(msg=msg, **self.result)

    def path(self, *parts) -> str:
        return os.path.join(self.root, *[str(part) for part in parts])

    def configfs_port(self, port: dict) -> str:
        return self.path("kernel", "config", "rdma_cm", port["hca"], "ports", port["port"])

    def mlnx_qos(self, netdev: str, args=()) -> dict:
        rc, out, err = self.tool.run(["-i", netdev, *args])
        if rc != 0:
            self.fail(
                f"mlnx_qos -i {netdev} {' '.join(args)} failed (exit {rc}): {(err or out).strip()[-400:]}. "
                f"Fix: check that {netdev} is a RoCE port of this host (ibdev2netdev) and that the driver is loaded"
            )
        try:
            return parse_mlnx_qos(out)
        except ParseError as exc:
            self.fail(f"could not read mlnx_qos -i {netdev}: {exc}")
        return {}

    def read_file(self, path: str):
        """The file's text, or None when it is not there."""
        try:
            with open(path, encoding="ascii", errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.fail(f"could not read {path}: {exc.strerror}. Fix: run the module as root (become)")
        return None

    def write_file(self, path: str, value: str) -> None:
        try:
            with open(path, "w", encoding="ascii") as handle:
                handle.write(value)
        except OSError as exc:
            self.fail(
                f"could not write {value!r} to {path}: {exc.strerror}. Fix: run as root; on a kernel without "
                "rdma_cm configfs load rdma_cm and mount configfs on /sys/kernel/config"
            )

    def read(self, port: dict) -> dict:
        """What the port's settings are now (see judge_roce_port for the keys)."""
        prio = self.params["pfc_priority"]
        reading = {"netdev": port["netdev"], "hca": port["hca"], "port": port["port"]}
        reading["qos"] = self.mlnx_qos(port["netdev"])
        try:
            for point in ("np", "rp"):
                text = self.read_file(self.path("class", "net", port["netdev"], "ecn", f"roce_{point}", "enable", prio))
                reading[f"ecn_{point}"] = {prio: read_number(text, f"ECN roce_{point}")} if text is not None else {}
            text = self.read_file(os.path.join(self.configfs_port(port), "default_roce_tos"))
            reading["roce_tos"] = read_number(text, "default_roce_tos") if text is not None else None
            text = self.read_file(self.path("class", "infiniband", port["hca"], "tc", port["port"], "traffic_class"))
            reading["traffic_class"] = read_traffic_class(text) if text is not None else None
            index = self.params["gid_index"]
            text = None
            if index is not None:
                text = self.read_file(
                    self.path("class", "infiniband", port["hca"], "ports", port["port"], "gid_attrs", "types", index)
                )
            reading["gid_type"] = read_gid_type(text) if text is not None else None
        except ParseError as exc:
            self.fail(f"{port['netdev']} ({port['hca']} port {port['port']}): {exc}")
        return reading

    def expected(self) -> dict:
        wanted = {
            "roce_trust": self.params["trust"],
            "roce_pfc_priority": self.params["pfc_priority"],
            "roce_ecn": self.params["ecn"],
            "roce_tos": self.params["tos"],
        }
        if self.params["gid_index"] is not None:
            wanted["roce_gid_index"] = self.params["gid_index"]
        return wanted

    def change(self, line: str) -> bool:
        """Record a setting to make; True when it is to be made now (not in check mode)."""
        self.result["changes"].append(line)
        self.result["changed"] = True
        return not self.module.check_mode

    def set_port(self, port: dict, reading: dict) -> None:
        name, prio, tos = port["netdev"], self.params["pfc_priority"], self.params["tos"]
        qos = reading["qos"]
        if qos["trust"] != self.params["trust"] and self.change(
            f"{name}: trust {qos['trust']} -> {self.params['trust']}"
        ):
            self.mlnx_qos(name, ["--trust", self.params["trust"]])
        if qos["pfc_priorities"] != [prio]:
            shown = ",".join(str(p) for p in qos["pfc_priorities"]) or "none"
            if self.change(f"{name}: PFC priorities {shown} -> {prio}"):
                self.mlnx_qos(name, ["--pfc", ",".join("1" if i == prio else "0" for i in range(PRIORITIES))])
        dscp = dscp_of_tos(tos)
        mapped = qos["dscp2prio"].get(dscp, dscp // 8)  # trust pcp prints no map: the driver's default applies
        if self.params["trust"] == "dscp" and mapped != prio and self.change(f"{name}: DSCP {dscp} -> priority {prio}"):
            self.mlnx_qos(name, ["--dscp2prio", f"set,{dscp},{prio}"])
        if self.params["ecn"]:
            for point in ("np", "rp"):
                if reading[f"ecn_{point}"].get(prio) != 1 and self.change(
                    f"{name}: ECN roce_{point} priority {prio} -> 1"
                ):
                    self.write_file(self.path("class", "net", name, "ecn", f"roce_{point}", "enable", prio), "1")
        if reading["roce_tos"] != tos:
            device_dir = self.path("kernel", "config", "rdma_cm", port["hca"])
            if self.change(f"{name}: RDMA-CM default ToS {reading['roce_tos']} -> {tos}"):
                if not os.path.isdir(device_dir):
                    # rdma_cm's configfs: the device's directory is made with mkdir; the kernel fills in ports/.
                    try:
                        os.mkdir(device_dir)
                    except OSError as exc:
                        self.fail(
                            f"could not create {device_dir}: {exc.strerror}. Fix: load rdma_cm and mount "
                            "configfs (mount -t configfs none /sys/kernel/config)"
                        )
                self.write_file(os.path.join(self.configfs_port(port), "default_roce_tos"), str(tos))
        if reading["traffic_class"] != tos and self.change(
            f"{name}: traffic class {reading['traffic_class']} -> {tos}"
        ):
            self.write_file(
                self.path("class", "infiniband", port["hca"], "tc", port["port"], "traffic_class"), str(tos)
            )

    def main(self):
        self.tool.require()  # a host without mlnx_qos fails here, naming the package
        expected = self.expected()
        problems = []
        for port in self.params["ports"]:
            reading = self.read(port)
            if self.params["state"] == "present":
                self.set_port(port, reading)
                if not self.module.check_mode:
                    reading = self.read(port)
            self.result["ports"].append(reading)
            # In check mode with state present this judges the state before the changes listed.
            problems.extend(judge_roce_port(reading, expected))
        observed = {
            f"{r['netdev']}": {
                "trust": r["qos"]["trust"],
                "pfc_priorities": r["qos"]["pfc_priorities"],
                "roce_tos": r["roce_tos"],
                "traffic_class": r["traffic_class"],
                "gid_type": r["gid_type"],
            }
            for r in self.result["ports"]
        }
        status = FAIL if problems else PASS
        self.result["check"] = node_check("roce_qos", status, observed, expected, "; ".join(problems), REMEDY)
        if problems and self.params["state"] == "present" and not self.module.check_mode:
            self.fail("RoCE QoS settings did not take: " + "; ".join(problems))
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "ports": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "netdev": {"type": "str", "required": True},
                    "hca": {"type": "str", "required": True},
                    "port": {"type": "int", "default": 1},
                },
            },
            "trust": {"type": "str", "choices": ["dscp", "pcp"], "default": "dscp"},
            "pfc_priority": {"type": "int", "required": True},
            "tos": {"type": "int", "required": True},
            "ecn": {"type": "bool", "default": True},
            "gid_index": {"type": "int"},
            "state": {"type": "str", "choices": ["present", "verify"], "default": "present"},
            "sysfs_root": {"type": "path", "default": "/sys"},
        },
        supports_check_mode=True,
    )
    if not 0 <= module.params["pfc_priority"] < PRIORITIES:
        module.fail_json(msg=f"pfc_priority {module.params['pfc_priority']} is outside 0-7 (the 802.1p priorities)")
    if not 0 <= module.params["tos"] <= 255:
        module.fail_json(msg=f"tos {module.params['tos']} is outside 0-255 (one IP ToS byte; 106 is DSCP 26 + ECT(0))")
    if not module.params["ports"]:
        module.fail_json(msg="ports is empty: list the RoCE ports ({netdev, hca, port}; ibdev2netdev shows them)")
    RoceQos(module).main()


if __name__ == "__main__":
    main()
