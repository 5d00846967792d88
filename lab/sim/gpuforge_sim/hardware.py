"""Load a lab node's hardware document and apply its injected faults.

The document is /etc/gpuforge-lab/hardware.json (or the path in $GPUFORGE_LAB_HARDWARE): a
profile from lab/profiles/ merged with `faults: [...]` (schema: lab/profiles/SCHEMA.md).
Stdlib only: imported by every simulated tool on the lab nodes.
"""

from __future__ import annotations

import copy
import json
import os

DEFAULT_HARDWARE_PATH = "/etc/gpuforge-lab/hardware.json"
DEFAULT_RUN_DIR = "/run/gpuforge-lab"
DEFAULT_LIB_DIR = "/usr/lib/gpuforge-lab"

# InfiniBand per-lane signalling rates (Gb/s) -> speed name, used when a fault changes a port's rate.
_LANE_SPEEDS = {2.5: "SDR", 5.0: "DDR", 10.0: "QDR", 14.0: "FDR", 25.0: "EDR", 50.0: "HDR", 100.0: "NDR"}
_WIDTH_LANES = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}


def hardware_path(path: str | None = None) -> str:
    """Path of the hardware document: the argument, else $GPUFORGE_LAB_HARDWARE, else the default."""
    return path or os.environ.get("GPUFORGE_LAB_HARDWARE") or DEFAULT_HARDWARE_PATH


def run_dir() -> str:
    """Runtime state directory (simulated loaded modules etc.); $GPUFORGE_LAB_RUN overrides it."""
    return os.environ.get("GPUFORGE_LAB_RUN") or DEFAULT_RUN_DIR


def lib_dir() -> str:
    """Static lab package data directory; $GPUFORGE_LAB_LIB overrides it."""
    return os.environ.get("GPUFORGE_LAB_LIB") or DEFAULT_LIB_DIR


def load_hardware(path: str | None = None) -> dict:
    """Read the hardware document; missing sections are filled so callers need no guards."""
    with open(hardware_path(path), encoding="utf-8") as handle:
        hw = json.load(handle)
    if not isinstance(hw, dict):
        raise ValueError(f"{hardware_path(path)}: top level must be a mapping")
    hw.setdefault("faults", [])
    hw.setdefault("hcas", [])
    hw.setdefault("network", [])
    if not hw.get("gpu"):
        hw["gpu"] = {"count": 0, "devices": [], "topology": []}
    return hw


def faults_of(hw: dict, fault_type: str) -> list[dict]:
    """The injected faults of one type, in document order."""
    return [f for f in hw.get("faults") or [] if f.get("type") == fault_type]


def _gpu_fault_index(hw: dict, fault_type: str) -> dict[int, dict]:
    return {int(f["gpu"]): f for f in faults_of(hw, fault_type) if "gpu" in f}


def visible_gpus(hw: dict) -> list[dict]:
    """GPUs the driver enumerates, with their faults applied.

    `gpu_missing` GPUs are dropped and the rest renumbered (the driver enumerates by PCI order, so a
    missing board shifts the indices). Each entry is a copy of the profile's device with:
    index (what nvidia-smi shows), profile_index, bus_id, numa, fallen_off_bus, ecc_dbe (count),
    row_remap_pending, thermal_slowdown, pcie_gen / pcie_width (current link), xids (list of faults),
    row_remap_failure, remapped_rows {correctable, uncorrectable}, ecc_aggregate {sram|dram_correctable|
    uncorrectable: count}, clock_events {reason: fraction of samples}, nvlink_inactive (link numbers) and
    nvlink_errors {link: {replay_errors, recovery_errors, crc_errors}}.
    """
    gpu = hw.get("gpu") or {}
    devices = gpu.get("devices") or []
    missing = set(_gpu_fault_index(hw, "gpu_missing"))
    fallen = set(_gpu_fault_index(hw, "gpu_fallen_off_bus"))
    ecc = _gpu_fault_index(hw, "ecc_dbe")
    remap = set(_gpu_fault_index(hw, "row_remap_pending"))
    thermal = set(_gpu_fault_index(hw, "thermal_slowdown"))
    pcie = _gpu_fault_index(hw, "pcie_width_degraded")
    result = []
    for profile_index, device in enumerate(devices):
        if profile_index in missing:
            continue
        entry = copy.deepcopy(device)
        entry["index"] = len(result)
        entry["profile_index"] = profile_index
        entry["fallen_off_bus"] = profile_index in fallen
        entry["ecc_dbe"] = int(ecc[profile_index].get("count", 1)) if profile_index in ecc else 0
        entry["row_remap_pending"] = profile_index in remap
        entry["thermal_slowdown"] = profile_index in thermal
        entry["pcie_gen"] = int(gpu.get("pcie_gen_max", 3))
        entry["pcie_width"] = int(gpu.get("pcie_width_max", 16))
        if profile_index in pcie:
            entry["pcie_width"] = int(pcie[profile_index]["width"])
            if pcie[profile_index].get("gen") is not None:
                entry["pcie_gen"] = int(pcie[profile_index]["gen"])
        entry["xids"] = [f for f in faults_of(hw, "xid") if int(f.get("gpu", -1)) == profile_index]
        _memory_faults(hw, profile_index, entry)
        _clock_and_nvlink_faults(hw, profile_index, entry)
        result.append(entry)
    return result


def _mine(hw: dict, fault_type: str, profile_index: int) -> list[dict]:
    return [f for f in faults_of(hw, fault_type) if int(f.get("gpu", -1)) == profile_index]


def _memory_faults(hw: dict, profile_index: int, entry: dict) -> None:
    """Row remapper and aggregate ECC state (faults row_remap_failure, remapped_rows, ecc_aggregate)."""
    entry["row_remap_failure"] = bool(_mine(hw, "row_remap_failure", profile_index))
    rows = {"correctable": 0, "uncorrectable": 1 if entry["row_remap_pending"] else 0}
    for fault in _mine(hw, "remapped_rows", profile_index):
        rows["correctable"] += int(fault.get("correctable", 0))
        rows["uncorrectable"] += int(fault.get("uncorrectable", 0))
    entry["remapped_rows"] = rows
    counts = {f"{m}_{k}": 0 for m in ("sram", "dram") for k in ("correctable", "uncorrectable")}
    for fault in _mine(hw, "ecc_aggregate", profile_index):
        counts[f"{fault['memory']}_{fault['kind']}"] += int(fault["count"])
    entry["ecc_aggregate"] = counts


def _clock_and_nvlink_faults(hw: dict, profile_index: int, entry: dict) -> None:
    """Clock event reasons over time and NVLink link state / error counters (faults clock_events,
    thermal_slowdown, nvlink_inactive, nvlink_errors)."""
    events = {}
    if entry["thermal_slowdown"]:  # a board that overheats all the time: every sample shows it
        events = {"hw_slowdown": 1.0, "hw_thermal_slowdown": 1.0}
    for fault in _mine(hw, "clock_events", profile_index):
        reason = fault["reason"]
        events[reason] = float(fault["fraction"])
        if reason in ("hw_thermal_slowdown", "hw_power_brake_slowdown"):  # both are kinds of HW Slowdown
            events["hw_slowdown"] = max(events.get("hw_slowdown", 0.0), events[reason])
    entry["clock_events"] = events
    entry["nvlink_inactive"] = sorted({int(n) for f in _mine(hw, "nvlink_inactive", profile_index) for n in f["links"]})
    errors: dict = {}
    for fault in _mine(hw, "nvlink_errors", profile_index):
        link = errors.setdefault(int(fault["link"]), {"replay_errors": 0, "recovery_errors": 0, "crc_errors": 0})
        for key in ("replay", "recovery", "crc"):
            link[f"{key}_errors"] += int(fault.get(key, 0))
    entry["nvlink_errors"] = errors


def ib_speed_name(rate_gbps: float, width: str) -> tuple[str, str]:
    """(width, speed) for an InfiniBand rate; keeps the width when the rate fits it, else finds one."""
    widths = [width] + [w for w in ("4X", "1X", "2X", "8X", "12X") if w != width]
    for candidate in widths:
        lanes = _WIDTH_LANES.get(candidate)
        if not lanes:
            continue
        name = _LANE_SPEEDS.get(round(float(rate_gbps) / lanes, 1))
        if name:
            return candidate, name
    return width, ""


def visible_hcas(hw: dict) -> list[dict]:
    """RDMA adapters the kernel sees: `hca_missing` dropped, port state/rate and `hca_firmware` faults
    applied (copies).

    An `ib_port_rate` fault on an InfiniBand port also updates the port's `speed` (and `width` when the
    rate does not fit the configured width, e.g. 25 on a 4X EDR port becomes 1X EDR).
    """
    missing = {f.get("hca") for f in faults_of(hw, "hca_missing")}
    states = {(f.get("hca"), int(f.get("port", 1))): f for f in faults_of(hw, "ib_port_state")}
    rates = {(f.get("hca"), int(f.get("port", 1))): f for f in faults_of(hw, "ib_port_rate")}
    firmware = {f.get("hca"): str(f.get("fw_ver")) for f in faults_of(hw, "hca_firmware")}
    result = []
    for hca in hw.get("hcas") or []:
        if hca.get("name") in missing:
            continue
        entry = copy.deepcopy(hca)
        if entry.get("name") in firmware:  # one node flashed with other firmware than the fleet
            entry["fw_ver"] = firmware[entry["name"]]
        for port in entry.get("ports") or []:
            key = (entry.get("name"), int(port.get("port", 1)))
            if key in states:
                port["state"] = states[key].get("state", "Down")
                port["phys_state"] = states[key].get("phys_state") or _default_phys_state(port["state"])
            if key in rates:
                port["rate_gbps"] = rates[key]["rate_gbps"]
                if port.get("link_layer", "InfiniBand") == "InfiniBand":
                    width, speed = ib_speed_name(port["rate_gbps"], port.get("width", "4X"))
                    if speed:
                        port["width"], port["speed"] = width, speed
        result.append(entry)
    return result


def _default_phys_state(state: str) -> str:
    # ibstat pairs: a Down port with no cable shows Polling; Init/Armed ports are physically up.
    return {"Down": "Polling", "Polling": "Polling"}.get(state, "LinkUp")
