"""gpuforge-health (roles/node_health, module_utils/gpuforge_health.py) judges a vGPU guest's licence through the
registry's vgpu_license check, as validate.yml does (issue 51 item 3): its full profile runs the registry's
standalone checks whose spec keys the expected system gives, and the vSphere vGPU system says vgpu_guest: true. On
the lab's simulated guest (lab/profiles/vsphere-t4-vgpu-roce.yml, benchmarks/node_health/simnode.py) a licensed GPU
passes and an unlicensed one (lab fault vgpu_unlicensed) fails the node naming the GPU and the fix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "node_health"))
import simnode  # noqa: E402

SYSTEM = "vsphere-t4-vgpu-roce"


def _full_run(tmp_path: Path, faults: list) -> tuple:
    sim = simnode.SimNode(tmp_path / "node", SYSTEM, faults)
    command = simnode.install(tmp_path / "opt")
    kernel = tmp_path / "root" / "proc" / "sys" / "kernel"
    kernel.mkdir(parents=True)
    (kernel / "tainted").write_text("0\n", encoding="ascii")
    config = simnode.health_config(SYSTEM, root=str(tmp_path / "root"))
    assert config["expected"].get("vgpu_guest") is True  # the system's spec (roles/gpuforge expected_hardware.yml)
    (tmp_path / "health.json").write_text(json.dumps(config), encoding="utf-8")
    argv = [str(command), "--profile", "full", "--config", str(tmp_path / "health.json"), "--node", "n1"]
    argv += ["--state", str(tmp_path / "state.json"), "--record", str(tmp_path / "last.json")]
    done = sim.run(argv)
    record = json.loads((tmp_path / "last-full.json").read_text(encoding="utf-8"))
    return done, {check["name"]: check for check in record["checks"]}


@pytest.mark.parametrize("status", ["Unlicensed (Restricted)", "Unlicensed (Unrestricted)"])
def test_an_unlicensed_guest_fails_the_full_profile_naming_the_gpu(tmp_path, status):
    done, checks = _full_run(tmp_path, [{"type": "vgpu_unlicensed", "status": status}])
    assert done.returncode == 1, done.stderr
    check = checks["vgpu_license"]
    assert check["status"] == "FAIL"
    assert "GPU 0 (00000000:02:02.0)" in check["fault"] and status in check["fault"]
    assert "gridd.conf" in check["remedy"] and "vgpu_license" in done.stdout


def test_a_licensed_guest_passes_the_vgpu_license_check(tmp_path):
    done, checks = _full_run(tmp_path, [])
    assert checks["vgpu_license"]["status"] == "PASS", checks["vgpu_license"]
    assert "vgpu_license" not in done.stdout
