"""Simulated NVSwitch driver errors: the kernel-log lines of the `sxid` fault (lab/profiles/SCHEMA.md).

The NVSwitch driver reports a switch error as an SXid in the kernel log, in NVIDIA's reporting convention
(NVIDIA Fabric Manager User Guide, "Runtime NVSwitch and GPU Errors",
https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html):
    nvidia-nvswitchX: SXid (PCI:<switch_pci_bdf>): <SXid_Value>, <Fatal or Non-Fatal>, <Link No> <Error Description>
followed by raw-information lines with the same prefix (the guide's example and the real samples in
tests/fixtures/kernel/ print a "Data {...}" line of eight or nine 32-bit words). Codes are printed zero-padded to
five digits by the driver; the fault's code is used as given.

In the lab the lines are written when nv-fabricmanager brings the NVSwitch fabric up (the links train then, and
real link SXids such as 22013 or 20034 show up at that point), once per boot: the marker lives in the run
directory, a tmpfs that a container restart empties. The kernel log is the file the lab's dmesg reads
(simkernel.py: $GPUFORGE_LAB_LOG/kern.log, lines "[<uptime>] <message>").
"""

from __future__ import annotations

import os
import time

from gpuforge_sim.hardware import faults_of, run_dir

DEFAULT_LOG_DIR = "/var/log/gpuforge-lab"
MARKER = "nvswitch-sxid-logged"
DEFAULT_MESSAGES = {True: "LTSSM Fault Up", False: "Minion Link DLREQ interrupt"}  # real lines, SOURCES.md


def sxid_lines(hw: dict) -> list[str]:
    """The kernel-log messages of the node's `sxid` faults, in document order: the classified line, then a
    Data line (raw information; zeros here)."""
    lines = []
    for fault in faults_of(hw, "sxid"):
        fatal = bool(fault.get("fatal", True))
        prefix = f"nvidia-nvswitch{int(fault.get('switch', 0))}: SXid (PCI:{fault.get('pci')}): {int(fault['code'])}"
        message = fault.get("message") or DEFAULT_MESSAGES[fatal]
        lines.append(f"{prefix}, {'Fatal' if fatal else 'Non-fatal'}, Link {int(fault.get('link', 0)):02d} {message}")
        lines.append(f"{prefix}, Data {{{', '.join(['0x00000000'] * 8)}}}")
    return lines


def log_sxids(hw: dict) -> int:
    """Append the sxid fault lines to the simulated kernel log, once per boot; returns the lines written."""
    marker = os.path.join(run_dir(), MARKER)
    lines = sxid_lines(hw)
    if not lines or os.path.exists(marker):
        return 0
    log_dir = os.environ.get("GPUFORGE_LAB_LOG", DEFAULT_LOG_DIR)
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, "kern.log"), "a", encoding="utf-8") as handle:
        handle.writelines(f"[{time.monotonic():12.6f}] {line}\n" for line in lines)
    os.makedirs(run_dir(), exist_ok=True)
    with open(marker, "w", encoding="ascii") as handle:
        handle.write(f"{len(lines)}\n")
    return len(lines)
