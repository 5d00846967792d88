"""Simulated nv-fabricmanager: runs on NVSwitch systems, refuses with the real error elsewhere."""

from __future__ import annotations

import io
import json

from gpuforge_sim import driver_state, fabricmanager, nvidia_smi

from gpuforge.lab.profiles import hardware_document, load_profile


def _node(tmp_path, monkeypatch, profile: str, loaded: bool = True, fm_version: str = "550.127.08", faults=()) -> None:
    (tmp_path / "lib" / "modules").mkdir(parents=True)
    (tmp_path / "lib" / "modules" / "nvidia.ko").write_text("{}")
    (tmp_path / "lib" / "nvidia-driver.json").write_text(json.dumps({"driver_version": "550.127.08"}))
    (tmp_path / "lib" / "nvidia-fabricmanager.json").write_text(json.dumps({"version": fm_version}))
    (tmp_path / "hardware.json").write_text(json.dumps(hardware_document(load_profile(profile), list(faults))))
    monkeypatch.setenv("GPUFORGE_LAB_LOG", str(tmp_path / "kernel"))
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "lib"))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    monkeypatch.setenv("GPUFORGE_LAB_FM_LOG_DIR", str(tmp_path))
    if loaded:
        driver_state.load_module("nvidia")


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = fabricmanager.main(argv, out=out, err=err, serve=False)
    return rc, out.getvalue(), err.getvalue()


def test_version_is_the_package_version(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx-h100-ndr", fm_version="550.90.07")
    assert _run(["--version"]) == (0, "Fabric Manager version is : 550.90.07\n", "")


def test_refuses_a_driver_of_another_version(tmp_path, monkeypatch):
    # The real daemon's refusal (NVIDIA/gpu-operator issue 544): a fabric manager pinned while the driver floated.
    _node(tmp_path, monkeypatch, "dgx-h100-ndr", fm_version="550.90.07")
    rc, _, err = _run(["-c", "/usr/share/nvidia/nvswitch/fabricmanager.cfg"])
    assert rc == 1
    assert err == (
        "fabric manager NVIDIA GPU driver interface version 550.90.07 don't match with driver version 550.127.08. "
        "Please update with matching NVIDIA driver package.\n"
    )


def test_starts_on_nvswitch_system(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx-h100-ndr")
    rc, _, err = _run(["-c", "/usr/share/nvidia/nvswitch/fabricmanager.cfg"])
    assert (rc, err) == (0, "")
    assert (
        "Successfully configured all the available GPUs and NVSwitches" in (tmp_path / "fabricmanager.log").read_text()
    )


def test_refuses_without_nvswitch(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx1-v100-edr")
    rc, _, err = _run(["-c", "/usr/share/nvidia/nvswitch/fabricmanager.cfg"])
    assert rc == 1
    assert "NV_WARN_NOTHING_TO_DO" in err


def test_needs_the_driver(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx-h100-ndr", loaded=False)
    rc, _, err = _run([])
    assert rc == 1 and "Driver Not Loaded" in err


def _smi_fabric() -> list[tuple[str, str]]:
    out, err = io.StringIO(), io.StringIO()
    assert nvidia_smi.main(["-q"], out=out, err=err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.strip() == "Fabric":
            found.append(tuple(lines[i + k].split(":", 1)[1].strip() for k in (1, 2)))
    return found


def test_fabric_manager_down_exits_1_and_gpus_stay_in_progress(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx-h100-ndr", faults=[{"type": "fabric_manager_down"}])
    rc, _, err = _run(["-c", "/usr/share/nvidia/nvswitch/fabricmanager.cfg"])
    assert rc == 1 and "fabric_manager_down" in err
    assert "Successfully configured" not in (tmp_path / "fabricmanager.log").read_text()
    assert _smi_fabric() == [("In Progress", "N/A")] * 8


def test_healthy_fabric_is_completed_and_no_nvswitch_is_na(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx-h100-ndr")
    # as the real 8x H100 -q output (leptonai/gpud, driver 535.183.01, among REAL_OUTPUTS of tests/conftest.py) shows it
    assert _smi_fabric() == [("Completed", "Success")] * 8
    other = tmp_path / "v100"
    other.mkdir()
    _node(other, monkeypatch, "dgx1-v100-edr")
    assert set(_smi_fabric()) == {("N/A", "N/A")}


def test_the_fabric_manager_logs_no_sxid(tmp_path, monkeypatch):
    # SXids are the NVSwitch driver's kernel-log lines (simkernel.py logs them at boot), not the daemon's
    sxid = {"type": "sxid", "switch": 3, "pci": "0000:c1:00.0", "code": 20034, "fatal": True, "link": 28}
    _node(tmp_path, monkeypatch, "dgx-h100-ndr", faults=[sxid])
    assert _run(["-c", "/usr/share/nvidia/nvswitch/fabricmanager.cfg"])[0] == 0
    assert not (tmp_path / "kernel" / "kern.log").exists()
