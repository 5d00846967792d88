"""The container GPU smoke test's bundle mode, for real on this host: runc, an OCI bundle, the role's hook file.

What is real here: runc (Debian's), the OCI bundle the module builds (`runc spec`, a root file system with
`sleep` and its libraries), runc running the prestart hook the role's template describes (state on stdin,
at the prestart stage of `runc create`), the device files created in the container's /dev and read back
through /proc/<pid>/root. What is simulated: the hook is the lab's nvidia-container-runtime-hook, and the
GPUs it injects are the lab hardware document's (device files made with mknod, major 195, in a temporary
directory standing in for the node's /dev; nothing answers behind them). Needs root and runc; skipped
otherwise.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpuforge.cluster.plugins.modules import container_gpu_smoke
from gpu_stack_render import RoleRender
from gpuforge_sim import driver_state, nvidia_ctk, nvidia_smi

from gpuforge.lab.profiles import hardware_document, load_profile

ROOT = Path(__file__).resolve().parents[3]
RUNC = shutil.which("runc")

pytestmark = [
    pytest.mark.skipif(RUNC is None, reason="runc is not installed (Debian package runc)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="runc create with namespaces and mknod needs root"),
]


class _Exit(Exception):
    pass


def run_module(monkeypatch, args: dict) -> dict:
    """container_gpu_smoke in-process with the real run_command (runc, ldd, timeout run for real)."""

    def finish(self, **result):
        raise _Exit(result)

    def fail(self, **result):
        raise _Exit({**result, "failed": True})

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", finish)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail)
    with patch_module_args({**args, "_ansible_check_mode": False}), pytest.raises(_Exit) as info:
        container_gpu_smoke.main()
    return info.value.args[0]


@pytest.fixture
def lab_node(tmp_path, monkeypatch):
    """A lab node in tmp_path: DGX-1 hardware (gpu_missing faults as given), the 535 driver loaded, its device
    files in tmp_path/dev, and the simulated hook behind a wrapper that carries that environment (an OCI hook
    gets only the env its hook file names)."""

    def make(faults=None, hook_env=None):
        lib = tmp_path / "lib"
        (lib / "modules").mkdir(parents=True, exist_ok=True)
        (lib / "modules" / "nvidia.ko").write_text(json.dumps({"size": 1000, "depends": []}))
        (lib / "nvidia-driver.json").write_text(json.dumps({"driver_version": "535.183.01", "cuda_version": "12.2"}))
        document = hardware_document(load_profile("dgx1-v100-edr"), faults or [])
        document["hostname"] = "lab-node"
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
        dev = tmp_path / "dev"
        dev.mkdir(exist_ok=True)
        env = {
            "GPUFORGE_LAB_RUN": str(tmp_path / "run"),
            "GPUFORGE_LAB_LIB": str(lib),
            "GPUFORGE_LAB_HARDWARE": str(tmp_path / "hardware.json"),
            "GPUFORGE_LAB_DEV_DIR": str(dev),
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        driver_state.load_module("nvidia")
        # What the simulated nvidia-persistenced does on a lab node: /dev/nvidiaN per GPU and /dev/nvidiactl.
        driver_state.create_device_files(range(document["gpu"]["count"]))
        exports = " ".join(f"{key}={value}" for key, value in {**env, **(hook_env or {})}.items())
        hook = tmp_path / "bin" / "nvidia-container-runtime-hook"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(
            f"#!/bin/sh\nexport PYTHONPATH={ROOT / 'lab' / 'sim'} {exports}\n"
            f'exec {sys.executable} -m gpuforge_sim.nvidia_container_runtime_hook "$@"\n'
        )
        hook.chmod(0o755)
        # The hooks.d file exactly as the role writes it, pointing at the wrapper.
        rendered = RoleRender("nvidia_container_toolkit", "debian12").template(
            "oci-nvidia-hook.json.j2", nvidia_container_toolkit_hook_path=str(hook)
        )
        hook_file = tmp_path / "oci-nvidia-hook.json"
        hook_file.write_text(rendered)
        out = io.StringIO()
        nvidia_smi.main(["-q", "-x"], out=out, err=io.StringIO())
        return {"dev": dev, "hook_file": hook_file, "gpus": _gpus(out.getvalue())}

    return make


def _gpus(xml_text: str) -> list:
    from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvidia_smi import parse_query_xml

    return parse_query_xml(xml_text)["gpus"]


def args_for(node, **extra) -> dict:
    return {
        "mode": "bundle",
        "methods": ["oci-hook"],
        "expected_gpus": node["gpus"],
        "hook_config": str(node["hook_file"]),
        "dev_dir": str(node["dev"]),
        "work_dir": str(node["dev"].parent),
        "timeout": 60,
        **extra,
    }


def _no_leftovers(tmp_path: Path) -> None:
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("gpuforge-smoke-")]


def test_hook_injects_the_eight_gpus_and_nvidiactl(lab_node, tmp_path, monkeypatch):
    node = lab_node()
    result = run_module(monkeypatch, args_for(node))
    assert "failed" not in result, result
    devices = result["checks"][0]
    assert devices["name"] == "container_devices_oci_hook"
    assert devices["status"] == "PASS", devices
    injected = devices["observed"]["devices"]
    assert sorted(injected) == sorted([f"/dev/nvidia{i}" for i in range(8)] + ["/dev/nvidiactl"])
    assert injected["/dev/nvidiactl"] == [195, 255] and injected["/dev/nvidia7"] == [195, 7]
    # The lab driver has no libraries: nothing listed exists, nothing is expected mounted.
    assert result["checks"][1] == {
        "name": "container_driver_libraries_oci_hook",
        "status": "PASS",
        "observed": {"mounted": [], "not_mounted": []},
        "expected": {"libraries": []},
        "fault": "",
        "remedy": "",
        "caused_by": None,
    }
    assert result["verdict"] == "PASS"
    creates = [argv for argv in result["commands"] if "create" in argv]
    assert creates and creates[0][0] == RUNC
    _no_leftovers(tmp_path)


def test_a_gpu_whose_device_file_is_gone_fails_the_hook(lab_node, tmp_path, monkeypatch):
    node = lab_node()
    (node["dev"] / "nvidia3").unlink()
    result = run_module(monkeypatch, args_for(node))
    check = result["checks"][0]
    assert check["status"] == "FAIL"
    assert check["observed"]["runc_create_rc"] != 0
    assert "nvidia3" in check["observed"]["error"]
    assert result["verdict"] == "FAIL"
    _no_leftovers(tmp_path)


def test_hook_that_injects_fewer_gpus_than_the_node_has_fails(lab_node, tmp_path, monkeypatch):
    node = lab_node()
    uuids = [gpu["uuid"] for gpu in node["gpus"]]
    # The container asks for two GPUs; the node (nvidia_smi_facts) has eight: the check names the six missing.
    result = run_module(monkeypatch, args_for(node, visible_devices=",".join(uuids[:2])))
    check = result["checks"][0]
    assert check["status"] == "FAIL"
    assert check["observed"]["missing"] == sorted(f"/dev/nvidia{i}" for i in range(2, 8))
    assert "not injected" in check["remedy"]
    _no_leftovers(tmp_path)


def test_cdi_spec_devices_are_created_by_runc(lab_node, tmp_path, monkeypatch):
    node = lab_node()
    out, err = io.StringIO(), io.StringIO()
    assert nvidia_ctk.main(["cdi", "generate"], out=out, err=err) == 0
    # The lab node has only nvidiactl of the control files; the spec leaves the others out with a warning.
    assert "Could not locate /dev/nvidia-uvm" in err.getvalue()
    spec = yaml.safe_load(out.getvalue())
    # The spec names the control files by their /dev path; on this host the node's /dev is tmp_path/dev, so each
    # node is given its hostPath there (a CDI deviceNode field), and the createContainer hook, /usr/bin/nvidia-ctk
    # on a lab node, is the simulator behind a wrapper here.
    for edits in [spec["containerEdits"], *(device["containerEdits"] for device in spec["devices"])]:
        for device_node in edits.get("deviceNodes") or []:
            device_node["hostPath"] = str(node["dev"] / Path(device_node["path"]).name)
    ctk = tmp_path / "bin" / "nvidia-ctk"
    ctk.write_text(
        f'#!/bin/sh\nexport PYTHONPATH={ROOT / "lab" / "sim"}\nexec {sys.executable} -m gpuforge_sim.nvidia_ctk "$@"\n'
    )
    ctk.chmod(0o755)
    [hook] = spec["containerEdits"]["hooks"]
    assert (hook["hookName"], hook["path"]) == ("createContainer", "/usr/bin/nvidia-ctk")
    hook["path"] = str(ctk)
    result = run_module(monkeypatch, args_for(node, methods=["cdi"], cdi_spec=spec))
    check = result["checks"][0]
    assert check["name"] == "container_devices_cdi"
    assert check["status"] == "PASS", check
    assert sorted(check["observed"]["devices"]) == sorted([f"/dev/nvidia{i}" for i in range(8)] + ["/dev/nvidiactl"])
    _no_leftovers(tmp_path)


def test_device_files_are_character_devices_of_the_node(lab_node):
    node = lab_node()
    info = os.stat(node["dev"] / "nvidia0")
    assert stat.S_ISCHR(info.st_mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) == (195, 0)


def test_a_container_that_asks_for_no_gpu_gets_none_and_fails(lab_node, tmp_path, monkeypatch):
    node = lab_node()
    # NVIDIA_VISIBLE_DEVICES=void: the hook runs and leaves the container alone, so every device file is missing.
    result = run_module(monkeypatch, args_for(node, visible_devices="void"))
    check = result["checks"][0]
    assert check["status"] == "FAIL" and check["observed"]["devices"] == {}
    assert len(check["observed"]["missing"]) == 9
    _no_leftovers(tmp_path)


def test_a_malformed_cdi_spec_is_a_failed_check(lab_node, tmp_path, monkeypatch):
    node = lab_node()
    spec = {"kind": "nvidia.com/gpu", "devices": [{"name": "all", "containerEdits": {"deviceNodes": [{"no": 1}]}}]}
    result = run_module(monkeypatch, args_for(node, methods=["cdi"], cdi_spec=spec))
    check = result["checks"][0]
    assert check["status"] == "FAIL" and check["observed"]["error"].startswith("cdi configuration: ")
    assert not [argv for argv in result["commands"] if "create" in argv]
    _no_leftovers(tmp_path)
