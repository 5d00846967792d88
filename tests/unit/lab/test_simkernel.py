"""The lab's simulated kernel: module table, dependencies, faults, blacklist, lsmod layout."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SIMKERNEL = Path(__file__).resolve().parents[3] / "lab/image/overlay/usr/local/lib/gpuforge-lab/simkernel.py"


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    for name, sub in (("RUN", "run"), ("LIB", "lib"), ("ETC", "etc"), ("LOG", "log"), ("STATE", "state")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(f"GPUFORGE_LAB_{name}", str(tmp_path / sub))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    spec = importlib.util.spec_from_file_location("simkernel_under_test", SIMKERNEL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.tmp = tmp_path
    return module


def _install(kernel, name, depends=(), directory="modules", size=1000):
    path = kernel.tmp / "lib" / directory / f"{name}.ko"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"size": size, "depends": list(depends), "version": "535.183.01-1"}))


def _hardware(kernel, **document):
    (kernel.tmp / "hardware.json").write_text(json.dumps(document))


def test_load_pulls_dependencies_and_lsmod_shows_holders(kernel, capsys):
    _install(kernel, "ib_core", directory="kernel-modules", size=458752)
    _install(kernel, "nvidia", size=56823808)
    _install(kernel, "nvidia_peermem", depends=["nvidia", "ib_core"], size=16384)
    assert kernel.modprobe_main(["nvidia-peermem"]) == 0
    assert [entry["name"] for entry in kernel.read_table()] == ["nvidia", "ib_core", "nvidia_peermem"]
    kernel.lsmod_main([])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Module                  Size  Used by"
    assert lines[1] == "nvidia_peermem         16384  0"
    assert lines[3] == "nvidia              56823808  1 nvidia_peermem"


def test_unknown_module_fails_like_modprobe(kernel, capsys):
    assert kernel.modprobe_main(["nvidia"]) == 1
    assert "modprobe: FATAL: Module nvidia not found in directory /lib/modules/" in capsys.readouterr().err


def test_nvidia_refuses_to_load_while_nouveau_owns_the_gpu(kernel, capsys):
    _install(kernel, "nouveau", directory="kernel-modules")
    _install(kernel, "nvidia")
    assert kernel.modprobe_main(["nouveau"]) == 0
    assert kernel.modprobe_main(["nvidia"]) == 1
    assert "could not insert 'nvidia': No such device" in capsys.readouterr().err
    assert kernel.modprobe_main(["-r", "nouveau"]) == 0
    assert kernel.modprobe_main(["nvidia"]) == 0


def test_peermem_fault_makes_load_fail_and_logs(kernel, capsys):
    _install(kernel, "ib_core")
    _install(kernel, "nvidia")
    _install(kernel, "nvidia_peermem", depends=["nvidia", "ib_core"])
    _hardware(kernel, faults=[{"type": "peermem_load_failure"}])
    assert kernel.modprobe_main(["nvidia_peermem"]) == 1
    assert "could not insert 'nvidia_peermem': Invalid argument" in capsys.readouterr().err
    assert "nvidia_peermem" not in [entry["name"] for entry in kernel.read_table()]
    kernel.dmesg_main([])
    assert "ib_register_peer_memory_client" in capsys.readouterr().out


def test_missing_dependency_is_unknown_symbol(kernel, capsys):
    _install(kernel, "nvidia")
    _install(kernel, "nvidia_peermem", depends=["nvidia", "ib_core"])
    assert kernel.modprobe_main(["nvidia_peermem"]) == 1
    assert "Unknown symbol in module" in capsys.readouterr().err


def test_remove_in_use_module_fails(kernel, capsys):
    _install(kernel, "nvidia")
    _install(kernel, "nvidia_uvm", depends=["nvidia"])
    kernel.modprobe_main(["nvidia_uvm"])
    assert kernel.modprobe_main(["-r", "nvidia"]) == 1
    assert "Module nvidia is in use." in capsys.readouterr().err


def test_boot_autoloads_nouveau_unless_blacklisted_and_modules_load_d(kernel):
    _install(kernel, "nouveau", directory="kernel-modules")
    _install(kernel, "nvidia")
    _install(kernel, "nvidia_uvm", depends=["nvidia"])
    _hardware(
        kernel,
        gpu={"count": 1, "devices": [{"bus_id": "00000000:06:00.0", "numa": 0}]},
        hcas=[],
        faults=[{"type": "xid", "gpu": 0, "code": 79, "message": "GPU has fallen off the bus."}],
    )
    kernel.boot()
    assert [entry["name"] for entry in kernel.read_table()] == ["nouveau"]
    (kernel.tmp / "etc/modprobe.d").mkdir()
    (kernel.tmp / "etc/modprobe.d/blacklist-nouveau.conf").write_text("blacklist nouveau\noptions nouveau modeset=0\n")
    (kernel.tmp / "etc/modules-load.d").mkdir()
    (kernel.tmp / "etc/modules-load.d/nvidia.conf").write_text("# GPU\nnvidia-uvm\n")
    kernel.boot()
    assert [entry["name"] for entry in kernel.read_table()] == ["nvidia", "nvidia_uvm"]
    log = (kernel.tmp / "log/kern.log").read_text()
    assert "NVRM: Xid (PCI:0000:06:00): 79, pid=1234, name=python3, GPU has fallen off the bus." in log


SXID_FAULTS = [
    {"type": "sxid", "switch": 3, "pci": "0000:c1:00.0", "code": 20034, "fatal": True, "link": 28},
    {"type": "sxid", "switch": 0, "pci": "0000:c2:00.0", "code": 22013, "fatal": False, "link": 4, "message": "x y"},
]


def test_boot_logs_the_sxid_faults_even_with_the_fabric_manager_down(kernel):
    # The NVSwitch driver logs an SXid when the error happens, whether or not nv-fabricmanager runs.
    _hardware(kernel, system={"nvswitch": True}, hcas=[], faults=[*SXID_FAULTS, {"type": "fabric_manager_down"}])
    kernel.boot()
    lines = (kernel.tmp / "log/kern.log").read_text().splitlines()
    assert all(line.startswith("[") for line in lines)  # dmesg's "[uptime] " prefix
    data = "Data {" + ", ".join(["0x00000000"] * 8) + "}"
    assert [line.split("] ", 1)[1] for line in lines if "SXid" in line] == [
        "nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 20034, Fatal, Link 28 LTSSM Fault Up",
        f"nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 20034, {data}",
        "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 22013, Non-fatal, Link 04 x y",
        f"nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 22013, {data}",
    ]


def test_update_initramfs_records_blacklist(kernel):
    (kernel.tmp / "etc/modprobe.d").mkdir()
    (kernel.tmp / "etc/modprobe.d/nouveau.conf").write_text("blacklist nouveau\n")
    assert kernel.update_initramfs_main(["-u"]) == 0
    record = json.loads((kernel.tmp / "state/initramfs.log").read_text().splitlines()[-1])
    assert record["argv"] == ["-u"]
    assert record["blacklisted"] == ["nouveau"]
