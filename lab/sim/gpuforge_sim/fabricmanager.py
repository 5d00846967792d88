"""Simulated nv-fabricmanager (nvidia-fabricmanager-<branch>): NVSwitch fabric manager daemon.

On NVSwitch systems (hardware `system.nvswitch: true`, e.g. DGX H100) it starts, logs like the real
daemon and stays up until stopped (the unit runs it Type=simple). On systems without NVSwitch
(DGX-1, PCIe servers) it exits 1 with the real daemon's error: there is no fabric to manage.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from gpuforge_sim import driver_state
from gpuforge_sim.hardware import load_hardware

NO_NVSWITCH = (
    "request to query NVSwitch device information from NVSwitch driver failed with error:"
    "WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n"
)
LOG_DIR = "/var/log"


def _log(message: str) -> None:
    path = os.path.join(os.environ.get("GPUFORGE_LAB_FM_LOG_DIR", LOG_DIR), "fabricmanager.log")
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"[{time.strftime('%b %d %Y %H:%M:%S')}] [INFO] [tid {os.getpid()}] {message}\n")
    except OSError:
        pass


def main(argv: list[str] | None = None, out=None, err=None, serve: bool = True) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    version = driver_state.driver_constants()["driver_version"]
    if "--version" in argv or "-v" in argv:
        out.write(f"Fabric Manager version is : {version}\n")
        return 0
    if "nvidia" not in driver_state.loaded_modules():
        err.write("fabric manager NVML initialization failed with error Driver Not Loaded\n")
        return 1
    hw = load_hardware()
    if not (hw.get("system") or {}).get("nvswitch"):
        err.write(NO_NVSWITCH)
        _log("request to query NVSwitch device information from NVSwitch driver failed")
        return 1
    _log(f"Fabric Manager version {version} is running with the following configuration options")
    _log(f"Successfully configured all the available GPUs and NVSwitches to route NVLink traffic ({hw.get('name')})")
    if not serve:
        return 0
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
