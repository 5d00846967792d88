"""Parsers over outputs captured on a real NVIDIA H200 machine (tests/fixtures/*/SOURCES.md: gpuforge-device_*,
gpuforge_1xh200_*): the values asserted are read off the files, not off the parsers."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_kernel as kernel
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_nvidia_smi as nv
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_pcie as pcie
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_resnet50 as resnet

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
XML = FIXTURES / "nvidia-smi" / "gpuforge-device_1xh200_drv580.159.04_q_x.xml"
QUERY_GPU = FIXTURES / "nvidia-smi" / "gpuforge-device_1xh200_drv580.159.04_query_gpu.csv"


def capture(view: str) -> str:
    """The 18:15 capture of 2026-11-26 (a second H200 VM of the same kind, SOURCES.md)."""
    return (FIXTURES / "nvidia-smi" / f"gpuforge-device_1xh200_drv580.159.04_{view}").read_text(encoding="utf-8")


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


# Readings that differ between two calls of nvidia-smi (-q at 18:14:36, -q -x at 18:14:37).
BETWEEN_CALLS = ("power_draw_w", "power_draw_average_w", "power_draw_instant_w", "temperature_c")


def test_h200_text_q_of_driver_580_agrees_with_its_xml():
    text = nv.parse_query_text(capture("q.txt"))
    xml = nv.parse_query_xml(capture("q_x_18-15.xml"))
    # Utilization: driver 580 prints `GPU` (older drivers `Gpu`): 0 % in both.
    assert text["gpus"][0]["utilization_gpu_pct"] == xml["gpus"][0]["utilization_gpu_pct"] == 0
    # Average Power Draw 79.66 W in -q, <average_power_draw>79.64 W in -q -x, a second later.
    assert (text["gpus"][0]["power_draw_average_w"], xml["gpus"][0]["power_draw_average_w"]) == (79.66, 79.64)
    assert text["gpus"][0]["serial"] == "1654524125085"
    for log in (text, xml):
        for key in ("format", "dtd_version", "timestamp"):
            log.pop(key)
        for key in BETWEEN_CALLS:
            log["gpus"][0].pop(key)
    assert text == xml


def test_h200_topo_m_with_the_ansi_underlined_header():
    raw = capture("topo_m.txt")
    assert raw.splitlines()[0] == "\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"
    topo = nv.parse_topo_matrix(raw)
    assert topo["columns"] == ["GPU0", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert topo["gpu_count"] == 1
    (gpu,) = topo["gpus"]
    assert (gpu["name"], gpu["cpu_affinity"], gpu["numa_affinity"], gpu["gpu_numa_id"]) == ("GPU0", "0-15", "0", None)
    assert (gpu["links"], gpu["nics"], topo["nics"]) == ({}, {}, [])
    assert topo["matrix"] == {"GPU0": {"GPU0": "X"}}
    assert len(topo["legend"]) == 7 and topo["legend"]["NV#"] == "Connection traversing a bonded set of # NVLinks"


@pytest.mark.parametrize(
    ("view", "parse"),
    [("nvlink_status_no_links.txt", nv.parse_nvlink_status), ("nvlink_e_no_links.txt", nv.parse_nvlink_errors)],
)
def test_h200_vm_without_nvlink_prints_nothing_which_is_no_links(view, parse):
    assert capture(view) == ""  # rc 0
    assert parse(capture(view)) == {"gpu_count": 0, "gpus": [], "errors": []}
    assert parse(" \n\n") == {"gpu_count": 0, "gpus": [], "errors": []}


def test_h200_list():
    listed = nv.parse_list_gpus(capture("list.txt"))
    assert listed["errors"] == []
    assert listed["gpus"] == [
        {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-971abaed-5cbd-7898-741f-82ee2a8223e6", "mig_devices": []}
    ]


@pytest.mark.parametrize("when", ["idle", "load"])
def test_h200_clock_event_samples_no_hw_reason_idle_or_under_load(when):
    samples = nv.parse_clock_event_samples(capture(f"clock_events_{when}.csv"))
    assert samples["field_names"] == nv.CLOCK_EVENT_FIELDS["clocks_event_reasons"]
    assert samples["sample_count"] == 20
    assert samples["unreachable"] == []
    (gpu,) = samples["gpus"]
    assert (gpu["bus_id"], gpu["index"], gpu["serial"], gpu["samples"]) == ("00000000:00:06.0", 0, "1654524125085", 20)
    assert gpu["active"] == {"hw_slowdown": 0, "hw_thermal_slowdown": 0, "hw_power_brake_slowdown": 0}


def test_h200_query_gpu_under_load_sw_power_cap():
    (gpu,) = nv.parse_query_gpu_csv(capture("query_gpu_load.csv"))["rows"]
    assert (gpu["clocks.current.sm"], gpu["clocks.max.sm"]) == (1455, 1980)
    assert (gpu["power.draw.average"], gpu["power.draw.instant"]) == (691.41, 686.58)
    assert (gpu["temperature.gpu"], gpu["utilization.gpu"]) == (66, 100)
    assert gpu["clocks_event_reasons.active"] == "0x0000000000000004"
    assert int(gpu["clocks_event_reasons.active"], 16) == nv.CLOCK_EVENT_BITS["sw_power_cap"]
    assert (gpu["clocks_event_reasons.sw_power_cap"], gpu["clocks_event_reasons.hw_slowdown"]) == (
        "Active",
        "Not Active",
    )
    # The same row as one clock event sample: the bitmask counts SW power cap, no HW slowdown.
    (sample,) = nv.parse_clock_event_samples(capture("query_gpu_load.csv"))["gpus"]
    assert sample["active"]["sw_power_cap"] == 1
    assert sample["active"]["hw_slowdown"] == sample["active"]["hw_thermal_slowdown"] == 0
    assert [reason for reason, count in sample["active"].items() if count] == ["sw_power_cap"]


def test_h200_q_d_performance_under_load():
    log = nv.parse_query_text(capture("q_d_performance_load.txt"))
    assert (log["driver_version"], log["attached_gpus"], log["gpu_count"]) == ("580.159.04", 1, 1)
    gpu = log["gpus"][0]
    assert (gpu["bus_id"], gpu["performance_state"]) == ("00000000:00:06.0", "P0")
    assert gpu["throttle_reasons"]["sw_power_cap"] is True
    assert gpu["throttle_reasons"]["hw_slowdown"] is False
    assert gpu["throttle_reasons"]["hw_thermal_slowdown"] is False
    assert gpu["throttle_reasons"]["hw_power_brake_slowdown"] is False
    assert gpu["active_throttle_reasons"] == ["sw_power_cap"]


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


# The 18:21 capture of 2026-11-26: a third H200 VM of the same kind, validated by playbooks/validate.yml
# (benchmarks/real_node/run.sh). lspci and lsmod are Debian 12's pciutils 3.9.0 and kmod 30 (SOURCES.md).
LSPCI_VM = FIXTURES / "lspci" / "gpuforge-device_1xh200_firecracker_vvv_D.txt"
LSMOD_VM = FIXTURES / "lsmod" / "gpuforge-device_1xh200_drv580.159.04_firecracker.txt"


def test_h200_vm_lspci_gpu_on_the_host_bridge_at_gen5_x16():
    text = LSPCI_VM.read_text(encoding="utf-8")
    devices = pcie.parse_lspci(text)
    # lspci's stderr (libkmod) is the capture's first line: it is not a device and carries no link or ACS.
    assert text.splitlines()[0] == "lspci: Unable to load libkmod resources: error -2"
    assert {k: v for k, v in devices[None].items() if k != "description"} == {
        "address": None,
        "bridge": False,
        "link_cap": None,
        "link_sta": None,
        "acs_ctl": None,
        "dev_sta": None,
        "ue_sta": None,
        "ce_sta": None,
    }
    assert sorted(a for a in devices if a) == [f"0000:00:0{n}.0" for n in range(7)]
    gpu = devices["0000:00:06.0"]
    # pci.ids 2023.04.11 does not know the H200's device ID: `NVIDIA Corporation Device 2335`.
    assert gpu["description"] == "3D controller: NVIDIA Corporation Device 2335 (rev a1)"
    assert gpu["link_cap"] == {"speed_gts": 32.0, "width": 16}
    # pciutils 3.9.0 marks nothing when LnkSta equals LnkCap (no `(ok)`).
    assert gpu["link_sta"] == {"speed_gts": 32.0, "width": 16, "speed_downgraded": False, "width_downgraded": False}
    assert pcie.link_degraded(gpu) == ""
    assert gpu["bridge"] is False and gpu["acs_ctl"] is None
    # Its Express DevSta and AER UESta/CESta registers: every bit clear on this healthy VM.
    assert gpu["dev_sta"] == dict.fromkeys(
        ["CorrErr", "NonFatalErr", "FatalErr", "UnsupReq", "AuxPwr", "TransPend"], False
    )
    assert len(gpu["ue_sta"]) == 12 and not any(gpu["ue_sta"].values())
    assert gpu["ce_sta"] == dict.fromkeys(
        ["RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "AdvNonFatalErr"], False
    )
    # No bridge above the GPU: the host bridge is the only one, without capabilities (no link, no ACS).
    assert [a for a, d in devices.items() if d["bridge"]] == ["0000:00:00.0"]
    assert devices["0000:00:00.0"]["description"] == "Host bridge: Intel Corporation Device 0d57"
    assert not any(d["acs_ctl"] for d in devices.values())
    # Only the GPU has a PCI Express capability; the others are virtio devices.
    assert [a for a, d in devices.items() if d["link_cap"]] == ["0000:00:06.0"]
    assert [a for a in devices if a and "Virtio 1.0" in devices[a]["description"]] == [
        f"0000:00:0{n}.0" for n in range(1, 6)
    ]


def test_h200_vm_lspci_gpu_aer_capability_with_no_error_set():
    """The parser does not read AER (gpu_node_check takes the counters from sysfs); the capture has the
    capability on the GPU, every status bit clear."""
    text = LSPCI_VM.read_text(encoding="utf-8")
    gpu = text[text.index("0000:00:06.0 ") :]
    assert text.count("Advanced Error Reporting") == gpu.count("Advanced Error Reporting") == 1
    lines = {line.strip().split(":", 1)[0]: line.strip() for line in gpu.splitlines() if ":\t" in line}
    assert "+" not in lines["UESta"] and "+" not in lines["CESta"]
    # The GPU is the last device; lspci ends every device with a blank line.
    assert gpu.endswith("\tKernel driver in use: nvidia\n\n")
    assert text.count("Kernel driver in use: virtio-pci") == 5
    assert "Kernel modules:" not in text  # libkmod could not load (the stderr line above)


def test_h200_vm_lsmod_use_count_minus_two():
    """kmod's lsmod prints kmod_module_get_refcnt(), -ENOENT (-2) when /sys/module/<name>/refcnt is absent."""
    modules = kernel.parse_lsmod(LSMOD_VM.read_text(encoding="utf-8"))
    assert modules["names"] == ["nvidia_uvm", "nvidia"]
    assert modules["modules"] == {
        "nvidia_uvm": {"size": 1830912, "use_count": -2, "used_by": []},
        "nvidia": {"size": 14299136, "use_count": -2, "used_by": []},
    }
    assert "nvidia_peermem" not in modules["modules"]


def test_h200_vm_xml_of_the_validated_machine():
    log = nv.parse_query_xml(capture("q_x_18-20.xml"))
    assert (log["dtd_version"], log["driver_version"], log["gpu_count"]) == ("v13", "580.159.04", 1)
    (gpu,) = log["gpus"]
    assert (gpu["bus_id"], gpu["serial"], gpu["vbios_version"]) == (
        "00000000:00:06.0",
        "1653724055631",
        "96.00.A5.00.1A",
    )
    assert gpu["pcie"] == {"gen_max": 5, "gen_current": 5, "width_max": 16, "width_current": 16}
