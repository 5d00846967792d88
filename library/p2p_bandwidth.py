#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: run the CUDA samples' p2pBandwidthLatencyTest and judge GPU peer-to-peer bandwidth."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: p2p_bandwidth
short_description: Run p2pBandwidthLatencyTest (CUDA samples) and judge GPU peer-to-peer bandwidth
description:
  - Runs I(binary), the CUDA samples' C(p2pBandwidthLatencyTest), when it is present, parses its devices,
    peer access and bandwidth/latency matrices, and judges every pair that can access its peer.
  - A pair passes when its P2P=Enabled bandwidth reaches I(expect.tolerance) (0.9) times the per-SKU
    enabled/disabled ratio of a reference run (gpuforge_p2p REFERENCES; the SKU is the devices' name unless
    I(expect.sku) says otherwise) or I(expect.min_ratio); without either, P2P=Enabled must not be slower
    than P2P=Disabled. I(expect.min_unidirectional_gbyte_per_s) and I(expect.min_bidirectional_gbyte_per_s)
    are site floors in GB/s (GB = 10^9 bytes, as the test prints).
  - I(binary) defaults to where the benchmark_tools role installs its build of the CUDA sample
    (C(gpuforge_benchmark_tools_prefix)/bin); when it is absent the task is reported skipped with the reason
    and the fix (the role, or C(gpuforge_bench_p2p_binary) for a site's own build).
  - In check mode nothing runs; the command is returned.
version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.benchmark
attributes:
  check_mode:
    support: partial
    details: Returns the command it would run; the test is not run and nothing is written.
options:
  binary:
    description:
      - Path of the p2pBandwidthLatencyTest program; by default the benchmark_tools role's build (its default
        C(gpuforge_benchmark_tools_prefix), C(/opt/gpuforge/benchmark-tools)).
    type: path
    default: /opt/gpuforge/benchmark-tools/bin/p2pBandwidthLatencyTest
  node:
    description: Name of this node in C(results) (the playbook passes C(inventory_hostname)); defaults to the host name.
    type: str
  args:
    description: Its arguments (C(--p2p_read), C(--sm_copy), C(--numElems=N) in current samples).
    type: list
    elements: str
    default: []
  output_path:
    description: File to write the raw output to (its directory is created); none by default.
    type: path
  env:
    description: Environment of the run (C(CUDA_VISIBLE_DEVICES), for example).
    type: dict
    default: {}
  timeout:
    description: Seconds before the test is terminated.
    type: int
    default: 600
  expect:
    description:
      - C(sku), C(gpus) (at least this many devices), C(require_p2p) (every pair must have peer access),
        C(min_ratio) (overrides the SKU reference), C(tolerance) (0.9), C(min_unidirectional_gbyte_per_s),
        C(min_bidirectional_gbyte_per_s).
    type: dict
    default: {}
requirements:
  - The CUDA samples' p2pBandwidthLatencyTest built for the installed CUDA (github.com/NVIDIA/cuda-samples)
  - coreutils C(timeout)
notes:
  - The CUDA samples print that they are not meant for performance measurements; the per-SKU references are
    therefore ratios against the same run's P2P=Disabled copies, not absolute figures.
  - A SKU reference holds for the NVLink count of its reference run's pairs (two links per pair for the V100 one).
    Without I(expect.min_ratio) the module reads C(nvidia-smi topo -m) and scales the reference to each pair's own
    NVLink count (the NV1 pairs of a DGX-1 hybrid cube-mesh need half the NV2 ratio; a pair without NVLink needs 1),
    and runs the test with C(CUDA_DEVICE_ORDER=PCI_BUS_ID) (unless I(env) sets it) so that its device numbers are
    nvidia-smi's. Without C(nvidia-smi) or a readable matrix every pair needs the reference as it is.
"""

EXAMPLES = r"""
- name: P2P between the GPUs of each node with the benchmark_tools role's build (Dell EMC Ready Solutions for AI)
  gpuforge.cluster.p2p_bandwidth:
    expect:
      gpus: 4
      require_p2p: true
"""

RETURN = r"""
skipped:
  description: True when the binary is absent (the reason is in C(skip_reason) and C(msg)).
  returned: when the binary is absent
  type: bool
cmd:
  description: The command.
  returned: always
  type: list
  elements: str
p2p:
  description: Parsed output, C({gpus, sku, devices, access, matrices, errors}).
  returned: when it ran
  type: dict
results:
  description:
    - One entry for this node, C({name, nodes, gpus, sku, uni_min_ratio, bi_min_ratio, bi_min_enabled_gbyte_per_s,
      verdict, run_failed}); verdict C(UNKNOWN) (with C(reason)) when the binary is absent or in check mode,
      C(FAIL) with run_failed true when the test produced no result, else the run's verdict.
  returned: always
  type: list
  elements: dict
checks:
  description: Each C({name, status, observed, expected, remedy}).
  returned: when it ran
  type: list
  elements: dict
verdict:
  description: Worst check status, C(PASS) or C(FAIL).
  returned: when it ran
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_common import (
    COMMON_OPTIONS,
    check_common_options,
    finish,
    judge_run,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, UNKNOWN, bench_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError, ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi import parse_topo_matrix
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_p2p import (
    EXPECT,
    REFERENCES,
    judge_p2p,
    nvlinks_by_pair,
    pair_ratios,
    parse_p2p,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, ToolNotRun, this_host


def read_nvlinks(module, expect: dict, parsed: dict):
    """{"i->j": NVLink count} from the node's `nvidia-smi topo -m` when a SKU reference will judge the pairs (no
    min_ratio), else None; None too when nvidia-smi is missing, fails or prints an unreadable matrix (then the
    reference holds for every pair as it is)."""
    if (expect or {}).get("min_ratio") is not None:
        return None
    reference = REFERENCES.get((expect or {}).get("sku") or parsed.get("sku") or "")
    if not reference or not reference.get("nvlinks_per_pair"):
        return None
    try:
        ran = Tool(module, "nvidia-smi", "install the NVIDIA driver", on_error="raise").run(["topo", "-m"], check=True)
        return nvlinks_by_pair(parse_topo_matrix(ran.out))
    except (ToolNotRun, ParseError):
        return None


# Where the benchmark_tools role installs p2pBandwidthLatencyTest: <gpuforge_benchmark_tools_prefix>/bin, the prefix's
# default (roles/gpuforge/defaults/main/benchmark_tools.yml); roles/gpuforge_bench passes gpuforge_bench_p2p_binary.
DEFAULT_BINARY = "/opt/gpuforge/benchmark-tools/bin/p2pBandwidthLatencyTest"


def main():
    module = AnsibleModule(
        argument_spec={
            "binary": {"type": "path", "default": DEFAULT_BINARY},
            "node": {"type": "str"},
            "args": {"type": "list", "elements": "str", "default": []},
            "output_path": {"type": "path"},
            **COMMON_OPTIONS,
            "timeout": {"type": "int", "default": 600},
        },
        supports_check_mode=True,
    )
    params = module.params
    binary = params["binary"]
    node = params["node"] or this_host()
    # FAIL with run_failed until the run gives a verdict: a task that fails below produced no result.
    summary = {"name": f"p2p-{node}", "nodes": [node], "verdict": FAIL, "run_failed": True}
    result = {"changed": False, "cmd": [binary, *params["args"]], "results": [summary]}
    try:
        check_common_options(params, EXPECT)
    except OptionError as exc:
        module.fail_json(msg=str(exc), **result)
    if params["timeout"] < 1:
        module.fail_json(msg=f"timeout must be at least 1 second, got {params['timeout']}", **result)
    if not os.path.isfile(binary):
        reason = (
            f"p2pBandwidthLatencyTest not found at {binary} on {this_host()}: build it with the benchmark_tools "
            "role (playbooks/benchmark_tools.yml, benchmark_tools_enabled: true), or set gpuforge_bench_p2p_binary to "
            "the site's build"
        )
        summary.update(verdict=UNKNOWN, run_failed=False, reason=reason)
        module.exit_json(skipped=True, skip_reason=reason, msg=reason, **result)
    if not os.access(binary, os.X_OK):
        module.fail_json(msg=f"{binary} on {this_host()} is not executable", **result)
    if module.check_mode:
        summary.update(verdict=UNKNOWN, run_failed=False, reason="check mode")
        module.exit_json(**result)
    # CUDA numbers devices fastest first; PCI bus order makes them nvidia-smi's, whose topo -m scales the references.
    environ = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", **(params["env"] or {})}
    run = Tool(module, binary, "check the CUDA samples build", result=result).run_bounded(
        params["args"], params["timeout"], environ=environ
    )

    def judge(parsed):
        checks = judge_p2p(parsed, params["expect"], nvlinks=read_nvlinks(module, params["expect"], parsed))
        if parsed["errors"]:
            checks.append(
                bench_check(
                    "p2p_output",
                    FAIL,
                    parsed["errors"],
                    "every matrix complete",
                    "the output was cut short: rerun the test and check its exit status",
                )
            )
        return checks

    parsed = judge_run(
        module,
        result,
        run,
        parse_p2p,
        judge,
        key="p2p",
        output_path=params["output_path"],
        timed_out=f"p2pBandwidthLatencyTest timed out after {params['timeout']} s",
        failed="p2pBandwidthLatencyTest failed",
        unreadable=lambda exc: f"could not read the p2pBandwidthLatencyTest output: {exc}",
    )
    uni, bi = pair_ratios(parsed, "uni"), pair_ratios(parsed, "bi")
    ratios = (
        [row["ratio"] for row in uni if row["ratio"] is not None],
        [r["ratio"] for r in bi if r["ratio"] is not None],
    )
    summary.update(
        gpus=parsed["gpus"],
        sku=parsed["sku"],
        uni_min_ratio=min(ratios[0]) if ratios[0] else None,
        bi_min_ratio=min(ratios[1]) if ratios[1] else None,
        bi_min_enabled_gbyte_per_s=min((row["enabled_gbyte_per_s"] for row in bi), default=None),
        verdict=result["verdict"],
        run_failed=False,
    )
    finish(module, result, "p2pBandwidthLatencyTest", params["fail_on"])


if __name__ == "__main__":
    main()
