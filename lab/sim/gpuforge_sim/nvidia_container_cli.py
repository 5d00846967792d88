"""Simulated nvidia-container-cli (libnvidia-container-tools 1.17.8): `info` and `list`.

`info` prints the driver and per-GPU block of the real tool; `list` prints what the real tool would
mount into a GPU container: device nodes, then driver binaries, libraries (versioned by the driver)
and the persistenced socket. `-k` (--load-kmods) loads the kernel modules first, as the real tool
does through nvidia-modprobe. The lab has no device nodes or driver libraries on disk: the paths are
the ones a real driver install provides, printed so that `nvidia-container-cli -k list | restorecon
-v -f -` (Red Hat/Supermicro MLPerf paper) gets the real list.
"""

from __future__ import annotations

import os
import sys

from gpuforge_sim import driver_state
from gpuforge_sim.hardware import load_hardware, visible_gpus
from gpuforge_sim.nvidia_smi import Context

VERSION = "1.17.8"
# Where the driver's libraries are on the node (the real tool reads them from ld.so.cache): NVIDIA's Debian and
# Ubuntu packages put x86_64 libraries in the multiarch directory, its RHEL driver packages in /usr/lib64 (the
# registry's file facts: nvidia-cuda/debian12 libnccl2, nvidia-cuda/rhel9 nvidia-driver-cuda-libs; tests/unit/lab/
# test_sim_lib_dir.py). A lab node's OS shape is told by its release file.
LIB_DIR_DEBIAN = "/usr/lib/x86_64-linux-gnu"
LIB_DIR_RHEL = "/usr/lib64"
REDHAT_RELEASE = "/etc/redhat-release"


def lib_dir() -> str:
    return LIB_DIR_RHEL if os.path.exists(REDHAT_RELEASE) else LIB_DIR_DEBIAN


# CUDA compute capability per architecture ("Architecture:" line of `info`).
COMPUTE_CAPABILITY = {"Volta": "7.0", "Turing": "7.5", "Ampere": "8.0", "Hopper": "9.0"}
BINARIES = [
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
]
LIBRARIES = [
    "libnvidia-ml.so",
    "libnvidia-cfg.so",
    "libcuda.so",
    "libcudadebugger.so",
    "libnvidia-opencl.so",
    "libnvidia-gpucomp.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-allocator.so",
    "libnvidia-pkcs11.so",
    "libnvidia-nvvm.so",
]
INIT_ERROR = "nvidia-container-cli: initialization error: nvml error: driver not loaded\n"
USAGE = "Usage: nvidia-container-cli [OPTION...] COMMAND [ARG...]\n"


def _devices(gpus: list[dict]) -> list[str]:
    nodes = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]
    return nodes + [f"/dev/nvidia{gpu['index']}" for gpu in gpus]


def list_paths(hw: dict, driver_version: str) -> list[str]:
    """Every path `list` prints for this node, in the real tool's order."""
    gpus = [gpu for gpu in visible_gpus(hw) if not gpu["fallen_off_bus"]]
    paths = _devices(gpus)
    paths += [f"/usr/bin/{name}" for name in BINARIES]
    paths += [f"{lib_dir()}/{name}.{driver_version}" for name in LIBRARIES]
    paths.append("/run/nvidia-persistenced/socket")
    return paths


def info_text(hw: dict) -> str:
    context = Context(hw, None)
    gpu = hw.get("gpu") or {}
    lines = [f"NVRM version:   {context.driver_version}", f"CUDA version:   {context.cuda_version}", ""]
    for device in context.listed:
        lines += [
            f"Device Index:   {device['index']}",
            f"Device Minor:   {device['index']}",
            f"Model:          {gpu.get('product_name', '')}",
            f"Brand:          {gpu.get('product_brand', '')}",
            f"GPU UUID:       {context.uuid(device)}",
            f"Bus Location:   {device['bus_id']}",
            f"Architecture:   {COMPUTE_CAPABILITY.get(gpu.get('architecture'), '7.0')}",
            "",
        ]
    return "\n".join(lines) + "\n"


def _load_modules() -> bool:
    return all(driver_state.load_module(name) for name in ("nvidia", "nvidia_uvm"))


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if "--version" in argv or "-V" in argv:
        out.write(f"cli-version: {VERSION}\nlib-version: {VERSION}\nbuild date: 2025-05-30T13:47+00:00\n")
        return 0
    load_kmods = any(arg in ("-k", "--load-kmods") for arg in argv)
    commands = [arg for arg in argv if not arg.startswith("-")]
    if not commands or commands[0] not in ("info", "list"):
        err.write(USAGE)
        return 64
    if load_kmods and not _load_modules():
        err.write("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1\n")
        return 1
    if "nvidia" not in driver_state.loaded_modules():
        err.write(INIT_ERROR)
        return 1
    hw = load_hardware()
    if commands[0] == "info":
        out.write(info_text(hw))
    else:
        out.write("\n".join(list_paths(hw, driver_state.driver_constants()["driver_version"])) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
