"""The lab's lspci simulator, the sysfs tree it writes, the kernel's link-limited report of the simulated
kernel, and the PCIe / P_Key fault parameters (lab/profiles/SCHEMA.md)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_pcie import (
    acs_enabled,
    aer_total,
    link_degraded,
    parse_aer,
    parse_link_limited,
    parse_lspci,
    parse_pkey,
)
from gpuforge_sim import hardware, lspci

from gpuforge.lab.profiles import hardware_document, load_profile

ROOT = Path(__file__).resolve().parents[3]
SIMKERNEL = ROOT / "lab/image/overlay/usr/local/lib/gpuforge-lab/simkernel.py"
GPU_PROFILES = [
    "dgx1-v100-edr",
    "supermicro-4029gp-v100",
    "poweredge-c4140-v100",
    "vsphere-t4-vgpu-roce",
    "dgx-h100-ndr",
]


@pytest.fixture
def node(tmp_path, monkeypatch):
    """node(profile, faults) writes hardware.json and points the simulators at tmp_path."""
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))

    def make(profile, faults=None):
        document = hardware_document(load_profile(profile), faults or [])
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
        return document

    return make


def run_lspci(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert lspci.main(list(argv)) == 0
    return out.getvalue()


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_healthy_profile_lists_every_gpu_and_hca_at_full_link(node, profile):
    document = node(profile)
    devices = parse_lspci(run_lspci("-vvv", "-D"))
    gpus = [hardware.pci_address(d["bus_id"]) for d in document["gpu"]["devices"]]
    hcas = [h["bus_id"] for h in document["hcas"]]
    assert set(gpus + hcas) <= set(devices)
    for address in gpus + hcas:
        cap, sta = devices[address]["link_cap"], devices[address]["link_sta"]
        assert (sta["speed_gts"], sta["width"]) == (cap["speed_gts"], cap["width"])
        assert not sta["speed_downgraded"] and not sta["width_downgraded"]
    # Capabilities from the profile: the GPU's and each HCA's own.
    gen_speed = {3: 8.0, 5: 32.0}
    assert devices[gpus[0]]["link_cap"] == {
        "speed_gts": gen_speed[document["gpu"]["pcie_gen_max"]],
        "width": document["gpu"]["pcie_width_max"],
    }
    first = document["hcas"][0]
    assert devices[hcas[0]]["link_cap"]["width"] == first["pcie_width_max"]
    assert all(not any((d["acs_ctl"] or {}).values()) for d in devices.values() if d["bridge"])


def test_header_and_filters(node):
    node("supermicro-4029gp-v100")
    plain = run_lspci()
    assert "18:00.0 Ethernet controller: Mellanox Technologies MT27710 Family [ConnectX-4 Lx]\n" in plain
    assert "LnkCap" not in plain
    assert run_lspci("-s", "18:00.1").startswith("18:00.1 Ethernet controller")
    nvidia = run_lspci("-d", "10de:")
    assert nvidia.count("3D controller: NVIDIA Corporation Tesla V100-SXM2-32GB") == 8
    assert "Mellanox" not in nvidia and "PCI bridge" not in nvidia


def test_faults_show_in_lspci(node):
    node(
        "dgx-h100-ndr",
        [{"type": "pcie_link_degraded", "hca": "mlx5_4", "gen": 3}, {"type": "acs_enabled", "hca": "mlx5_4"}],
    )
    text = run_lspci("-vvv", "-D", "-s", "0000:9a:00.0")
    assert "\t\tLnkSta:\tSpeed 8GT/s (downgraded), Width x16 (ok)\n" in text
    devices = parse_lspci(run_lspci("-vvv", "-D"))
    on = [a for a, d in devices.items() if d["bridge"] and any(d["acs_ctl"].values())]
    assert len(on) == 1
    assert devices[on[0]]["link_sta"]["speed_gts"] == 8.0  # the root port shows the same (downtrained) link


def test_sysfs_tree(node, tmp_path):
    node("dgx1-v100-edr", [{"type": "pcie_aer_errors", "gpu": 7, "nonfatal": 2, "correctable": 5}])
    run_lspci()
    root = tmp_path / "run" / "sys"
    device = root / "bus/pci/devices/0000:8a:00.0"
    assert os.path.realpath(device).endswith("/devices/pci0000:00/0000:00:0b.0/0000:8a:00.0")
    assert aer_total(parse_aer((device / "aer_dev_nonfatal").read_text()), "nonfatal") == 2
    correctable = parse_aer((device / "aer_dev_correctable").read_text())
    assert (correctable["Receiver Error"], correctable["TOTAL_ERR_COR"]) == (5, 5)
    assert aer_total(parse_aer((root / "bus/pci/devices/0000:06:00.0/aer_dev_fatal").read_text()), "fatal") == 0
    hca = root / "class/infiniband/mlx5_2"
    assert os.path.basename(os.path.realpath(hca / "device")) == "0000:84:00.0"
    table = [parse_pkey((hca / "ports/1/pkeys" / str(i)).read_text()) for i in range(lspci.PKEY_TABLE_SIZE)]
    assert table == ["0xffff"] + [None] * (lspci.PKEY_TABLE_SIZE - 1)


def test_pkey_mismatch_fault(node, tmp_path):
    node("dgx1-v100-edr", [{"type": "pkey_mismatch", "hca": "mlx5_1", "pkeys": ["0x7fff", "0x8001"]}])
    run_lspci()
    table = tmp_path / "run/sys/class/infiniband/mlx5_1/ports/1/pkeys"
    assert [(table / str(i)).read_text() for i in range(3)] == ["0x7fff\n", "0x8001\n", "0x0000\n"]
    assert (tmp_path / "run/sys/class/infiniband/mlx5_0/ports/1/pkeys/0").read_text() == "0xffff\n"


def test_simulated_kernel_reports_the_downtrained_link_at_the_lspci_root_port(node, tmp_path):
    faults = [
        {"type": "pcie_link_degraded", "hca": "mlx5_6", "width": 8},
        {"type": "pcie_link_degraded", "gpu": 1, "gen": 4, "width": 4},
    ]
    document = node("dgx-h100-ndr", faults)
    spec = importlib.util.spec_from_file_location("simkernel_lspci_test", SIMKERNEL)
    kernel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernel)
    reports = {r["address"]: r for r in parse_link_limited("\n".join(kernel._pcie_limited_lines(document)))}
    bridges = {d["address"]: d["bridge"] for d in hardware.pcie_devices(hardware.load_hardware())}
    assert set(reports) == {"0000:ce:00.0", "0000:43:00.0"}
    hca, gpu = reports["0000:ce:00.0"], reports["0000:43:00.0"]
    assert (hca["driver"], hca["width"], hca["speed_gts"], hca["limited_at"]) == (
        "mlx5_core",
        8,
        32.0,
        bridges["0000:ce:00.0"],
    )
    # Bandwidth as the kernel computes it (PCIE_SPEED2MBS_ENC x width): 8 x 31507 and 16 x 31507 Mb/s.
    assert (hca["available_gbit_per_s"], hca["capable_gbit_per_s"]) == (252.056, 504.112)
    assert (gpu["driver"], gpu["width"], gpu["speed_gts"], gpu["limited_at"]) == (
        "pci",
        4,
        16.0,
        bridges["0000:43:00.0"],
    )
    assert kernel._pcie_limited_lines(hardware_document(load_profile("dgx-h100-ndr"), [])) == []


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            {"type": "pcie_link_degraded", "hca": "mlx5_0", "width": 16},
            r"faults\[0\]\.width: must be a link width below",
        ),
        (
            {"type": "pcie_link_degraded", "hca": "mlx5_0", "gen": 3},
            r"faults\[0\]\.gen: must be a PCIe generation below",
        ),
        ({"type": "pcie_link_degraded", "gpu": 0}, r"needs width or gen"),
        ({"type": "pcie_link_degraded", "gpu": 0, "hca": "mlx5_0", "width": 8}, r"needs one of gpu or hca"),
        ({"type": "acs_enabled"}, r"acs_enabled needs one of gpu or hca"),
        ({"type": "pcie_aer_errors", "gpu": 0}, r"needs correctable, nonfatal or fatal"),
        ({"type": "pcie_aer_errors", "gpu": 0, "fatal": -1}, r"faults\[0\]\.fatal: must be a non-negative integer"),
        ({"type": "pkey_mismatch", "hca": "mlx5_0", "pkeys": ["7fff"]}, r"faults\[0\]\.pkeys"),
        ({"type": "pkey_mismatch", "hca": "mlx5_7", "pkeys": ["0x7fff"]}, r"faults\[0\]\.hca: no HCA"),
    ],
)
def test_bad_pcie_fault_named(fault, message):
    with pytest.raises(ValueError, match=message):
        hardware_document(load_profile("dgx1-v100-edr"), [fault])


def test_hca_pcie_capability_must_be_a_real_one(tmp_path):
    profile = load_profile("poweredge-c4140-v100")
    profile["hcas"][0]["pcie_width_max"] = 12
    with pytest.raises(ValueError, match=r"hcas\[0\]\.pcie_width_max: must be 1, 2, 4, 8, 16 or 32"):
        hardware_document(profile, [])


def test_simulator_output_parses_to_the_profile(node):
    faults = [{"type": "pcie_link_degraded", "hca": "mlx5_1", "width": 4}, {"type": "acs_enabled", "gpu": 0}]
    node("dgx1-v100-edr", faults)
    devices = parse_lspci(run_lspci("-vvv", "-D"))
    gpu = devices["0000:06:00.0"]
    assert gpu["description"].startswith("3D controller: NVIDIA Corporation Tesla V100-SXM2-16GB")
    assert gpu["link_cap"] == {"speed_gts": 8.0, "width": 16}
    assert link_degraded(gpu) == ""
    hca = devices["0000:0c:00.0"]
    assert hca["description"] == "Infiniband controller: Mellanox Technologies MT27700 Family [ConnectX-4]"
    assert link_degraded(hca) == "width x4 of x16"
    bridges = {a: d for a, d in devices.items() if d["bridge"]}
    assert (
        len(bridges) == 12
    )  # one root port per device bus: the DGX-1 profile has 8 GPUs and 4 HCAs, each on its own bus
    assert [a for a, d in bridges.items() if acs_enabled(d["acs_ctl"])] == ["0000:00:02.0"]
    # Without -D the domain 0000 is left out, as lspci does.
    assert "06:00.0 3D controller" in run_lspci("-vvv")


def test_image_wrapper_runs_the_simulator_and_says_when_it_is_missing(node, tmp_path):
    node("poweredge-c4140-v100")
    wrapper = ROOT / "lab/image/overlay/usr/local/bin/lspci"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lab/sim")}
    done = subprocess.run([sys.executable, str(wrapper), "-d", "15b3:"], capture_output=True, text=True, env=env)
    assert (done.returncode, done.stdout) == (
        0,
        "5e:00.0 Infiniband controller: Mellanox Technologies MT27800 Family [ConnectX-5]\n",
    )
    bare = {**os.environ, "PYTHONPATH": str(tmp_path / "empty")}
    done = subprocess.run([sys.executable, "-S", str(wrapper)], capture_output=True, text=True, env=bare)
    assert done.returncode == 1
    assert "gpuforge-lab-sim" in done.stderr
