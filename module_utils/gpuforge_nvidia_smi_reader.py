"""Reading a node's GPUs with nvidia-smi: the runs, their order and the fallbacks of nvidia_smi_facts, shared with
gpu_node_check (which reads them itself with gather: true, one module run per node instead of two).

Runs through gpuforge_run.Tool over an AnsibleModule-like object; parsing is gpuforge_nvidia_smi's pure functions.
"""

from __future__ import annotations

import re
import time

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
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, ToolNotRun, missing_tool

__all__ = ["EXIT_HINTS", "NvidiaSmiReader", "unreachable_gpus"]

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

DRIVER_FIX = (
    "the NVIDIA driver is not installed. Fix: run the gpuforge_nvidia_driver role (driver package + nvidia-modprobe)"
)


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


class NvidiaSmiReader:
    """Reads a node's GPUs with nvidia-smi: gather() returns the facts nvidia_smi_facts returns (errors and notes
    in them, never an exception). `module` answers get_bin_path and run_command (an AnsibleModule); `options`
    holds executable, topology, nvlink, clock_event_samples and clock_event_interval_ms (nvidia_smi_facts' options
    of those names)."""

    def __init__(self, module, options: dict):
        self.module = module
        self.params = options
        self.errors: list[str] = []
        self.notes: list[str] = []

    def run(self, binary: str, args: list[str]):
        """(rc, out, err) of nvidia-smi with args; rc 127 and the reason when it cannot be started (removed or not
        executable since get_bin_path found it), which gather() reports among its errors."""
        try:
            return Tool(self.module, binary, DRIVER_FIX, on_error="raise").run(args)
        except ToolNotRun as exc:
            return 127, "", str(exc)

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
            self.errors.append(missing_tool(self.params["executable"], DRIVER_FIX, "PATH"))
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
                {
                    "active_links": n["active_links"],
                    "total_speed_gbyte_per_s": n["total_speed_gbyte_per_s"],
                    "links": n["links"],
                }
                if n
                else None
            )
            e = errors.get(gpu["index"])
            gpu["nvlink_errors"] = e["links"] if e else None
            c = samples.get(gpu["bus_id"])
            gpu["clock_events"] = {"samples": c["samples"], "active": c["active"]} if c else None
