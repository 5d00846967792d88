"""Run library/gdr_loopback_bw.py in-process against the lab's simulated ib_write_bw on a booted SimNode.

The module is not faked: it starts the simulator's server and client as real processes on this machine (both on
the node's HCA port, the client connecting to 127.0.0.1), through coreutils timeout, as it does on a lab node.
The values are the ones playbooks/validate.yml hands it: the expected system and link speeds of
roles/gpuforge/defaults/main/expected_hardware.yml, and the lab's thresholds and run length of
inventories/lab/group_vars/all/validation.yml.
"""

from __future__ import annotations

import random
import shutil
import socket
import sys
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpuforge.cluster.plugins.modules import gdr_loopback_bw

ROOT = Path(__file__).resolve().parents[3]
SIM = ROOT / "lab" / "sim"
EXPECTED = ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml"
ACCEPTANCE = ROOT / "roles/gpuforge/defaults/main/acceptance_checks.yml"
LAB_VALIDATION = ROOT / "inventories/lab/group_vars/all/validation.yml"
BENCH_DEFAULTS = ROOT / "roles/gpuforge_bench/defaults/main.yml"


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def free_tcp_ports(count: int = 32) -> int:
    """The first of `count` consecutive loopback TCP ports that are free now. The simulated ib_write_bw server and
    client really meet over TCP on 127.0.0.1, and make test runs the unit suite on two ansible-cores at once: with
    the module's default port (18510) both runs' loopbacks collided ("Couldn't bind to port 18510")."""
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(20000, 60000 - count)
        sockets = []
        try:
            for port in range(first, first + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free TCP ports on 127.0.0.1")


def lab_args(profile: str) -> dict:
    """The module arguments validate.yml builds for a lab node of this profile (its facts and node checks are
    added by the caller)."""
    hardware, defaults, lab = _yaml(EXPECTED), _yaml(ACCEPTANCE), _yaml(LAB_VALIDATION)
    value = {**defaults, **lab}.get
    thresholds = value("gpuforge_gdr_thresholds")
    if thresholds == "{{ gpuforge_expected_ib_write_bw }}":
        thresholds = defaults["gpuforge_expected_ib_write_bw"]
    # gpuforge_gdr_min_fraction follows gpuforge_bench_ib_min_fraction (roles/gpuforge_bench), which the lab leaves.
    assert value("gpuforge_gdr_min_fraction") == "{{ gpuforge_bench_ib_min_fraction | default(0.9) }}"
    return {
        "system": hardware["gpuforge_expected_systems"][profile],
        "link_speeds": hardware["gpuforge_expected_link_speeds"],
        "thresholds": thresholds,
        "min_fraction": ((_yaml(BENCH_DEFAULTS) if BENCH_DEFAULTS.is_file() else None) or {}).get(
            "gpuforge_bench_ib_min_fraction", 0.9
        ),
        "iterations": value("gpuforge_gdr_iterations"),
        "numactl": value("gpuforge_gdr_numactl"),
        "tcp_port": free_tcp_ports(),
    }


def sim_executable(directory: Path, tool: str = "ib_write_bw") -> str:
    """The tool on disk (ib_write_bw, nvidia-smi, ...), running the lab simulator of its name with this Python (as the
    lab package's wrapper does)."""
    path = directory / tool
    path.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(SIM)!r})\n"
        f"from gpuforge_sim.{tool.replace('-', '_')} import main\nsys.exit(main())\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    return str(path)


class _Exit(Exception):
    pass


def run_module(monkeypatch, tmp_path: Path, args: dict) -> dict:
    """gdr_loopback_bw.main() with args; returns its exit_json or fail_json result (failed=True for the latter)."""
    tools = {"ib_write_bw": sim_executable(tmp_path), "timeout": shutil.which("timeout"), "numactl": None}
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: tools.get(name))
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", lambda self, **result: (_ for _ in ()).throw(_Exit(result)))
    monkeypatch.setattr(
        basic.AnsibleModule,
        "fail_json",
        lambda self, **result: (_ for _ in ()).throw(_Exit({**result, "failed": True})),
    )
    monkeypatch.setenv("GPUFORGE_LAB_PERFTEST_TIMEOUT", "20")
    with patch_module_args({**args, "_ansible_check_mode": False}), pytest.raises(_Exit) as info:
        gdr_loopback_bw.main()
    return info.value.args[0]
