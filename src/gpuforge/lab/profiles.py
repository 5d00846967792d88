"""Compile a lab hardware profile (lab/profiles/<name>.yml) plus faults into a node's hardware.json.

The schema is lab/profiles/SCHEMA.md. Every error is a ValueError naming the profile file and the
field, so a typo in a profile or an inventory's fault list is found before a lab node boots.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

PROFILES_DIR = Path(__file__).resolve().parents[3] / "lab" / "profiles"

TOPO_CODES = {"X", "SYS", "NODE", "PHB", "PXB", "PIX"}
IB_STATES = {"Active", "Down", "Init", "Armed", "Polling"}
FAULT_STATES = {"Down", "Polling", "Init", "Armed"}
# The unlicensed states nvidia-smi prints (module_utils/gpuforge_vgpu_license.py cites them).
VGPU_UNLICENSED_STATES = {"Unlicensed", "Unlicensed (Restricted)", "Unlicensed (Unrestricted)"}
WIDTHS = {"1X", "2X", "4X", "8X", "12X"}
MTUS = {256, 512, 1024, 2048, 4096}
GPU_BUS_RE = re.compile(r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$")
HCA_BUS_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
GUID_RE = re.compile(r"^0x[0-9a-f]{16}$")
NVLINK_RE = re.compile(r"^NV[1-9][0-9]*$")

# Fault table of SCHEMA.md: type -> (required parameters, optional parameters).
FAULT_PARAMS: dict[str, tuple[set[str], set[str]]] = {
    "gpu_missing": ({"gpu"}, set()),
    "gpu_fallen_off_bus": ({"gpu"}, set()),
    "ecc_dbe": ({"gpu", "count"}, set()),
    "row_remap_pending": ({"gpu"}, set()),
    "xid": ({"gpu", "code"}, {"message"}),
    "ib_port_state": ({"hca", "port", "state"}, {"phys_state"}),
    "ib_port_rate": ({"hca", "port", "rate_gbit_per_s"}, set()),
    "hca_missing": ({"hca"}, set()),
    "pcie_width_degraded": ({"gpu", "width"}, {"gen"}),
    "thermal_slowdown": ({"gpu"}, set()),
    "peermem_load_failure": (set(), set()),
    "row_remap_failure": ({"gpu"}, set()),
    "remapped_rows": ({"gpu"}, {"correctable", "uncorrectable"}),
    "ecc_aggregate": ({"gpu", "memory", "kind", "count"}, set()),
    "clock_events": ({"gpu", "reason", "fraction"}, set()),
    "nvlink_inactive": ({"gpu", "links"}, set()),
    "nvlink_errors": ({"gpu", "link"}, {"replay", "recovery", "crc"}),
    "ib_port_errors": ({"hca", "port", "counters"}, {"initial"}),
    "ib_link_flap": ({"hca", "port"}, {"count"}),
    "hca_firmware": ({"hca", "fw_ver"}, set()),
    "pcie_link_degraded": (set(), {"gpu", "hca", "width", "gen"}),
    "pcie_aer_errors": (set(), {"gpu", "hca", "correctable", "nonfatal", "fatal"}),
    "acs_enabled": (set(), {"gpu", "hca"}),
    "pkey_mismatch": ({"hca", "pkeys"}, {"port"}),
    "dcgm_diag_failure": ({"gpu", "test"}, {"level"}),
    "host_bandwidth_degraded": ({"gpu", "fraction"}, set()),
    "gdr_slow": ({"hca", "fraction"}, {"port"}),
    "gdr_unavailable": (set(), {"hca"}),
    "sxid": ({"switch", "pci", "code", "fatal"}, {"link", "message"}),
    "fabric_manager_down": (set(), set()),
    # The subnet's SMs as sminfo sees them (lab/sim/gpuforge_sim/sminfo.py): none answers / a second master.
    "sm_missing": (set(), set()),
    "sm_duplicate_master": (set(), {"guid", "lid"}),
    # RoCE QoS (lab/sim/gpuforge_sim/mlnx_qos.py puts them back over what was set; the roce_qos module judges them)
    "roce_trust_pcp": ({"hca", "port"}, set()),
    "roce_pfc_off": ({"hca", "port"}, set()),
    "roce_tos_wrong": ({"hca", "port"}, {"tos"}),
}


def _registered_faults() -> dict:
    """The lab faults of the check registry's standalone checks and gpuforge-health's checks
    (module_utils/gpuforge_registry.py): a new check brings its lab fault in its registry entry."""
    from gpuforge.paths import collection_import

    registry = collection_import("plugins.module_utils.gpuforge_registry")
    checks = [*registry.standalone(), *registry.HEALTH_CHECKS]
    return {c.lab_fault[0]: (set(c.lab_fault[1]), set(c.lab_fault[2])) for c in checks if c.lab_fault}


FAULT_PARAMS.update(_registered_faults())
# DCGM 4 diagnostic test -> the first dcgmi diag level that runs it (lab/sim/gpuforge_sim/dcgmi.py TESTS).
DCGM_TEST_LEVELS = {
    "software": 1,
    "memory": 2,
    "pcie": 2,
    "diagnostic": 3,
    "targeted_stress": 3,
    "targeted_power": 3,
    "memory_bandwidth": 3,
    "memtest": 4,
    "pulse_test": 4,
}
# PortCounters fields perfquery prints (rdma-core libibmad/fields.c); ib_port_errors may set these.
PERFQUERY_COUNTERS = {
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortRcvSwitchRelayErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "VL15Dropped",
}
# Faults of the row remapper and SRAM/DRAM ECC counters exist from Ampere on (NVIDIA, "NVIDIA A100 GPU
# Memory Error Management", https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html).
REMAP_ARCHITECTURES = {"Ampere", "Hopper", "Blackwell"}
CLOCK_EVENT_REASONS = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"}


class _Checker:
    """Field checks that raise ValueError('<file>: <field>: <problem>')."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, field: str, problem: str):
        raise ValueError(f"{self.source}: {field}: {problem}")

    def get(self, mapping, key: str, field: str, kind, required: bool = True):
        if not isinstance(mapping, dict):
            self.fail(field.rsplit(".", 1)[0] or field, "must be a mapping")
        if key not in mapping or mapping[key] is None:
            if required:
                self.fail(field, "is required")
            return None
        value = mapping[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            self.fail(field, f"must be {'/'.join(k.__name__ for k in kinds)}, not a boolean")
        if not isinstance(value, kinds):
            self.fail(field, f"must be {'/'.join(k.__name__ for k in kinds)}, got {value!r}")
        return value

    def match(self, value: str, pattern: re.Pattern, field: str, what: str):
        if not pattern.match(str(value)):
            self.fail(field, f"{value!r} is not {what}")


def load_profile(name: str, profiles_dir: str | Path | None = None) -> dict:
    """Read lab/profiles/<name>.yml (or a path to a .yml file) and validate it."""
    path = Path(name) if str(name).endswith((".yml", ".yaml")) else Path(profiles_dir or PROFILES_DIR) / f"{name}.yml"
    if not path.is_file():
        raise ValueError(f"{path}: no such profile")
    with path.open(encoding="utf-8") as handle:
        profile = yaml.safe_load(handle)
    checker = _Checker(str(path))
    if not isinstance(profile, dict):
        checker.fail("(top level)", "must be a mapping")
    if profile.get("name") != path.stem:
        checker.fail("name", f"{profile.get('name')!r} must equal the file name {path.stem!r}")
    _validate_profile(profile, checker)
    return profile


def _validate_system(system: dict, c: _Checker) -> None:
    for key in ("vendor", "product", "cpu_model"):
        c.get(system, key, f"system.{key}", str)
    for key in ("sockets", "numa_nodes", "memory_mib"):
        if c.get(system, key, f"system.{key}", int) <= 0:
            c.fail(f"system.{key}", "must be positive")
    cpus = c.get(system, "cpus_per_numa", "system.cpus_per_numa", list)
    if len(cpus) != system["numa_nodes"]:
        c.fail("system.cpus_per_numa", f"needs {system['numa_nodes']} entries (numa_nodes), got {len(cpus)}")
    for i, cpu in enumerate(cpus):
        c.match(cpu, re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$"), f"system.cpus_per_numa[{i}]", "a CPU list")
    c.get(system, "nvswitch", "system.nvswitch", bool)


def _validate_gpu(gpu: dict, numa_nodes: int, c: _Checker) -> None:
    count = c.get(gpu, "count", "gpu.count", int)
    if count == 0:
        return
    for key in ("product_name", "product_brand", "architecture", "vbios", "serial_prefix"):
        c.get(gpu, key, f"gpu.{key}", str)
    c.get(gpu, "memory_mib", "gpu.memory_mib", int)
    c.get(gpu, "power_limit_w", "gpu.power_limit_w", (int, float))
    if c.get(gpu, "pcie_gen_max", "gpu.pcie_gen_max", int) not in range(1, 7):
        c.fail("gpu.pcie_gen_max", "must be 1..6")
    if c.get(gpu, "pcie_width_max", "gpu.pcie_width_max", int) not in (1, 2, 4, 8, 16, 32):
        c.fail("gpu.pcie_width_max", "must be 1, 2, 4, 8, 16 or 32")
    nvlink = c.get(gpu, "nvlink", "gpu.nvlink", dict, required=False)
    if nvlink is not None:
        c.get(nvlink, "links", "gpu.nvlink.links", int)
        c.get(nvlink, "speed_gbyte_per_s", "gpu.nvlink.speed_gbyte_per_s", (int, float))
    vgpu = c.get(gpu, "vgpu", "gpu.vgpu", dict, required=False)
    if vgpu is not None:
        c.get(vgpu, "type", "gpu.vgpu.type", str)
    devices = c.get(gpu, "devices", "gpu.devices", list)
    if len(devices) != count:
        c.fail("gpu.devices", f"needs {count} entries (gpu.count), got {len(devices)}")
    for i, device in enumerate(devices):
        c.match(
            c.get(device, "bus_id", f"gpu.devices[{i}].bus_id", str),
            GPU_BUS_RE,
            f"gpu.devices[{i}].bus_id",
            "a GPU bus id like 00000000:06:00.0",
        )
        if c.get(device, "numa", f"gpu.devices[{i}].numa", int) not in range(numa_nodes):
            c.fail(f"gpu.devices[{i}].numa", f"must be below system.numa_nodes ({numa_nodes})")
    topology = c.get(gpu, "topology", "gpu.topology", list)
    if len(topology) != count or any(not isinstance(row, list) or len(row) != count for row in topology):
        c.fail("gpu.topology", f"must be a {count}x{count} matrix")
    for i, row in enumerate(topology):
        for j, code in enumerate(row):
            field = f"gpu.topology[{i}][{j}]"
            if (i == j) != (code == "X"):
                c.fail(field, "X belongs on the diagonal only")
            if code not in TOPO_CODES and not NVLINK_RE.match(str(code)):
                c.fail(field, f"{code!r} is not a topo -m code")
            if topology[j][i] != code:
                c.fail(field, f"matrix not symmetric ({code} vs {topology[j][i]})")


def _validate_hca(hca: dict, i: int, gpu_count: int, numa_nodes: int, c: _Checker) -> None:
    base = f"hcas[{i}]"
    for key in ("name", "ca_type", "board_id", "fw_ver", "hw_ver"):
        c.get(hca, key, f"{base}.{key}", str)
    c.get(hca, "vendor_part_id", f"{base}.vendor_part_id", int)
    for key in ("node_guid", "sys_image_guid"):
        c.match(c.get(hca, key, f"{base}.{key}", str), GUID_RE, f"{base}.{key}", "a 0x + 16 hex digit GUID")
    c.match(c.get(hca, "bus_id", f"{base}.bus_id", str), HCA_BUS_RE, f"{base}.bus_id", "a bus id like 0000:05:00.0")
    if c.get(hca, "pcie_gen_max", f"{base}.pcie_gen_max", int, required=False) not in (None, *range(1, 7)):
        c.fail(f"{base}.pcie_gen_max", "must be 1..6")
    if c.get(hca, "pcie_width_max", f"{base}.pcie_width_max", int, required=False) not in (None, 1, 2, 4, 8, 16, 32):
        c.fail(f"{base}.pcie_width_max", "must be 1, 2, 4, 8, 16 or 32")
    if c.get(hca, "numa", f"{base}.numa", int) not in range(numa_nodes):
        c.fail(f"{base}.numa", f"must be below system.numa_nodes ({numa_nodes})")
    affinity = c.get(hca, "gpu_affinity", f"{base}.gpu_affinity", dict, required=False) or {}
    for gpu, code in affinity.items():
        if not str(gpu).isdigit() or int(gpu) >= gpu_count:
            c.fail(f"{base}.gpu_affinity.{gpu}", f"no GPU {gpu} in this profile")
        if code not in TOPO_CODES - {"X"}:
            c.fail(f"{base}.gpu_affinity.{gpu}", f"{code!r} is not a PCIe topo -m code")
    ports = c.get(hca, "ports", f"{base}.ports", list)
    if not ports:
        c.fail(f"{base}.ports", "needs at least one port")
    for j, port in enumerate(ports):
        field = f"{base}.ports[{j}]"
        for key in ("port", "lid", "sm_lid", "lmc", "mtu"):
            c.get(port, key, f"{field}.{key}", int)
        if port["mtu"] not in MTUS:
            c.fail(f"{field}.mtu", f"must be one of {sorted(MTUS)}")
        if c.get(port, "link_layer", f"{field}.link_layer", str) not in ("InfiniBand", "Ethernet"):
            c.fail(f"{field}.link_layer", "must be InfiniBand or Ethernet")
        c.get(port, "rate_gbit_per_s", f"{field}.rate_gbit_per_s", (int, float))
        if c.get(port, "width", f"{field}.width", str) not in WIDTHS:
            c.fail(f"{field}.width", f"must be one of {sorted(WIDTHS)}")
        for key in ("speed", "netdev", "phys_state"):
            c.get(port, key, f"{field}.{key}", str)
        if c.get(port, "state", f"{field}.state", str) not in IB_STATES:
            c.fail(f"{field}.state", f"must be one of {sorted(IB_STATES)}")


def _validate_profile(profile: dict, c: _Checker) -> None:
    c.get(profile, "name", "name", str)
    c.get(profile, "summary", "summary", str)
    system = c.get(profile, "system", "system", dict)
    _validate_system(system, c)
    gpu = c.get(profile, "gpu", "gpu", dict, required=False)
    if gpu is not None:
        _validate_gpu(gpu, system["numa_nodes"], c)
    gpu_count = gpu["count"] if gpu else 0
    hcas = c.get(profile, "hcas", "hcas", list, required=False) or []
    names = [hca.get("name") if isinstance(hca, dict) else None for hca in hcas]
    for i, hca in enumerate(hcas):
        _validate_hca(hca, i, gpu_count, system["numa_nodes"], c)
        if names.count(hca["name"]) > 1:
            c.fail(f"hcas[{i}].name", f"duplicate HCA name {hca['name']!r}")
    for i, nic in enumerate(c.get(profile, "network", "network", list, required=False) or []):
        c.get(nic, "name", f"network[{i}].name", str)
        c.get(nic, "speed_gbit_per_s", f"network[{i}].speed_gbit_per_s", (int, float))


def _validate_fault(fault: dict, i: int, profile: dict, c: _Checker) -> None:
    field = f"faults[{i}]"
    if not isinstance(fault, dict):
        c.fail(field, "must be a mapping")
    kind = fault.get("type")
    if kind not in FAULT_PARAMS:
        c.fail(f"{field}.type", f"{kind!r} is not one of {sorted(FAULT_PARAMS)}")
    required, optional = FAULT_PARAMS[kind]
    missing = sorted(required - set(fault))
    if missing:
        c.fail(field, f"{kind} needs {', '.join(missing)}")
    unknown = sorted(set(fault) - required - optional - {"type"})
    if unknown:
        c.fail(field, f"{kind} does not take {', '.join(unknown)}")
    gpu = profile.get("gpu") or {}
    if "gpu" in fault and (not isinstance(fault["gpu"], int) or fault["gpu"] not in range(gpu.get("count", 0))):
        c.fail(f"{field}.gpu", f"no GPU {fault['gpu']!r} in profile {profile['name']}")
    if "hca" in fault:
        hca = next((h for h in profile.get("hcas") or [] if h["name"] == fault["hca"]), None)
        if hca is None:
            c.fail(f"{field}.hca", f"no HCA {fault['hca']!r} in profile {profile['name']}")
        if "port" in fault and fault["port"] not in [p["port"] for p in hca["ports"]]:
            c.fail(f"{field}.port", f"{fault['hca']} has no port {fault['port']!r}")
    if kind.startswith("roce_"):
        port = next(
            p for h in profile["hcas"] if h["name"] == fault["hca"] for p in h["ports"] if p["port"] == fault["port"]
        )
        if port.get("link_layer") != "Ethernet" or not port.get("netdev"):
            c.fail(
                field, f"{kind} needs a RoCE port (Ethernet, with a netdev); {fault['hca']} port {fault['port']} is not"
            )
        tos = fault.get("tos", 0)
        if kind == "roce_tos_wrong" and (isinstance(tos, bool) or not isinstance(tos, int) or not 0 <= tos <= 255):
            c.fail(f"{field}.tos", "must be an IP ToS byte (0-255)")
    if kind == "ib_port_state" and fault["state"] not in FAULT_STATES:
        c.fail(f"{field}.state", f"must be one of {sorted(FAULT_STATES)}")
    if kind == "vgpu_unlicensed" and not gpu.get("vgpu"):
        c.fail(field, f"vgpu_unlicensed needs a vGPU guest profile (gpu.vgpu); {profile['name']} has none")
    if kind == "vgpu_unlicensed" and fault.get("status", "Unlicensed") not in VGPU_UNLICENSED_STATES:
        c.fail(f"{field}.status", f"must be one of {sorted(VGPU_UNLICENSED_STATES)}")
    if kind == "ecc_dbe" and (not isinstance(fault["count"], int) or fault["count"] < 1):
        c.fail(f"{field}.count", "must be a positive integer")
    if kind == "xid" and not isinstance(fault["code"], int):
        c.fail(f"{field}.code", "must be an integer Xid code")
    if kind == "pcie_width_degraded":
        if fault["width"] not in (1, 2, 4, 8, 16) or fault["width"] >= gpu.get("pcie_width_max", 16):
            c.fail(f"{field}.width", f"must be a link width below gpu.pcie_width_max ({gpu.get('pcie_width_max')})")
        if "gen" in fault and fault["gen"] not in range(1, gpu.get("pcie_gen_max", 3) + 1):
            c.fail(f"{field}.gen", "must be 1..gpu.pcie_gen_max")
    if kind == "ib_port_rate" and not isinstance(fault["rate_gbit_per_s"], (int, float)):
        c.fail(f"{field}.rate_gbit_per_s", "must be a number")
    if kind in ("sm_missing", "sm_duplicate_master"):
        _validate_sm_fault(fault, field, profile, c)
    _validate_gpu_health_fault(kind, fault, field, gpu, c)
    _validate_ib_health_fault(kind, fault, field, profile, c)
    _validate_pcie_fault(kind, fault, field, profile, c)
    _validate_acceptance_fault(kind, fault, field, c)
    _validate_nvswitch_fault(kind, fault, field, profile, c)


def _validate_sm_fault(fault: dict, field: str, profile: dict, c: _Checker) -> None:
    """Subnet manager faults: a node with an InfiniBand port; a second master's GUID and LID as sminfo takes them."""
    ports = [p for h in profile.get("hcas") or [] for p in h.get("ports") or []]
    if not any(p.get("link_layer", "InfiniBand") == "InfiniBand" for p in ports):
        c.fail(field, f"{fault['type']} needs an InfiniBand port; profile {profile['name']} has none")
    if "guid" in fault and not (isinstance(fault["guid"], str) and GUID_RE.match(fault["guid"])):
        c.fail(f"{field}.guid", "must be a port GUID: 0x and 16 lower-case hex digits")
    if "lid" in fault and (not isinstance(fault["lid"], int) or not 1 <= fault["lid"] <= 0xBFFF):
        c.fail(f"{field}.lid", "must be a unicast LID (1-49151)")


def _validate_nvswitch_fault(kind: str, fault: dict, field: str, profile: dict, c: _Checker) -> None:
    """Parameters of the sxid fault (SCHEMA.md): an NVSwitch's index and PCI address, a positive SXid code, its
    Fatal/Non-fatal class and the link it names, on an NVSwitch system."""
    if kind != "sxid":
        return
    if not (profile.get("system") or {}).get("nvswitch"):
        c.fail(field, f"sxid needs an NVSwitch system (system.nvswitch: true), not {profile['name']}")
    for key, minimum in (("switch", 0), ("code", 1), ("link", 0)):
        value = fault.get(key, minimum)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            what = "a positive integer SXid code" if key == "code" else f"a non-negative integer {key} number"
            c.fail(f"{field}.{key}", f"must be {what}, got {value!r}")
    if not isinstance(fault["pci"], str) or not HCA_BUS_RE.match(fault["pci"]):
        c.fail(f"{field}.pci", f"{fault['pci']!r} is not a PCI address such as 0000:c1:00.0")
    if not isinstance(fault["fatal"], bool):
        c.fail(f"{field}.fatal", f"must be true or false, got {fault['fatal']!r}")
    if "message" in fault and (not isinstance(fault["message"], str) or not fault["message"].strip()):
        c.fail(f"{field}.message", "must be a non-empty string: the SXid's error description")


def _validate_acceptance_fault(kind: str, fault: dict, field: str, c: _Checker) -> None:
    """Parameters of the DCGM diagnostic, host bandwidth and GPUDirect RDMA faults (SCHEMA.md)."""
    if kind == "dcgm_diag_failure":
        first = DCGM_TEST_LEVELS.get(fault["test"])
        if first is None:
            c.fail(f"{field}.test", f"must be one of {sorted(DCGM_TEST_LEVELS)}")
        level = fault.get("level", first)
        if not isinstance(level, int) or level not in range(first, 5):
            c.fail(f"{field}.level", f"must be {first}..4: dcgmi diag runs {fault['test']} from level {first} on")
    if kind == "host_bandwidth_degraded" and (
        not isinstance(fault["fraction"], (int, float)) or not 0 < fault["fraction"] < 1
    ):
        c.fail(f"{field}.fraction", "must be a number in (0, 1): the share of the healthy bandwidth left")
    if kind == "gdr_slow" and (not isinstance(fault["fraction"], (int, float)) or not 0 < fault["fraction"] < 1):
        c.fail(f"{field}.fraction", "must be a number in (0, 1): the share of the line rate GPU memory runs reach")


PKEY_RE = re.compile(r"^0x[0-9a-f]{4}$")


def _validate_pcie_fault(kind: str, fault: dict, field: str, profile: dict, c: _Checker) -> None:
    """Parameters of the PCIe link, AER, ACS and P_Key faults (SCHEMA.md): the PCIe faults name one device,
    a GPU (`gpu`) or an HCA (`hca`); a degraded link is below the device's maximum."""
    if kind in ("pcie_link_degraded", "pcie_aer_errors", "acs_enabled") and ("gpu" in fault) == ("hca" in fault):
        c.fail(field, f"{kind} needs one of gpu or hca")
    if kind == "pcie_link_degraded":
        device = profile.get("gpu") or {}
        if "hca" in fault:
            device = next(h for h in profile.get("hcas") or [] if h["name"] == fault["hca"])
        gen_max, width_max = device.get("pcie_gen_max", 3), device.get("pcie_width_max", 16)
        if "width" not in fault and "gen" not in fault:
            c.fail(field, "pcie_link_degraded needs width or gen (or both)")
        if "width" in fault and (fault["width"] not in (1, 2, 4, 8, 16) or fault["width"] >= width_max):
            c.fail(f"{field}.width", f"must be a link width below the device's pcie_width_max ({width_max})")
        if "gen" in fault and fault["gen"] not in range(1, gen_max):
            c.fail(f"{field}.gen", f"must be a PCIe generation below the device's pcie_gen_max ({gen_max})")
    if kind == "pcie_aer_errors":
        counts = [k for k in ("correctable", "nonfatal", "fatal") if k in fault]
        if not counts:
            c.fail(field, "pcie_aer_errors needs correctable, nonfatal or fatal (counts)")
        for key in counts:
            if not isinstance(fault[key], int) or isinstance(fault[key], bool) or fault[key] < 0:
                c.fail(f"{field}.{key}", "must be a non-negative integer")
    if kind == "pkey_mismatch":
        keys = fault["pkeys"]
        if not isinstance(keys, list) or not keys or not all(PKEY_RE.match(str(k)) for k in keys):
            c.fail(f"{field}.pkeys", "must be a non-empty list of P_Keys such as 0x7fff")


def _validate_ib_health_fault(kind: str, fault: dict, field: str, profile: dict, c: _Checker) -> None:
    """Parameters of the perfquery counter, link flap and HCA firmware faults (SCHEMA.md)."""
    if kind == "ib_port_errors":
        for key in ("counters", "initial"):
            value = fault.get(key, {})
            if not isinstance(value, dict) or (key == "counters" and not value):
                c.fail(f"{field}.{key}", "must be a mapping of perfquery counter name to a count")
            for name, count in value.items():
                if name not in PERFQUERY_COUNTERS:
                    c.fail(f"{field}.{key}.{name}", f"not one of {sorted(PERFQUERY_COUNTERS)}")
                if not isinstance(count, int) or count < 0:
                    c.fail(f"{field}.{key}.{name}", "must be a non-negative integer")
    if kind == "ib_link_flap" and (not isinstance(fault.get("count", 1), int) or fault.get("count", 1) < 1):
        c.fail(f"{field}.count", "must be an integer >= 1")
    if kind in ("ib_port_errors", "ib_link_flap"):
        hca = next((h for h in profile.get("hcas") or [] if h["name"] == fault["hca"]), {})
        port = next((p for p in hca.get("ports") or [] if p["port"] == fault["port"]), {})
        if kind == "ib_port_errors" and port.get("link_layer", "InfiniBand") != "InfiniBand":
            c.fail(f"{field}.port", "perfquery counters need an InfiniBand port (RoCE ports have no PMA)")
    if kind == "hca_firmware" and not isinstance(fault["fw_ver"], str):
        c.fail(f"{field}.fw_ver", "must be a string such as 12.28.2006")


def _validate_gpu_health_fault(kind: str, fault: dict, field: str, gpu: dict, c: _Checker) -> None:
    """Parameters of the row remapper, ECC, clock event and NVLink faults (SCHEMA.md)."""
    if kind in ("row_remap_failure", "remapped_rows", "ecc_aggregate") and gpu.get("architecture") not in (
        REMAP_ARCHITECTURES
    ):
        c.fail(field, f"{kind} needs an Ampere or newer GPU (row remapping), not {gpu.get('architecture')}")
    counts = [k for k in ("correctable", "uncorrectable", "count", "replay", "recovery", "crc") if k in fault]
    for key in counts:
        if not isinstance(fault[key], int) or fault[key] < 0:
            c.fail(f"{field}.{key}", "must be a non-negative integer")
    if kind == "ecc_aggregate":
        if fault["memory"] not in ("sram", "dram"):
            c.fail(f"{field}.memory", "must be sram or dram")
        if fault["kind"] not in ("correctable", "uncorrectable"):
            c.fail(f"{field}.kind", "must be correctable or uncorrectable")
    if kind == "clock_events":
        if fault["reason"] not in CLOCK_EVENT_REASONS:
            c.fail(f"{field}.reason", f"must be one of {sorted(CLOCK_EVENT_REASONS)}")
        if not isinstance(fault["fraction"], (int, float)) or not 0 < fault["fraction"] <= 1:
            c.fail(f"{field}.fraction", "must be a number in (0, 1]: the share of samples showing the reason")
    links = int((gpu.get("nvlink") or {}).get("links") or 0)
    if kind in ("nvlink_inactive", "nvlink_errors") and not links:
        c.fail(field, f"{kind} needs a GPU with NVLink (gpu.nvlink.links)")
    if kind == "nvlink_inactive" and (
        not isinstance(fault["links"], list) or not fault["links"] or any(n not in range(links) for n in fault["links"])
    ):
        c.fail(f"{field}.links", f"must be a non-empty list of link numbers 0..{links - 1}")
    if kind == "nvlink_errors" and fault["link"] not in range(links):
        c.fail(f"{field}.link", f"must be a link number 0..{links - 1}")


def hardware_document(profile: dict, faults: list | None) -> dict:
    """Validate a profile and faults; return the hardware.json document (JSON-ready copy)."""
    c = _Checker(f"lab/profiles/{profile.get('name', '?')}.yml" if isinstance(profile, dict) else "profile")
    if not isinstance(profile, dict):
        c.fail("(top level)", "must be a mapping")
    _validate_profile(profile, c)
    faults = faults or []
    if not isinstance(faults, list):
        c.fail("faults", "must be a list")
    for i, fault in enumerate(faults):
        _validate_fault(fault, i, profile, c)
    document = copy.deepcopy(profile)
    if not document.get("gpu"):
        document["gpu"] = {"count": 0, "devices": [], "topology": []}
    document.setdefault("hcas", [])
    document.setdefault("network", [])
    for hca in document["hcas"] or []:
        # JSON object keys are strings; make that explicit so YAML ints and JSON strings read alike.
        hca["gpu_affinity"] = {str(k): v for k, v in (hca.get("gpu_affinity") or {}).items()}
    document["faults"] = copy.deepcopy(faults)
    return document
