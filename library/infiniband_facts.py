#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: gather InfiniBand/RoCE facts from ibstat, ibv_devinfo and ibdev2netdev."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: infiniband_facts
short_description: Gather InfiniBand/RoCE adapter and port facts
description:
  - Runs C(ibstat) (infiniband-diags) and returns C(ansible_facts.infiniband) - one entry per RDMA
    adapter (HCA) with CA type, firmware, GUIDs and its ports (state, physical state, rate, width,
    speed, link layer, LID, SM LID, port GUID, MTU, netdev).
  - When C(ibv_devinfo) (ibverbs-utils) is present it is run with C(-v) to add width, speed and MTU;
    when C(ibstat) is absent it is the only source. When C(ibdev2netdev) (MLNX_OFED) is present the
    ports get their network device and its carrier state.
  - C(active_ports) lists the Active ports as C(mlx5_0/1), the format of IBM Spectrum Scale's
    C(verbsPorts) setting.
  - When C(ofed_info) (MLNX_OFED, DOCA-OFED) is present, C(ofed_release) is the release line of C(ofed_info -s),
    so one module run reads both the adapters and the installed OFED release.
  - ibstat exits 255 after printing part of its output when it cannot read one adapter
    (C(ibpanic:)); the adapters it did print are returned and the panic line is in C(errors).
  - Reads only; check mode runs the same commands.
options:
  fail_on_missing:
    description:
      - Fail when neither C(ibstat) nor C(ibv_devinfo) is installed, naming the package to install.
      - When false, the module succeeds with C(infiniband.available=false) and no adapters.
    type: bool
    default: true
  devinfo:
    description: Also run C(ibv_devinfo -v) when it is installed (width, speed and MTU).
    type: bool
    default: true
  wait_for_active_ports:
    description:
      - Read the adapters again every 2 seconds until at least this many ports are Active or O(wait_timeout)
        seconds have passed, then return the last read; the caller judges the count. A port stays Initializing
        until a subnet manager configures it, so right after the fabric's subnet manager starts (OpenSM on a
        storage or head node, on the same run) its ports need a few of the manager's sweeps to become Active.
      - C(0) reads once and does not wait.
    type: int
    default: 0
  wait_timeout:
    description: Seconds to wait for O(wait_for_active_ports) Active ports at most.
    type: int
    default: 60
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
notes:
  - Package names are Debian/Ubuntu and RHEL ones; MLNX_OFED ships all three tools.
"""

EXAMPLES = r"""
- name: Gather InfiniBand facts
  gpuforge.cluster.infiniband_facts:

- name: Require four active EDR ports
  ansible.builtin.assert:
    that:
      - ansible_facts.infiniband.active_ports | length == 4
      - ansible_facts.infiniband.hcas | map(attribute='ports') | flatten
        | selectattr('rate_gbit_per_s', 'lt', 100) | list | length == 0

- name: Spectrum Scale verbsPorts from the active ports
  ansible.builtin.set_fact:
    scale_verbs_ports: "{{ ansible_facts.infiniband.active_ports | join(' ') }}"

- name: Facts once the subnet manager started on this run has brought two ports up (a minute at most)
  gpuforge.cluster.infiniband_facts:
    wait_for_active_ports: 2

- name: Facts on a node that may have no RDMA stack
  gpuforge.cluster.infiniband_facts:
    fail_on_missing: false
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    infiniband:
      description: RDMA adapters and ports.
      returned: always
      type: dict
      contains:
        available:
          description: Whether an RDMA status tool was found.
          type: bool
          sample: true
        source:
          description: Tool the adapter list comes from (C(ibstat) or C(ibv_devinfo)); null when none.
          type: str
          sample: ibstat
        hcas:
          description:
            - One entry per adapter - name, ca_type, fw_ver, hw_ver, node_guid, sys_image_guid, num_ports,
              and (from ibv_devinfo) board_id, vendor_part_id.
            - C(ports) entries - port, state, state_code, phys_state, phys_state_code, rate_gbit_per_s, width,
              speed, link_layer, lid, sm_lid, lmc, port_guid, capability_mask, active_mtu, max_mtu,
              netdev, netdev_state. Keys a tool does not report are null.
          type: list
          elements: dict
          sample:
            - name: mlx5_0
              ca_type: MT4115
              fw_ver: 12.23.1020
              node_guid: "0x248a07030029e1fa"
              ports:
                - {port: 1, state: Active, phys_state: LinkUp, rate_gbit_per_s: 100, width: 4X, speed: EDR,
                   link_layer: InfiniBand, lid: 5, sm_lid: 1, active_mtu: 4096, netdev: ib0, netdev_state: Up}
        active_ports:
          description: Active ports as C(<hca>/<port>) (Spectrum Scale verbsPorts format).
          type: list
          elements: str
          sample: [mlx5_0/1, mlx5_1/1]
        inactive_ports:
          description: Ports that are not Active, as C(<hca>/<port>).
          type: list
          elements: str
          sample: [mlx5_3/1]
        ofed_release:
          description:
            - The release line C(ofed_info -s) prints, as printed (C(MLNX_OFED_LINUX-<version>:) from the MLNX_OFED
              tarball, C(OFED-internal-<version>:) from DOCA-OFED packages); null without C(ofed_info) or when it
              failed (then in C(errors)).
          type: str
          sample: "OFED-internal-24.10-1.1.4.0.200:"
        waited_s:
          description: Seconds spent waiting for O(wait_for_active_ports) Active ports (0 when the first read had them).
          type: float
          sample: 0
        errors:
          description:
            - Messages from the tools (C(ibpanic:) lines, cut-short blocks, optional tools that failed).
          type: list
          elements: str
          sample: ["ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_infiniband_reader import (
    InfinibandReader,
    InfinibandReadError,
)


class InfinibandFacts(InfinibandReader):
    def __init__(self, module: AnsibleModule):
        super().__init__(module, module.params)

    def main(self):
        wanted, timeout = self.module.params["wait_for_active_ports"], self.module.params["wait_timeout"]
        if wanted < 0 or timeout < 0:
            self.module.fail_json(
                msg=f"wait_for_active_ports ({wanted}) and wait_timeout ({timeout}) must not be negative"
            )
        try:
            facts = self.facts(wanted, timeout)
        except InfinibandReadError as exc:
            self.module.fail_json(msg=str(exc), **exc.output)
        for message in facts["errors"]:
            self.module.warn(message)
        self.module.exit_json(changed=False, ansible_facts={"infiniband": facts})


def main():
    module = AnsibleModule(
        argument_spec={
            "fail_on_missing": {"type": "bool", "default": True},
            "devinfo": {"type": "bool", "default": True},
            "wait_for_active_ports": {"type": "int", "default": 0},
            "wait_timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    InfinibandFacts(module).main()


if __name__ == "__main__":
    main()
