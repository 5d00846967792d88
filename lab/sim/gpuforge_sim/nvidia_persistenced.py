"""Simulated nvidia-persistenced: write the pid file and sleep until stopped (systemd unit target).

While it runs, the simulated nvidia-smi reports Persistence Mode Enabled.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from gpuforge_sim import driver_state


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--version" in argv:
        sys.stdout.write(f"nvidia-persistenced:  version {driver_state.driver_constants()['driver_version']}\n")
        return 0
    if "nvidia" not in driver_state.loaded_modules() and not driver_state.load_module("nvidia"):
        sys.stderr.write("nvidia-persistenced failed to initialize. Check syslog for more details.\n")
        return 1
    pid_file = driver_state.persistenced_pid_file()
    os.makedirs(os.path.dirname(pid_file), exist_ok=True)
    with open(pid_file, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\n")

    def stop(_signum, _frame):
        try:
            os.unlink(pid_file)
        finally:
            sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:  # the real daemon forks unless --no-fork; the lab unit runs it as Type=simple
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
