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
    # pcie_width_degraded (the older name) and pcie_link_degraded with `gpu` both lower the GPU's link.
    pcie = {**_gpu_fault_index(hw, "pcie_width_degraded"), **_gpu_fault_index(hw, "pcie_link_degraded")}
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
            if pcie[profile_index].get("width") is not None:
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


def ib_speed_name(rate_gbit_per_s: float, width: str) -> tuple[str, str]:
    """(width, speed) for an InfiniBand rate; keeps the width when the rate fits it, else finds one."""
    widths = [width] + [w for w in ("4X", "1X", "2X", "8X", "12X") if w != width]
    for candidate in widths:
        lanes = _WIDTH_LANES.get(candidate)
        if not lanes:
            continue
        name = _LANE_SPEEDS.get(round(float(rate_gbit_per_s) / lanes, 1))
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
                port["rate_gbit_per_s"] = rates[key]["rate_gbit_per_s"]
                if port.get("link_layer", "InfiniBand") == "InfiniBand":
                    width, speed = ib_speed_name(port["rate_gbit_per_s"], port.get("width", "4X"))
                    if speed:
                        port["width"], port["speed"] = width, speed
        result.append(entry)
    return result


def _default_phys_state(state: str) -> str:
    # ibstat pairs: a Down port with no cable shows Polling; Init/Armed ports are physically up.
    return {"Down": "Polling", "Polling": "Polling"}.get(state, "LinkUp")


# PCIe generation -> link speed in GT/s as lspci prints it (PCI Express Base Specification per generation).
PCIE_GEN_SPEED = {1: "2.5", 2: "5", 3: "8", 4: "16", 5: "32", 6: "64"}
# PCI device names of the lab's HCA models as lspci prints them (pci.ids, vendor 15b3).
HCA_PCI_NAMES = {
    "MT4115": "MT27700 Family [ConnectX-4]",
    "MT4117": "MT27710 Family [ConnectX-4 Lx]",
    "MT4119": "MT27800 Family [ConnectX-5]",
    "MT4123": "MT28908 Family [ConnectX-6]",
    "MT4129": "MT2910 Family [ConnectX-7]",
}


def pci_address(bus_id: str) -> str:
    """dddd:bb:dd.f in lower case from an nvidia-smi (00000000:1B:00.0) or sysfs (0000:1b:00.0) bus ID."""
    domain, bus, rest = str(bus_id).split(":")
    return f"{int(domain, 16):04x}:{bus.lower()}:{rest.lower()}"


def _device_faults(hw: dict, fault_type: str, gpu_index=None, hca=None) -> list[dict]:
    return [
        f
        for f in faults_of(hw, fault_type)
        if (gpu_index is not None and "gpu" in f and int(f["gpu"]) == gpu_index)
        or (hca is not None and f.get("hca") == hca)
    ]


def pcie_devices(hw: dict) -> list[dict]:
    """The GPUs and HCAs on the node's PCIe bus with their link and error state (faults applied), sorted by
    address; each has a root port above it (lab topology: one root port per device bus, on bus 00).

    Entry: address, kind (gpu|hca), name, description (lspci class and name), gen_max, width_max, gen, width
    (negotiated), aer {correctable|nonfatal|fatal: count}, bridge (root port address), acs (ACS enabled on that
    root port). Faults: pcie_link_degraded / pcie_width_degraded (link), pcie_aer_errors, acs_enabled.
    A GPU that is `gpu_missing` stays on the bus (the driver does not see it, lspci does)."""
    gpu = hw.get("gpu") or {}
    devices = []
    visible = {d["profile_index"]: d for d in visible_gpus(hw)}
    for index, device in enumerate(gpu.get("devices") or []):
        seen = visible.get(index)
        devices.append(
            {
                "address": pci_address(device["bus_id"]),
                "kind": "gpu",
                "index": index,
                "name": f"GPU {index}",
                "description": f"3D controller: NVIDIA Corporation {gpu.get('product_name', 'GPU')} (rev a1)",
                "gen_max": int(gpu.get("pcie_gen_max", 3)),
                "width_max": int(gpu.get("pcie_width_max", 16)),
                "gen": int(seen["pcie_gen"]) if seen else int(gpu.get("pcie_gen_max", 3)),
                "width": int(seen["pcie_width"]) if seen else int(gpu.get("pcie_width_max", 16)),
                "numa": int(device.get("numa", 0)),
            }
        )
    missing = {f.get("hca") for f in faults_of(hw, "hca_missing")}
    for hca in hw.get("hcas") or []:
        if hca.get("name") in missing:
            continue
        layer = (hca.get("ports") or [{}])[0].get("link_layer", "InfiniBand")
        kind = "Infiniband controller" if layer == "InfiniBand" else "Ethernet controller"
        entry = {
            "address": pci_address(hca["bus_id"]),
            "kind": "hca",
            "name": hca["name"],
            "description": f"{kind}: Mellanox Technologies {HCA_PCI_NAMES.get(hca.get('ca_type'), 'Device')}",
            "gen_max": int(hca.get("pcie_gen_max", 3)),
            "width_max": int(hca.get("pcie_width_max", 16)),
            "numa": int(hca.get("numa", 0)),
        }
        entry["gen"], entry["width"] = entry["gen_max"], entry["width_max"]
        for fault in _device_faults(hw, "pcie_link_degraded", hca=hca["name"]):
            entry["gen"] = int(fault.get("gen", entry["gen"]))
            entry["width"] = int(fault.get("width", entry["width"]))
        devices.append(entry)
    devices.sort(key=lambda d: d["address"])
    roots: dict = {}
    for device in devices:
        domain, bus, _rest = device["address"].split(":")
        # Functions of one card share its bus and so its root port.
        roots.setdefault((domain, bus), f"{domain}:00:{len(roots) + 1:02x}.0")
        device["bridge"] = roots[(domain, bus)]
        target = {"gpu_index": device.get("index")} if device["kind"] == "gpu" else {"hca": device["name"]}
        aer = {"correctable": 0, "nonfatal": 0, "fatal": 0}
        for fault in _device_faults(hw, "pcie_aer_errors", **target):
            for kind in aer:
                aer[kind] += int(fault.get(kind, 0))
        device["aer"] = aer
        device["acs"] = bool(_device_faults(hw, "acs_enabled", **target))
    return devices


def port_pkeys(hw: dict, hca: str, port: int) -> list[str]:
    """The P_Key table entries of one port that are in use: the profile port's `pkeys` (default the default
    partition 0xffff), or a `pkey_mismatch` fault's `pkeys`."""
    entry = next((h for h in hw.get("hcas") or [] if h.get("name") == hca), {})
    spec = next((p for p in entry.get("ports") or [] if int(p.get("port", 1)) == port), {})
    keys = [str(k) for k in spec.get("pkeys") or ["0xffff"]]
    for fault in faults_of(hw, "pkey_mismatch"):
        if fault.get("hca") == hca and int(fault.get("port", 1)) == port:
            keys = [str(k) for k in fault["pkeys"]]
    return keys
