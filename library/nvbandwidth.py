#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: measure host<->GPU and GPU<->GPU bandwidth with NVIDIA nvbandwidth and judge it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvbandwidth
short_description: Measure host to GPU and GPU to GPU bandwidth with nvbandwidth and judge it per GPU
description:
  - Runs C(nvbandwidth -t <testcase>...) (C(LC_ALL=C), C(CUDA_DEVICE_ORDER=PCI_BUS_ID) so its device N is
    nvidia-smi's GPU N, under C(timeout)) for the chosen testcases - C(h2d) host_to_device_memcpy_ce,
    C(d2h) device_to_host_memcpy_ce, C(p2p) device_to_device_memcpy_read_ce - and parses the matrices.
  - Returns the C(nvbandwidth) check of the gpu_node_check result contract; a GPU (or GPU pair) below the
    minimum fails, named by PCI bus ID.
options:
  testcases:
    description: Testcases to run (short names h2d, d2h, p2p).
    type: list
    elements: str
    choices: [h2d, d2h, p2p]
    default: [h2d, d2h]
  thresholds:
    description:
      - Minimum GB/s per GPU (h2d, d2h) or per GPU pair (p2p) - the SKU's entry of gpuforge_expected_nvbandwidth.
      - Every chosen testcase needs a number; a null value (a SKU with no published measurement) fails the
        module and names the variable to set for the site.
    type: dict
    required: true
  gpus:
    description: The GPUs of C(ansible_facts.nvidia_smi.gpus) (index and bus_id), to name GPUs by bus ID.
    type: list
    elements: dict
    default: []
  timeout:
    description: Seconds before nvbandwidth is stopped.
    type: int
    default: 900
  executable:
    description: nvbandwidth command name or path.
    type: str
    default: nvbandwidth
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: In check mode nvbandwidth is not run; the module checks the thresholds and finds the tool.
notes:
  - nvbandwidth is built from source (github.com/NVIDIA/nvbandwidth); NVIDIA publishes no package of it.
"""

EXAMPLES = r"""
- name: Host to GPU bandwidth against the SKU minimum
  gpuforge.cluster.nvbandwidth:
    testcases: [h2d, d2h]
    thresholds: "{{ gpuforge_expected_nvbandwidth['H100-80GB-HBM3'] }}"
    gpus: "{{ ansible_facts.nvidia_smi.gpus }}"
"""

RETURN = r"""
ran:
  description: Whether nvbandwidth ran (false in check mode).
  returned: always
  type: bool
healthy:
  description: False when the check failed; true in check mode.
  returned: always
  type: bool
nvbandwidth:
  description:
    - parse_output result - version, driver_version, devices, testcases (each with its matrix and SUM, and
      matrices keyed by SUM key, since a bidirectional device-to-device testcase prints Read1/Write1, Read2/Write2
      and Total), and waived_unnamed, the count of C(Waived) lines nvbandwidth 0.8 prints without a name.
  returned: when ran
  type: dict
check:
  description:
    - The C(nvbandwidth) check (name, status, observed, expected, fault, remedy, caused_by). observed holds
      testcases (per bus ID or pair, GB/s), low ([{testcase, gpu, bus_id, peer, gbyte_per_s, min}]), waived, missing.
  returned: when ran
  type: dict
cmd:
  description: The nvbandwidth command line.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_diagnostics import (
    NVBANDWIDTH_ARGUMENT_SPEC,
    run_nvbandwidth,
)


def main():
    module = AnsibleModule(argument_spec=NVBANDWIDTH_ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**run_nvbandwidth(module, module.params))


if __name__ == "__main__":
    main()
