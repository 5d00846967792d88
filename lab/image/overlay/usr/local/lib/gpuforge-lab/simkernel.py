#!/usr/bin/python3
"""Simulated kernel of a gpuforge lab node (docs/lab.md, "What is simulated").

Lab nodes are containers on a shared host kernel: they can neither see a GPU nor
load a kernel module. This file keeps what the kernel would know:
- the module table (/run/gpuforge-lab/modules, one JSON object a line; /run is a
  tmpfs, so a container restart is a reboot that empties it),
- the kernel log (/var/log/gpuforge-lab/kern.log), read by the lab's dmesg,
- the initramfs rebuild log (/var/lib/gpuforge-lab/initramfs.log).
A module is loadable when a package installed its marker under
/usr/lib/gpuforge-lab/modules/ (as DKMS would install the .ko) or the lab image
ships it as an in-box driver under /usr/lib/gpuforge-lab/kernel-modules/.
Marker files hold JSON: {"size": int, "depends": [names], "version": str}.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

RUN = os.environ.get("GPUFORGE_LAB_RUN", "/run/gpuforge-lab")
LIB = os.environ.get("GPUFORGE_LAB_LIB", "/usr/lib/gpuforge-lab")
ETC = os.environ.get("GPUFORGE_LAB_ETC", "/etc")
LOG_DIR = os.environ.get("GPUFORGE_LAB_LOG", "/var/log/gpuforge-lab")
STATE_DIR = os.environ.get("GPUFORGE_LAB_STATE", "/var/lib/gpuforge-lab")
HARDWARE = os.environ.get("GPUFORGE_LAB_HARDWARE", "/etc/gpuforge-lab/hardware.json")
REAL_MODPROBE = "/usr/sbin/modprobe"
INBOX_HCA_MODULES = ["ib_core", "mlx5_core", "mlx5_ib", "ib_uverbs", "ib_umad", "ib_ipoib", "rdma_cm", "rdma_ucm"]


def _table_path() -> str:
    return os.path.join(RUN, "modules")


def _norm(name: str) -> str:
    return name.replace("-", "_")


def load_hardware() -> dict:
    try:
        with open(HARDWARE, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}


def read_table() -> list[dict]:
    try:
        with open(_table_path(), encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def write_table(entries: list[dict]) -> None:
    os.makedirs(RUN, exist_ok=True)
    tmp = _table_path() + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(entry, sort_keys=True) + "\n" for entry in entries)
    os.replace(tmp, _table_path())


def marker(name: str) -> dict | None:
    """Metadata of an installed module: package-installed (updates) wins over in-box."""
    for directory in ("modules", "kernel-modules"):
        path = os.path.join(LIB, directory, name + ".ko")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                meta = json.load(handle)
            meta["name"] = name
            meta["origin"] = directory
            return meta
    return None


def kernel_log(message: str) -> None:
    os.makedirs(LOG_DIR, exist_ok=True)
    uptime = time.monotonic()
    with open(os.path.join(LOG_DIR, "kern.log"), "a", encoding="utf-8") as handle:
        handle.write(f"[{uptime:12.6f}] {message}\n")


def _modprobe_conf_lines() -> list[list[str]]:
    lines = []
    for path in sorted(glob.glob(os.path.join(ETC, "modprobe.d", "*.conf"))):
        with open(path, encoding="utf-8") as handle:
            lines.extend(line.split() for line in handle if line.strip() and not line.startswith("#"))
    return lines


def blacklisted(name: str) -> bool:
    """True when modprobe.d blacklists the module or replaces its install with /bin/false."""
    for words in _modprobe_conf_lines():
        if words[:2] == ["blacklist", name]:
            return True
        if words[:2] == ["install", name] and words[2:3] in (["/bin/false"], ["/bin/true"]):
            return True
    return False


def _fault(hardware: dict, kind: str) -> list[dict]:
    return [fault for fault in hardware.get("faults", []) if fault.get("type") == kind]


class ModprobeError(Exception):
    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def load(name: str, table: list[dict], hardware: dict) -> bool:
    """Load a module and its dependencies into table; returns True when something was loaded."""
    name = _norm(name)
    if any(entry["name"] == name for entry in table):
        return False
    meta = marker(name)
    if meta is None:
        raise ModprobeError(f"modprobe: FATAL: Module {name} not found in directory /lib/modules/{os.uname().release}")
    if name in ("nvidia_peermem", "nv_peer_mem") and _fault(hardware, "peermem_load_failure"):
        kernel_log(f"{name}: disagrees about version of symbol ib_register_peer_memory_client")
        raise ModprobeError(f"modprobe: ERROR: could not insert '{name}': Invalid argument")
    if name == "nvidia" and any(entry["name"] == "nouveau" for entry in table):
        kernel_log("NVRM: The NVIDIA probe routine was not called for 1 device(s).")
        kernel_log("NVRM: This can occur when another driver (nouveau) was loaded and obtained ownership of the GPU")
        raise ModprobeError("modprobe: ERROR: could not insert 'nvidia': No such device")
    for dependency in meta.get("depends", []):
        try:
            load(dependency, table, hardware)
        except ModprobeError as exc:
            kernel_log(f"{name}: Unknown symbol in module ({dependency} unavailable)")
            raise ModprobeError(
                f"modprobe: ERROR: could not insert '{name}': Unknown symbol in module, "
                "or unknown parameter (see dmesg)"
            ) from exc
    table.append({"name": name, "size": int(meta.get("size", 16384)), "depends": meta.get("depends", [])})
    kernel_log(f"{name}: module loaded (version {meta.get('version', 'inbox')})")
    return True


def unload(name: str, table: list[dict]) -> bool:
    name = _norm(name)
    if not any(entry["name"] == name for entry in table):
        return False
    users = [entry["name"] for entry in table if name in entry.get("depends", [])]
    if users:
        raise ModprobeError(f"modprobe: FATAL: Module {name} is in use.")
    table[:] = [entry for entry in table if entry["name"] != name]
    kernel_log(f"{name}: module unloaded")
    return True


def modprobe_main(argv: list[str]) -> int:
    remove = quiet = dry_run = False
    names: list[str] = []
    for arg in argv:
        if arg in ("-r", "--remove"):
            remove = True
        elif arg in ("-q", "--quiet"):
            quiet = True
        elif arg in ("-n", "--dry-run", "--show"):
            dry_run = True
        elif arg.startswith("-"):
            continue
        elif "=" in arg and names:
            continue  # module parameter: accepted, not simulated
        else:
            names.append(arg)
    if not names:
        print("modprobe: ERROR: missing parameters. See -h.", file=sys.stderr)
        return 1
    simulated = [name for name in names if marker(_norm(name)) or not remove]
    if remove and not simulated and os.path.exists(REAL_MODPROBE):
        os.execv(REAL_MODPROBE, [REAL_MODPROBE, *argv])
    table = read_table()
    hardware = load_hardware()
    try:
        targets = names if remove else names[:1]
        for name in targets:
            if remove:
                unload(name, table)
            else:
                load(name, table, hardware)
    except ModprobeError as exc:
        if not quiet:
            print(str(exc), file=sys.stderr)
        return exc.code
    if not dry_run:
        write_table(table)
    return 0


def rmmod_main(argv: list[str]) -> int:
    table = read_table()
    for name in [arg for arg in argv if not arg.startswith("-")]:
        if not any(entry["name"] == _norm(name) for entry in table):
            print(f"rmmod: ERROR: Module {_norm(name)} is not currently loaded", file=sys.stderr)
            return 1
        try:
            unload(name, table)
        except ModprobeError:
            print(f"rmmod: ERROR: Module {_norm(name)} is in use", file=sys.stderr)
            return 1
    write_table(table)
    return 0


def lsmod_main(argv: list[str]) -> int:
    """Same layout as kmod's lsmod: name padded to 19, size right-aligned to 8, refcount, holders."""
    print("Module                  Size  Used by")
    table = read_table()
    for entry in reversed(table):
        holders = [other["name"] for other in table if entry["name"] in other.get("depends", [])]
        line = f"{entry['name']:<19} {entry['size']:>8}  {len(holders)}"
        if holders:
            line += " " + ",".join(holders)
        print(line)
    try:
        with open("/proc/modules", encoding="utf-8") as handle:
            for raw in handle:
                fields = raw.split()
                if len(fields) >= 4:
                    holders = fields[3].strip(",-")
                    line = f"{fields[0]:<19} {fields[1]:>8}  {fields[2]}"
                    print(line + (" " + holders if holders else ""))
    except OSError:
        pass
    return 0


def dmesg_main(argv: list[str]) -> int:
    try:
        with open(os.path.join(LOG_DIR, "kern.log"), encoding="utf-8") as handle:
            sys.stdout.write(handle.read())
    except FileNotFoundError:
        pass
    return 0


def update_initramfs_main(argv: list[str]) -> int:
    os.makedirs(STATE_DIR, exist_ok=True)
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "argv": argv,
        "blacklisted": sorted({w[1] for w in _modprobe_conf_lines() if w[:1] == ["blacklist"] and len(w) > 1}),
    }
    with open(os.path.join(STATE_DIR, "initramfs.log"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
    print(f"update-initramfs: Generating /boot/initrd.img-{os.uname().release}")
    return 0


def _modules_load_d() -> list[str]:
    names = []
    for pattern in ("modules-load.d/*.conf", "modules"):
        for path in sorted(glob.glob(os.path.join(ETC, pattern))):
            with open(path, encoding="utf-8") as handle:
                names.extend(
                    line.strip() for line in handle if line.strip() and not line.lstrip().startswith(("#", ";"))
                )
    return names


# Xid lines the driver logs for a hardware fault as well (NVIDIA "Xid Errors" catalogue,
# https://docs.nvidia.com/deploy/xid-errors/): a GPU that fell off the bus logs Xid 79, a double-bit
# ECC error Xid 48. Explicit `xid` faults come after them.
FAULT_XIDS = {
    "gpu_fallen_off_bus": (79, "GPU has fallen off the bus."),
    "ecc_dbe": (48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer."),
}


def _xid_lines(hardware: dict) -> list[str]:
    devices = (hardware.get("gpu") or {}).get("devices", [])
    lines = []
    implied = [
        {"gpu": fault.get("gpu", 0), "code": code, "message": message}
        for kind, (code, message) in FAULT_XIDS.items()
        for fault in _fault(hardware, kind)
    ]
    for fault in implied + _fault(hardware, "xid"):
        index = int(fault.get("gpu", 0))
        bus = devices[index]["bus_id"] if index < len(devices) else "00000000:00:00.0"
        # Kernel log addresses the GPU as PCI:<domain>:<bus>:<device> (4-digit domain).
        domain, bus_no, dev_fn = bus.split(":")
        pci = f"{domain[-4:]}:{bus_no}:{dev_fn.split('.')[0]}"
        message = fault.get("message", "Graphics Exception")
        lines.append(f"NVRM: Xid (PCI:{pci}): {int(fault.get('code', 79))}, pid=1234, name=python3, {message}")
    return lines


# Fault sxid (lab/profiles/SCHEMA.md): the NVSwitch driver reports a switch error as an SXid in the kernel log when
# the error happens, whether or not nv-fabricmanager runs, in NVIDIA's reporting convention (NVIDIA Fabric Manager
# User Guide, "Runtime NVSwitch and GPU Errors"):
#   nvidia-nvswitchX: SXid (PCI:<switch_pci_bdf>): <SXid_Value>, <Fatal or Non-Fatal>, <Link No> <Error Description>
# followed by raw-information lines with the same prefix (the guide's example and the real samples in
# tests/fixtures/kernel/ print a "Data {...}" line of eight or nine 32-bit words). Codes are printed zero-padded to
# five digits by the driver; the fault's code is used as given.
SXID_MESSAGES = {True: "LTSSM Fault Up", False: "Minion Link DLREQ interrupt"}  # real lines, SOURCES.md


def _sxid_lines(hardware: dict) -> list[str]:
    """The classified line, then a Data line (raw information; zeros here), of each sxid fault in document order."""
    lines = []
    for fault in _fault(hardware, "sxid"):
        fatal = bool(fault.get("fatal", True))
        prefix = f"nvidia-nvswitch{int(fault.get('switch', 0))}: SXid (PCI:{fault.get('pci')}): {int(fault['code'])}"
        message = fault.get("message") or SXID_MESSAGES[fatal]
        lines.append(f"{prefix}, {'Fatal' if fatal else 'Non-fatal'}, Link {int(fault.get('link', 0)):02d} {message}")
        lines.append(f"{prefix}, Data {{{', '.join(['0x00000000'] * 8)}}}")
    return lines


def _link_flap_lines(hardware: dict) -> list[str]:
    """Fault ib_link_flap (lab/profiles/SCHEMA.md): `count` down/up pairs of the port's netdev, worded as
    systemd-networkd logs an IPoIB netdev (Lost/Gained carrier) and mlx5 logs a RoCE one (Link down/up)."""
    lines = []
    for fault in _fault(hardware, "ib_link_flap"):
        hca = next((h for h in hardware.get("hcas") or [] if h.get("name") == fault.get("hca")), {})
        port = next((p for p in hca.get("ports") or [] if int(p.get("port", 1)) == int(fault.get("port", 1))), {})
        dev = port.get("netdev") or f"{fault.get('hca')}/{fault.get('port', 1)}"
        for _ in range(int(fault.get("count", 1))):
            if port.get("link_layer") == "Ethernet":
                lines += [f"mlx5_core {hca.get('bus_id')} {dev}: Link {state}" for state in ("down", "up")]
            else:
                lines += [f"systemd-networkd[612]: {dev}: {state} carrier" for state in ("Lost", "Gained")]
    return lines


# PCIe generation -> (speed as the kernel names it, usable Mb/s per lane): Linux drivers/pci/pci.h
# PCIE_SPEED2STR and PCIE_SPEED2MBS_ENC (8b/10b encoding up to 5 GT/s, 128b/130b from 8 GT/s, 1:1 at 64 GT/s).
PCIE_SPEEDS = {
    1: ("2.5", 2000),
    2: ("5.0", 4000),
    3: ("8.0", 7876),
    4: ("16.0", 15753),
    5: ("32.0", 31507),
    6: ("64.0", 64000),
}


def _pcie_limited_lines(hardware: dict) -> list[str]:
    """Faults pcie_link_degraded / pcie_width_degraded: the kernel's report of a downtrained link (Linux
    drivers/pci/pci.c __pcie_print_link_status) - at enumeration for a GPU (`pci <address>: ...`), at probe
    for an HCA (`mlx5_core <address>: ...`), limited at the root port above the device. Root ports are
    numbered as gpuforge_sim.hardware.pcie_devices numbers them (one per device bus, bus 00, address order)."""
    gpu = hardware.get("gpu") or {}
    missing = {f.get("hca") for f in _fault(hardware, "hca_missing")}
    devices = {}
    for index, device in enumerate(gpu.get("devices") or []):
        domain, bus, rest = device["bus_id"].split(":")
        address = f"{int(domain, 16):04x}:{bus.lower()}:{rest.lower()}"
        devices[address] = ("pci", gpu.get("pcie_gen_max", 3), gpu.get("pcie_width_max", 16), ("gpu", index))
    for hca in hardware.get("hcas") or []:
        if hca.get("name") not in missing:
            limits = (hca.get("pcie_gen_max", 3), hca.get("pcie_width_max", 16))
            devices[hca["bus_id"].lower()] = ("mlx5_core", *limits, ("hca", hca.get("name")))
    roots: dict = {}
    for address in sorted(devices):
        domain, bus, _rest = address.split(":")
        roots.setdefault((domain, bus), f"{domain}:00:{len(roots) + 1:02x}.0")
    lines = []
    faults = _fault(hardware, "pcie_width_degraded") + _fault(hardware, "pcie_link_degraded")
    for address, (driver, gen_max, width_max, target) in sorted(devices.items()):
        mine = [f for f in faults if (target[0] in f and f[target[0]] == target[1])]
        if not mine:
            continue
        gen, width = int(mine[-1].get("gen", gen_max)), int(mine[-1].get("width", width_max))
        (speed, lane), (speed_max, lane_max) = PCIE_SPEEDS[gen], PCIE_SPEEDS[int(gen_max)]
        bw, cap = width * lane, int(width_max) * lane_max
        domain, bus, _rest = address.split(":")
        lines.append(
            f"{driver} {address}: {bw // 1000}.{bw % 1000:03d} Gb/s available PCIe bandwidth, limited by "
            f"{speed} GT/s PCIe x{width} link at {roots[(domain, bus)]} (capable of {cap // 1000}.{cap % 1000:03d} "
            f"Gb/s with {speed_max} GT/s PCIe x{width_max} link)"
        )
    return lines


def boot() -> int:
    """What a booting kernel would do: autoload drivers for present hardware and modules-load.d."""
    hardware = load_hardware()
    table: list[dict] = []
    write_table(table)
    kernel_log(f"Linux version {os.uname().release} (gpuforge lab: simulated kernel log)")
    wanted: list[str] = []
    if (hardware.get("gpu") or {}).get("count", 0) and not blacklisted("nouveau"):
        wanted.append("nouveau")
    if hardware.get("hcas"):
        wanted.extend(INBOX_HCA_MODULES)
    wanted.extend(_modules_load_d())
    status = 0
    for name in wanted:
        try:
            load(name, table, hardware)
        except ModprobeError as exc:
            kernel_log(f"systemd-modules-load: Failed to insert module '{_norm(name)}': {exc}")
            status = 1
    write_table(table)
    for line in (
        _pcie_limited_lines(hardware) + _xid_lines(hardware) + _sxid_lines(hardware) + _link_flap_lines(hardware)
    ):
        kernel_log(line)
    return status


if __name__ == "__main__":
    if sys.argv[1:2] == ["boot"]:
        boot()
        sys.exit(0)
    print("usage: simkernel.py boot", file=sys.stderr)
    sys.exit(2)
