#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: gather NVIDIA GPU facts from nvidia-smi (-q -x, topo -m, nvlink --status)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_smi_facts
short_description: Gather NVIDIA GPU facts from nvidia-smi
description:
  - Runs C(nvidia-smi -q -x), C(nvidia-smi topo -m), C(nvidia-smi nvlink --status) and
    C(nvidia-smi nvlink -e) and samples the clock event reasons, and returns C(ansible_facts.nvidia_smi) -
    driver and CUDA versions, one entry per GPU (model, UUID, bus id, serial, memory, ECC mode and
    volatile/aggregate SRAM/DRAM counters, page retirement / row remapping state and histogram, PCIe
    generation and width current against max, throttle reasons, clock event reasons over the sampling
    window, NVLink state and error counters per link, CPU/NUMA affinity and GPU to NIC topology).
  - The clock event reasons (HW slowdown, HW thermal slowdown, HW power brake) are sampled
    I(clock_event_samples) times, I(clock_event_interval_ms) apart, with
    C(nvidia-smi --query-gpu=...clocks_event_reasons.*), falling back to the C(clocks_throttle_reasons.*)
    names drivers before R535 use.
  - When a GPU has fallen off the bus, C(nvidia-smi -q -x) prints only that error; the module then lists
    the GPUs that still answer (C(nvidia-smi -L)) and reads each with C(-i), so the others are still
    judged, and names the lost boards in C(nvidia_smi.unreachable_gpus).
  - C(topo -m) and the NVLink views are optional; when nvidia-smi cannot run them their facts are
    null and a note is added to C(nvidia_smi.notes).
  - Reads only; check mode runs the same commands.
options:
  executable:
    description: nvidia-smi command name or path.
    type: str
    default: nvidia-smi
  topology:
    description: Also run C(nvidia-smi topo -m).
    type: bool
    default: true
  nvlink:
    description: Also run C(nvidia-smi nvlink --status) and C(nvidia-smi nvlink -e).
    type: bool
    default: true
  clock_event_samples:
    description: How many times to sample the clock event reasons (0 skips the sampling).
    type: int
    default: 20
  clock_event_interval_ms:
    description: Time between two clock event samples, in milliseconds.
    type: int
    default: 500
  fail_on_error:
    description:
      - Fail when nvidia-smi is missing, exits non-zero (9 driver not loaded, 15 GPU fell off the bus)
        or prints output that cannot be parsed.
      - When false, the module succeeds and the problems are listed in C(nvidia_smi.errors).
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpuforge.cluster.nvidia_smi_facts:

- name: Gather what can be read, even on a broken node
  gpuforge.cluster.nvidia_smi_facts:
    fail_on_error: false

- name: Label the node with its GPU model (for example Tesla-V100-SXM2-16GB)
  ansible.builtin.debug:
    msg: "nvidia.com/gpu.product={{ ansible_facts.nvidia_smi.gpu_product_label }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(nvidia_smi).
  returned: always
  type: dict
  contains:
    nvidia_smi:
      description: GPU facts; key names as in docs/parsers.md (nvidia-smi-xml, nvidia-smi-topo, nvlink-status).
      type: dict
      contains:
        driver_version:
          description: Driver version, e.g. C(535.183.01).
          type: str
        cuda_version:
          description: CUDA version the driver supports, e.g. C(12.2).
          type: str
        gpu_count:
          description: GPUs nvidia-smi reported.
          type: int
        gpu_product_label:
          description: First GPU's product name with spaces as dashes (node label value), e.g. C(Tesla-V100-SXM2-16GB).
          type: str
        gpus:
          description:
            - One dict per GPU as parse_query_xml returns it (index, bus_id, product_name, uuid, memory, pcie,
              ecc, retired_pages, remapped_rows, memory_repair_pending, throttle_reasons,
              active_throttle_reasons, ...) plus product_label, nvlink (active_links, total_speed_gbyte_per_s,
              links), cpu_affinity, numa_affinity and nics (NIC device name to topo -m code).
          type: list
          elements: dict
        topology:
          description: parse_topo_matrix result, or null when topo -m was skipped or unsupported.
          type: dict
        nvlink:
          description: parse_nvlink_status result, or null when skipped or unsupported.
          type: dict
        nvlink_errors:
          description: parse_nvlink_errors result (nvlink -e), or null when skipped or unsupported.
          type: dict
        clock_events:
          description:
            - parse_clock_event_samples result over the sampling window, or null when skipped or unsupported.
            - Each GPU entry also gets C(clock_events) - samples and, per reason, the samples it was active in.
          type: dict
        unreachable_gpus:
          description: GPUs nvidia-smi could not get a handle for (fallen off the bus) - bus_id and message.
          type: list
          elements: dict
        errors:
          description: Problems found (only with fail_on_error=false; otherwise the module fails).
          type: list
          elements: str
        notes:
          description: Optional views that were not available.
          type: list
          elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi_reader import NvidiaSmiReader


class NvidiaSmiFacts(NvidiaSmiReader):
    def __init__(self, module: AnsibleModule):
        super().__init__(module, module.params)
        self.result = {"changed": False, "ansible_facts": {}}

    def main(self):
        facts = self.gather()
        self.result["ansible_facts"]["nvidia_smi"] = facts
        lost = [f"{g['message']} (exit 15: a GPU has fallen off the bus)" for g in facts["unreachable_gpus"]]
        if (self.errors or lost) and self.params["fail_on_error"]:
            self.module.fail_json(msg="; ".join(self.errors + lost), **self.result)
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "executable": {"type": "str", "default": "nvidia-smi"},
            "topology": {"type": "bool", "default": True},
            "nvlink": {"type": "bool", "default": True},
            "clock_event_samples": {"type": "int", "default": 20},
            "clock_event_interval_ms": {"type": "int", "default": 500},
            "fail_on_error": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    NvidiaSmiFacts(module).main()


if __name__ == "__main__":
    main()
