#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: judge one GPU node against its expected hardware spec (thin wrapper)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_node_check
short_description: Judge a GPU node against its expected hardware spec
description:
  - Compares the facts of C(nvidia_smi_facts) and C(infiniband_facts) (given, or read here with O(gather)), the loaded
    kernel modules and the kernel log with an expected spec and returns one check per property - GPU count and model,
    driver branch, persistence mode, ECC, volatile double-bit errors, lifetime SRAM/DRAM ECC counts, row remapping
    (pending, failure, uncorrectable remaps over the limit), retired pages, PCIe link, clock event reasons over a
    sampling window, Xid events by NVIDIA's Xid catalogue, NVLinks active and their error counters, HCAs present, port
    state and rate, InfiniBand link flaps in the log (IPoIB C(Lost carrier) and mlx5 C(Link down) lines per netdev),
    nvidia-peermem loaded, GPU to HCA NUMA affinity.
  - NVSwitch systems (I(expected.nvswitch)) - NVSwitch SXid errors in the kernel log (a fatal SXid fails, a
    non-fatal one warns; NVIDIA Fabric Manager User Guide, NVSwitch SXid Errors), and the fabric manager - the
    C(nvidia-fabricmanager) service active and every GPU's fabric state C(Completed) where nvidia-smi reports one.
  - PCIe (when I(pcie) is true) - the negotiated link of every HCA against its capability (C(lspci -vvv) LnkSta
    against LnkCap), the kernel's C(available PCIe bandwidth, limited by) reports for GPUs and HCAs, the AER
    counters of GPUs and HCAs (sysfs C(aer_dev_correctable), C(aer_dev_nonfatal), C(aer_dev_fatal)), and on
    bare metal (not I(expected.virtual)) ACS enabled on the PCIe bridges above them, which breaks GPUDirect
    peer-to-peer traffic (NCCL troubleshooting guide, PCI Access Control Services).
  - Returns the P_Keys of every HCA port (sysfs C(pkeys)) in C(pkeys), for the cross-node comparison of
    C(fleet_consistency).
  - Every GPU verdict names the board by PCI bus ID (and serial). A GPU that fell off the bus is failed by
    name while the others are still judged; a check that fails only because another failed (the GPU
    count, the Xid 79 that reports it) names that check in C(caused_by) and is not counted again.
  - Facts that are missing or cannot be read give a failed C(*_readable) check naming what could not
    be read; the module itself does not fail, so a broken node yields a report, not an aborted play.
  - Runs C(lsmod), C(dmesg) and C(lspci -vvv -D) (as root - lspci hides capabilities from other users) when
    I(lsmod) / I(kernel_log) / I(lspci) are not given, C(systemctl is-active nvidia-fabricmanager) on NVSwitch
    systems when I(fabric_manager) is not given, and reads sysfs under I(sysfs_root). Reads only; check mode runs
    the same commands, but no diagnostic of O(diagnostics).
options:
  nvidia_smi:
    description: The C(ansible_facts.nvidia_smi) dict of the nvidia_smi_facts module. Not with O(gather).
    type: dict
  infiniband:
    description: The C(ansible_facts.infiniband) dict of the infiniband_facts module. Not with O(gather).
    type: dict
  gather:
    description:
      - Read the node's GPUs and RDMA adapters here instead of taking O(nvidia_smi) and O(infiniband) - the runs of
        C(nvidia_smi_facts) with C(fail_on_error=false) (C(nvidia-smi -q -x), C(topo -m), C(nvlink --status),
        C(nvlink -e), the clock event samples) and of C(infiniband_facts) with C(fail_on_missing=false) (C(ibstat),
        C(ibv_devinfo -v), C(ibdev2netdev), C(ofed_info -s)) - judge them, and return them as
        C(ansible_facts.nvidia_smi) and C(ansible_facts.infiniband), the facts those modules return.
      - A tool that cannot be read is a failed C(nvidia_smi_readable) or C(infiniband_readable) check, not a
        failed task.
    type: bool
    default: false
  clock_event_samples:
    description:
      - With O(gather) - how many times to read the GPUs' clock event reasons (C(nvidia_smi_facts) option of the
        same name); C(0) reads none.
    type: int
    default: 20
  clock_event_interval_ms:
    description: With O(gather) - milliseconds between two clock event samples.
    type: int
    default: 500
  diagnostics:
    description:
      - Diagnostics to run after the node's own checks, in this order - C(dcgm) (the DCGM diagnostic, check
        C(dcgm_diag)), C(nvbandwidth) (host<->GPU copies, check C(nvbandwidth)) and C(gdr) (an ib_write_bw loopback
        from GPU memory per HCA port, check C(gdr_ib_write_bw)). A key's value holds the options of the module of
        the same run - C(dcgm_diag), C(nvbandwidth), C(gdr_loopback_bw) (see theirs); a key that is absent is not
        run.
      - Their C(gpus) default to the GPUs judged here, C(gdr)'s C(node_checks) to this module's own checks (a port
        that fails because a node check already failed names it in C(caused_by)).
      - Their checks join RV(records) and decide RV(verdict), RV(healthy) and RV(failed_checks); each one's result
        is in RV(diagnostics).
      - A diagnostic that cannot run or be judged (its tool missing or not starting, a non-zero exit without a
        result, a timeout, output that cannot be read, a threshold not set) gives its check C(FAIL) - the node was
        not validated - with the reason, naming the host, in C(fault) and the fix, naming the role or variable, in
        C(remedy); the node's other checks and the other diagnostics are still judged and returned, so one
        missing tool does not cost the node its records. Its result in RV(diagnostics) holds C(ran=false),
        C(healthy=false) and the reason in C(msg).
    type: dict
    default: {}
  lsmod:
    description: Output of C(lsmod); when omitted the module runs C(lsmod).
    type: str
  kernel_log:
    description: Kernel log text (C(dmesg) or C(journalctl -k)); when omitted the module runs C(dmesg).
    type: str
  lspci:
    description: Output of C(lspci -vvv); when omitted the module runs C(lspci -vvv -D).
    type: str
  fabric_manager:
    description:
      - State of the nvidia-fabricmanager service as C(systemctl is-active nvidia-fabricmanager) prints it
        (C(active), C(inactive), C(failed), ...); when omitted on an NVSwitch system the module runs that command.
      - Not read on systems without NVSwitch.
    type: str
  pcie:
    description: Run the PCIe checks (lspci, kernel link reports, AER, ACS) and read the P_Keys.
    type: bool
    default: true
  sysfs_root:
    description:
      - Where sysfs is mounted; AER counters are read from C(<sysfs_root>/bus/pci/devices/<address>/aer_dev_*),
        the bridges above a device from the path C(<sysfs_root>/bus/pci/devices/<address>) links to, HCAs and
        their P_Keys from C(<sysfs_root>/class/infiniband/<hca>/device) and C(.../ports/<n>/pkeys/<index>).
      - The lab points it at the tree its simulated lspci writes.
    type: path
    default: /sys
  system:
    description:
      - The name of the expected system the node is judged against (a key of C(gpuforge_expected_systems)), returned
        as RV(system) so that what reports the verdict names the system this run used (a play variable never reaches
        another host's C(hostvars)).
    type: str
  node:
    description:
      - The name the records give the node (playbooks pass C(inventory_hostname)); the node's host name when not given.
    type: str
  expected:
    description:
      - The expected spec - a GPU SKU entry of C(gpuforge_expected_gpu_skus) combined with the system
        entry of C(gpuforge_expected_systems) (roles/gpuforge/defaults/main/expected_hardware.yml).
      - Keys - gpu_count, gpu_model, driver_branch, persistence_mode (bool), ecc (bool),
        retired_pages_max, pcie_gen_max, pcie_width_max, nvlink_links, xid_fatal (list of codes that
        always fail), xid_fail_actions (Xid action classes that fail), remap_uncorrectable_max,
        sram_uncorrectable_max, sram_correctable_max, dram_errors_max, clock_event_reasons,
        clock_event_max_fraction, clock_event_min_samples, nvlink_error_max (counter name to per-link max),
        hcas (list of name and ports with port and link, or rate_gbit_per_s and link_layer), link_speeds
        (link name to rate_gbit_per_s and link_layer), peermem (bool), numa_affinity (list of gpus, hcas, numa),
        ib_link_flaps_max (link-down events of one netdev in the log that still pass; more fail),
        virtual (bool; a virtual machine - PCIe ACS is not judged), nvswitch (bool; an NVSwitch system - SXid
        and fabric manager are judged), pcie_aer_uncorrectable_max and
        pcie_aer_correctable_max (AER errors per device that still pass).
      - Keys that are absent are not checked.
    type: dict
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: Reads state only; check mode runs the same reads, not the diagnostics (their results say so).
"""

EXAMPLES = r"""
- name: Gather what can be read, even on a broken node
  gpuforge.cluster.nvidia_smi_facts:
    fail_on_error: false

- name: Gather InfiniBand facts
  gpuforge.cluster.infiniband_facts:
    fail_on_missing: false

- name: Judge the node
  gpuforge.cluster.gpu_node_check:
    nvidia_smi: "{{ ansible_facts.nvidia_smi }}"
    infiniband: "{{ ansible_facts.infiniband }}"
    expected: "{{ gpuforge_expected_gpu_skus[system.gpu_sku] | combine(system) }}"
  vars:
    system: "{{ gpuforge_expected_systems['dgx1-v100-edr'] }}"
  register: node_check

- name: Read the GPUs and adapters and judge the node in one module run (facts returned as ansible_facts)
  gpuforge.cluster.gpu_node_check:
    gather: true
    clock_event_samples: 20
    expected: "{{ gpuforge_expected_gpu_skus[system.gpu_sku] | combine(system) }}"
  vars:
    system: "{{ gpuforge_expected_systems['dgx1-v100-edr'] }}"
  register: node_check

- name: Judge the node, then run the DCGM diagnostic and nvbandwidth in the same module run
  gpuforge.cluster.gpu_node_check:
    gather: true
    expected: "{{ gpuforge_expected_gpu_skus[system.gpu_sku] | combine(system) }}"
    diagnostics:
      dcgm: {level: 1}
      nvbandwidth: {thresholds: {h2d: 20.0, d2h: 20.0}}
  vars:
    system: "{{ gpuforge_expected_systems['dgx1-v100-edr'] }}"
  register: node_check

- name: Stop on an unhealthy node
  ansible.builtin.assert:
    that: node_check.healthy
    fail_msg: "failed checks: {{ node_check.failed_checks | join(', ') }}"
"""

RETURN = r"""
verdict:
  description:
    - The node's verdict over its records (gpuforge_records.node_verdicts, the one verdict function) - C(PASS),
      C(WARN) (warnings only - healthy for scheduling, flagged), C(FAIL), or C(UNKNOWN) (part of it not judged).
  returned: always
  type: str
  sample: FAIL
healthy:
  description: The verdict's C(healthy) - true unless the verdict is C(FAIL) (a C(WARN) node is healthy, flagged).
  returned: always
  type: bool
  sample: false
caused_failures:
  description: The verdict's failed checks whose failure another failed check explains - check name to root cause(s).
  returned: always
  type: dict
  sample: {gpu_count: gpu_fallen_off_bus}
failed_checks:
  description: The verdict's failed checks that are root causes (see caused_failures for the others).
  returned: always
  type: list
  elements: str
  sample: [ecc_volatile_dbe, xid]
reasons:
  description: The verdict's records that are not C(PASS) - C(verdict), C(what) (C(check <name>)), C(remedy).
  returned: always
  type: list
  elements: dict
  sample: [{verdict: FAIL, what: check xid, remedy: Drain the node}]
node:
  description: O(node) as given, else the node's host name; the records name it.
  returned: always
  type: str
  sample: gpu01
checked_at:
  description: When the node was judged (UTC, ISO 8601, the node's clock); the records carry it.
  returned: always
  type: str
  sample: "2026-11-28T10:00:00Z"
ansible_facts:
  description:
    - With O(gather) - C(nvidia_smi) and C(infiniband), what the nvidia_smi_facts and infiniband_facts modules return
      in C(ansible_facts) (see theirs).
  returned: when O(gather) is true
  type: dict
  sample: {nvidia_smi: {driver_version: 535.183.01, gpu_count: 8, gpus: [], errors: []},
           infiniband: {available: true, active_ports: [mlx5_0/1], hcas: [], errors: []}}
diagnostics:
  description:
    - Per diagnostic of O(diagnostics) that ran (C(dcgm), C(nvbandwidth), C(gdr)) - what its module returns (see
      C(dcgm_diag), C(nvbandwidth), C(gdr_loopback_bw)), and C(checked_at), when it ended (UTC, ISO 8601, the
      node's clock).
    - One that could not run or be judged - C(ran=false), C(healthy=false), C(msg) (why), C(check) (its failed
      check) and what its module had gathered (C(cmd), C(rc)).
  returned: always
  type: dict
  sample: {dcgm: {ran: true, healthy: true, check: {name: dcgm_diag, status: PASS}, checked_at: "2026-11-28T10:00:00Z"}}
system:
  description: O(system) as given (null when not).
  returned: always
  type: str
  sample: dgx-h100
pkeys:
  description: HCA port (C(hca/port)) to the sorted P_Keys in use in its P_Key table (empty when not read).
  returned: always
  type: dict
  sample: {mlx5_0/1: ["0xffff"]}
records:
  description:
    - One C(node_check) record per check (schemas/node-check.schema.json, schema_version 1), written by
      playbooks/validate.yml as they are. Check names are stable, each an entry of the check registry
      (module_utils/gpuforge_registry.py CHECK_NAMES) - first those judged together - nvidia_smi_readable,
      infiniband_readable, lsmod_readable, kernel_log_readable, gpu_count, gpu_model, gpu_fallen_off_bus,
      driver_branch, persistence_mode, ecc_enabled, ecc_volatile_dbe, ecc_aggregate, row_remap, retired_pages,
      pcie_link, throttle, xid, nvlink_active, nvlink_errors, hcas_present, ib_port_state, ib_port_rate,
      ib_link_flaps, peermem_loaded, gpu_hca_affinity, lspci_readable, pcie_link_hca, pcie_link_limited, pcie_aer,
      pcie_acs, sxid, fabric_manager; then the registry's standalone checks, in registry order; then those of
      O(diagnostics) - dcgm_diag, nvbandwidth, gdr_ib_write_bw.
    - Checks whose spec key is absent (or whose input could not be read) are left out.
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: C(node_check).
      type: str
    schema_version:
      description: The record format's version, 1.
      type: int
    run_id:
      description: Null here; the report's loader sets the run's id.
      type: str
    node:
      description: The node (O(node)).
      type: str
    check:
      description: Check name.
      type: str
    system:
      description: O(system).
      type: str
    checked_at:
      description: When the node was judged.
      type: str
    verdict:
      description: C(PASS), C(WARN) or C(FAIL) (C(UNKNOWN) - not judged).
      type: str
    observed:
      description: What the node shows (per GPU bus ID or C(hca/port) where it concerns some of them).
      type: raw
    threshold:
      description: C(expected), what the spec asks for, and C(source), where that comes from.
      type: dict
    fault:
      description: What is wrong (empty when it passed).
      type: str
    remedy:
      description: What to do about it (empty when it passed).
      type: str
    caused_by:
      description: The failed checks this failure follows from (empty when it is a root cause or passed).
      type: list
      elements: str
  sample:
    - kind: node_check
      schema_version: 1
      run_id: null
      node: gpu01
      check: ecc_volatile_dbe
      system: dgx1-v100-edr
      checked_at: "2026-11-28T10:00:00Z"
      verdict: FAIL
      observed: {"00000000:07:00.0": 2}
      threshold: {expected: 0, source: expected hardware spec}
      fault: volatile uncorrectable (double-bit) ECC errors on 00000000:07:00.0 (GPU 1, serial 0321618000101)
      remedy: Drain the node and reset the GPU (nvidia-smi -r) or reboot; RMA if they come back
      caused_by: []
"""

import os
import platform
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, node_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_diagnostics import (
    DCGM_ARGUMENT_SPEC,
    GDR_ARGUMENT_SPEC,
    NVBANDWIDTH_ARGUMENT_SPEC,
    GdrLoopback,
    run_dcgm,
    run_nvbandwidth,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_infiniband_reader import (
    InfinibandReader,
    InfinibandReadError,
    unavailable,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_kernel import (
    ParseError,
    parse_lsmod,
    parse_sxid_events,
    parse_xid_events,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_node_health import (
    check_expected,
    judge_node,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi_reader import NvidiaSmiReader
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_pcie import (
    AER_KINDS,
    parse_aer,
    parse_link_limited,
    parse_lspci,
    parse_pkey,
    pci_address,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perfquery import parse_link_flaps
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_records import node_report
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_registry import SOURCES, read_file, standalone
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, ToolNotRun

# What installs each command the module runs when its text is not given.
TOOL_FIXES = {
    "lsmod": "install kmod, or pass lsmod",
    "dmesg": "install util-linux, or pass kernel_log (journalctl -k)",
    "lspci": "install pciutils, or pass lspci",
    "systemctl": "run the check on a systemd host, or pass fabric_manager",
}
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"
# The diagnostics of the diagnostics option, in the order they run: name -> (its module's argument spec, runner).
DIAGNOSTICS = {
    "dcgm": (DCGM_ARGUMENT_SPEC, run_dcgm),
    "nvbandwidth": (NVBANDWIDTH_ARGUMENT_SPEC, run_nvbandwidth),
    "gdr": (GDR_ARGUMENT_SPEC, lambda module, params: GdrLoopback(module, params).run()),
}
ACCESS_DENIED = "<access denied>"  # lspci's capability line when not run as root
# The check each diagnostic emits, and the fix when it could not run: its tool not installed (the role or variable
# that installs or names it, and the validate.yml variable that leaves it out), or installed but not judged.
DIAGNOSTIC_CHECKS = {"dcgm": "dcgm_diag", "nvbandwidth": "nvbandwidth", "gdr": "gdr_ib_write_bw"}
NOT_INSTALLED_FIXES = {
    "dcgm": "install DCGM with the nvidia_driver role (nvidia_driver_dcgm_enabled: true), or leave the diagnostic "
    "out with gpuforge_validate_dcgm: false",
    "nvbandwidth": "build it with the benchmark_tools role (playbooks/benchmark_tools.yml), or set "
    "gpuforge_nvbandwidth_executable to the site's build; gpuforge_validate_nvbandwidth: false leaves it out",
    "gdr": "install perftest built with CUDA (NVIDIA's perftest package of DOCA/MLNX_OFED, or perftest from source), "
    "or set gpuforge_gdr_executable to the site's build; gpuforge_validate_gdr: false leaves it out",
}
NOT_JUDGED_FIXES = {
    "dcgm": "check the GPUs (nvidia-smi) and nv-hostengine (systemctl status nvidia-dcgm, "
    "/var/log/nvidia-dcgm/nv-hostengine.log), then run validate.yml again",
    "nvbandwidth": "check the driver (nvidia-smi) and that nvbandwidth was built for this CUDA version (the "
    "benchmark_tools role rebuilds it), set gpuforge_expected_nvbandwidth for the SKU, then run validate.yml again",
    "gdr": "check the HCA ports (ibstat), nvidia-peermem (lsmod) and the gpuforge_gdr_* settings, then run "
    "validate.yml again",
}


def _read(path):
    """The text of a sysfs file, None when it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def sysfs_hcas(root) -> dict:
    """{PCI address: HCA name} from <root>/class/infiniband/<hca>/device links."""
    base = os.path.join(root, "class", "infiniband")
    found = {}
    for name in _listdir(base):
        address = pci_address(os.path.basename(os.path.realpath(os.path.join(base, name, "device"))))
        if address:
            found[address] = name
    return found


def sysfs_upstream(root, addresses) -> dict:
    """{address: [bridge addresses above it, root first]} from the device path <root>/bus/pci/devices/<a>
    links to (/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0: 0000:00:01.0 is above 0000:01:00.0)."""
    found = {}
    for address in addresses:
        link = os.path.join(root, "bus", "pci", "devices", address)
        if not os.path.exists(link):
            continue
        parts = [pci_address(p) for p in os.path.realpath(link).split(os.sep) if "." in p]
        found[address] = [p for p in parts if p and p != address]
    return found


def sysfs_aer(root, addresses) -> dict:
    """{address: {correctable|nonfatal|fatal: parse_aer()}} for the devices whose AER files exist."""
    found = {}
    for address in addresses:
        files = {}
        for kind in AER_KINDS:
            text = _read(os.path.join(root, "bus", "pci", "devices", address, f"aer_dev_{kind}"))
            if text is not None:
                files[kind] = parse_aer(text)
        if files:
            found[address] = files
    return found


def sysfs_pkeys(root) -> dict:
    """{"<hca>/<port>": sorted P_Keys in use} of every port under <root>/class/infiniband."""
    base = os.path.join(root, "class", "infiniband")
    found = {}
    for hca in _listdir(base):
        for port in _listdir(os.path.join(base, hca, "ports")):
            table = os.path.join(base, hca, "ports", port, "pkeys")
            keys = {parse_pkey(_read(os.path.join(table, index))) for index in _listdir(table)}
            found[f"{hca}/{port}"] = sorted(k for k in keys if k)
    return found


def netdevs(infiniband) -> list:
    """Network devices of the HCA ports in the infiniband facts (ibdev2netdev), for the link-flap scan."""
    hcas = (infiniband or {}).get("hcas") if isinstance(infiniband, dict) else None
    return [
        p.get("netdev")
        for h in hcas or []
        if isinstance(h, dict)
        for p in h.get("ports") or []
        if isinstance(p, dict) and p.get("netdev")
    ]


def pcie_inputs(devices, log, root, nvidia_smi) -> dict:
    """judge_node's `pcie` input: parsed lspci (devices), the kernel's link reports in the log, and the HCAs,
    AER counters and bridges above each GPU and HCA from sysfs under root."""
    hcas = sysfs_hcas(root)
    smi = nvidia_smi if isinstance(nvidia_smi, dict) else {}
    listed = [
        v for key in ("gpus", "unreachable_gpus") for v in (smi.get(key) if isinstance(smi.get(key), list) else [])
    ]
    gpus = [g for g in listed if isinstance(g, dict)]
    addresses = sorted({pci_address(g.get("bus_id")) for g in gpus if pci_address(g.get("bus_id"))} | set(hcas))
    return {
        "lspci": devices or {},
        "hcas": hcas,
        "limited": parse_link_limited(log) if log is not None else [],
        "aer": sysfs_aer(root, addresses),
        "upstream": sysfs_upstream(root, addresses),
    }


class DiagnosticNotRun(Exception):
    """A diagnostic that ended where its own module fails (DiagnosticModule.fail_json): msg, what it had gathered
    (partial) and the tools it looked for and did not find (missing)."""

    def __init__(self, msg: str, partial: dict, missing: list):
        super().__init__(msg)
        self.msg, self.partial, self.missing = msg, partial, missing


class DiagnosticModule:
    """The module as one diagnostic sees it. Where the diagnostic's own module fails (a missing tool, a timeout,
    unreadable output), fail_json raises DiagnosticNotRun instead of ending the module: the diagnostic's check
    fails, naming why, and the node's other checks are still returned (one missing nvbandwidth used to cost the
    node every record). get_bin_path notes the tools that are not there, whose fix is to install them."""

    def __init__(self, module: AnsibleModule, name: str):
        self.module = module
        self.name = name
        self.missing: list[str] = []

    def __getattr__(self, attribute):
        return getattr(self.module, attribute)

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        found = self.module.get_bin_path(arg, required=required, opt_dirs=opt_dirs)
        if not found:
            self.missing.append(arg)
        return found

    def fail_json(self, msg: str, **partial):
        raise DiagnosticNotRun(msg, partial, list(self.missing))


def not_run_check(name: str, problem: DiagnosticNotRun) -> dict:
    """The FAIL check of a diagnostic that could not run or be judged: the reason (its module's message, which
    names the host) and the fix - install the tool where it was missing, else what to look at."""
    check = DIAGNOSTIC_CHECKS[name]
    # A tool looked for and not found that this failure names (gdr looks for numactl, and runs without it).
    missing = [tool for tool in problem.missing if os.path.basename(tool) in problem.msg]
    remedy = f"{', '.join(missing)} not found: {NOT_INSTALLED_FIXES[name]}" if missing else NOT_JUDGED_FIXES[name]
    observed = {"ran": False, "rc": problem.partial.get("rc")}
    expected = f"{name} runs and its output is judged"
    return node_check(check, FAIL, observed, expected, f"{check} not judged: {problem.msg}", remedy)


class GpuNodeCheck:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.unreadable: dict[str, str] = {}
        self.nvidia_smi = None  # the facts judged: given, or read with gather
        self.node = self.params["node"] or platform.node()
        self.checked_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def run_tool(self, source: str, command: str, args: list):
        """(rc, out, err) of command with args (gpuforge_run.Tool); None, with the problem (missing, cannot start)
        noted under source, when it cannot be run."""
        try:
            tool = Tool(self.module, command, TOOL_FIXES[command], on_error="raise")
            tool.require()
            return tool.run(args)
        except ToolNotRun as exc:
            self.unreadable[source] = str(exc)
            return None

    def text(self, source: str, command: str) -> str | None:
        """The given text, else the output of running `command`; None (and a note) when it fails."""
        if self.params[source] is not None:
            return self.params[source]
        ran = self.run_tool(source, command, [])
        if ran is None:
            return None
        rc, out, err = ran
        if rc != 0:
            self.unreadable[source] = f"{command} exited with code {rc}: {(err or out).strip()[:200]}"
            return None
        return out

    def gather(self) -> dict:
        """ansible_facts.nvidia_smi and .infiniband read on the node as the two facts modules read them, neither
        failing: what could not be read is in their errors (their *_readable checks)."""
        smi = NvidiaSmiReader(
            self.module,
            {
                "executable": "nvidia-smi",
                "topology": True,
                "nvlink": True,
                "clock_event_samples": self.params["clock_event_samples"],
                "clock_event_interval_ms": self.params["clock_event_interval_ms"],
            },
        ).gather()
        try:
            infiniband = InfinibandReader(self.module, {"fail_on_missing": False, "devinfo": True}).facts()
        except InfinibandReadError as exc:
            infiniband = unavailable(str(exc))
        return {"nvidia_smi": smi, "infiniband": infiniband}

    def diagnostic_options(self) -> dict:
        """{name: its validated options} of the diagnostics option, in the order they run; a bad option fails the
        module before anything is read."""
        given = self.params["diagnostics"] or {}
        unknown = sorted(set(given) - set(DIAGNOSTICS))
        if unknown:
            self.module.fail_json(
                msg=f"diagnostics: unknown {', '.join(unknown)}; the diagnostics are {', '.join(DIAGNOSTICS)}"
            )
        options = {}
        for name, (spec, _run) in DIAGNOSTICS.items():
            if name not in given:
                continue
            if not isinstance(given[name], dict):
                self.module.fail_json(msg=f"diagnostics.{name}: a dict of its module's options, got {given[name]!r}")
            validated = ArgumentSpecValidator(spec).validate(given[name])
            if validated.error_messages:
                self.module.fail_json(msg=f"diagnostics.{name}: {'; '.join(validated.error_messages)}")
            options[name] = (validated.validated_parameters, set(given[name]))
        return options

    def run_diagnostics(self, options: dict, result: dict) -> None:
        """Run each diagnostic; its result goes to result['diagnostics'], its check joins the node's checks, whose
        records and verdict are made again (gpuforge_records.node_report) as judge_node makes its own."""
        gpus = (self.nvidia_smi or {}).get("gpus") or []
        gpu_count = (self.nvidia_smi or {}).get("gpu_count") or 0
        own_records = list(result["records"])
        for name, (params, given) in options.items():
            if "gpus" not in given:
                params["gpus"] = gpus
            if name == "gdr" and "node_checks" not in given:
                params["node_checks"] = own_records
            if name == "nvbandwidth" and gpu_count < 2 and "p2p" in params["testcases"]:
                params["testcases"] = [case for case in params["testcases"] if case != "p2p"]  # needs two GPUs
            outcome = self.diagnostic(name, params)
            outcome["checked_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            result["diagnostics"][name] = outcome
            if isinstance(outcome.get("check"), dict):  # none when not run (check mode, nothing to measure)
                result["checks"].append(outcome["check"])
        result.update(node_report(result["checks"], self.node, self.params["system"], self.checked_at))

    def diagnostic(self, name: str, params: dict) -> dict:
        """The result of one diagnostic; one that cannot run or be judged is a result with its failed check."""
        module = DiagnosticModule(self.module, name)
        try:
            return DIAGNOSTICS[name][1](module, params)
        except DiagnosticNotRun as problem:
            return {
                **problem.partial,
                "msg": problem.msg,
                "ran": False,
                "healthy": False,
                "check": not_run_check(name, problem),
            }
        except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
            # A parser or judge that met output it does not expect: the check fails naming it, the node's other
            # checks stand (never a traceback that costs the node its records).
            problem = DiagnosticNotRun(
                f"gpuforge could not judge {name}'s output on {self.node}: {type(exc).__name__}: {exc}",
                {},
                module.missing,
            )
            return {"msg": problem.msg, "ran": False, "healthy": False, "check": not_run_check(name, problem)}

    def main(self):
        try:
            expected = check_expected(self.params["expected"])
        except OptionError as exc:
            self.module.fail_json(msg=str(exc))
        diagnostics = self.diagnostic_options()
        facts = {}
        if self.params["gather"]:
            if self.params["nvidia_smi"] is not None or self.params["infiniband"] is not None:
                self.module.fail_json(
                    msg="gather: true reads nvidia_smi and infiniband on the node: give gather or those facts, not both"
                )
            facts = self.gather()
        self.nvidia_smi = facts["nvidia_smi"] if facts else self.params["nvidia_smi"]
        infiniband = facts["infiniband"] if facts else self.params["infiniband"]
        lsmod = None
        lsmod_text = self.text("lsmod", "lsmod")
        if lsmod_text is not None:
            try:
                lsmod = parse_lsmod(lsmod_text)
            except ParseError as exc:
                self.unreadable["lsmod"] = str(exc)
        log = self.text("kernel_log", "dmesg")
        events = parse_xid_events(log) if log is not None else []
        flaps = parse_link_flaps(log, netdevs(infiniband)) if log is not None else None
        pcie, pkeys = (self.pcie_inputs(log), self.pkeys()) if self.params["pcie"] else (None, {})
        nvswitch = bool(expected.get("nvswitch"))
        result = judge_node(
            self.nvidia_smi,
            infiniband,
            lsmod,
            events,
            expected,
            unreadable=self.unreadable,
            link_flaps=flaps,
            pcie=pcie,
            sxid_events=parse_sxid_events(log) if log is not None and nvswitch else None,
            fabric_manager=self.fabric_manager() if nvswitch else None,
        )
        for check in standalone():  # the registry's other checks whose spec keys are given, from their sources
            if any(key in expected for key in check.expected):
                result["checks"].append(check.judge(self.sources(check.needs), expected))
        result.update(node_report(result["checks"], self.node, self.params["system"], self.checked_at))
        result["diagnostics"] = {}
        if diagnostics:
            self.run_diagnostics(diagnostics, result)
        del result["checks"]  # the records are the result: node_check_record of each check
        if facts:
            result["ansible_facts"] = facts
        result.update(pkeys=pkeys, system=self.params["system"], node=self.node, checked_at=self.checked_at)
        self.module.exit_json(changed=False, **result)

    def lspci(self):
        """Parsed `lspci -vvv -D` (or the given text); None and a note when it cannot be read."""
        text = self.params["lspci"]
        if text is None:
            ran = self.run_tool("lspci", "lspci", ["-vvv", "-D"])
            if ran is None:
                return None
            rc, text, err = ran
            if rc != 0:
                self.unreadable["lspci"] = f"lspci exited with code {rc}: {(err or text).strip()[:200]}"
                return None
        if ACCESS_DENIED in text:
            self.unreadable["lspci"] = "lspci shows 'Capabilities: <access denied>': run the check as root (become)"
            return None
        return parse_lspci(text)

    def fabric_manager(self):
        """`systemctl is-active nvidia-fabricmanager` (or the given state); None and a note when it cannot run.
        is-active exits non-zero for every state but active and still prints the state."""
        if self.params["fabric_manager"] is not None:
            return self.params["fabric_manager"]
        ran = self.run_tool("fabric_manager", "systemctl", ["is-active", FABRIC_MANAGER_UNIT])
        if ran is None:
            return None
        rc, out, err = ran
        state = (out or "").strip().splitlines()
        if not state:
            self.unreadable["fabric_manager"] = (
                f"systemctl is-active exited with code {rc}: {(err or '').strip()[:200]}"
            )
            return None
        return state[0].strip()

    def pcie_inputs(self, log) -> dict:
        """The PCIe inputs of judge_node: lspci is run first (the lab's lspci writes its sysfs tree)."""
        devices = self.lspci()
        return pcie_inputs(devices, log, self.params["sysfs_root"], self.nvidia_smi)

    def sources(self, needs) -> dict:
        """{name: text or gpuforge_registry.Unreadable} of the sources a standalone registered check needs: its
        files, read under the node's root (sysfs_root's parent: / on a node, the simulated tree in the lab)."""
        root = os.path.dirname(os.path.normpath(self.params["sysfs_root"])) or "/"
        found = {}
        for name in needs:
            source = SOURCES[name]
            if name == "nvidia_smi":  # the facts judge_node read (vgpu_license reads each GPU's licence from them)
                found[name] = self.nvidia_smi
                continue
            if source.kind != "file":
                self.module.fail_json(msg=f"registered source {name!r} is a {source.kind} source, not a file")
            found[name] = read_file(root, source.read)
        return found

    def pkeys(self) -> dict:
        return sysfs_pkeys(self.params["sysfs_root"])


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "dict"},
            "infiniband": {"type": "dict"},
            "gather": {"type": "bool", "default": False},
            "diagnostics": {"type": "dict", "default": {}},
            "clock_event_samples": {"type": "int", "default": 20},
            "clock_event_interval_ms": {"type": "int", "default": 500},
            "lsmod": {"type": "str"},
            "kernel_log": {"type": "str"},
            "lspci": {"type": "str"},
            "fabric_manager": {"type": "str"},
            "pcie": {"type": "bool", "default": True},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "system": {"type": "str"},
            "node": {"type": "str"},
            "expected": {"type": "dict", "required": True},
        },
        supports_check_mode=True,
    )
    GpuNodeCheck(module).main()


if __name__ == "__main__":
    main()
