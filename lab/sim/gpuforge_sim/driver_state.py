"""Simulated NVIDIA kernel-driver state shared by nvidia-smi, nvidia-modprobe and nvidia-persistenced.

Loaded modules are the table <run dir>/modules (GPUFORGE_LAB_RUN, default /run/gpuforge-lab), one JSON
object a line as the lab's simulated kernel (simkernel.py: modprobe, lsmod) keeps it; a module can be
"loaded" only when the lab package installed <lib dir>/modules/<name>.ko
(GPUFORGE_LAB_LIB, default /usr/lib/gpuforge-lab). Driver and CUDA versions come from
<lib dir>/nvidia-driver.json, written by the lab driver package build.
"""

from __future__ import annotations

import json
import os
import stat

from gpuforge_sim.hardware import lib_dir, run_dir

DEFAULT_DRIVER_VERSION = "535.183.01"
DEFAULT_CUDA_VERSION = "12.2"
# Character device numbers of the NVIDIA driver: major 195, GPU N is minor N, nvidiactl is minor 255.
NVIDIA_DEVICE_MAJOR = 195
NVIDIA_CTL_MINOR = 255


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


def _table() -> list[dict]:
    """The simulated module table, one JSON object a line (the format of the lab's simkernel.py)."""
    entries = []
    try:
        with open(modules_file(), encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if not line:
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    entry = {"name": line}  # a bare name (older lab state): still a loaded module
                if isinstance(entry, dict) and entry.get("name"):
                    entries.append(entry)
    except FileNotFoundError:
        pass
    return entries


def _write_table(entries: list[dict]) -> None:
    os.makedirs(run_dir(), exist_ok=True)
    tmp = modules_file() + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(entry, sort_keys=True) + "\n" for entry in entries)
    os.replace(tmp, modules_file())


def loaded_modules() -> list[str]:
    return [entry["name"] for entry in _table()]


def module_available(name: str) -> bool:
    """True when the lab driver package shipped <name>.ko (what modprobe would need)."""
    return os.path.isfile(os.path.join(lib_dir(), "modules", f"{name}.ko"))


def load_module(name: str) -> bool:
    """Record a module (and the modules it depends on) as loaded if installed; returns whether it is loaded."""
    entries = _table()
    if any(entry["name"] == name for entry in entries):
        return True
    if not module_available(name):
        return False
    with open(os.path.join(lib_dir(), "modules", f"{name}.ko"), encoding="utf-8") as handle:
        try:
            meta = json.load(handle)
        except ValueError:
            meta = {}
    depends = list(meta.get("depends") or [])
    for dependency in depends:
        if not load_module(dependency):
            return False
    entries = _table()
    entries.append({"name": name, "size": int(meta.get("size", 16384)), "depends": depends})
    _write_table(entries)
    return True


def unload_module(name: str) -> None:
    entries = _table()
    if any(entry["name"] == name for entry in entries):
        _write_table([entry for entry in entries if entry["name"] != name])


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


def dev_dir() -> str:
    return os.environ.get("GPUFORGE_LAB_DEV_DIR") or "/dev"


def create_device_files(minors) -> list[str]:
    """/dev/nvidiaN for each minor and /dev/nvidiactl, as the driver's nvidia-modprobe creates them when
    nvidia-persistenced opens the GPUs; existing files are kept. Returns the paths created."""
    created = []
    for name, minor in [(f"nvidia{m}", m) for m in minors] + [("nvidiactl", NVIDIA_CTL_MINOR)]:
        path = os.path.join(dev_dir(), name)
        if os.path.exists(path):
            continue
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_DEVICE_MAJOR, minor))
        os.chmod(path, 0o666)  # mknod's mode is filtered by the umask
        created.append(path)
    return created
