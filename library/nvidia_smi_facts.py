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
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpuforge.cluster.nvidia_smi_facts:

- name: Gather what can be read, even on a broken node
  gpuforge.cluster.nvidia_smi_facts:
    fail_on_error: false

- name: Label the node with its GPU model (seed 000 - Tesla-V100-SXM2-16GB)
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
              active_throttle_reasons, ...) plus product_label, nvlink (active_links, total_speed_gbps,
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

import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi import (
    CLOCK_EVENT_FIELDS,
    ParseError,
    gpu_product_label,
    parse_clock_event_samples,
    parse_list_gpus,
    parse_nvlink_errors,
    parse_nvlink_status,
    parse_query_xml,
    parse_topo_matrix,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import missing_tool, this_host

EXIT_HINTS = {
    9: "the nvidia kernel module is not loaded (NVIDIA-SMI couldn't communicate with the NVIDIA driver). "
    "Fix: load it with 'modprobe nvidia' or nvidia-modprobe; if that fails, rebuild the driver for the "
    "running kernel (DKMS, kernel-devel/headers) and remove nouveau",
    15: "a GPU has fallen off the bus. Fix: drain the node, check the kernel log for Xid 79, then reseat or "
    "power-cycle the GPU",
    6: "no GPU was found. Fix: check that the GPUs are visible on PCI (lspci -d 10de:) and that the "
    "driver supports them",
}


UNREACHABLE_RE = re.compile(r"Unable to determine the device handle for GPU ?(?P<bus>[0-9A-Fa-f:.]+?):? (?P<why>.*)$")


def unreachable_gpus(text: str) -> list:
    """[{bus_id, message}] for each 'Unable to determine the device handle for GPU<bus>' line in text."""
    found = []
    for line in (text or "").splitlines():
        match = UNREACHABLE_RE.search(line.strip())
        if match:
            bus = match.group("bus").rstrip(":").upper()
            if len(bus.split(":")[0]) == 4:  # 0000:85:00.0 -> 00000000:85:00.0, the -q -x spelling
                bus = "0000" + bus
            found.append({"bus_id": bus, "message": line.strip()})
    return found


class NvidiaSmiFacts:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.result = {"changed": False, "ansible_facts": {}}

    def run(self, binary: str, args: list[str]):
        try:
            return self.module.run_command([binary, *args], environ_update={"LC_ALL": "C"}, handle_exceptions=False)
        except OSError as exc:  # removed or not executable since get_bin_path found it
            return 127, "", f"{binary} could not be run on {this_host()}: {exc}"

    def optional_view(self, binary: str, args: list[str], parser, what: str):
        rc, out, err = self.run(binary, args)
        text = f"{out}\n{err}"
        if rc != 0 or "not supported" in text.lower():
            self.notes.append(f"nvidia-smi {' '.join(args)} not available (exit {rc}): {(err or out).strip()[:200]}")
            return None
        try:
            return parser(out)
        except ParseError as exc:
            self.errors.append(f"could not read {what}: {exc}")
            return None

    def gather(self) -> dict:
        facts = {
            "driver_version": None,
            "cuda_version": None,
            "gpu_count": 0,
            "gpu_product_label": None,
            "gpus": [],
            "topology": None,
            "nvlink": None,
            "nvlink_errors": None,
            "clock_events": None,
            "unreachable_gpus": [],
            "errors": self.errors,
            "notes": self.notes,
        }
        binary = self.module.get_bin_path(self.params["executable"])
        if not binary:
            fix = (
                "the NVIDIA driver is not installed. "
                "Fix: run the gpuforge_nvidia_driver role (driver package + nvidia-modprobe)"
            )
            self.errors.append(missing_tool(self.params["executable"], fix, "PATH"))
            return facts
        rc, out, err = self.run(binary, ["-q", "-x"])
        lost = unreachable_gpus(f"{out}\n{err}") if rc != 0 else []
        if lost:
            facts["unreachable_gpus"] = lost
            query = self.query_each(binary)
            if query is None:
                return facts
        elif rc != 0:
            detail = (out or err).strip().splitlines()
            hint = EXIT_HINTS.get(rc, "see the message nvidia-smi printed")
            self.errors.append(
                f"nvidia-smi -q -x exited with code {rc}: {hint}. Output: {' | '.join(detail[:3]) or '(none)'}"
            )
            return facts
        else:
            try:
                query = parse_query_xml(out)
            except ParseError as exc:
                self.errors.append(f"could not read nvidia-smi -q -x: {exc}")
                return facts
        facts.update(
            driver_version=query["driver_version"],
            cuda_version=query["cuda_version"],
            gpu_count=query["gpu_count"],
            gpus=query["gpus"],
        )
        if query["gpus"]:
            facts["gpu_product_label"] = gpu_product_label(query["gpus"][0]["product_name"])
        if self.params["topology"]:
            facts["topology"] = self.optional_view(binary, ["topo", "-m"], parse_topo_matrix, "nvidia-smi topo -m")
        if self.params["nvlink"]:
            facts["nvlink"] = self.optional_view(
                binary, ["nvlink", "--status"], parse_nvlink_status, "nvidia-smi nvlink --status"
            )
            facts["nvlink_errors"] = self.optional_view(
                binary, ["nvlink", "-e"], parse_nvlink_errors, "nvidia-smi nvlink -e"
            )
        if self.params["clock_event_samples"] > 0:
            facts["clock_events"] = self.sample_clock_events(binary)
        self.merge(facts)
        return facts

    def query_each(self, binary: str):
        """-q -x of every GPU that still answers (nvidia-smi -L, then -q -x -i N), merged into one log."""
        rc, out, err = self.run(binary, ["-L"])
        try:
            listed = parse_list_gpus(out)
        except ParseError as exc:
            self.errors.append(f"nvidia-smi -L after a GPU fell off the bus: {exc}")
            return None
        merged = None
        for gpu in listed["gpus"]:
            rc, out, err = self.run(binary, ["-q", "-x", "-i", str(gpu["index"])])
            try:
                one = parse_query_xml(out) if rc == 0 else None
            except ParseError as exc:
                self.errors.append(f"could not read nvidia-smi -q -x -i {gpu['index']}: {exc}")
                continue
            if one is None:
                self.errors.append(f"nvidia-smi -q -x -i {gpu['index']} exited with code {rc}: {(out or err)[:200]}")
                continue
            for entry in one["gpus"]:
                entry["index"] = gpu["index"]
            if merged is None:
                merged = one
            else:
                merged["gpus"] += one["gpus"]
        if merged is None:
            self.errors.append("no GPU answered nvidia-smi -q -x -i after one fell off the bus")
            return None
        merged["gpu_count"] = len(merged["gpus"])
        self.notes.append(
            "a GPU fell off the bus: the others were read one by one (nvidia-smi -q -x -i N); see unreachable_gpus"
        )
        return merged

    def sample_clock_events(self, binary: str):
        """Query the clock event reasons clock_event_samples times; new field names first, old on refusal."""
        for prefix, fields in CLOCK_EVENT_FIELDS.items():
            args = [f"--query-gpu={','.join(fields)}", "--format=csv"]
            outputs = []
            for sample in range(self.params["clock_event_samples"]):
                if sample:
                    time.sleep(self.params["clock_event_interval_ms"] / 1000.0)
                rc, out, err = self.run(binary, args)
                if rc == 2 or "is not a valid field" in f"{out}{err}":
                    break  # this driver does not know these field names: try the older ones
                outputs.append(out)
            else:
                try:
                    return parse_clock_event_samples("\n".join(outputs))
                except ParseError as exc:
                    self.errors.append(f"could not read the clock event samples ({prefix}.*): {exc}")
                    return None
        self.notes.append("nvidia-smi knows neither clocks_event_reasons.* nor clocks_throttle_reasons.* fields")
        return None

    @staticmethod
    def merge(facts: dict) -> None:
        """Attach per-GPU topology, NVLink state and counters (matched by index) and clock event samples
        (matched by bus id) to each GPU entry."""
        topo = {g["index"]: g for g in (facts["topology"] or {}).get("gpus", [])}
        links = {g["index"]: g for g in (facts["nvlink"] or {}).get("gpus", [])}
        errors = {g["index"]: g for g in (facts["nvlink_errors"] or {}).get("gpus", [])}
        samples = {g["bus_id"]: g for g in (facts["clock_events"] or {}).get("gpus", [])}
        for gpu in facts["gpus"]:
            gpu["product_label"] = gpu_product_label(gpu["product_name"] or "")
            t = topo.get(gpu["index"], {})
            gpu["cpu_affinity"] = t.get("cpu_affinity")
            gpu["numa_affinity"] = t.get("numa_affinity")
            gpu["nics"] = t.get("nics", {})
            gpu["peers"] = t.get("links", {})
            n = links.get(gpu["index"])
            gpu["nvlink"] = (
                {"active_links": n["active_links"], "total_speed_gbps": n["total_speed_gbps"], "links": n["links"]}
                if n
                else None
            )
            e = errors.get(gpu["index"])
            gpu["nvlink_errors"] = e["links"] if e else None
            c = samples.get(gpu["bus_id"])
            gpu["clock_events"] = {"samples": c["samples"], "active": c["active"]} if c else None

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
