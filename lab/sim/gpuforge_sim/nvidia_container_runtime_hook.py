"""Simulated nvidia-container-runtime-hook (NVIDIA Container Toolkit 1.17.8): the OCI prestart hook.

The real hook reads the container state (JSON) on stdin and, when the container asks for GPUs
(NVIDIA_VISIBLE_DEVICES set and not "void"/"none"), runs `nvidia-container-cli configure` to mount
the driver into the container's root file system; other containers pass untouched (exit 0).
This stand-in does the same triage, prints the nvidia-container-cli call it would make, and fails
for GPU containers because the lab has no GPU to mount.
"""

from __future__ import annotations

import json
import os
import sys

VERSION = "1.17.8"


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
    pid = state.get("pid", 0)
    err.write(
        f"gpuforge lab: would run nvidia-container-cli --load-kmods configure --device={devices} "
        f"--compute --utility --pid={pid} <rootfs>\n"
        "gpuforge lab: no GPU in the lab to mount into the container\n"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
