"""Simulated NVIDIA nvbandwidth (github.com/NVIDIA/nvbandwidth): `nvbandwidth [-t <testcase>...] [-l]`.

Prints what nvbandwidth v0.6 prints (format of the public outputs in tests/fixtures/nvbandwidth/SOURCES.md):
a version header, `Device <n>: <name> (<bus>)` lines, then per testcase `Running <name>.`, the matrix title
(`memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)`), the column indices, the rows (`N/A` for a GPU with
itself) and `SUM <name> <total>`. Device order is PCI bus order (the module sets CUDA_DEVICE_ORDER=PCI_BUS_ID).

Bandwidths are lab values derived from the hardware document, not measurements:
* host<->device: the GPU's current PCIe link (generation and width, after `pcie_width_degraded`) at the
  per-lane rate of the PCIe generation (Gen3 0.985, Gen4 1.969, Gen5 3.938 GB/s per lane after 128b/130b
  encoding, PCI-SIG) times 0.83 (lab efficiency; close to the public measurements: Gen4 x16 26.03 GB/s in
  Azure's nvbandwidth fixture), times `fraction` of a `host_bandwidth_degraded` fault on that GPU;
* device->device (read, CE): NV<k> in the profile's topology gives k x 25 GB/s (NVLink 2/3/4 per-link
  unidirectional rate) x 0.82; a pair without NVLink gets the host link rate of the slower GPU x 0.8.
Supported testcases: host_to_device_memcpy_ce, device_to_host_memcpy_ce, device_to_device_memcpy_read_ce
(also by index 0, 1, 2 with -t). A single-GPU node waives the device-to-device testcase, as nvbandwidth does.
"""

from __future__ import annotations

import json
import os
import sys

from gpuforge_sim import driver_state
from gpuforge_sim.hardware import faults_of, lib_dir, load_hardware, visible_gpus

VERSION = "v0.6"
LANE_GBYTE_PER_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
HOST_EFFICIENCY = 0.83
NVLINK_LINK_GBYTE_PER_S = 25.0
NVLINK_EFFICIENCY = 0.82
TESTCASES = (
    ("host_to_device_memcpy_ce", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"),
    ("device_to_host_memcpy_ce", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)"),
    ("device_to_device_memcpy_read_ce", "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"),
)
NAMES = [name for name, _title in TESTCASES]


def host_gbyte_per_s(hw: dict, gpu: dict) -> float:
    """Lab host<->GPU bandwidth of one GPU: its current link, times a host_bandwidth_degraded fraction."""
    value = LANE_GBYTE_PER_S.get(int(gpu["pcie_gen"]), 0.985) * int(gpu["pcie_width"]) * HOST_EFFICIENCY
    for fault in faults_of(hw, "host_bandwidth_degraded"):
        if int(fault.get("gpu", -1)) == gpu["profile_index"]:
            value *= float(fault["fraction"])
    return round(value, 2)


def _nvlinks(hw: dict, a: dict, b: dict) -> int:
    topology = (hw.get("gpu") or {}).get("topology") or []
    try:
        code = str(topology[a["profile_index"]][b["profile_index"]])
    except IndexError:
        return 0
    return int(code[2:]) if code.startswith("NV") and code[2:].isdigit() else 0


def p2p_gbyte_per_s(hw: dict, a: dict, b: dict) -> float:
    links = _nvlinks(hw, a, b)
    if links:
        return round(links * NVLINK_LINK_GBYTE_PER_S * NVLINK_EFFICIENCY, 2)
    return round(min(host_gbyte_per_s(hw, a), host_gbyte_per_s(hw, b)) * 0.8, 2)


def _row(label: str, values: list) -> str:
    return f"{label:>2}" + "".join(f"{v:>10}" for v in values)


def _driver_version() -> str:
    try:
        with open(os.path.join(lib_dir(), "nvidia-driver.json"), encoding="utf-8") as handle:
            return str(json.load(handle)["driver_version"])
    except (OSError, ValueError, KeyError):
        return ""


def _bus(gpu: dict) -> str:
    # "00000000:1B:00.0" -> "00000000:1b:00" (the form nvbandwidth's Device lines print)
    return gpu["bus_id"].rsplit(".", 1)[0].lower()


def run_testcase(hw: dict, gpus: list, name: str) -> list:
    title = dict(TESTCASES)[name]
    lines = [f"Running {name}.", title]
    header = "".join(f"{n:>10}" for n in range(len(gpus)))
    if name.startswith("device_to_device"):
        if len(gpus) < 2:
            return [f"Running {name}.", "Waived: this testcase needs at least 2 GPUs", ""]
        lines.append("  " + header)
        total = 0.0
        for a in gpus:
            row = []
            for b in gpus:
                if a is b:
                    row.append("N/A")
                    continue
                value = p2p_gbyte_per_s(hw, a, b)
                total += value
                row.append(f"{value:.2f}")
            lines.append(_row(str(a["index"]), row))
    else:
        lines.append("  " + header)
        values = [host_gbyte_per_s(hw, g) for g in gpus]
        total = sum(values)
        lines.append(_row("0", [f"{v:.2f}" for v in values]))
    lines += ["", f"SUM {name} {total:.2f}", ""]
    return lines


def main(argv: list | None = None, out=None, err=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if "-l" in argv or "--list" in argv:
        for index, name in enumerate(NAMES):
            out.write(f"{index}, {name}:\n")
        return 0
    wanted = []
    i = 0
    while i < len(argv):
        if argv[i] in ("-t", "--testcase"):
            i += 1
            while i < len(argv) and not argv[i].startswith("-"):
                item = argv[i]
                name = NAMES[int(item)] if item.isdigit() and int(item) < len(NAMES) else item
                if name not in NAMES:
                    err.write(f"ERROR: Testcase {item} not found!\n")
                    return 1
                wanted.append(name)
                i += 1
            continue
        i += 1
    if "nvidia" not in driver_state.loaded_modules():
        err.write("CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected (the NVIDIA driver is not loaded)\n")
        return 1
    hw = load_hardware()
    gpus = [g for g in visible_gpus(hw) if not g.get("fallen_off_bus")]
    product = (hw.get("gpu") or {}).get("product_name", "NVIDIA GPU")
    lines = [f"nvbandwidth Version: {VERSION}", "Built from Git version: gpuforge-lab", ""]
    lines += [f"Driver Version: {_driver_version()}", ""]
    lines += [f"Device {g['index']}: {product} ({_bus(g)})" for g in gpus] + [""]
    for name in wanted or NAMES:
        lines += run_testcase(hw, gpus, name)
    out.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
