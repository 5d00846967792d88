"""The textfile collector (roles/gpu_monitoring/files/gpuforge_gpu_metrics.py) against the lab's simulated
nvidia-smi and ibstat (the tools a lab node runs), with the hardware faults of lab/profiles/SCHEMA.md; its
output must pass `promtool check metrics`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROLE

from gpuforge.lab.profiles import hardware_document, load_profile

SCRIPT = ROLE / "files" / "gpuforge_gpu_metrics.py"
SIM = Path(__file__).resolve().parents[4] / "lab" / "sim"


def _wrapper(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(0o755)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A lab node: simulated nvidia-smi and ibstat on PATH, a kernel log, a hardware document.

    node(profile, faults, kernel_log=[...], expected=8) runs the collector and returns its output text."""
    (tmp_path / "lib" / "modules").mkdir(parents=True)
    (tmp_path / "lib" / "modules" / "nvidia.ko").write_text("", encoding="ascii")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = sys.executable
    _wrapper(bin_dir / "nvidia-smi", f'exec {python} -m gpuforge_sim.nvidia_smi "$@"')
    _wrapper(bin_dir / "ibstat", f'exec {python} -m gpuforge_sim.ibstat "$@"')
    _wrapper(bin_dir / "dmesg", f"cat {tmp_path / 'kern.log'}")
    env = {
        "GPUFORGE_LAB_RUN": str(tmp_path / "run"),
        "GPUFORGE_LAB_LIB": str(tmp_path / "lib"),
        "GPUFORGE_LAB_PERSISTENCED_DIR": str(tmp_path / "persistenced"),
        "GPUFORGE_LAB_HARDWARE": str(tmp_path / "hardware.json"),
        "PYTHONPATH": str(SIM),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }

    def run(profile, faults=(), kernel_log=(), expected=None, nvidia_smi="nvidia-smi", gpus=True):
        document = hardware_document(load_profile(profile), list(faults))
        document["hostname"] = "lab-node"
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
        (tmp_path / "kern.log").write_text("".join(line + "\n" for line in kernel_log), encoding="utf-8")
        config = {
            "output": str(tmp_path / "gpuforge_gpu.prom"),
            "gpus": gpus,
            "expected_gpus": expected,
            "xid_fatal": [48, 79, 95],
            "nvidia_smi": nvidia_smi,
            "sysfs_infiniband": str(tmp_path / "no-sysfs"),
        }
        (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
        result = subprocess.run(
            [sys.executable, str(SCRIPT), str(tmp_path / "config.json")],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return (tmp_path / "gpuforge_gpu.prom").read_text(encoding="utf-8")

    run.path = tmp_path
    run.bin = bin_dir
    return run


def samples(text: str) -> dict[str, float]:
    """{'name{labels}': value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def named(text: str, name: str) -> dict[str, float]:
    return {key: value for key, value in samples(text).items() if key == name or key.startswith(name + "{")}


def test_healthy_dgx1(node, promtool):
    text = node("dgx1-v100-edr", expected=8)
    values = samples(text)
    assert values["gpuforge_gpus_listed"] == 8
    assert values["gpuforge_gpus_expected"] == 8
    assert values["gpuforge_nvidia_smi_exit_code"] == 0
    assert values["gpuforge_gpu_unreachable"] == 0
    assert len(named(text, "gpuforge_gpu_info")) == 8
    assert all(value == 0 for value in named(text, "gpuforge_gpu_ecc_uncorrected_volatile_errors").values())
    assert all(value == 0 for value in named(text, "gpuforge_gpu_thermal_slowdown_active").values())
    # V100 (Volta) retires pages; nvidia-smi answers [N/A] for remapped rows, so only page_retirement appears.
    repairs = named(text, "gpuforge_gpu_memory_repair_pending")
    assert len(repairs) == 8 and all('mechanism="page_retirement"' in key for key in repairs)
    # IBM Redpaper REDP-5610: "16160MiB"
    memory = 'gpuforge_gpu_memory_total_bytes{gpu="0",uuid="' + _uuid(text, "0") + '"}'
    assert values[memory] == 16160 * 1048576
    ports = named(text, "gpuforge_ib_port_active")
    assert len(ports) == 4 and set(ports.values()) == {1.0}
    assert named(text, "gpuforge_gpu_xid_events") == {}
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def _uuid(text: str, gpu: str) -> str:
    for key in named(text, "gpuforge_gpu_info"):
        if f'gpu="{gpu}"' in key:
            return key.split('uuid="', 1)[1].split('"', 1)[0]
    raise AssertionError(f"no GPU {gpu}")


def test_faults_show_up_as_metrics(node, promtool):
    faults = [
        {"type": "thermal_slowdown", "gpu": 2},
        {"type": "ecc_dbe", "gpu": 5, "count": 2},
        {"type": "row_remap_pending", "gpu": 1},
        {"type": "gpu_missing", "gpu": 7},
        {"type": "ib_port_state", "hca": "mlx5_0", "port": 1, "state": "Down", "phys_state": "Disabled"},
    ]
    kernel_log = [
        "NVRM: Xid (PCI:0000:0B:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:06:00): 13, pid=1234, name=python3, Graphics SM Warp Exception",
        "NVRM: Xid (PCI:0000:06:00): 13, pid=1234, name=python3, Graphics SM Warp Exception",
    ]
    text = node("dgx1-v100-edr", faults, kernel_log, expected=8)
    values = samples(text)
    assert values["gpuforge_gpus_listed"] == 7
    thermal = {key for key, value in named(text, "gpuforge_gpu_thermal_slowdown_active").items() if value == 1}
    assert [key.split('gpu="', 1)[1].split('"', 1)[0] for key in thermal] == ["2"]
    ecc = {key: value for key, value in named(text, "gpuforge_gpu_ecc_uncorrected_volatile_errors").items() if value}
    assert list(ecc.values()) == [2.0] and 'gpu="5"' in next(iter(ecc))
    pending = [key for key, value in named(text, "gpuforge_gpu_memory_repair_pending").items() if value == 1]
    assert len(pending) == 1 and 'gpu="1"' in pending[0]
    down = [key for key, value in named(text, "gpuforge_ib_port_active").items() if value == 0]
    assert down == ['gpuforge_ib_port_active{hca="mlx5_0",link_layer="InfiniBand",port="1"}']
    info = [key for key in named(text, "gpuforge_ib_port_info") if 'hca="mlx5_0"' in key]
    assert 'phys_state="Disabled"' in info[0] and 'state="Down"' in info[0] and 'source="ibstat"' in info[0]
    assert named(text, "gpuforge_gpu_xid_events") == {
        'gpuforge_gpu_xid_events{fatal="true",pci_bus_id="0000:0b:00",xid="79"}': 1.0,
        'gpuforge_gpu_xid_events{fatal="false",pci_bus_id="0000:06:00",xid="13"}': 2.0,
    }
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_ampere_and_later_report_row_remaps(node):
    text = node("dgx-h100-ndr", [{"type": "row_remap_pending", "gpu": 4}], expected=8)
    pending = {key: value for key, value in named(text, "gpuforge_gpu_memory_repair_pending").items()}
    assert all('mechanism="row_remap"' in key for key in pending)
    assert [key for key, value in pending.items() if value == 1] == [next(key for key in pending if 'gpu="4"' in key)]


def test_fallen_off_bus_gpu_is_counted_unreachable(node):
    text = node("dgx1-v100-edr", [{"type": "gpu_fallen_off_bus", "gpu": 3}], expected=8)
    values = samples(text)
    assert values["gpuforge_nvidia_smi_exit_code"] == 15
    assert values["gpuforge_gpus_listed"] == 7
    assert values["gpuforge_gpu_unreachable"] == 1


def test_a_driver_without_clocks_event_reasons_falls_back(node):
    """Drivers before R535 reject clocks_event_reasons.*: the collector drops the field and asks again."""
    _wrapper(
        node.bin / "old-nvidia-smi",
        'case "$*" in *clocks_event_reasons*) '
        "echo 'Field \"clocks_event_reasons.hw_thermal_slowdown\" is not a valid field to query.'; exit 2;; esac\n"
        f'exec {node.bin / "nvidia-smi"} "$@"',
    )
    text = node("dgx1-v100-edr", [{"type": "thermal_slowdown", "gpu": 0}], nvidia_smi=str(node.bin / "old-nvidia-smi"))
    values = samples(text)
    assert values['gpuforge_nvidia_smi_field_unsupported{field="clocks_event_reasons.hw_thermal_slowdown"}'] == 1
    active = [key for key, value in named(text, "gpuforge_gpu_thermal_slowdown_active").items() if value == 1]
    assert len(active) == 1 and 'gpu="0"' in active[0]
    assert "gpuforge_gpus_expected" not in values  # no expected count configured


def test_missing_nvidia_smi(node):
    text = node("dgx1-v100-edr", expected=8, nvidia_smi="/nonexistent/nvidia-smi")
    values = samples(text)
    assert values["gpuforge_nvidia_smi_exit_code"] == 127
    assert values["gpuforge_gpus_listed"] == 0


def test_host_without_gpus_reports_ports_only(node):
    text = node("dgx1-v100-edr", gpus=False)
    assert "gpuforge_gpus_listed" not in samples(text)
    assert len(named(text, "gpuforge_ib_port_active")) == 4


def test_sysfs_is_preferred_to_ibstat(node):
    port = node.path / "no-sysfs" / "mlx5_9" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("1: DOWN\n", encoding="ascii")
    (port / "phys_state").write_text("3: Disabled\n", encoding="ascii")
    (port / "link_layer").write_text("InfiniBand\n", encoding="ascii")
    text = node("dgx1-v100-edr", gpus=False)
    assert named(text, "gpuforge_ib_port_active") == {
        'gpuforge_ib_port_active{hca="mlx5_9",link_layer="InfiniBand",port="1"}': 0.0
    }
    assert 'source="sysfs"' in next(iter(named(text, "gpuforge_ib_port_info")))
