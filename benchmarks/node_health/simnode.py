"""A lab node's simulated tools as programs on this machine: the node_health benchmark and tests run
gpuforge-health as it runs on a lab node (one process per tool call), without a container.

The hardware document comes from a lab profile and faults (gpuforge.lab.profiles); the tools are the lab's
simulators (lab/sim/gpuforge_sim, the lab kernel's lsmod and dmesg) behind small wrapper scripts in <root>/bin,
in the shape of the lab mirror's wrappers (src/gpuforge/lab/mirror.py); the collection's module_utils are laid out
as the node_health role installs them (roles/node_health/vars/main.yml names the files), and the command is a
launcher with the role's process runner as its body (roles/node_health/files/gpuforge_health_local.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from gpuforge import vendor_facts
from gpuforge.lab.profiles import hardware_document, load_profile

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "lab" / "sim"
KERNEL_LIB = ROOT / "lab" / "image" / "overlay" / "usr" / "local" / "lib" / "gpuforge-lab"
# Tool name -> the simulator module that answers it (lab/packages/packages.yml `simulators`).
SIMULATORS = {
    "nvidia-smi": "gpuforge_sim.nvidia_smi",
    "ibstat": "gpuforge_sim.ibstat",
    "ibv_devinfo": "gpuforge_sim.ibv_devinfo",
    "ibdev2netdev": "gpuforge_sim.ibdev2netdev",
    "ofed_info": "gpuforge_sim.ofed_info",
}
KERNEL_TOOLS = {"lsmod": "lsmod_main", "dmesg": "dmesg_main", "modprobe": "modprobe_main"}
# gpuforge-health's process runner and main(), the body of the launcher the role writes (templates/gpuforge-health.j2).
RUNNER = ROOT / "roles" / "node_health" / "files" / "gpuforge_health_local.py"


def module_utils_files() -> list:
    """The module_utils files the node_health role installs: all of them (roles/node_health/vars/main.yml)."""
    return sorted(path.name for path in (ROOT / "module_utils").glob("*.py"))


def install(prefix: Path, python: str = sys.executable) -> Path:
    """Lay out gpuforge-health under prefix as the role does; returns the command's path."""
    package = prefix / "lib" / "ansible_collections" / "gpuforge" / "cluster" / "plugins" / "module_utils"
    package.mkdir(parents=True, exist_ok=True)
    for directory in (package, *list(package.parents)[:4]):  # module_utils up to ansible_collections
        (directory / "__init__.py").write_text("", encoding="utf-8")
    for name in module_utils_files():
        (package / name).write_text((ROOT / "module_utils" / name).read_text(encoding="utf-8"), encoding="utf-8")
    command = prefix / "bin" / "gpuforge-health"
    command.parent.mkdir(parents=True, exist_ok=True)
    command.write_text(
        f"#!{python}\nimport sys\nsys.path.insert(0, {str(prefix / 'lib')!r})\n"
        f"{RUNNER.read_text(encoding='utf-8')}\nsys.exit(main())\n",
        encoding="utf-8",
    )
    command.chmod(0o755)
    return command


class SimNode:
    """<root>/bin holds the tools, <root>/hardware.json the node; env() is the environment to run them in."""

    def __init__(self, root: Path, profile: str, faults: list | None = None, python: str = sys.executable):
        self.root = root
        self.python = python
        for sub in ("bin", "run", "lib/modules", "lib/kernel-modules", "etc", "log", "state"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.write_hardware(profile, faults or [])
        for tool, module in SIMULATORS.items():
            self._wrapper(tool, f"from {module} import main; sys.exit(main(sys.argv[1:]))")
        for tool, function in KERNEL_TOOLS.items():
            self._wrapper(
                tool,
                f'sys.path.insert(0, "{KERNEL_LIB}"); from simkernel import {function}; '
                f"sys.exit({function}(sys.argv[1:]))",
            )
        # The driver and nvidia-peermem as the driver and OFED packages install them (markers), loaded at boot.
        for name, depends, directory in (
            ("nvidia", [], "modules"),
            ("ib_core", [], "kernel-modules"),
            ("nvidia_peermem", ["nvidia", "ib_core"], "modules"),
        ):
            meta = {"size": 16384, "depends": depends, "version": "lab"}
            (root / "lib" / directory / f"{name}.ko").write_text(json.dumps(meta), encoding="utf-8")
        (root / "lib" / "nvidia-driver.json").write_text(
            json.dumps({"driver_version": "535.216.01", "cuda_version": "12.2"}), encoding="utf-8"
        )
        # What the lab mirror's ofed-scripts package installs (packages.yml data_files), from the registry.
        doca = vendor_facts.load(ROOT / "vendor_facts" / "nvidia-doca" / "debian12.yml")
        ofed = {
            "release_tag": doca.fact("ofed_info_s"),
            "version": doca.fact("ofed_info_n"),
            "ofed": doca.fact("ofed_version"),
        }
        (root / "lib" / "ofed_info.json").write_text(json.dumps(ofed), encoding="utf-8")
        self.run([self.python, str(KERNEL_LIB / "simkernel.py"), "boot"])
        for module in ("nvidia", "nvidia-peermem"):
            self.run([str(root / "bin" / "modprobe"), module])

    def _wrapper(self, tool: str, body: str) -> None:
        path = self.root / "bin" / tool
        path.write_text(f"#!/bin/sh\nexec {self.python} -c 'import sys; {body}' \"$@\"\n", encoding="utf-8")
        path.chmod(0o755)

    def write_hardware(self, profile: str, faults: list) -> None:
        document = hardware_document(load_profile(profile), faults)
        (self.root / "hardware.json").write_text(json.dumps(document), encoding="utf-8")

    def kernel_log(self, line: str) -> None:
        """A line the (simulated) kernel logs now, as the driver logs an Xid when it happens."""
        with open(self.root / "log" / "kern.log", "a", encoding="utf-8") as handle:
            handle.write(f"[{1000 + len(line):12.6f}] {line}\n")

    def env(self) -> dict:
        env = dict(os.environ)
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(SIM)
        for name, sub in (("RUN", "run"), ("LIB", "lib"), ("ETC", "etc"), ("LOG", "log"), ("STATE", "state")):
            env[f"GPUFORGE_LAB_{name}"] = str(self.root / sub)
        env["GPUFORGE_LAB_HARDWARE"] = str(self.root / "hardware.json")
        return env

    def run(self, argv: list) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env(), capture_output=True, text=True, check=False)


def expected_for(system: str) -> dict:
    """The spec validate.yml hands gpu_node_check for a lab node of this system, in its precedence
    (playbooks/tasks/validate_node.yml: site > system > GPU SKU > defaults), which the node_health role writes for
    gpuforge-health. The driver branch is left out: no profile of gpuforge-health judges it."""
    data = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml").read_text(encoding="utf-8"))
    spec = data["gpuforge_expected_systems"][system]
    merged = {
        **data["gpuforge_expected_check_defaults"],
        **data["gpuforge_expected_memory_errors"],
        **data["gpuforge_expected_clock_events"],
        **data["gpuforge_expected_pcie_aer"],
        "link_speeds": data["gpuforge_expected_link_speeds"],
        "retired_pages_max": data["gpuforge_expected_retired_pages_max"],
        "xid_fail_actions": data["gpuforge_expected_xid_fail_actions"],
        "nvlink_error_max": data["gpuforge_expected_nvlink_error_max"],
        "ib_link_flaps_max": data["gpuforge_expected_ib_link_flaps_max"],
        **data["gpuforge_expected_gpu_skus"][spec["gpu_sku"]],
        **spec,
        **data["gpuforge_expected_site"],
    }
    # Entries that name a global of the same file ("{{ gpuforge_expected_xid_fatal }}"), as Ansible templates them.
    return {key: _global(value, data) for key, value in merged.items()}


def _global(value, data: dict):
    if isinstance(value, str) and value.startswith("{{") and value.endswith("}}"):
        name = value[2:-2].strip()
        if name in data:
            return data[name]
    return value


def health_config(system: str, **extra) -> dict:
    """The health.json the node_health role writes (roles/node_health/templates/health.json.j2) for this system."""
    return {
        "system": system,
        "expected": expected_for(system),
        "mounts": ["/"],
        "gpu_bus_ids": [],
        "clock_event_samples": 10,
        "clock_event_interval_ms": 100,
        "gpu_memory_used_max_mib": 16,
        "root": "/",
        **extra,
    }
