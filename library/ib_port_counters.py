#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: read InfiniBand port error counters with perfquery; judge their growth against a baseline."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ib_port_counters
short_description: Read InfiniBand port error counters (perfquery) and fail ports whose errors grew
description:
  - Runs C(perfquery -C <hca> -P <port>) (infiniband-diags) for every Active InfiniBand port of the
    C(infiniband) facts and returns the PortCounters of each as C(counters), keyed C(<hca>/<port>).
  - With I(baseline) (the C(counters) of an earlier run, typically read before the benchmarks) it returns
    the C(ib_port_counters) check - a port fails when an error counter (SymbolErrorCounter,
    LinkErrorRecoveryCounter, LinkDownedCounter, PortRcvErrors, PortXmitDiscards, ...) grew by more than
    I(max_growth) allows (0 by default, as ibqueryerrors). A counter at its maximum is saturated and warns.
  - RoCE (Ethernet) ports and ports that are not Active are skipped - perfquery needs an InfiniBand
    port with a LID. A port perfquery cannot read is listed in C(errors), not failed here.
  - Reads only; check mode runs the same reads.
options:
  infiniband:
    description: The C(ansible_facts.infiniband) dict of the infiniband_facts module (which ports to read).
    type: dict
    required: true
  baseline:
    description: The C(counters) result of an earlier run; when given the growth is judged.
    type: dict
  max_growth:
    description:
      - Counter name to the growth allowed between I(baseline) and now; counters not named allow 0.
      - Keys are PortCounters names as perfquery prints them (C(SymbolErrorCounter), ...).
    type: dict
    default: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
notes:
  - perfquery ships in infiniband-diags (Debian, RHEL, MLNX_OFED / DOCA-OFED).
"""

EXAMPLES = r"""
- name: Read the port counters before the benchmarks
  gpuforge.cluster.ib_port_counters:
    infiniband: "{{ ansible_facts.infiniband }}"
  register: ib_counters_before

- name: Read them again after the benchmarks and judge the growth
  gpuforge.cluster.ib_port_counters:
    infiniband: "{{ ansible_facts.infiniband }}"
    baseline: "{{ ib_counters_before.counters }}"
    max_growth: "{{ gpuforge_expected_ib_counter_growth_max }}"
  register: ib_counters_after
"""

RETURN = r"""
counters:
  description: PortCounters per port (C(<hca>/<port>)), counter name to value.
  returned: always
  type: dict
  sample: {"mlx5_0/1": {"SymbolErrorCounter": 0, "LinkDownedCounter": 0, "PortRcvErrors": 0}}
errors:
  description: Ports perfquery could not read, with its message.
  returned: always
  type: list
  elements: str
healthy:
  description: False when the growth check failed; true without I(baseline).
  returned: always
  type: bool
check:
  description:
    - The C(ib_port_counters) check in the gpu_node_check result contract (name, status, observed,
      expected, fault, remedy, caused_by). observed holds C(grew) (port to counter growth over the
      limit), C(saturated) and C(unpaired) (ports read only once).
  returned: when baseline is given
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perfquery import (
    ParseError,
    judge_counter_growth,
    parse_perfquery,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool

FIX = "install infiniband-diags (perfquery)"


def ib_ports(infiniband) -> list:
    """(hca, port) of the Active InfiniBand ports in infiniband_facts' facts."""
    found = []
    for hca in (infiniband or {}).get("hcas") or []:
        if not isinstance(hca, dict):
            continue
        for port in hca.get("ports") or []:
            if not isinstance(port, dict):
                continue
            if port.get("state") == "Active" and port.get("link_layer", "InfiniBand") == "InfiniBand":
                found.append((str(hca.get("name")), int(port.get("port") or 1)))
    return found


def read_counters(module, infiniband) -> tuple:
    """({"<hca>/<port>": counters}, [error messages]) from one perfquery run per port."""
    counters, errors = {}, []
    ports = ib_ports(infiniband)
    if not ports:
        return counters, errors
    perfquery = Tool(module, "perfquery", FIX)
    perfquery.require()
    for hca, port in ports:
        rc, out, err = perfquery.run(["-C", hca, "-P", port])
        key = f"{hca}/{port}"
        if rc != 0:
            errors.append(f"perfquery -C {hca} -P {port} failed (rc={rc}): {(err or out).strip()[:300]}")
            continue
        try:
            blocks = parse_perfquery(out)
        except ParseError as exc:
            errors.append(f"{key}: could not read perfquery output: {exc}")
            continue
        counters[key] = blocks[0]["counters"]
    return counters, errors


def main():
    module = AnsibleModule(
        argument_spec={
            "infiniband": {"type": "dict", "required": True},
            "baseline": {"type": "dict"},
            "max_growth": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    limits = {}
    for name, value in (module.params["max_growth"] or {}).items():
        try:
            limits[str(name)] = int(value)
        except (TypeError, ValueError):
            module.fail_json(msg=f"max_growth.{name}: {value!r} is not an integer")
        if limits[str(name)] < 0:
            module.fail_json(msg=f"max_growth.{name}: must be >= 0")
    counters, errors = read_counters(module, module.params["infiniband"])
    result = {"changed": False, "counters": counters, "errors": errors, "healthy": True}
    baseline = module.params["baseline"]
    if baseline is not None:
        clean = {k: v for k, v in baseline.items() if isinstance(v, dict)}
        check = judge_counter_growth(clean, counters, limits)
        result.update(check=check, healthy=check["status"] != FAIL)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
