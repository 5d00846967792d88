"""Simulated `lspci` (pciutils) for the lab's GPUs and HCAs, and the sysfs files the node check reads beside it.

`lspci [-v|-vv|-vvv] [-D] [-nn] [-s [[domain:]bus:]dev.fn] [-d vendor:]`: one block per device, sorted by
address: the GPUs and HCAs of the hardware document (lab/profiles/SCHEMA.md) and one PCIe root port above each
device bus (lab topology: root ports on bus 00, numbered in address order; gpuforge_sim.hardware.pcie_devices).
With -vv or more each block shows the Express capability (`LnkCap: Port #0, Speed 16GT/s, Width x16, ...`,
`LnkSta: Speed 16GT/s (ok), Width x16 (ok)` or `(downgraded)`), the AER capability and, for root ports, the
Access Control Services capability (`ACSCtl:` all `-`; the `acs_enabled` fault turns on SrcValid, ReqRedir,
CmpltRedir and UpstreamFwd on the root port above the device, as real root ports with ACS on show them).
Line layout as pciutils prints it (ls-caps.c, ls-ecaps.c: tab indentation, the label, a tab, the values);
the lab prints only the capabilities the checks read. Idle GPUs are shown at their full link speed (real
boards lower it when idle: the node check does not judge GPU speed from lspci).

Every run also writes the sysfs files of those devices under $GPUFORGE_LAB_SYSFS (default
<run dir>/sys), the tree library/gpu_node_check.py reads with `sysfs_root` in the lab:
devices/pci<domain>:00/<root port>/<device>/aer_dev_{correctable,nonfatal,fatal} (Linux
Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats), bus/pci/devices/<address> links to them,
class/infiniband/<hca>/device links and ports/<n>/pkeys/<index> (0x%04x, unused entries 0x0000).
"""

from __future__ import annotations

import argparse
import os
import sys

from gpuforge_sim.hardware import PCIE_GEN_SPEED, faults_of, load_hardware, pcie_devices, port_pkeys, run_dir

PKEY_TABLE_SIZE = 16  # lab size of the P_Key table (ConnectX ports have more entries; unused ones are 0x0000)
ACS_ON = "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
ACS_OFF = "SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
# Error names of the sysfs AER files, in the kernel's order (aer_stats ABI "Sample output"); the lab puts a
# fault's count on the first name of each list.
AER_NAMES = {
    "correctable": (
        "TOTAL_ERR_COR",
        [
            "Receiver Error",
            "Bad TLP",
            "Bad DLLP",
            "RELAY_NUM Rollover",
            "Replay Timer Timeout",
            "Advisory Non-Fatal",
            "Corrected Internal Error",
            "Header Log Overflow",
        ],
    ),
    "nonfatal": (
        "TOTAL_ERR_NONFATAL",
        [
            "Completion Timeout",
            "Undefined",
            "Data Link Protocol",
            "Surprise Down Error",
            "Poisoned TLP",
            "Flow Control Protocol",
            "Completer Abort",
            "Unexpected Completion",
            "Receiver Overflow",
            "Malformed TLP",
            "ECRC",
            "Unsupported Request",
            "ACS Violation",
        ],
    ),
    "fatal": (
        "TOTAL_ERR_FATAL",
        [
            "Surprise Down Error",
            "Undefined",
            "Data Link Protocol",
            "Poisoned TLP",
            "Flow Control Protocol",
            "Completion Timeout",
            "Completer Abort",
            "Unexpected Completion",
            "Receiver Overflow",
            "Malformed TLP",
            "ECRC",
            "Unsupported Request",
            "ACS Violation",
        ],
    ),
}


def sysfs_root() -> str:
    return os.environ.get("GPUFORGE_LAB_SYSFS") or os.path.join(run_dir(), "sys")


def _bridges(devices: list[dict]) -> list[dict]:
    """One root port per device bus: address, link of the widest/fastest device below it, ACS state."""
    ports: dict = {}
    for device in devices:
        port = ports.setdefault(
            device["bridge"],
            {"address": device["bridge"], "gen_max": 0, "width_max": 0, "gen": 0, "width": 0, "acs": False},
        )
        for key in ("gen_max", "width_max", "gen", "width"):
            port[key] = max(port[key], device[key])
        port["acs"] = port["acs"] or device["acs"]
    return sorted(ports.values(), key=lambda p: p["address"])


def _link_lines(port: int, device: dict) -> list[str]:
    speed, speed_max = PCIE_GEN_SPEED[device["gen"]], PCIE_GEN_SPEED[device["gen_max"]]
    speed_note = "downgraded" if device["gen"] < device["gen_max"] else "ok"
    width_note = "downgraded" if device["width"] < device["width_max"] else "ok"
    return [
        f"\t\tLnkCap:\tPort #{port}, Speed {speed_max}GT/s, Width x{device['width_max']}, ASPM not supported",
        "\t\t\tClockPM- Surprise- LLActRep- BwNot- ASPMOptComp+",
        f"\t\tLnkSta:\tSpeed {speed}GT/s ({speed_note}), Width x{device['width']} ({width_note})",
        "\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-",
    ]


def _aer_lines() -> list[str]:
    return [
        "\tCapabilities: [100 v2] Advanced Error Reporting",
        "\t\tUESta:\tDLP- SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt- RxOF- MalfTLP- ECRC- UnsupReq- ACSViol-",
        "\t\tCESta:\tRxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr-",
    ]


def _name(address: str, domain: bool) -> str:
    return address if domain or not address.startswith("0000:") else address[5:]


def blocks(hw: dict, verbose: int, domain: bool) -> list[tuple[str, str, list[str]]]:
    """(address, vendor id, lines) per device, root ports included, sorted by address."""
    devices = pcie_devices(hw)
    found = []
    for port in _bridges(devices):
        name = _name(port["address"], domain)
        lines = [f"{name} PCI bridge: gpuforge lab PCIe root port (prog-if 00 [Normal decode])"]
        if verbose >= 2:
            lines.append("\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00")
            lines += _link_lines(int(port["address"].split(":")[2].split(".")[0], 16), port)
            lines += _aer_lines()
            lines.append("\tCapabilities: [2a0 v1] Access Control Services")
            lines.append("\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+")
            lines.append(f"\t\tACSCtl:\t{ACS_ON if port['acs'] else ACS_OFF}")
            lines.append("\tKernel driver in use: pcieport")
        found.append((port["address"], "8086", lines))
    for device in devices:
        vendor = "10de" if device["kind"] == "gpu" else "15b3"
        lines = [f"{_name(device['address'], domain)} {device['description']}"]
        if verbose >= 1:
            lines.append(f"\tNUMA node: {device.get('numa', 0)}")
        if verbose >= 2:
            lines.append("\tCapabilities: [60] Express (v2) Endpoint, MSI 00")
            lines += _link_lines(0, device)
            lines += _aer_lines()
            lines.append(f"\tKernel driver in use: {'nvidia' if device['kind'] == 'gpu' else 'mlx5_core'}")
        found.append((device["address"], vendor, lines))
    return sorted(found, key=lambda block: block[0])


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _link(target: str, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.islink(path) or os.path.exists(path):
        os.unlink(path)
    os.symlink(os.path.relpath(target, os.path.dirname(path)), path)


def aer_text(kind: str, count: int) -> str:
    total, names = AER_NAMES[kind]
    return "".join(f"{name} {count if i == 0 else 0}\n" for i, name in enumerate(names)) + f"{total} {count}\n"


def write_sysfs(hw: dict, root: str | None = None) -> str:
    """Write the sysfs files of the node's GPUs, HCAs and root ports under root; returns root."""
    root = root or sysfs_root()
    devices = pcie_devices(hw)
    for port in _bridges(devices):
        domain = port["address"].split(":")[0]
        path = os.path.join(root, "devices", f"pci{domain}:00", port["address"])
        for kind in AER_NAMES:
            _write(os.path.join(path, f"aer_dev_{kind}"), aer_text(kind, 0))
        _link(path, os.path.join(root, "bus", "pci", "devices", port["address"]))
    for device in devices:
        domain = device["address"].split(":")[0]
        path = os.path.join(root, "devices", f"pci{domain}:00", device["bridge"], device["address"])
        for kind in AER_NAMES:
            _write(os.path.join(path, f"aer_dev_{kind}"), aer_text(kind, device["aer"][kind]))
        _link(path, os.path.join(root, "bus", "pci", "devices", device["address"]))
        if device["kind"] != "hca":
            continue
        hca = next(h for h in hw.get("hcas") or [] if h.get("name") == device["name"])
        _link(path, os.path.join(root, "class", "infiniband", device["name"], "device"))
        for port in hca.get("ports") or []:
            number = int(port.get("port", 1))
            keys = port_pkeys(hw, device["name"], number)
            table = os.path.join(root, "class", "infiniband", device["name"], "ports", str(number), "pkeys")
            for index in range(PKEY_TABLE_SIZE):
                value = int(keys[index], 16) if index < len(keys) else 0
                _write(os.path.join(table, str(index)), f"0x{value:04x}\n")
    # The kernel's taint mask beside the tree (<root>/../proc/sys/kernel/tainted, where gpu_node_check reads it):
    # the bits of the kernel_taint faults, else 0.
    taint = sum(1 << bit for fault in faults_of(hw, "kernel_taint") for bit in set(fault.get("bits") or []))
    _write(os.path.join(os.path.dirname(os.path.normpath(root)), "proc", "sys", "kernel", "tainted"), f"{taint}\n")
    return root


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lspci", add_help=True)
    parser.add_argument("-v", action="count", default=0, dest="verbose")
    parser.add_argument("-D", action="store_true", dest="domain")
    parser.add_argument("-n", action="count", default=0, dest="numeric")
    parser.add_argument("-s", dest="slot")
    parser.add_argument("-d", dest="vendor")
    return parser


def _selected(address: str, slot: str | None) -> bool:
    if not slot:
        return True
    slot = slot.lower()
    return address == slot or address.endswith(":" + slot) or address[5:] == slot


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        hw = load_hardware()
    except FileNotFoundError:
        return 0  # no hardware document: a node without GPUs or HCAs lists none of them
    write_sysfs(hw)
    vendor = (args.vendor or "").split(":")[0].lower()
    out = []
    for address, device_vendor, lines in blocks(hw, args.verbose, args.domain):
        if _selected(address, args.slot) and (not vendor or vendor == device_vendor):
            out.append("\n".join(lines) + ("\n" if args.verbose else ""))
    sys.stdout.write("\n".join(out) if args.verbose else "".join(b + "\n" for b in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
