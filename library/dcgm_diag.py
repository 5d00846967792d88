#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: run the NVIDIA DCGM diagnostic (dcgmi diag -r N -j) and judge it per GPU and per test."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: dcgm_diag
short_description: Run the NVIDIA DCGM diagnostic and judge it per GPU and per test
description:
  - Runs C(dcgmi diag -r <level> -j) (C(LC_ALL=C), under C(timeout)) and parses the JSON of DCGM 3.x
    (C(DCGM GPU Diagnostic)) or DCGM 4.x (C(DCGM Diagnostic)), one result per GPU and per test.
  - Returns the C(dcgm_diag) check of the gpu_node_check result contract; a failed test names the GPU by its
    PCI bus ID, taken from the nvidia-smi facts (DCGM numbers GPUs as nvidia-smi does).
  - Level 1 (seconds, software checks) suits validation; level 3 (about 15 minutes, stress tests) suits
    burn-in; level 4 adds memtest and the pulse test.
  - Fails, naming the fix, when C(dcgmi) is not installed or the DCGM host engine (C(nv-hostengine), unit
    C(nvidia-dcgm)) is not running. A failed diagnostic is a result, not a module failure.
options:
  level:
    description: Diagnostic level (C(dcgmi diag -r)).
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  gpus:
    description: The GPUs of C(ansible_facts.nvidia_smi.gpus) (index and bus_id), to name GPUs by bus ID.
    type: list
    elements: dict
    default: []
  allow_skip:
    description: A test that did not run (Skip) passes; false makes it a warning.
    type: bool
    default: true
  timeout:
    description: Seconds before the diagnostic is stopped; 0 takes the level's default (600, 1800, 3600, 14400 s).
    type: int
    default: 0
  executable:
    description: dcgmi command name or path.
    type: str
    default: dcgmi
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: In check mode the diagnostic is not run (it loads the GPUs); the module only finds dcgmi.
notes:
  - DCGM comes from NVIDIA's CUDA repository (datacenter-gpu-manager-4-cuda12, DCGM 3.x
    datacenter-gpu-manager); the gpuforge_nvidia_driver role installs it with nvidia_driver_dcgm_enabled.
"""

EXAMPLES = r"""
- name: Level 1 DCGM diagnostic
  gpuforge.cluster.dcgm_diag:
    level: 1
    gpus: "{{ ansible_facts.nvidia_smi.gpus }}"
  register: dcgm

- name: Burn-in depth
  gpuforge.cluster.dcgm_diag:
    level: 3
    gpus: "{{ ansible_facts.nvidia_smi.gpus }}"
"""

RETURN = r"""
ran:
  description: Whether the diagnostic ran (false in check mode).
  returned: always
  type: bool
healthy:
  description: False when the check failed; true in check mode.
  returned: always
  type: bool
dcgm:
  description: parse_diag result (format, version, driver_version, runtime_error, tests, gpus).
  returned: when ran
  type: dict
check:
  description:
    - The C(dcgm_diag) check (name, status, observed, expected, fault, remedy, caused_by). observed holds
      level, version, failed and warned ([{test, gpu, bus_id, messages}]), skipped, tests and per_gpu.
  returned: when ran
  type: dict
cmd:
  description: The dcgmi command line.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_diagnostics import DCGM_ARGUMENT_SPEC, run_dcgm


def main():
    module = AnsibleModule(argument_spec=DCGM_ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**run_dcgm(module, module.params))


if __name__ == "__main__":
    main()
