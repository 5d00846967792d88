"""Simulated NVIDIA kernel-driver state shared by nvidia-smi, nvidia-modprobe and nvidia-persistenced.

Loaded modules are the lines of <run dir>/modules (GPUFORGE_LAB_RUN, default /run/gpuforge-lab); a
module can be "loaded" only when the lab package installed <lib dir>/modules/<name>.ko
(GPUFORGE_LAB_LIB, default /usr/lib/gpuforge-lab). Driver and CUDA versions come from
<lib dir>/nvidia-driver.json, written by the lab driver package build.
"""

from __future__ import annotations

import json
import os

from gpuforge_sim.hardware import lib_dir, run_dir

DEFAULT_DRIVER_VERSION = "535.183.01"
DEFAULT_CUDA_VERSION = "12.2"


def driver_constants() -> dict:
    """{driver_version, cuda_version} of the installed (simulated) driver package."""
    path = os.path.join(lib_dir(), "nvidia-driver.json")
    data = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    return {
        "driver_version": str(data.get("driver_version") or DEFAULT_DRIVER_VERSION),
        "cuda_version": str(data.get("cuda_version") or DEFAULT_CUDA_VERSION),
    }


def modules_file() -> str:
    return os.path.join(run_dir(), "modules")


def loaded_modules() -> list[str]:
    try:
        with open(modules_file(), encoding="utf-8") as handle:
            return [line.strip() for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def module_available(name: str) -> bool:
    """True when the lab driver package shipped <name>.ko (what modprobe would need)."""
    return os.path.isfile(os.path.join(lib_dir(), "modules", f"{name}.ko"))


def load_module(name: str) -> bool:
    """Record a module as loaded if it is installed; returns whether it is loaded afterwards."""
    modules = loaded_modules()
    if name in modules:
        return True
    if not module_available(name):
        return False
    os.makedirs(run_dir(), exist_ok=True)
    with open(modules_file(), "a", encoding="utf-8") as handle:
        handle.write(name + "\n")
    return True


def unload_module(name: str) -> None:
    modules = [m for m in loaded_modules() if m != name]
    if os.path.isfile(modules_file()):
        with open(modules_file(), "w", encoding="utf-8") as handle:
            handle.writelines(m + "\n" for m in modules)


def persistenced_pid_file() -> str:
    base = os.environ.get("GPUFORGE_LAB_PERSISTENCED_DIR") or "/run/nvidia-persistenced"
    return os.path.join(base, "nvidia-persistenced.pid")


def persistence_enabled() -> bool:
    """Persistence mode is on while nvidia-persistenced (its pid file names a live process) runs."""
    try:
        with open(persistenced_pid_file(), encoding="utf-8") as handle:
            pid = int(handle.read().strip())
    except (FileNotFoundError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
