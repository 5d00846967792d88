"""Simulated nvidia-smi, driven by the node's hardware document (see hardware.py) and driver state.

Views: bare table, -L, --query-gpu=... --format=csv[,noheader][,nounits], -q, -q -x, topo -m,
nvlink --status / -s and --errorcounters / -e, each with -i N. Clock event reasons are sampled: each
--query-gpu that asks for a clock reason field reads the next sample (a counter in the run directory), so
a fault active in a fraction of the samples shows in that fraction of repeated queries.
Layouts follow the real tool (driver 535: XML DTD v12 with
clocks_event_reasons, text -q padded to column 42, tab-separated topo -m with legends; driver 580 as the
580.159.04 capture in tests/fixtures/nvidia-smi: XML DTD v13, topo -m's header underlined with ANSI codes,
text -q `Utilization/GPU`; any driver: no NVLink, no nvlink output). Faults from
lab/profiles/SCHEMA.md are applied in every view. Exit codes: 9 when the nvidia module is not loaded
(and cannot be), 15 when a GPU has fallen off the bus, 6 when no GPU exists, 2 on bad arguments.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

from gpuforge_sim import driver_state
from gpuforge_sim.hardware import hardware_path, lib_dir, load_hardware, run_dir, visible_gpus, visible_hcas


def _mtime(path: str):
    """A file's modification time, None when it cannot be read."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)

# Per-architecture facts nvidia-smi prints that the profile does not carry.
ARCH = {
    "Volta": {"clocks": (135, 877, 1530, 1372), "temps": (90, 87, 83), "ecc_layout": "bit", "remap": False},
    "Turing": {"clocks": (300, 5000, 1590, 1470), "temps": (96, 93, 87), "ecc_layout": "bit", "remap": False},
    "Ampere": {"clocks": (210, 1215, 1410, 1290), "temps": (92, 89, 85), "ecc_layout": "sram", "remap": True},
    "Hopper": {"clocks": (345, 2619, 1980, 1545), "temps": (92, 87, 85), "ecc_layout": "sram", "remap": True},
}
DEVICE_IDS = {
    "Tesla V100-SXM2-16GB": ("1DB110DE", "121210DE"),
    "Tesla V100-SXM2-32GB": ("1DB510DE", "124910DE"),
    "GRID T4-16C": ("1EB810DE", "130E10DE"),
    "NVIDIA H100 80GB HBM3": ("233010DE", "16C110DE"),
}
LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""
_RANK = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}

# --query-gpu fields: name -> (header spelling, unit or None, value function (ctx, gpu) -> str|None).
NA = "[N/A]"


def _q(header, unit, fn):
    return (header, unit, fn)


# Clock event reasons a fault can make active (NVML bit values: NVML API reference "NvmlClocksEventReasons").
EVENT_BITS = {"gpu_idle": 0x1, "hw_slowdown": 0x8, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40}
EVENT_BITS["hw_power_brake_slowdown"] = 0x80


def _event(reason):
    return lambda c, g: "Active" if c.event_active(g, reason) else "Not Active"


def _event_mask(ctx, gpu) -> str:
    mask = sum(bit for reason, bit in EVENT_BITS.items() if ctx.event_active(gpu, reason))
    return f"0x{mask:016X}"


QUERY_FIELDS = {
    "index": _q("index", None, lambda c, g: str(g["index"])),
    "name": _q("name", None, lambda c, g: c.gpu["product_name"]),
    "uuid": _q("uuid", None, lambda c, g: c.uuid(g)),
    "serial": _q("serial", None, lambda c, g: c.serial(g)),
    "pci.bus_id": _q("pci.bus_id", None, lambda c, g: g["bus_id"]),
    "driver_version": _q("driver_version", None, lambda c, g: c.driver_version),
    "vbios_version": _q("vbios_version", None, lambda c, g: c.gpu["vbios"]),
    "count": _q("count", None, lambda c, g: str(len(c.listed))),
    "pstate": _q("pstate", None, lambda c, g: "P0"),
    "memory.total": _q("memory.total", "MiB", lambda c, g: str(c.gpu["memory_mib"])),
    "memory.used": _q("memory.used", "MiB", lambda c, g: str(c.memory(g)[1])),
    "memory.free": _q("memory.free", "MiB", lambda c, g: str(c.memory(g)[2])),
    "memory.reserved": _q("memory.reserved", "MiB", lambda c, g: str(c.memory(g)[0])),
    "temperature.gpu": _q("temperature.gpu", None, lambda c, g: str(c.temperature(g))),
    "utilization.gpu": _q("utilization.gpu", "%", lambda c, g: "0"),
    "utilization.memory": _q("utilization.memory", "%", lambda c, g: "0"),
    "persistence_mode": _q("persistence_mode", None, lambda c, g: c.persistence),
    "compute_mode": _q("compute_mode", None, lambda c, g: "Default"),
    "mig.mode.current": _q("mig.mode.current", None, lambda c, g: c.mig_mode or NA),
    "ecc.mode.current": _q("ecc.mode.current", None, lambda c, g: c.ecc_mode or NA),
    "ecc.mode.pending": _q("ecc.mode.pending", None, lambda c, g: c.ecc_mode or NA),
    "ecc.errors.uncorrected.volatile.total": _q(
        "ecc.errors.uncorrected.volatile.total", None, lambda c, g: str(g["ecc_dbe"]) if c.ecc_mode else NA
    ),
    "ecc.errors.corrected.volatile.total": _q(
        "ecc.errors.corrected.volatile.total", None, lambda c, g: "0" if c.ecc_mode else NA
    ),
    "retired_pages.pending": _q(
        "retired_pages.pending", None, lambda c, g: NA if c.arch["remap"] else c.yes_no(g["row_remap_pending"])
    ),
    "remapped_rows.pending": _q(
        "remapped_rows.pending", None, lambda c, g: c.yes_no(g["row_remap_pending"]) if c.arch["remap"] else NA
    ),
    "pcie.link.gen.current": _q("pcie.link.gen.current", None, lambda c, g: str(g["pcie_gen"])),
    "pcie.link.gen.max": _q("pcie.link.gen.max", None, lambda c, g: str(c.gpu["pcie_gen_max"])),
    "pcie.link.width.current": _q("pcie.link.width.current", None, lambda c, g: str(g["pcie_width"])),
    "pcie.link.width.max": _q("pcie.link.width.max", None, lambda c, g: str(c.gpu["pcie_width_max"])),
    "timestamp": _q("timestamp", None, lambda c, g: time.strftime("%Y/%m/%d %H:%M:%S.000")),
    "power.limit": _q("power.limit", "W", lambda c, g: c.watts(c.gpu["power_limit_w"])),
    "power.draw": _q("power.draw", "W", lambda c, g: c.watts(c.power_draw(g))),
}
# Both generations of the clock reason fields (R535 renamed clocks_throttle_reasons.* to clocks_event_reasons.*).
for _prefix in ("clocks_throttle_reasons", "clocks_event_reasons"):
    for _reason in ("gpu_idle", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"):
        QUERY_FIELDS[f"{_prefix}.{_reason}"] = _q(f"{_prefix}.{_reason}", None, _event(_reason))
    QUERY_FIELDS[f"{_prefix}.active"] = _q(f"{_prefix}.active", None, _event_mask)
CLOCK_FIELD_PREFIXES = ("clocks_throttle_reasons.", "clocks_event_reasons.")
QUERY_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "gpu_serial": "serial"}


def _sample_path() -> str:
    return os.path.join(run_dir(), "nvidia-smi-clock-sample")


def _read_sample() -> int:
    """The clock-reason sample number: every --query-gpu of a clock reason field reads the next sample."""
    try:
        with open(_sample_path(), encoding="ascii") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _next_sample(current: int) -> None:
    os.makedirs(run_dir(), exist_ok=True)
    with open(_sample_path(), "w", encoding="ascii") as handle:
        handle.write(f"{current + 1}\n")


def _xml_escape(text: str) -> str:
    """&, < and > as entities (what xml.sax.saxutils.escape does, without importing xml.sax and urllib)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


class Context:
    """Everything a view needs: hardware, faults applied, driver constants, selected GPUs."""

    def __init__(self, hw: dict, selected: list[int] | None):
        self.hw = hw
        self.gpu = hw.get("gpu") or {}
        consts = driver_state.driver_constants()
        self.driver_version = consts["driver_version"]
        self.cuda_version = consts["cuda_version"]
        self.driver_major = int(self.driver_version.split(".")[0])
        self.arch = ARCH.get(self.gpu.get("architecture"), ARCH["Volta"])
        self.vgpu = self.gpu.get("vgpu")
        self.unlicensed = [f for f in hw.get("faults") or [] if f.get("type") == "vgpu_unlicensed"]
        self.persistence = "Enabled" if driver_state.persistence_enabled() else "Disabled"
        self.ecc_mode = None if self.vgpu else "Enabled"
        self.mig_mode = "Disabled" if self.arch["remap"] else None
        # os.uname: gethostname(2) is the nodename; socket (and hashlib, xml.sax) cost each query their import
        # time, and validate.yml's clock-event sampling runs this tool ten times per node.
        self.host = hw.get("hostname") or os.uname().nodename
        gpus = visible_gpus(hw)
        if selected is not None:
            gpus = [g for g in gpus if g["index"] in selected]
        self.all = gpus
        self.fallen = [g for g in gpus if g["fallen_off_bus"]]
        self.listed = [g for g in gpus if not g["fallen_off_bus"]]
        self.sample = _read_sample()
        # Fault gpu_process_left: a process still holding GPU memory after its job (what an Epilog must catch).
        self.left = [f for f in hw.get("faults") or [] if f.get("type") == "gpu_process_left"]

    def event_active(self, gpu, reason: str) -> bool:
        """Whether a clock event reason is active in the current sample. A reason active in a fraction f of
        the samples is active in sample k when floor((k+1)f) > floor(kf): n samples show it about f*n times."""
        if reason == "gpu_idle":
            return not any(self.event_active(gpu, r) for r in EVENT_BITS if r != "gpu_idle")
        fraction = (gpu.get("clock_events") or {}).get(reason, 0.0)
        k = self.sample
        return math.floor((k + 1) * fraction + 1e-9) > math.floor(k * fraction + 1e-9)

    def uuid(self, gpu) -> str:
        import hashlib  # only the views that print UUIDs pay its import (OpenSSL's _hashlib)

        digest = hashlib.md5(f"{self.host}/{self.hw.get('name')}/{gpu['profile_index']}".encode()).hexdigest()
        return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"

    def license_status(self, gpu) -> str:
        """A vGPU guest GPU's License Status: Licensed with a lease expiring a day from now, in the driver's unpadded
        GMT format ("2023-1-31 11:32:22 GMT" in a real capture, tests/fixtures/nvidia-smi-vgpu/SOURCES.md); fault
        vgpu_unlicensed: its status (default "Unlicensed (Restricted)") on its GPU, or on every GPU. On a node with
        the lab's stand-in guest driver (<lib dir>/vgpu-guest-driver.json) the lease is nvidia-gridd's: what the
        simulated daemon wrote to <run dir>/vgpu-license.json (nvidia_gridd.py), Unlicensed while it has not run."""
        for fault in self.unlicensed:
            if fault.get("gpu") in (None, gpu["index"]):
                return fault.get("status", "Unlicensed (Restricted)")
        # A lease expires at one time, whichever call reads it (two nvidia-smi runs a second apart print the same
        # expiry): a day after the lease was written (the simulated nvidia-gridd's file), else after the hardware
        # document the node started with.
        leased_at = _mtime(hardware_path())
        if os.path.isfile(os.path.join(lib_dir(), "vgpu-guest-driver.json")):
            lease = os.path.join(run_dir(), "vgpu-license.json")
            try:
                with open(lease, encoding="utf-8") as handle:
                    status = str(json.load(handle).get("status") or "")
            except (OSError, ValueError, AttributeError):
                status = ""
            if status != "Licensed":
                return status or "Unlicensed (Restricted)"
            leased_at = _mtime(lease) or leased_at
        t = time.gmtime((leased_at or time.time()) + 86400)
        return f"Licensed (Expiry: {t.tm_year}-{t.tm_mon}-{t.tm_mday} {t.tm_hour}:{t.tm_min}:{t.tm_sec} GMT)"

    def serial(self, gpu) -> str:
        return f"{self.gpu.get('serial_prefix', '')}{gpu['profile_index']}"

    def memory(self, gpu):
        total = self.gpu["memory_mib"]
        reserved = 0 if self.vgpu else max(1, total // 150)
        used = min(sum(p["memory_mib"] for p in self.processes(gpu)), total - reserved)
        return reserved, used, total - reserved - used

    def processes(self, gpu) -> list:
        """The gpu_process_left faults on this GPU (its profile index) as {pid, name, memory_mib}."""
        return [
            {"pid": f.get("pid", 4242), "name": f.get("name", "python3"), "memory_mib": f.get("memory_mib", 1024)}
            for f in self.left
            if f.get("gpu") == gpu["profile_index"]
        ]

    def temperature(self, gpu) -> int:
        return self.arch["temps"][1] + 1 if gpu["thermal_slowdown"] else 34 + gpu["index"] % 4

    def power_draw(self, gpu):
        return None if self.vgpu else round(self.gpu["power_limit_w"] * 0.14 + gpu["index"] * 0.37, 2)

    def watts(self, value):
        return NA if value is None or self.vgpu else f"{float(value):.2f} W"

    @staticmethod
    def yes_no(flag) -> str:
        return "Yes" if flag else "No"

    def unable(self, gpu) -> str:
        bus = gpu["bus_id"][4:] if len(gpu["bus_id"]) == 16 else gpu["bus_id"]
        return f"Unable to determine the device handle for GPU{bus}: Unknown Error\n"


# ---------------------------------------------------------------------------------------------------
# -q / -q -x: one model, two renderings. Node: (xml tag or None, text label or None, payload) where the
# payload is a value (str, or (xml value, text value)) or a list of child nodes.


def _bus_parts(bus_id: str):
    domain, bus, rest = bus_id.split(":")
    device = rest.split(".")[0]
    return domain, bus, device


def _ecc_nodes(ctx: Context, gpu: dict) -> list:
    na = ctx.ecc_mode is None
    dbe = "N/A" if na else str(gpu["ecc_dbe"])
    zero = "N/A" if na else "0"
    if ctx.arch["ecc_layout"] == "bit":

        def bits(volatile: bool):
            double = dbe if volatile else zero
            parts = [
                ("device_memory", "Device Memory"),
                ("register_file", "Register File"),
                ("l1_cache", "L1 Cache"),
                ("l2_cache", "L2 Cache"),
                ("texture_memory", "Texture Memory"),
                ("texture_shm", "Texture Shared"),
                ("cbu", "CBU"),
            ]
            single = [
                (t, lbl, zero if t in ("device_memory", "register_file", "l2_cache") else "N/A") for t, lbl in parts
            ]
            dbl = [(t, lbl, double if t == "device_memory" else single[i][2]) for i, (t, lbl) in enumerate(parts)]
            return [
                ("single_bit", "Single Bit", [*single, ("total", "Total", zero)]),
                ("double_bit", "Double Bit", [*dbl, ("total", "Total", double)]),
            ]

        return [("volatile", "Volatile", bits(True)), ("aggregate", "Aggregate", bits(False))]

    def sram(volatile: bool):
        dram = dbe if volatile else zero
        agg = {key: "N/A" if na else str(value) for key, value in gpu["ecc_aggregate"].items()}
        if volatile:
            agg = dict.fromkeys(agg, zero)
        else:
            agg["dram_uncorrectable"] = "N/A" if na else str(gpu["ecc_aggregate"]["dram_uncorrectable"])
        nodes = [
            ("sram_correctable", "SRAM Correctable", agg["sram_correctable"]),
            ("sram_uncorrectable", None, agg["sram_uncorrectable"]),
            (None, "SRAM Uncorrectable Parity", agg["sram_uncorrectable"]),
            (None, "SRAM Uncorrectable SEC-DED", zero),
            ("dram_correctable", "DRAM Correctable", agg["dram_correctable"]),
            ("dram_uncorrectable", "DRAM Uncorrectable", dram if volatile else agg["dram_uncorrectable"]),
        ]
        if not volatile and ctx.driver_major >= 535:
            nodes.append(("sram_threshold_exceeded", "SRAM Threshold Exceeded", "N/A" if na else "No"))
        return nodes

    return [("volatile", "Volatile", sram(True)), ("aggregate", "Aggregate", sram(False))]


def _memory_repair_nodes(ctx: Context, gpu: dict) -> list:
    pending = ctx.yes_no(gpu["row_remap_pending"])
    if ctx.arch["remap"]:
        retired = [
            (
                "multiple_single_bit_retirement",
                None,
                [("retired_count", None, "N/A"), ("retired_pagelist", None, "N/A")],
            ),
            ("double_bit_retirement", None, [("retired_count", None, "N/A"), ("retired_pagelist", None, "N/A")]),
            (None, "Single Bit ECC", "N/A"),
            (None, "Double Bit ECC", "N/A"),
            ("pending_blacklist", "Pending Page Blacklist", "N/A"),
            ("pending_retirement", None, "N/A"),
        ]
        rows = gpu["remapped_rows"]
        # Each remap uses a spare row of one bank (2560 banks on H100, as the real output shows); a failed
        # remap means a bank had no spare left.
        banks = 2560
        used = min(rows["correctable"] + rows["uncorrectable"], banks)
        none = 1 if gpu["row_remap_failure"] else 0
        remap = [
            ("remapped_row_corr", "Correctable Error", str(rows["correctable"])),
            ("remapped_row_unc", "Uncorrectable Error", str(rows["uncorrectable"])),
            ("remapped_row_pending", "Pending", pending),
            ("remapped_row_failure", "Remapping Failure Occurred", ctx.yes_no(gpu["row_remap_failure"])),
            (
                "row_remapper_histogram",
                "Bank Remap Availability Histogram",
                [
                    ("row_remapper_histogram_max", "Max", f"{banks - used - none} bank(s)"),
                    ("row_remapper_histogram_high", "High", "0 bank(s)"),
                    ("row_remapper_histogram_partial", "Partial", f"{used} bank(s)"),
                    ("row_remapper_histogram_low", "Low", "0 bank(s)"),
                    ("row_remapper_histogram_none", "None", f"{none} bank(s)"),
                ],
            ),
        ]
        return [("retired_pages", "Retired Pages", retired), ("remapped_rows", "Remapped Rows", remap)]
    # Volta/Turing retire pages instead of remapping rows: a pending repair is a pending retirement.
    na = ctx.ecc_mode is None
    double = "N/A" if na else ("1" if gpu["row_remap_pending"] else "0")
    single = "N/A" if na else "0"
    page = "N/A" if na else pending
    retired = [
        ("multiple_single_bit_retirement", None, [("retired_count", None, single), ("retired_pagelist", None, [])]),
        ("double_bit_retirement", None, [("retired_count", None, double), ("retired_pagelist", None, [])]),
        (None, "Single Bit ECC", single),
        (None, "Double Bit ECC", double),
        ("pending_blacklist", "Pending Page Blacklist", page),
        ("pending_retirement", None, page),
    ]
    return [("retired_pages", "Retired Pages", retired), ("remapped_rows", "Remapped Rows", "N/A")]


def _gpu_model(ctx: Context, gpu: dict) -> list:
    g = ctx.gpu
    new = ctx.driver_major >= 535
    domain, bus, device = _bus_parts(gpu["bus_id"])
    dev_id, sub_id = DEVICE_IDS.get(g["product_name"], ("1DB110DE", "121210DE"))
    idle, mem_clock, max_graphics, max_video = ctx.arch["clocks"]
    shutdown, slowdown, max_op = ctx.arch["temps"]

    def state(reason):
        return "Active" if ctx.event_active(gpu, reason) else "Not Active"

    reserved, used, free = ctx.memory(gpu)
    na_if_vgpu = (lambda v: "N/A") if ctx.vgpu else (lambda v: v)
    reason = "clocks_event_reason_" if new else "clocks_throttle_reason_"
    reasons = [
        ("gpu_idle", "Idle", state("gpu_idle")),
        ("applications_clocks_setting", "Applications Clocks Setting", "Not Active"),
        ("sw_power_cap", "SW Power Cap", "Not Active"),
        ("hw_slowdown", "HW Slowdown", state("hw_slowdown")),
        ("hw_thermal_slowdown", "    HW Thermal Slowdown", state("hw_thermal_slowdown")),
        ("hw_power_brake_slowdown", "    HW Power Brake Slowdown", state("hw_power_brake_slowdown")),
        ("sync_boost", "Sync Boost", "Not Active"),
        ("sw_thermal_slowdown", "SW Thermal Slowdown", state("sw_thermal_slowdown")),
        ("display_clocks_setting", "Display Clock Setting", "Not Active"),
    ]
    draw = ctx.watts(ctx.power_draw(gpu)).strip("[]")
    # R550 and newer replace power_draw with average_power_draw and instant_power_draw.
    draws = (
        [
            ("average_power_draw", "Average Power Draw", draw),
            ("instant_power_draw", "Instantaneous Power Draw", draw),
        ]
        if ctx.driver_major >= 550
        else [("power_draw", "Power Draw", draw)]
    )
    power = [
        ("power_state", None, "P0"),
        *draws,
        (
            "current_power_limit" if new else "power_limit",
            "Current Power Limit" if new else "Power Limit",
            ctx.watts(g["power_limit_w"]).strip("[]"),
        ),
        (
            "requested_power_limit" if new else "enforced_power_limit",
            "Requested Power Limit" if new else "Enforced Power Limit",
            ctx.watts(g["power_limit_w"]).strip("[]"),
        ),
        ("default_power_limit", "Default Power Limit", ctx.watts(g["power_limit_w"]).strip("[]")),
        ("min_power_limit", "Min Power Limit", ctx.watts(g["power_limit_w"] / 2).strip("[]")),
        ("max_power_limit", "Max Power Limit", ctx.watts(g["power_limit_w"]).strip("[]")),
    ]
    model = [
        ("product_name", "Product Name", g["product_name"]),
        ("product_brand", "Product Brand", g["product_brand"]),
        ("product_architecture", "Product Architecture", g["architecture"]),
        ("display_mode", "Display Mode", "Disabled"),
        ("display_active", "Display Active", "Disabled"),
        ("persistence_mode", "Persistence Mode", ctx.persistence),
    ]
    if new:
        model.append(("addressing_mode", "Addressing Mode", "None"))
    mig = ctx.mig_mode or "N/A"
    model += [
        ("mig_mode", "MIG Mode", [("current_mig", "Current", mig), ("pending_mig", "Pending", mig)]),
        ("mig_devices", None, ("None", None)),
        ("accounting_mode", "Accounting Mode", "Disabled"),
        ("accounting_mode_buffer_size", "Accounting Mode Buffer Size", "4000"),
        ("driver_model", "Driver Model", [("current_dm", "Current", "N/A"), ("pending_dm", "Pending", "N/A")]),
        ("serial", "Serial Number", "N/A" if ctx.vgpu else ctx.serial(gpu)),
        ("uuid", "GPU UUID", ctx.uuid(gpu)),
        ("minor_number", "Minor Number", str(gpu["index"])),
        ("vbios_version", "VBIOS Version", g["vbios"]),
        ("multigpu_board", "MultiGPU Board", "No"),
        ("board_id", "Board ID", f"0x{bus.lower()}00"),
        ("board_part_number", "Board Part Number", "N/A"),
        ("gpu_part_number", "GPU Part Number", "N/A"),
        ("gpu_fru_part_number", "FRU Part Number", "N/A"),
        ("gpu_module_id", "Module ID", str(gpu["profile_index"] + 1)),
        (
            "inforom_version",
            "Inforom Version",
            [
                ("img_version", "Image Version", na_if_vgpu("G503.0201.00.03")),
                ("oem_object", "OEM Object", na_if_vgpu("1.1")),
                ("ecc_object", "ECC Object", na_if_vgpu("5.0")),
                ("pwr_object", "Power Management Object", "N/A"),
            ],
        ),
        (
            "gpu_operation_mode",
            "GPU Operation Mode",
            [("current_gom", "Current", "N/A"), ("pending_gom", "Pending", "N/A")],
        ),
        ("gsp_firmware_version", "GSP Firmware Version", ctx.driver_version if ctx.arch["remap"] else "N/A"),
        (
            "gpu_virtualization_mode",
            "GPU Virtualization Mode",
            [
                ("virtualization_mode", "Virtualization Mode", "VGPU" if ctx.vgpu else "None"),
                ("host_vgpu_mode", "Host VGPU Mode", "N/A"),
            ],
        ),
    ]
    if ctx.vgpu:
        model.append(
            (
                "vgpu_software_licensed_product",
                "vGPU Software Licensed Product",
                [
                    # <licensed_product_name> in -q -x, "Product Name" in -q (tests/fixtures/nvidia-smi-vgpu).
                    (
                        "licensed_product_name",
                        "Product Name",
                        ctx.vgpu.get("license", "NVIDIA Virtual Compute Server"),
                    ),
                    ("license_status", "License Status", ctx.license_status(gpu)),
                ],
            )
        )
    if new:
        model.append(
            (
                "gpu_reset_status",
                "GPU Reset Status",
                [
                    ("reset_required", "Reset Required", "No"),
                    ("drain_and_reset_recommended", "Drain and Reset Recommended", "No"),
                ],
            )
        )
    model += [
        ("ibmnpu", "IBMNPU", [("relaxed_ordering_mode", "Relaxed Ordering Mode", "N/A")]),
        (
            "pci",
            "PCI",
            [
                ("pci_bus", "Bus", (bus, f"0x{bus}")),
                ("pci_device", "Device", (device, f"0x{device}")),
                ("pci_domain", "Domain", (domain[-4:], f"0x{domain[-4:]}")),
                ("pci_device_id", "Device Id", (dev_id, f"0x{dev_id}")),
                ("pci_bus_id", "Bus Id", gpu["bus_id"]),
                ("pci_sub_system_id", "Sub System Id", (sub_id, f"0x{sub_id}")),
                (
                    "pci_gpu_link_info",
                    "GPU Link Info",
                    [
                        (
                            "pcie_gen",
                            "PCIe Generation",
                            [
                                ("max_link_gen", "Max", str(g["pcie_gen_max"])),
                                ("current_link_gen", "Current", str(gpu["pcie_gen"])),
                                ("device_current_link_gen", "Device Current", str(gpu["pcie_gen"])),
                                ("max_device_link_gen", "Device Max", str(g["pcie_gen_max"])),
                                ("max_host_link_gen", "Host Max", str(g["pcie_gen_max"])),
                            ]
                            if new
                            else [
                                ("max_link_gen", "Max", str(g["pcie_gen_max"])),
                                ("current_link_gen", "Current", str(gpu["pcie_gen"])),
                            ],
                        ),
                        (
                            "link_widths",
                            "Link Width",
                            [
                                ("max_link_width", "Max", f"{g['pcie_width_max']}x"),
                                ("current_link_width", "Current", f"{gpu['pcie_width']}x"),
                            ],
                        ),
                    ],
                ),
                (
                    "pci_bridge_chip",
                    "Bridge Chip",
                    [("bridge_chip_type", "Type", "N/A"), ("bridge_chip_fw", "Firmware", "N/A")],
                ),
                ("replay_counter", "Replays Since Reset", "0"),
                ("replay_rollover_counter", "Replay Number Rollovers", "0"),
                ("tx_util", "Tx Throughput", "0 KB/s"),
                ("rx_util", "Rx Throughput", "0 KB/s"),
                ("atomic_caps_inbound", "Atomic Caps Inbound", "N/A"),
                ("atomic_caps_outbound", "Atomic Caps Outbound", "N/A"),
            ],
        ),
        ("fan_speed", "Fan Speed", "N/A"),
        ("performance_state", "Performance State", "P0"),
        (
            "clocks_event_reasons" if new else "clocks_throttle_reasons",
            "Clocks Event Reasons" if new else "Clocks Throttle Reasons",
            [(reason + tag, label, value) for tag, label, value in reasons],
        ),
        (
            "fb_memory_usage",
            "FB Memory Usage",
            [
                ("total", "Total", f"{g['memory_mib']} MiB"),
                ("reserved", "Reserved", f"{reserved} MiB"),
                ("used", "Used", f"{used} MiB"),
                ("free", "Free", f"{free} MiB"),
            ],
        ),
        (
            "bar1_memory_usage",
            "BAR1 Memory Usage",
            [("total", "Total", "256 MiB"), ("used", "Used", "2 MiB"), ("free", "Free", "254 MiB")],
        ),
        (
            "cc_protected_memory_usage",
            "Conf Compute Protected Memory Usage",
            [("total", "Total", "0 MiB"), ("used", "Used", "0 MiB"), ("free", "Free", "0 MiB")],
        ),
        ("compute_mode", "Compute Mode", "Default"),
        (
            "utilization",
            "Utilization",
            [
                # Text label: `Gpu` before driver 580, `GPU` in the 580.159.04 capture (tests/fixtures/nvidia-smi).
                ("gpu_util", "GPU" if ctx.driver_major >= 580 else "Gpu", "0 %"),
                ("memory_util", "Memory", "0 %"),
                ("encoder_util", "Encoder", "0 %"),
                ("decoder_util", "Decoder", "0 %"),
                ("jpeg_util", "JPEG", "0 %"),
                ("ofa_util", "OFA", "0 %"),
            ],
        ),
        (
            "encoder_stats",
            "Encoder Stats",
            [
                ("session_count", "Active Sessions", "0"),
                ("average_fps", "Average FPS", "0"),
                ("average_latency", "Average Latency", "0"),
            ],
        ),
        (
            "fbc_stats",
            "FBC Stats",
            [
                ("session_count", "Active Sessions", "0"),
                ("average_fps", "Average FPS", "0"),
                ("average_latency", "Average Latency", "0"),
            ],
        ),
        (
            "ecc_mode",
            "ECC Mode",
            [("current_ecc", "Current", ctx.ecc_mode or "N/A"), ("pending_ecc", "Pending", ctx.ecc_mode or "N/A")],
        ),
        ("ecc_errors", "ECC Errors", _ecc_nodes(ctx, gpu)),
        *_memory_repair_nodes(ctx, gpu),
        (
            "temperature",
            "Temperature",
            [
                ("gpu_temp", "GPU Current Temp", "N/A" if ctx.vgpu else f"{ctx.temperature(gpu)} C"),
                ("gpu_temp_max_threshold", "GPU Shutdown Temp", na_if_vgpu(f"{shutdown} C")),
                ("gpu_temp_slow_threshold", "GPU Slowdown Temp", na_if_vgpu(f"{slowdown} C")),
                ("gpu_temp_max_gpu_threshold", "GPU Max Operating Temp", na_if_vgpu(f"{max_op} C")),
                ("gpu_target_temperature", "GPU Target Temperature", "N/A"),
                ("memory_temp", "Memory Current Temp", "N/A"),
                ("gpu_temp_max_mem_threshold", "Memory Max Operating Temp", "N/A"),
            ],
        ),
        ("gpu_power_readings" if new else "power_readings", "GPU Power Readings" if new else "Power Readings", power),
        (
            "clocks",
            "Clocks",
            [
                ("graphics_clock", "Graphics", f"{idle} MHz"),
                ("sm_clock", "SM", f"{idle} MHz"),
                ("mem_clock", "Memory", f"{mem_clock} MHz"),
                ("video_clock", "Video", f"{max_video // 2} MHz"),
            ],
        ),
        (
            "applications_clocks",
            "Applications Clocks",
            [("graphics_clock", "Graphics", f"{max_graphics} MHz"), ("mem_clock", "Memory", f"{mem_clock} MHz")],
        ),
        (
            "default_applications_clocks",
            "Default Applications Clocks",
            [("graphics_clock", "Graphics", f"{max_graphics} MHz"), ("mem_clock", "Memory", f"{mem_clock} MHz")],
        ),
        ("deferred_clocks", "Deferred Clocks", [("mem_clock", "Memory", "N/A")]),
        (
            "max_clocks",
            "Max Clocks",
            [
                ("graphics_clock", "Graphics", f"{max_graphics} MHz"),
                ("sm_clock", "SM", f"{max_graphics} MHz"),
                ("mem_clock", "Memory", f"{mem_clock} MHz"),
                ("video_clock", "Video", f"{max_video} MHz"),
            ],
        ),
        (
            "max_customer_boost_clocks",
            "Max Customer Boost Clocks",
            [("graphics_clock", "Graphics", f"{max_graphics} MHz")],
        ),
        (
            "clock_policy",
            "Clock Policy",
            [("auto_boost", "Auto Boost", "N/A"), ("auto_boost_default", "Auto Boost Default", "N/A")],
        ),
        ("voltage", "Voltage", [("graphics_volt", "Graphics", "N/A" if ctx.vgpu else "875.000 mV")]),
        (
            "fabric",
            "Fabric",
            [
                ("state", "State", _fabric(ctx.hw)[0]),
                ("status", "Status", _fabric(ctx.hw)[1]),
            ],
        ),
        (
            "supported_clocks",
            None,
            [
                (
                    "supported_mem_clock",
                    None,
                    [("value", None, f"{mem_clock} MHz")]
                    + [("supported_graphics_clock", None, f"{mhz} MHz") for mhz in range(max_graphics, idle - 1, -15)],
                )
            ],
        ),
        ("processes", "Processes", _processes(ctx.processes(gpu))),
        ("accounted_processes", None, []),
    ]
    return model


def _processes(processes: list):
    """The Processes section: -q -x one <process_info> per process (gpu_instance_id, compute_instance_id, pid, type,
    process_name, used_memory); -q "None", or per process GPU/Compute instance ID, then Process ID with its Type,
    Name and Used GPU Memory one level deeper (the real 8x H100 R535 -q capture among the real-output test inputs:
    leptonai/gpud nvidia-smi-query.535.183.01.out.0.valid)."""
    if not processes:
        return [], "None"
    xml, text = [], []
    for p in processes:
        xml.append(
            (
                "process_info",
                None,
                [
                    ("gpu_instance_id", None, "N/A"),
                    ("compute_instance_id", None, "N/A"),
                    ("pid", None, str(p["pid"])),
                    ("type", None, "C"),
                    ("process_name", None, p["name"]),
                    ("used_memory", None, f"{p['memory_mib']} MiB"),
                ],
            )
        )
        text += [
            (None, "GPU instance ID", "N/A"),
            (None, "Compute instance ID", "N/A"),
            (None, "Process ID", str(p["pid"])),
            (None, "    Type", "C"),
            (None, "    Name", p["name"]),
            (None, "    Used GPU Memory", f"{p['memory_mib']} MiB"),
        ]
    return xml, text


def _fabric(hw: dict) -> tuple[str, str]:
    """(State, Status) of nvidia-smi -q's Fabric section: Completed/Success once the fabric manager configured an
    NVSwitch system (real 8x H100 output), In Progress/N/A while it is down (fault fabric_manager_down; a public
    H100 SXM5 report, "CUDA Error 802 - H100 SXM Fabric State Stuck 'In Progress'", shows this pair when
    nv-fabricmanager fails to start), N/A/N/A without NVSwitch."""
    if not (hw.get("system") or {}).get("nvswitch"):
        return "N/A", "N/A"
    if any(f.get("type") == "fabric_manager_down" for f in hw.get("faults") or []):
        return "In Progress", "N/A"
    return "Completed", "Success"


def _render_xml(nodes, depth: int, lines: list) -> None:
    pad = "\t" * depth
    for tag, _label, payload in nodes:
        if tag is None:
            continue
        if isinstance(payload, tuple):
            payload = payload[0]
        if isinstance(payload, list):
            lines.append(f"{pad}<{tag}>")
            _render_xml(payload, depth + 1, lines)
            lines.append(f"{pad}</{tag}>")
        elif tag == "mig_devices":
            lines.extend([f"{pad}<{tag}>", f"{pad}\t{payload}", f"{pad}</{tag}>"])
        else:
            lines.append(f"{pad}<{tag}>{_xml_escape(payload)}</{tag}>")


def _render_text(nodes, depth: int, lines: list) -> None:
    pad = "    " * depth
    for _tag, label, payload in nodes:
        if label is None:
            continue
        if isinstance(payload, tuple):
            payload = payload[1]
        if isinstance(payload, list):
            lines.append(f"{pad}{label}")
            _render_text(payload, depth + 1, lines)
        else:
            lines.append(f"{(pad + label).ljust(42)}: {payload}")


def _timestamp() -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y")


def view_query_xml(ctx: Context, out) -> int:
    # Driver 580 prints DTD v13 (580.159.04 capture: tests/fixtures/nvidia-smi/
    # gpuforge-device_1xh200_drv580.159.04_q_x.xml); 535 .. 579 keep v12, older drivers v11.
    dtd = "v13" if ctx.driver_major >= 580 else "v12" if ctx.driver_major >= 535 else "v11"
    lines = [
        '<?xml version="1.0" ?>',
        f'<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_{dtd}.dtd">',
        "<nvidia_smi_log>",
        f"\t<timestamp>{_timestamp()}</timestamp>",
        f"\t<driver_version>{ctx.driver_version}</driver_version>",
        f"\t<cuda_version>{ctx.cuda_version}</cuda_version>",
        f"\t<attached_gpus>{len(ctx.listed)}</attached_gpus>",
    ]
    for gpu in ctx.listed:
        lines.append(f'\t<gpu id="{gpu["bus_id"]}">')
        _render_xml(_gpu_model(ctx, gpu), 2, lines)
        lines.append("\t</gpu>")
    lines += ["", "</nvidia_smi_log>"]
    out.write("\n".join(lines) + "\n")
    return 0


def view_query_text(ctx: Context, out) -> int:
    lines = [
        "",
        "==============NVSMI LOG==============",
        "",
        f"{'Timestamp'.ljust(42)}: {_timestamp()}",
        f"{'Driver Version'.ljust(42)}: {ctx.driver_version}",
        f"{'CUDA Version'.ljust(42)}: {ctx.cuda_version}",
        "",
        f"{'Attached GPUs'.ljust(42)}: {len(ctx.listed)}",
    ]
    for gpu in ctx.listed:
        lines.append(f"GPU {gpu['bus_id']}")
        _render_text(_gpu_model(ctx, gpu), 1, lines)
        lines.append("")
    out.write("\n".join(lines) + "\n")
    return 0


def view_list(ctx: Context, out) -> int:
    for gpu in ctx.listed:
        out.write(f"GPU {gpu['index']}: {ctx.gpu['product_name']} (UUID: {ctx.uuid(gpu)})\n")
    return 0


def view_query_gpu(ctx: Context, fields: list[str], fmt: str, out, err) -> int:
    options = [o.strip() for o in fmt.split(",") if o.strip()]
    if not options or options[0] != "csv" or any(o not in ("csv", "noheader", "nounits") for o in options):
        err.write(f'"{fmt}" is not a valid format. Only csv format is supported.\n')
        return 2
    specs = []
    for field in fields:
        name = QUERY_ALIASES.get(field, field)
        if name not in QUERY_FIELDS:
            err.write(f'Field "{field}" is not a valid field to query.\n\n')
            return 2
        specs.append(QUERY_FIELDS[name])
    if "noheader" not in options:
        out.write(", ".join(f"{h} [{u}]" if u else h for h, u, _ in specs) + "\n")
    for gpu in ctx.listed:
        values = []
        for _header, unit, fn in specs:
            value = fn(ctx, gpu)
            if value is None:
                value = NA
            elif unit and "nounits" in options and value.endswith(" " + unit):
                value = value[: -len(unit) - 1]
            elif unit and "nounits" not in options and value != NA and not value.endswith(unit):
                value = f"{value} {unit}"
            values.append(value)
        out.write(", ".join(values) + "\n")
    for gpu in ctx.fallen:
        out.write(ctx.unable(gpu))
    if any(f.startswith(CLOCK_FIELD_PREFIXES) for f in fields):
        _next_sample(ctx.sample)
    return 15 if ctx.fallen else 0


def _nic_pair(a: dict, b: dict, gpu_count: int) -> str:
    """NIC<->NIC code: the closest common path through any GPU both reach; SYS across NUMA nodes."""
    if a["numa"] != b["numa"]:
        return "SYS"
    best = "NODE"
    for g in range(gpu_count):
        code_a = a.get("gpu_affinity", {}).get(str(g), "SYS")
        code_b = b.get("gpu_affinity", {}).get(str(g), "SYS")
        worst = max(code_a, code_b, key=_RANK.get)
        if _RANK[worst] < _RANK[best]:
            best = worst
    return best


def view_topo(ctx: Context, out) -> int:
    topology = ctx.gpu.get("topology") or []
    hcas = visible_hcas(ctx.hw)
    cpus = ctx.hw.get("system", {}).get("cpus_per_numa") or []
    gpu_names = [f"GPU{g['index']}" for g in ctx.listed]
    nic_names = [f"NIC{i}" for i in range(len(hcas))]
    numa_id = ctx.driver_major >= 535
    header = [*gpu_names, *nic_names, "CPU Affinity", "NUMA Affinity"] + (["GPU NUMA ID"] if numa_id else [])
    # Driver 580 underlines the header with ANSI codes, even into a file or pipe (580.159.04 capture,
    # tests/fixtures/nvidia-smi/gpuforge-device_1xh200_drv580.159.04_topo_m.txt).
    underline = ("\x1b[4m", "\x1b[0m") if ctx.driver_major >= 580 else ("", "")
    lines = ["\t" + underline[0] + "\t".join(header) + underline[1]]
    count = int(ctx.gpu.get("count") or 0)
    for gpu in ctx.listed:
        row = topology[gpu["profile_index"]]
        cells = [" X " if peer is gpu else row[peer["profile_index"]] for peer in ctx.listed]
        cells += [hca.get("gpu_affinity", {}).get(str(gpu["profile_index"]), "SYS") for hca in hcas]
        numa = gpu.get("numa", 0)
        tail = f"\t{cpus[numa] if numa < len(cpus) else 'N/A'}\t{numa}" + ("\t\tN/A" if numa_id else "")
        lines.append(f"GPU{gpu['index']}\t" + "\t".join(cells) + tail)
    for i, hca in enumerate(hcas):
        cells = [hca.get("gpu_affinity", {}).get(str(g["profile_index"]), "SYS") for g in ctx.listed]
        cells += [" X " if j == i else _nic_pair(hca, other, count) for j, other in enumerate(hcas)]
        lines.append(f"NIC{i}\t" + "\t".join(cells))
    text = "\n".join(lines) + "\n\n" + LEGEND
    if hcas:
        text += "\nNIC Legend:\n\n" + "".join(f"  NIC{i}: {hca['name']}\n" for i, hca in enumerate(hcas))
    out.write(text)
    return 0


def view_nvlink(ctx: Context, out, errors: bool = False) -> int:
    """nvlink -s: `Link N: <speed> GB/s` or `<inactive>`; nvlink -e: replay, recovery and CRC counters per
    link, a blank line between links (layout of the public H100 output in tests/fixtures/nvidia-smi).

    A GPU without NVLink prints nothing, not even its `GPU n: ... (UUID ...)` line: with no such GPU both views
    print nothing and exit 0 (driver 580.159.04 on an H200 VM, gpuforge-device_1xh200_drv580.159.04_nvlink_
    status_no_links.txt and _nvlink_e_no_links.txt in tests/fixtures/nvidia-smi)."""
    nvlink = ctx.gpu.get("nvlink") or {}
    links = range(int(nvlink.get("links") or 0))
    if not links:
        return 0
    for gpu in ctx.listed:
        out.write(f"GPU {gpu['index']}: {ctx.gpu['product_name']} (UUID: {ctx.uuid(gpu)})\n")
        for link in links:
            if errors:
                counters = gpu["nvlink_errors"].get(link, {})
                for key, label in (("replay_errors", "Replay"), ("recovery_errors", "Recovery"), ("crc_errors", "CRC")):
                    out.write(f"         Link {link}: {label} Errors: {counters.get(key, 0)}\n")
                if link != links[-1]:
                    out.write("\n")
            elif link in gpu["nvlink_inactive"]:
                out.write(f"         Link {link}: <inactive>\n")
            else:
                out.write(f"         Link {link}: {float(nvlink['speed_gbyte_per_s']):g} GB/s\n")
    return 0


def view_table(ctx: Context, out) -> int:
    """Bare `nvidia-smi`: the R535 summary table (fixed 89-column layout)."""
    rule = "+-----------------------------------------+----------------------+----------------------+"
    versions = f"Driver Version: {ctx.driver_version:<12} CUDA Version: {ctx.cuda_version:<9}"
    head = f"| NVIDIA-SMI {ctx.driver_version:<22} {versions}|"
    lines = [
        f"{_timestamp()}       ",
        "+---------------------------------------------------------------------------------------+",
        head,
        "|-----------------------------------------+----------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                      |               MIG M. |",
        "|=========================================+======================+======================|",
    ]
    for gpu in ctx.listed:
        persist = "On" if ctx.persistence == "Enabled" else "Off"
        ecc = str(gpu["ecc_dbe"]) if ctx.ecc_mode else "N/A"
        _reserved, used, _free = ctx.memory(gpu)
        temp = "N/A" if ctx.vgpu else f"{ctx.temperature(gpu)}C"
        draw = ctx.power_draw(gpu)
        power = "N/A /  N/A" if ctx.vgpu else f"{round(draw)}W / {round(ctx.gpu['power_limit_w'])}W"
        left = f" {gpu['index']:>3}  {ctx.gpu['product_name'][:20]:<20}"
        memory = f"{used}MiB / {ctx.gpu['memory_mib']}MiB"
        lines.append(f"|{left}{(persist + '  '):>{41 - len(left)}}| {gpu['bus_id']} Off | {ecc:>20} |")
        left = f" N/A  {temp:>4}    P0"
        lines.append(f"|{left}{(power + ' '):>{41 - len(left)}}|{(memory + ' '):>22}|{'0%':>8}      Default |")
        lines.append(
            f"|                                         |                      | {ctx.mig_mode or 'N/A':>20} |"
        )
        lines.append(rule)
    lines += [
        " " * 89,
        "+---------------------------------------------------------------------------------------+",
        "| Processes:                                                                            |",
        "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |",
        "|        ID   ID                                                             Usage      |",
        "|=======================================================================================|",
        "|  No running processes found                                                           |",
        "+---------------------------------------------------------------------------------------+",
    ]
    out.write("\n".join(lines) + "\n")
    return 0


def _parse_args(argv: list[str]):
    """Return (view, options) or raise ValueError with nvidia-smi's complaint."""
    opts = {"view": "table", "ids": None, "fields": None, "format": None, "xml": False, "query": False}
    args = list(argv)
    if args and args[0] == "topo":
        if "-m" not in args[1:] and "--matrix" not in args[1:]:
            raise ValueError("topo: only -m (--matrix) is simulated")
        opts["view"] = "topo"
        return opts
    if args and args[0] == "nvlink":
        rest = args[1:]
        flags = {"-s", "--status", "-e", "--errorcounters"}
        if not any(a in flags for a in rest):
            raise ValueError("nvlink: only --status (-s) and --errorcounters (-e) are simulated")
        opts["view"] = "nvlink"
        opts["nvlink_errors"] = any(a in ("-e", "--errorcounters") for a in rest)
        args = [a for a in rest if a not in flags]
    i = 0
    while i < len(args):
        arg = args[i]
        value = None
        if "=" in arg and arg.startswith("--"):
            arg, value = arg.split("=", 1)
        if arg in ("-L", "--list-gpus"):
            opts["view"] = "list"
        elif arg in ("-q", "--query"):
            opts["query"] = True
        elif arg in ("-x", "--xml-format"):
            opts["xml"] = True
        elif arg in ("-i", "--id"):
            if value is None:
                i += 1
                value = args[i] if i < len(args) else None
            if value is None:
                raise ValueError("Option -i needs a GPU index")
            opts["ids"] = value
        elif arg.startswith("-i") and arg[2:].isdigit():
            opts["ids"] = arg[2:]
        elif arg in ("--query-gpu", "--format"):
            if value is None:
                i += 1
                value = args[i] if i < len(args) else ""
            opts["fields" if arg == "--query-gpu" else "format"] = value
        else:
            raise ValueError(f'Invalid combination of input arguments. Please run "nvidia-smi -h" for help. ({arg})')
        i += 1
    if opts["view"] == "nvlink":
        return opts
    if opts["fields"] is not None:
        opts["view"] = "query_gpu"
    elif opts["query"]:
        opts["view"] = "query_xml" if opts["xml"] else "query_text"
    return opts


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        opts = _parse_args(argv)
    except ValueError as exc:
        err.write(f"{exc}\n")
        return 2
    # Real nvidia-smi asks nvidia-modprobe to load the module; only an installed module can be loaded.
    if "nvidia" not in driver_state.loaded_modules() and not driver_state.load_module("nvidia"):
        out.write(NO_DRIVER)
        return 9
    hw = load_hardware()
    selected = None
    if opts["ids"] is not None:
        try:
            selected = [int(part) for part in opts["ids"].split(",")]
        except ValueError:
            err.write(f"Invalid GPU index: {opts['ids']}\n")
            return 2
    ctx = Context(hw, selected)
    if not ctx.all:  # no GPU in the profile, or -i named none of them
        out.write("No devices were found\n")
        return 6
    view = opts["view"]
    if view in ("table", "query_text", "query_xml") and ctx.fallen:
        for gpu in ctx.fallen:
            out.write(ctx.unable(gpu))
        return 15
    if view == "list":
        return view_list(ctx, out)
    if view == "query_gpu":
        if not opts["format"]:
            err.write("--format is required with --query-gpu\n")
            return 2
        return view_query_gpu(
            ctx, [f.strip() for f in opts["fields"].split(",") if f.strip()], opts["format"], out, err
        )
    if view == "query_xml":
        return view_query_xml(ctx, out)
    if view == "query_text":
        return view_query_text(ctx, out)
    if view == "topo":
        return view_topo(ctx, out)
    if view == "nvlink":
        return view_nvlink(ctx, out, errors=opts.get("nvlink_errors", False))
    return view_table(ctx, out)


if __name__ == "__main__":
    sys.exit(main())
