"""Simulated nvidia-ctk (NVIDIA Container Toolkit 1.17.8): `runtime configure`, `cdi generate`, `--version`.

runtime configure --runtime=docker|containerd|crio [--config=PATH] [--set-as-default] [--dry-run]
    edits the runtime's existing config in place, as the real tool does: docker's daemon.json gets a
    `runtimes.nvidia` entry (other keys kept); containerd's config.toml and cri-o's crio.conf get the
    nvidia runtime table appended when absent (the rest of the file is kept byte for byte).
cdi generate [--output=PATH]
    writes a CDI spec (kind nvidia.com/gpu) with one device per GPU of the node's hardware document,
    named by index and by UUID (the UUIDs nvidia-smi reports), plus `all`; the common edits list the
    control device files the node has.
hook update-ldcache
    the CDI spec's createContainer hook; a no-op here (the lab driver has no libraries), exit 0.
"""

from __future__ import annotations

import json
import os
import sys

from gpuforge_sim import driver_state
from gpuforge_sim.hardware import load_hardware
from gpuforge_sim.nvidia_smi import Context

VERSION = "1.17.8"
# The lab build has no upstream commit; the line keeps the real two-line layout.
COMMIT = "0000000000000000000000000000000000000000"
RUNTIME_BINARY = "/usr/bin/nvidia-container-runtime"
DEFAULT_CONFIGS = {
    "docker": "/etc/docker/daemon.json",
    "containerd": "/etc/containerd/config.toml",
    "crio": "/etc/crio/crio.conf",
}
CONTAINERD_TABLE = 'plugins."io.containerd.grpc.v1.cri".containerd'
CDI_SPEC_VERSION = "0.5.0"
# Control device files of the common containerEdits, in the order the real spec lists them.
CONTROL_NODES = ("nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools", "nvidiactl")


def _log(err, level: str, message: str) -> None:
    err.write(f"{level}[0000] {message}\n")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def configure_docker(text: str, set_default: bool) -> str:
    config = json.loads(text) if text.strip() else {}
    runtimes = config.setdefault("runtimes", {})
    runtimes["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    if set_default:
        config["default-runtime"] = "nvidia"
    return json.dumps(config, indent=4) + "\n"


def configure_containerd(text: str, set_default: bool) -> str:
    header = f"[{CONTAINERD_TABLE}.runtimes.nvidia]"
    if header not in text:
        block = (
            f"\n{header}\n"
            "  privileged_without_host_devices = false\n"
            '  runtime_engine = ""\n'
            '  runtime_root = ""\n'
            '  runtime_type = "io.containerd.runc.v2"\n\n'
            f"  [{CONTAINERD_TABLE}.runtimes.nvidia.options]\n"
            f'    BinaryName = "{RUNTIME_BINARY}"\n'
        )
        text = text.rstrip("\n") + "\n" + block if text.strip() else "version = 2\n" + block
    if set_default:
        text = _set_toml_key(text, f"[{CONTAINERD_TABLE}]", "default_runtime_name", '"nvidia"')
    return text


def configure_crio(text: str, set_default: bool) -> str:
    header = "[crio.runtime.runtimes.nvidia]"
    if header not in text:
        block = f'\n{header}\nruntime_path = "{RUNTIME_BINARY}"\nruntime_type = "oci"\n'
        text = text.rstrip("\n") + "\n" + block
    if set_default:
        text = _set_toml_key(text, "[crio.runtime]", "default_runtime", '"nvidia"')
    return text


def _set_toml_key(text: str, table: str, key: str, value: str) -> str:
    """Set key = value inside [table] (added at the end when the table is missing)."""
    lines = text.splitlines()
    if table not in [line.strip() for line in lines]:
        return text.rstrip("\n") + f"\n\n{table}\n  {key} = {value}\n"
    start = [line.strip() for line in lines].index(table)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    for i in range(start + 1, end):
        if lines[i].split("=")[0].strip() == key:
            lines[i] = lines[i][: len(lines[i]) - len(lines[i].lstrip())] + f"{key} = {value}"
            return "\n".join(lines) + "\n"
    lines.insert(start + 1, f"  {key} = {value}")
    return "\n".join(lines) + "\n"


EDITORS = {"docker": configure_docker, "containerd": configure_containerd, "crio": configure_crio}


def _options(args: list[str]) -> dict:
    options: dict = {"flags": set()}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            key, value = arg[2:].split("=", 1)
            options[key] = value
        elif arg in ("--runtime", "--config", "--output", "--format") and i + 1 < len(args):
            options[arg[2:]] = args[i + 1]
            i += 1
        elif arg.startswith("-"):
            options["flags"].add(arg.lstrip("-"))
        i += 1
    return options


def runtime_configure(args: list[str], out, err) -> int:
    options = _options(args)
    runtime = options.get("runtime", "docker")
    if runtime not in EDITORS:
        _log(err, "ERRO", f"unrecognized runtime '{runtime}'")
        return 1
    path = options.get("config") or DEFAULT_CONFIGS[runtime]
    _log(err, "INFO", f"Loading config from {path}")
    try:
        updated = EDITORS[runtime](_read(path), "set-as-default" in options["flags"])
    except ValueError as exc:
        _log(err, "ERRO", f"unable to load config for runtime {runtime}: {exc}")
        return 1
    if "dry-run" in options["flags"]:
        out.write(updated)
        return 0
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(updated)
    _log(err, "INFO", f"Wrote updated config to {path}")
    _log(err, "INFO", f"It is recommended that {runtime} daemon be restarted.")
    return 0


def cdi_spec(hw: dict, err=None) -> str:
    """The CDI spec text (YAML) for the node's GPUs. Control devices the node lacks are left out with a
    warning, as the real tool does when it cannot locate one (the lab's simulated driver creates only
    /dev/nvidiaN and /dev/nvidiactl, and those only when nvidia-persistenced runs)."""
    context = Context(hw, None)
    controls = []
    for name in CONTROL_NODES:
        if os.path.exists(os.path.join(driver_state.dev_dir(), name)):
            controls.append(f"  - path: /dev/{name}")
        elif err is not None:
            _log(err, "WARN", f"Could not locate /dev/{name}: pattern /dev/{name} not found")
    lines = [
        "---",
        f"cdiVersion: {CDI_SPEC_VERSION}",
        "containerEdits:",
        *(["  deviceNodes:", *controls] if controls else []),
        "  env:",
        "  - NVIDIA_VISIBLE_DEVICES=void",
        "  hooks:",
        "  - args:",
        "    - nvidia-ctk",
        "    - hook",
        "    - update-ldcache",
        "    hookName: createContainer",
        "    path: /usr/bin/nvidia-ctk",
        "devices:",
    ]
    all_nodes = []
    for gpu in context.listed:
        node = f"/dev/nvidia{gpu['index']}"
        all_nodes.append(node)
        for name in (str(gpu["index"]), context.uuid(gpu)):
            lines += ["- containerEdits:", "    deviceNodes:", f"    - path: {node}", f'  name: "{name}"']
    lines += ["- containerEdits:", "    deviceNodes:"]
    lines += [f"    - path: {node}" for node in all_nodes]
    lines += ["  name: all", "kind: nvidia.com/gpu"]
    return "\n".join(lines) + "\n"


def cdi_generate(args: list[str], out, err) -> int:
    if "nvidia" not in driver_state.loaded_modules():
        _log(
            err,
            "ERRO",
            "failed to generate CDI spec: failed to create device CDI specs: "
            "failed to initialize NVML: ERROR_DRIVER_NOT_LOADED",
        )
        return 1
    options = _options(args)
    spec = cdi_spec(load_hardware(), err)
    output = options.get("output")
    if not output:
        out.write(spec)
        return 0
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(spec)
    _log(err, "INFO", f"Generated CDI spec with version {CDI_SPEC_VERSION}")
    return 0


def hook_update_ldcache(args: list[str], err) -> int:
    """The createContainer hook of the CDI spec: the real one runs ldconfig in the container for the driver
    library folders it is given (--folder). The lab's driver has no libraries, so there is nothing to add:
    the stand-in reads the container state runc passes on stdin (as the real hook does) and says so."""
    folders = [arg.split("=", 1)[1] for arg in args if arg.startswith("--folder=")]
    _log(
        err,
        "INFO",
        "gpuforge lab: no driver library folders to add to the container's ld cache"
        + (f" (asked for {', '.join(folders)})" if folders else ""),
    )
    return 0


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if argv[:1] in (["--version"], ["-v"]):
        out.write(f"NVIDIA Container Toolkit CLI version {VERSION}\ncommit: {COMMIT}\n")
        return 0
    if argv[:2] == ["runtime", "configure"]:
        return runtime_configure(argv[2:], out, err)
    if argv[:2] == ["cdi", "generate"]:
        return cdi_generate(argv[2:], out, err)
    if argv[:2] == ["hook", "update-ldcache"]:
        return hook_update_ldcache(argv[2:], err)
    err.write("NAME:\n   NVIDIA Container Toolkit CLI - Tools to configure the NVIDIA Container Toolkit\n\n")
    err.write("USAGE:\n   nvidia-ctk [global options] command [command options] [arguments...]\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
