"""Simulated nvbandwidth: the v0.6 text format, bandwidth from the current PCIe link and NVLink topology, the
host_bandwidth_degraded fault, testcase selection and the errors of the real tool."""

from __future__ import annotations

import io
import json

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvbandwidth import parse_output, per_gpu
from gpuforge_sim import driver_state, nvbandwidth

from gpuforge.lab.profiles import hardware_document, load_profile

H2D, D2H, P2P = nvbandwidth.NAMES


def _node(tmp_path, monkeypatch, profile, faults=None, loaded=True):
    (tmp_path / "lib" / "modules").mkdir(parents=True, exist_ok=True)
    (tmp_path / "lib" / "modules" / "nvidia.ko").write_text("{}")
    (tmp_path / "lib" / "nvidia-driver.json").write_text(json.dumps({"driver_version": "570.195.03"}))
    (tmp_path / "hardware.json").write_text(json.dumps(hardware_document(load_profile(profile), faults or [])))
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_LIB", str(tmp_path / "lib"))
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
    if loaded:
        driver_state.load_module("nvidia")


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    rc = nvbandwidth.main(argv, out, err)
    return rc, out.getvalue(), err.getvalue()


def test_output_format_and_header(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx-h100-ndr")
    rc, out, _ = _run(["-t", H2D])
    lines = out.splitlines()
    assert rc == 0 and lines[0] == "nvbandwidth Version: v0.6"
    assert "Driver Version: 570.195.03" in lines
    assert "Device 4: NVIDIA H100 80GB HBM3 (00000000:9d:00)" in lines
    start = lines.index(f"Running {H2D}.")
    assert lines[start + 1] == "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
    assert lines[start + 2].split() == [str(n) for n in range(8)]
    assert lines[start + 3].split() == ["0"] + ["52.30"] * 8  # Gen5 x16: 3.938 GB/s x 16 lanes x 0.83
    assert f"SUM {H2D} 418.40" in lines


def test_parser_reads_the_simulator_and_the_fault_lowers_one_gpu(tmp_path, monkeypatch):
    faults = [{"type": "host_bandwidth_degraded", "gpu": 1, "fraction": 0.25}]
    _node(tmp_path, monkeypatch, "poweredge-c4140-v100", faults)
    parsed = parse_output(_run([])[1])
    assert list(parsed["testcases"]) == [H2D, D2H, P2P]
    assert per_gpu(H2D, parsed["testcases"][H2D]) == {0: 13.08, 1: 3.27, 2: 13.08, 3: 13.08}
    assert per_gpu(D2H, parsed["testcases"][D2H])[1] == 3.27
    assert parsed["devices"][1]["bus_id"] == load_profile("poweredge-c4140-v100")["gpu"]["devices"][1]["bus_id"]


def test_p2p_follows_the_nvlink_topology(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx1-v100-edr")
    topology = load_profile("dgx1-v100-edr")["gpu"]["topology"]
    pairs = per_gpu(P2P, parse_output(_run(["-t", "2"])[1])["testcases"][P2P])
    assert len(pairs) == 8 * 7
    for (a, b), value in pairs.items():
        code = topology[a][b]
        expected = int(code[2:]) * 25 * 0.82 if code.startswith("NV") else 13.08 * 0.8
        assert value == pytest.approx(expected, abs=0.01), (a, b, code)


def test_downtrained_link_halves_the_host_bandwidth(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "supermicro-4029gp-v100", [{"type": "pcie_width_degraded", "gpu": 7, "width": 8}])
    values = per_gpu(H2D, parse_output(_run(["-t", H2D])[1])["testcases"][H2D])
    assert values[7] == 6.54 and values[0] == 13.08


def test_single_gpu_waives_device_to_device(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "vsphere-t4-vgpu-roce")
    parsed = parse_output(_run(["-t", H2D, P2P])[1])
    assert parsed["testcases"][P2P]["waived"] is True and per_gpu(H2D, parsed["testcases"][H2D]) == {0: 13.08}


def test_list_and_errors(tmp_path, monkeypatch):
    _node(tmp_path, monkeypatch, "dgx-h100-ndr", loaded=False)
    assert _run(["-l"])[1].splitlines() == [f"0, {H2D}:", f"1, {D2H}:", f"2, {P2P}:"]
    rc, _out, err = _run(["-t", "host_to_device_memcpy_sm_typo"])
    assert rc == 1 and "Testcase host_to_device_memcpy_sm_typo not found" in err
    rc, out, err = _run(["-t", H2D])
    assert (rc, out) == (1, "") and "CUDA_ERROR_NO_DEVICE" in err
