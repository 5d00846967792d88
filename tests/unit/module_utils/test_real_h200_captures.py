"""Parsers over outputs captured on a real NVIDIA H200 machine (tests/fixtures/*/SOURCES.md: gpuforge-device_*,
gpuforge_1xh200_*): the values asserted are read off the files, not off the parsers."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_nvidia_smi as nv
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_resnet50 as resnet

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
XML = FIXTURES / "nvidia-smi" / "gpuforge-device_1xh200_drv580.159.04_q_x.xml"
QUERY_GPU = FIXTURES / "nvidia-smi" / "gpuforge-device_1xh200_drv580.159.04_query_gpu.csv"


def test_h200_xml_of_driver_580():
    log = nv.parse_query_xml(XML.read_text(encoding="utf-8"))
    assert (log["dtd_version"], log["driver_version"], log["cuda_version"]) == ("v13", "580.159.04", "13.0")
    assert log["gpu_count"] == 1
    gpu = log["gpus"][0]
    assert (gpu["product_name"], gpu["bus_id"], gpu["serial"]) == ("NVIDIA H200", "00000000:00:06.0", "1653824018642")
    assert gpu["pcie"] == {"gen_max": 5, "gen_current": 5, "width_max": 16, "width_current": 16}
    # Driver 580 has no <power_draw>: gpu_power_readings/average_power_draw 77.42 W, instant_power_draw 76.91 W.
    assert (gpu["power_draw_average_w"], gpu["power_draw_instant_w"]) == (77.42, 76.91)
    assert gpu["power_draw_w"] == 77.42
    assert gpu["power_limit_w"] == 700.0
    assert gpu["remapped_rows"]["pending"] is False and gpu["remapped_rows"]["failure"] is False
    assert (gpu["remapped_rows"]["correctable"], gpu["remapped_rows"]["uncorrectable"]) == (0, 0)
    assert gpu["remapped_rows"]["histogram"]["max"] == 3072
    assert gpu["ecc"]["mode_current"] == "Enabled"
    assert gpu["ecc"]["aggregate"]["sram_threshold_exceeded"] is False
    assert gpu["active_throttle_reasons"] == ["gpu_idle"]
    assert gpu["throttle_reasons"]["hw_thermal_slowdown"] is False


def test_h200_query_gpu_csv_with_units_in_the_header():
    fields = QUERY_GPU.read_text(encoding="utf-8").splitlines()[0]
    assert "power.draw.average [W]" in fields
    parsed = nv.parse_query_gpu_csv(QUERY_GPU.read_text(encoding="utf-8"))
    assert parsed["units"]["power.draw.average"] == "W"
    (gpu,) = parsed["rows"]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["pci.bus_id"] == "00000000:00:06.0"
    # all digits, but an identifier: kept as printed
    assert gpu["serial"] == "1653824018642"
    assert gpu["driver_version"] == "580.159.04"
    assert (gpu["power.draw"], gpu["power.draw.average"], gpu["power.draw.instant"]) == (77.31, 77.31, 77.31)
    assert gpu["clocks_event_reasons.active"] == "0x0000000000000001"
    assert gpu["clocks_event_reasons.hw_thermal_slowdown"] == "Not Active"
    assert (gpu["pcie.link.gen.current"], gpu["pcie.link.width.current"]) == (5, 16)


def test_a_serial_with_a_leading_zero_keeps_it():
    text = "index, serial, uuid\n3, 0321618000103, GPU-1\n"
    assert nv.parse_query_gpu_csv(text)["rows"][0]["serial"] == "0321618000103"


@pytest.mark.parametrize(
    ("name", "precision", "batch", "images_per_second"),
    [("fp32-b128", "fp32", 128, 3026.47), ("amp-b128", "bf16", 128, 4390.93), ("amp-b256", "bf16", 256, 4717.98)],
)
def test_resnet50_real_h200_runs(name, precision, batch, images_per_second):
    result = resnet.parse_resnet50((FIXTURES / "resnet50" / f"gpuforge_1xh200_{name}.txt").read_text(encoding="utf-8"))
    assert result["device_name"] == "NVIDIA H200"
    assert result["precision"] == precision
    assert result["batch_size"] == batch
    assert result["per_gpu"] == result["total_imgs_per_sec"] == images_per_second
    assert result["world_size"] == 1
