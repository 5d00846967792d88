"""Simulated `openibd` (MLNX_OFED init script): `openibd start|stop|restart|status`.

start loads the HCA driver and access layer modules through the lab's simulated kernel (the
`modprobe` shim), stop unloads them, refusing while a module outside the OFED stack (for example
nvidia_peermem) still holds them, as the real script refuses while the devices are in use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gpuforge_sim.hardware import lib_dir, run_dir

# Load order of the OFED stack (mlx_compat only exists once MLNX_OFED replaced the in-box stack).
OFED_MODULES = [
    "mlx_compat",
    "ib_core",
    "mlx5_core",
    "mlx5_ib",
    "ib_uverbs",
    "ib_umad",
    "ib_ipoib",
    "rdma_cm",
    "rdma_ucm",
]
STATUS_COLUMN = 59


def _modprobe() -> str:
    return os.environ.get("GPUFORGE_SIM_MODPROBE", "modprobe")


def loaded() -> list[dict]:
    try:
        with open(os.path.join(run_dir(), "modules"), encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def available(name: str) -> bool:
    return any(os.path.isfile(os.path.join(lib_dir(), d, name + ".ko")) for d in ("modules", "kernel-modules"))


def _line(text: str, ok: bool) -> str:
    return f"{text:<{STATUS_COLUMN}}[{'  OK  ' if ok else 'FAILED'}]"


def start() -> int:
    failed = []
    for name in [m for m in OFED_MODULES if available(m)]:
        result = subprocess.run([_modprobe(), name], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            failed.append(result.stderr.strip() or name)
    print(_line("Loading HCA driver and Access Layer:", not failed))
    for message in failed:
        print(message, file=sys.stderr)
    return 1 if failed else 0


def stop() -> int:
    table = loaded()
    users = sorted(
        {e["name"] for e in table if e["name"] not in OFED_MODULES and set(e.get("depends", [])) & set(OFED_MODULES)}
    )
    if users:
        print(_line("Unloading HCA driver:", False))
        print(f"ERROR: Module ib_core is in use by {','.join(users)}", file=sys.stderr)
        print(f"Please unload {' '.join(users)} and stop all applications using InfiniBand devices.", file=sys.stderr)
        return 1
    names = {e["name"] for e in table}
    for name in reversed(OFED_MODULES):
        if name in names:
            subprocess.run([_modprobe(), "-r", name], capture_output=True, text=True, check=False)
    print(_line("Unloading HCA driver:", True))
    return 0


def status() -> int:
    names = [e["name"] for e in loaded()]
    if "mlx5_ib" not in names:
        print("\n  HCA driver is not loaded\n")
        return 3
    ofed = [m for m in reversed(OFED_MODULES) if m in names]
    out = ["", "  HCA driver loaded", "", "The following OFED modules are loaded:", ""]
    out += [f"  {m}" for m in ofed]
    print("\n".join(out) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    action = args[0] if args else ""
    if action == "start":
        return start()
    if action == "stop":
        return stop()
    if action in ("restart", "force-restart"):
        return stop() or start()
    if action == "status":
        return status()
    print("Usage: openibd {start|force-start|stop|force-stop|restart|force-restart|status}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
