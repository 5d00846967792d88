"""Simulated nvidia-container-runtime-hook (NVIDIA Container Toolkit 1.17.8): the OCI prestart hook.

The real hook reads the container state (JSON) on stdin and, when the container asks for GPUs
(NVIDIA_VISIBLE_DEVICES set and not "void"/"none"), runs `nvidia-container-cli configure`, which enters the
container's mount namespace and bind-mounts the node's NVIDIA device files and driver libraries into its
root file system; other containers pass untouched (exit 0).

This stand-in does the same triage and then injects what the lab node really has: for the requested GPUs
(all, indices or UUIDs, resolved against the node's hardware document as nvidia-smi lists them) and the
control devices (nvidiactl, nvidia-uvm, ...) present in /dev, it creates device files with the node's own
device numbers in the container's /dev, reached through /proc/<pid>/root (at the prestart stage the
container's mount namespace is set up and its root is not yet pivoted). It mounts no driver libraries: the
lab's simulated driver installs none (the paths `nvidia-container-cli list` prints do not exist), and says so.
It fails, as the real hook does, when the driver is not loaded, a requested GPU does not exist or its device
file is missing. The device files' numbers are real; the lab has no GPU behind them (opening one fails).
"""

from __future__ import annotations

import json
import os
import stat
import sys

from gpuforge_sim import driver_state
from gpuforge_sim.hardware import load_hardware
from gpuforge_sim.nvidia_smi import Context

VERSION = "1.17.8"
# Control devices nvidia-container-cli mounts when the node has them (its `list` prints them first).
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


def _bundle_env(state: dict) -> dict:
    bundle = state.get("bundle") or state.get("bundlePath") or ""
    try:
        with open(os.path.join(bundle, "config.json"), encoding="utf-8") as handle:
            spec = json.load(handle)
    except (OSError, ValueError):
        return {}
    env = (spec.get("process") or {}).get("env") or []
    return dict(item.split("=", 1) for item in env if "=" in item)


def main(argv: list[str] | None = None, out=None, err=None, stdin=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    stdin = stdin or sys.stdin
    if "--version" in argv or "-version" in argv:
        out.write(f"NVIDIA Container Runtime Hook version {VERSION}\n")
        out.write("commit: 0000000000000000000000000000000000000000\n")
        return 0
    if argv[:1] != ["prestart"]:
        if argv[:1] == ["poststart"] or argv[:1] == ["poststop"]:
            return 0
        err.write("Usage of nvidia-container-runtime-hook:\n  prestart\n  poststart\n  poststop\n")
        return 2
    try:
        state = json.load(stdin)
    except ValueError as exc:
        err.write(f"nvidia-container-runtime-hook: could not decode container state: {exc}\n")
        return 1
    devices = _bundle_env(state).get("NVIDIA_VISIBLE_DEVICES", "")
    if devices in ("", "void", "none"):
        return 0
    return configure(state, devices, err)


def _spec(state: dict) -> dict:
    bundle = state.get("bundle") or state.get("bundlePath") or ""
    with open(os.path.join(bundle, "config.json"), encoding="utf-8") as handle:
        return json.load(handle)


def _requested_minors(devices: str, hw: dict) -> list[int]:
    """Minor numbers (= the index nvidia-smi shows, as the lab's driver numbers them) of the requested GPUs."""
    context = Context(hw, None)
    by_name = {}
    for gpu in context.listed:
        by_name[str(gpu["index"])] = gpu["index"]
        by_name[context.uuid(gpu)] = gpu["index"]
    if devices == "all":
        return [gpu["index"] for gpu in context.listed]
    minors = []
    for name in devices.split(","):
        name = name.strip()
        if name not in by_name:
            raise LookupError(f"unknown device id: {name}")
        minors.append(by_name[name])
    return minors


def configure(state: dict, devices: str, err, proc: str = "/proc") -> int:
    """Inject the requested GPUs' and the control devices' files into the container's /dev."""
    if "nvidia" not in driver_state.loaded_modules():
        err.write("nvidia-container-cli: initialization error: nvml error: driver not loaded\n")
        return 1
    try:
        minors = _requested_minors(devices, load_hardware())
        spec = _spec(state)
    except (LookupError, OSError, ValueError) as exc:
        err.write(f"nvidia-container-cli: device error: {exc}\n")
        return 1
    rootfs = (spec.get("root") or {}).get("path") or "rootfs"
    if not os.path.isabs(rootfs):
        rootfs = os.path.join(state.get("bundle") or "", rootfs)
    target = os.path.join(proc, str(state.get("pid", 0)), "root", rootfs.lstrip("/"), "dev")
    names = [name for name in CONTROL_NODES if os.path.exists(os.path.join(driver_state.dev_dir(), name))]
    if "nvidiactl" not in names:
        err.write(f"nvidia-container-cli: mount error: stat failed: {driver_state.dev_dir()}/nvidiactl: no such file\n")
        return 1
    names += [f"nvidia{minor}" for minor in minors]
    for name in names:
        source = os.path.join(driver_state.dev_dir(), name)
        try:
            info = os.stat(source)
            if not stat.S_ISCHR(info.st_mode):
                raise OSError(f"{source} is not a character device")
            os.mknod(os.path.join(target, name), stat.S_IFCHR | 0o666, info.st_rdev)
            os.chmod(os.path.join(target, name), stat.S_IMODE(info.st_mode))
        except OSError as exc:
            err.write(f"nvidia-container-cli: mount error: {name}: {exc}\n")
            return 1
    err.write(
        f"gpuforge lab: injected {', '.join('/dev/' + name for name in names)} (device files of this node); "
        "no driver libraries to mount (the lab driver installs none)\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
