"""Simulated `opensm` (InfiniBand subnet manager): a daemon that sweeps once and stays up.

It prints the banner and the state changes real OpenSM prints (DISCOVERING, MASTER, SUBNET UP)
to stdout and to /var/log/opensm.log ($GPUFORGE_LAB_OPENSM_LOG), binding to the first active
InfiniBand port of the node's hardware document, then sleeps until it is stopped.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from gpuforge_sim import hardware

VERSION = "5.21.0.MLNX20241126.dc7c2998"


def port_guid(hw: dict) -> str | None:
    """GUID of the first Active InfiniBand port (port GUID = node GUID + port - 1, as on ConnectX)."""
    for hca in hardware.visible_hcas(hw):
        for port in hca.get("ports", []):
            if port.get("link_layer") == "InfiniBand" and port.get("state") == "Active":
                return f"0x{int(hca['node_guid'], 16) + int(port['port']) - 1:016x}"
    return None


def banner(hw: dict) -> tuple[list[str], int]:
    log_file = os.environ.get("GPUFORGE_LAB_OPENSM_LOG", "/var/log/opensm.log")
    out = [
        "-------------------------------------------------",
        f"OpenSM {VERSION}",
        "Command Line Arguments:",
        f" Log File: {log_file}",
        "-------------------------------------------------",
        f"OpenSM {VERSION}",
        "",
    ]
    guid = port_guid(hw)
    if guid is None:
        out.append("opensm: No local ports.  Exiting.")  # nothing to bind to, as on a host without an IB HCA
        return out, 1
    out += [
        f"Using default GUID {guid}",
        "Entering DISCOVERING state",
        "",
        "Entering MASTER state",
        "",
        "SUBNET UP",
        "",
    ]
    return out, 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--version" in args or "-V" in args:
        print(f"OpenSM {VERSION}")
        return 0
    lines, status = banner(hardware.load_hardware())
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    try:
        log_file = os.environ.get("GPUFORGE_LAB_OPENSM_LOG", "/var/log/opensm.log")
        with open(log_file, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        pass
    if status or "--once" in args:  # --once: lab/test convenience, sweep and exit
        return status
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
