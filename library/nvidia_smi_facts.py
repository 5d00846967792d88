#!/usr/bin/python
"""Ansible module: gather NVIDIA GPU facts from nvidia-smi (-q -x, topo -m, nvlink --status)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpuforge_nvidia_smi import (
    ParseError,
    gpu_product_label,
    parse_nvlink_status,
    parse_query_xml,
    parse_topo_matrix,
)
from ansible.module_utils.gpuforge_run import missing_tool, this_host

DOCUMENTATION = r"""
---
module: nvidia_smi_facts
short_description: Gather NVIDIA GPU facts from nvidia-smi
description:
  - Runs C(nvidia-smi -q -x), C(nvidia-smi topo -m) and C(nvidia-smi nvlink --status) and returns
    C(ansible_facts.nvidia_smi) - driver and CUDA versions, one entry per GPU (model, UUID, bus id,
    memory, ECC mode and counters, page retirement / row remapping state, PCIe generation and width
    current against max, throttle reasons, NVLink state, CPU/NUMA affinity and GPU to NIC topology).
  - C(topo -m) and C(nvlink --status) are optional; when nvidia-smi cannot run them their facts are
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
    description: Also run C(nvidia-smi nvlink --status).
    type: bool
    default: true
  fail_on_error:
    description:
      - Fail when nvidia-smi is missing, exits non-zero (9 driver not loaded, 15 GPU fell off the bus)
        or prints output that cannot be parsed.
      - When false, the module succeeds and the problems are listed in C(nvidia_smi.errors).
    type: bool
    default: true
author:
  - gpuforge
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Gather GPU facts
  nvidia_smi_facts:

- name: Gather what can be read, even on a broken node
  nvidia_smi_facts:
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
        errors:
          description: Problems found (only with fail_on_error=false; otherwise the module fails).
          type: list
          elements: str
        notes:
          description: Optional views that were not available.
          type: list
          elements: str
"""

EXIT_HINTS = {
    9: "the nvidia kernel module is not loaded (NVIDIA-SMI couldn't communicate with the NVIDIA driver). "
    "Fix: load it with 'modprobe nvidia' or nvidia-modprobe; if that fails, rebuild the driver for the "
    "running kernel (DKMS, kernel-devel/headers) and remove nouveau",
    15: "a GPU has fallen off the bus. Fix: drain the node, check the kernel log for Xid 79, then reseat or "
    "power-cycle the GPU",
    6: "no GPU was found. Fix: check that the GPUs are visible on PCI (lspci -d 10de:) and that the "
    "driver supports them",
}


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
        if rc != 0:
            detail = (out or err).strip().splitlines()
            hint = EXIT_HINTS.get(rc, "see the message nvidia-smi printed")
            self.errors.append(
                f"nvidia-smi -q -x exited with code {rc}: {hint}. Output: {' | '.join(detail[:3]) or '(none)'}"
            )
            return facts
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
        self.merge(facts)
        return facts

    @staticmethod
    def merge(facts: dict) -> None:
        """Attach per-GPU topology and NVLink state to each GPU entry (matched by index)."""
        topo = {g["index"]: g for g in (facts["topology"] or {}).get("gpus", [])}
        links = {g["index"]: g for g in (facts["nvlink"] or {}).get("gpus", [])}
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

    def main(self):
        facts = self.gather()
        self.result["ansible_facts"]["nvidia_smi"] = facts
        if self.errors and self.params["fail_on_error"]:
            self.module.fail_json(msg="; ".join(self.errors), **self.result)
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "executable": {"type": "str", "default": "nvidia-smi"},
            "topology": {"type": "bool", "default": True},
            "nvlink": {"type": "bool", "default": True},
            "fail_on_error": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    NvidiaSmiFacts(module).main()


if __name__ == "__main__":
    main()
