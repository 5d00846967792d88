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
notes:
  - Supports check mode.
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
        | selectattr('rate_gbps', 'lt', 100) | list | length == 0

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
            - C(ports) entries - port, state, state_code, phys_state, phys_state_code, rate_gbps, width,
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
                - {port: 1, state: Active, phys_state: LinkUp, rate_gbps: 100, width: 4X, speed: EDR,
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

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_infiniband import (
    ParseError,
    parse_ibdev2netdev,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_ofed_info_release,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import run_tool, this_host

PORT_KEYS = (
    "port",
    "state",
    "state_code",
    "phys_state",
    "phys_state_code",
    "rate_gbps",
    "width",
    "speed",
    "link_layer",
    "lid",
    "sm_lid",
    "lmc",
    "port_guid",
    "capability_mask",
    "active_mtu",
    "max_mtu",
    "netdev",
    "netdev_state",
)
HCA_KEYS = ("name", "ca_type", "fw_ver", "hw_ver", "node_guid", "sys_image_guid", "num_ports", "board_id")
# Keys ibv_devinfo -v adds to an ibstat port, and to an ibstat CA.
DEVINFO_PORT_KEYS = ("width", "speed", "active_mtu", "max_mtu")
DEVINFO_HCA_KEYS = ("board_id", "vendor_part_id")
# Seconds between two reads while waiting for Active ports.
WAIT_INTERVAL_S = 2
INSTALL_HINT = "install the infiniband-diags package (ibstat; ibverbs-utils / libibverbs-utils for ibv_devinfo)"
MISSING_MSG = (
    "Neither ibstat nor ibv_devinfo is installed on {host}: " + INSTALL_HINT + ", or set fail_on_missing: false"
)


class InfinibandFacts:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.errors: list[str] = []

    def run(self, path: str, args: list[str]) -> tuple[int, str, str]:
        return run_tool(self.module, [path, *args], INSTALL_HINT)

    def read(self, name: str, args: list[str], parser, ok_rcs=(0,), optional=False) -> dict | None:
        """Run one tool and parse it; None when it is not installed.

        A failing or unreadable primary tool fails the module; an optional one (extra detail only)
        is noted in `errors` and skipped.
        """
        path = self.module.get_bin_path(name)
        if not path:
            return None
        rc, out, err = self.run(path, args)
        problem = None
        if rc not in ok_rcs:
            problem = f"{' '.join([name, *args])} failed (rc={rc}): {err.strip() or out.strip()}"
        else:
            try:
                result = parser(out + err)
            except ParseError as exc:
                problem = f"could not read {name} output: {exc}"
        if problem and optional:
            self.errors.append(problem)
            return None
        if problem:
            self.module.fail_json(msg=problem, stdout=out, stderr=err)
        self.errors.extend(f"{name}: {message}" for message in result["errors"])
        return result

    @staticmethod
    def normalise(hca: dict) -> dict:
        entry = {key: hca.get(key) for key in HCA_KEYS}
        entry["vendor_part_id"] = hca.get("vendor_part_id")
        entry["ports"] = [{key: port.get(key) for key in PORT_KEYS} for port in hca.get("ports", [])]
        return entry

    @staticmethod
    def merge_devinfo(hcas: list[dict], devinfo: dict) -> None:
        by_name = {hca["name"]: hca for hca in devinfo["cas"]}
        for hca in hcas:
            extra = by_name.get(hca["name"])
            if not extra:
                continue
            for key in DEVINFO_HCA_KEYS:
                hca[key] = hca.get(key) or extra.get(key)
            extra_ports = {port["port"]: port for port in extra["ports"]}
            for port in hca["ports"]:
                for key in DEVINFO_PORT_KEYS:
                    if port.get(key) is None:
                        port[key] = extra_ports.get(port["port"], {}).get(key)

    @staticmethod
    def merge_netdevs(hcas: list[dict], mappings: list[dict]) -> None:
        netdevs = {(m["ca"], m["port"]): m for m in mappings}
        for hca in hcas:
            for port in hca["ports"]:
                mapping = netdevs.get((hca["name"], port["port"]))
                if mapping:
                    port["netdev"], port["netdev_state"] = mapping["netdev"], mapping["netdev_state"]

    def ofed_release(self) -> str | None:
        """`ofed_info -s` when OFED is installed (inbox rdma-core has no ofed_info); a failure is an error entry."""
        path = self.module.get_bin_path("ofed_info")
        if not path:
            return None
        rc, out, err = self.run(path, ["-s"])
        if rc != 0:
            self.errors.append(f"ofed_info -s failed (rc={rc}): {(err or out).strip()[:200]}")
            return None
        try:
            return parse_ofed_info_release(out)
        except ParseError as exc:
            self.errors.append(str(exc))
            return None

    def gather(self) -> dict:
        params = self.module.params
        # ibstat exits 255 after an ibpanic but has printed every CA before it: keep those.
        ibstat = self.read("ibstat", [], parse_ibstat, ok_rcs=(0, 255))
        devinfo = None
        if params["devinfo"] or ibstat is None:
            optional = ibstat is not None
            devinfo = self.read("ibv_devinfo", ["-v"], parse_ibv_devinfo, ok_rcs=(0, 255), optional=optional)
        if ibstat is None and devinfo is None:
            if params["fail_on_missing"]:
                self.module.fail_json(msg=MISSING_MSG.format(host=this_host()))
            return {"available": False, "source": None, "hcas": [], "active_ports": [], "inactive_ports": []}
        source = ibstat or devinfo
        hcas = [self.normalise(hca) for hca in source["cas"]]
        if ibstat is None:
            for hca in hcas:  # ibstat's CA type is MT<vendor_part_id> on Mellanox/NVIDIA adapters
                hca["ca_type"] = f"MT{hca['vendor_part_id']}" if hca.get("vendor_part_id") else None
        elif devinfo is not None:
            self.merge_devinfo(hcas, devinfo)
        mapping = self.read("ibdev2netdev", [], parse_ibdev2netdev, optional=True)
        if mapping is not None:
            self.merge_netdevs(hcas, mapping["mappings"])
        ports = [(hca["name"], port) for hca in hcas for port in hca["ports"]]
        return {
            "available": True,
            "source": "ibstat" if ibstat is not None else "ibv_devinfo",
            "hcas": hcas,
            "active_ports": [f"{name}/{port['port']}" for name, port in ports if port["state"] == "Active"],
            "inactive_ports": [f"{name}/{port['port']}" for name, port in ports if port["state"] != "Active"],
        }

    def gather_waiting(self) -> dict:
        """gather(), repeated every WAIT_INTERVAL_S while fewer than wait_for_active_ports ports are Active, for
        wait_timeout seconds at most; the last read, with the seconds waited."""
        wanted, timeout = self.module.params["wait_for_active_ports"], self.module.params["wait_timeout"]
        if wanted < 0 or timeout < 0:
            self.module.fail_json(
                msg=f"wait_for_active_ports ({wanted}) and wait_timeout ({timeout}) must not be negative"
            )
        started = time.monotonic()
        reads = 0
        while True:
            self.errors = []
            facts = self.gather()
            reads += 1
            elapsed = time.monotonic() - started
            if len(facts["active_ports"]) >= wanted or not facts["available"] or elapsed >= timeout:
                facts["waited_s"] = round(elapsed, 1) if reads > 1 else 0
                return facts
            time.sleep(min(WAIT_INTERVAL_S, timeout - elapsed))

    def main(self):
        facts = self.gather_waiting()
        facts["ofed_release"] = self.ofed_release()
        facts["errors"] = self.errors
        for message in self.errors:
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
