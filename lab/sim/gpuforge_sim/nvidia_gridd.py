"""Simulated nvidia-gridd, the vGPU guest's licensing client (lab stand-in, docs/lab.md "vGPU guest").

Shipped by the lab's stand-in guest driver package (src/gpuforge/lab/vgpu_guest.py). Like the real daemon it reads
/etc/nvidia/gridd.conf (FeatureType) and the client configuration token in /etc/nvidia/ClientConfigToken/ only when
it starts (NVIDIA Virtual GPU Client Licensing User Guide, "Configuring a Licensed Client on Linux"), then holds the
lease until it is stopped. No license server is contacted: the lease is granted when FeatureType is not 0 and a
non-empty .tok file is there, and refused otherwise. The outcome goes to <run dir>/vgpu-license.json, which the
simulated nvidia-smi prints as each GPU's "License Status" (nvidia_smi.Context.license_status); stopping the daemon
removes it (the licence is returned), so the GPU reads Unlicensed again.
Runs in the foreground (the stand-in's unit is Type=simple); $GPUFORGE_LAB_GRIDD_CONFIG_DIR overrides /etc/nvidia.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time

from gpuforge_sim.hardware import run_dir

CONFIG_DIR = "/etc/nvidia"
STATE_NAME = "vgpu-license.json"
UNLICENSED = "Unlicensed (Restricted)"


def config_dir() -> str:
    return os.environ.get("GPUFORGE_LAB_GRIDD_CONFIG_DIR") or CONFIG_DIR


def state_path() -> str:
    return os.path.join(run_dir(), STATE_NAME)


def feature_type(text: str) -> int | None:
    """FeatureType from gridd.conf's text (NAME=value lines, # comments); None when unset or not a number."""
    value = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, raw = line.partition("=")
        if name.strip() == "FeatureType":
            try:
                value = int(raw.strip())
            except ValueError:
                value = None
    return value


def tokens(directory: str) -> list[str]:
    """The non-empty .tok files of the token directory, by name."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found = []
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(".tok") and os.path.isfile(path) and os.path.getsize(path) > 0:
            found.append(name)
    return found


def lease() -> dict:
    """What the daemon gets at start: {status, feature_type, token, reason}."""
    try:
        with open(os.path.join(config_dir(), "gridd.conf"), encoding="utf-8") as handle:
            feature = feature_type(handle.read())
    except OSError:
        feature = None
    found = tokens(os.path.join(config_dir(), "ClientConfigToken"))
    if not feature:
        reason = f"FeatureType is {feature if feature is not None else 'not set'} in gridd.conf: no licence requested"
        return {"status": UNLICENSED, "feature_type": feature, "token": None, "reason": reason}
    if not found:
        reason = "no client configuration token (.tok) in ClientConfigToken/"
        return {"status": UNLICENSED, "feature_type": feature, "token": None, "reason": reason}
    return {"status": "Licensed", "feature_type": feature, "token": found[0], "reason": "lease granted (lab)"}


def _write_state(state: dict) -> None:
    os.makedirs(run_dir(), exist_ok=True)
    tmp = state_path() + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, state_path())


def _release(*_args) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state_path())
    sys.stderr.write("nvidia-gridd: licence returned, exiting\n")
    sys.exit(0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--once" not in argv:
        signal.signal(signal.SIGTERM, _release)
        signal.signal(signal.SIGINT, _release)
    state = lease()
    _write_state(state)
    sys.stderr.write(f"nvidia-gridd (gpuforge lab stand-in): {state['status']}: {state['reason']}\n")
    sys.stderr.flush()
    if "--once" in argv:  # tests: write the state and return
        return 0
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
