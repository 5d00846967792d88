"""Simulated nvidia-persistenced: fork (unless --no-fork), write the pid file and sleep until stopped.

While it runs, the simulated nvidia-smi reports Persistence Mode Enabled. On start it creates the device
files /dev/nvidia0..N-1 and /dev/nvidiactl of the node's simulated GPUs.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from gpuforge_sim import driver_state
from gpuforge_sim.hardware import load_hardware


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--version" in argv:
        sys.stdout.write(f"nvidia-persistenced:  version {driver_state.driver_constants()['driver_version']}\n")
        return 0
    if "nvidia" not in driver_state.loaded_modules() and not driver_state.load_module("nvidia"):
        sys.stderr.write("nvidia-persistenced failed to initialize. Check syslog for more details.\n")
        return 1
    try:
        # The real daemon opens every GPU, which makes the driver create /dev/nvidiaN (Slurm's gres.conf
        # and the container hook name those files).
        driver_state.create_device_files(range(load_hardware()["gpu"].get("count", 0)))
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"nvidia-persistenced: could not create the device files: {exc}\n")
    pid_file = driver_state.persistenced_pid_file()
    os.makedirs(os.path.dirname(pid_file), exist_ok=True)
    if "--no-fork" not in argv and "-f" not in argv:
        # Like the real daemon: fork, and let the parent exit once the child wrote its pid file
        # (the packaged unit is Type=forking with PIDFile=).
        if os.path.isfile(pid_file):
            os.unlink(pid_file)  # stale: the new child writes its own
        child = os.fork()
        if child:
            for _ in range(100):
                if os.path.isfile(pid_file):
                    break
                time.sleep(0.05)
            return 0
        os.setsid()
    with open(pid_file, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\n")

    def stop(_signum, _frame):
        try:
            os.unlink(pid_file)
        finally:
            sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
