"""nvidia-smi parsers over the public real outputs (REAL_OUTPUTS, tests/conftest.py) and fixtures from the reference
documents (docs/sources.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_nvidia_smi as nv

P100_XML = "nvidia-smi-q-x__netdata-go.d.plugin__tesla-p100.xml"
A100_MIG_XML = "nvidia-smi-q-x__netdata-go.d.plugin__a100-sxm4-40gb-mig_drv510.xml"
RTX4090_XML = "nvidia-smi-q-x__netdata-go.d.plugin__rtx4090_drv535.xml"
P100_CSV = "nvidia-smi-query-gpu-csv__netdata-go.d.plugin__tesla-p100.csv"
H100_TEXT = "nvidia-smi-q-text__leptonai-gpud__8xh100_drv535.183.01.txt"
V100_RETIRE = "nvidia-smi-q-d-PAGE_RETIREMENT__Azure-azurehpc-health-checks__8xv100.txt"
NVLINK_A100 = "nvidia-smi-nvlink-status__leptonai-gpud__a100.txt"
TOPO_TABS = "nvidia-smi-topo-m__noonghunna-club-3090__issue1229__2gpu_phb_tabs.txt"
TOPO_8NIC = "nvidia-smi-topo-m__sgl-project-sglang__issue30401__8xh100_8nic.txt"
TOPO_NO_NIC = "nvidia-smi-topo-m__stas00-ml-engineering__training-performance-README__8xh100_no_nic.txt"


def test_xml_p100_dtd_v11_throttle_reasons_and_retired_pages(real_output):
    log = nv.parse_query_xml(real_output(P100_XML))
    assert (log["dtd_version"], log["driver_version"], log["cuda_version"]) == ("v11", "510.47.03", "11.6")
    assert log["attached_gpus"] == log["gpu_count"] == 1
    gpu = log["gpus"][0]
    assert gpu["product_name"] == "Tesla P100-PCIE-16GB"
    assert gpu["bus_id"] == "00000000:00:04.0"
    assert gpu["uuid"] == "GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e"
    assert gpu["memory"] == {"total_mib": 16384, "reserved_mib": 103, "used_mib": 0, "free_mib": 16280}
    assert gpu["pcie"] == {"gen_max": 3, "gen_current": 3, "width_max": 16, "width_current": 16}
    assert (gpu["ecc"]["volatile"]["corrected"], gpu["ecc"]["volatile"]["uncorrected"]) == (0, 0)
    assert (gpu["ecc"]["aggregate"]["corrected"], gpu["ecc"]["aggregate"]["uncorrected"]) == (3, 0)
    assert gpu["ecc"]["aggregate"]["sram_correctable"] is None  # Pascal counts bits, not SRAM/DRAM
    assert gpu["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    assert gpu["remapped_rows"] is None
    assert gpu["active_throttle_reasons"] == ["gpu_idle"]
    assert gpu["throttle_reasons"]["hw_thermal_slowdown"] is False
    assert len(gpu["throttle_reasons"]) == 9
    assert (gpu["power_limit_w"], gpu["power_draw_w"], gpu["temperature_c"]) == (250.0, 26.16, 38)
    assert gpu["mig_mode"] == {"current": None, "pending": None}


def test_xml_a100_mig_and_value_with_line_break(real_output):
    gpu = nv.parse_query_xml(real_output(A100_MIG_XML))["gpus"][0]
    assert gpu["product_name"] == "NVIDIA A100-SXM4-40GB"
    assert gpu["mig_mode"] == {"current": "Enabled", "pending": "Enabled"}
    assert [m["gpu_instance_id"] for m in gpu["mig_devices"]] == [1, 2]
    assert gpu["mig_devices"][0]["memory_total_mib"] == 19968
    assert gpu["mig_devices"][0]["multiprocessor_count"] == 42
    # <clocks_throttle_reason_applications_clocks_setting>Not Active\n  </...>
    assert gpu["throttle_reasons"]["applications_clocks_setting"] is False
    assert gpu["active_throttle_reasons"] == []
    # A100 on driver 510: SRAM/DRAM split; volatile N/A with MIG on, aggregate readable.
    assert set(gpu["ecc"]["volatile"].values()) == {None}
    assert gpu["ecc"]["aggregate"] == {
        "corrected": 0, "uncorrected": 0, "sram_correctable": 0, "sram_uncorrectable": 0, "dram_correctable": 0,
        "dram_uncorrectable": 0, "sram_threshold_exceeded": None,
    }  # fmt: skip
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert gpu["pcie"]["gen_max"] == 4


def test_xml_rtx4090_dtd_v12_clock_event_reasons_and_remapped_rows(real_output):
    log = nv.parse_query_xml(real_output(RTX4090_XML))
    assert (log["dtd_version"], log["driver_version"], log["cuda_version"]) == ("v12", "535.86.05", "12.2")
    gpu = log["gpus"][0]
    assert gpu["bus_id"] == "00000000:84:00.0"
    assert gpu["serial"] is None
    assert gpu["persistence_mode"] == "Enabled"
    assert gpu["pcie"] == {"gen_max": 3, "gen_current": 1, "width_max": 16, "width_current": 16}
    assert gpu["remapped_rows"] == {
        "correctable": 0, "uncorrectable": 0, "pending": False, "failure": False,
        "histogram": {"max": 192, "high": 0, "partial": 0, "low": 0, "none": 0},
    }  # fmt: skip
    assert gpu["memory_repair_pending"] is False
    assert gpu["active_throttle_reasons"] == ["gpu_idle"]
    assert gpu["power_limit_w"] == 450.0
    assert gpu["ecc"]["mode_current"] == "Disabled"


def test_text_h100_eight_gpus_same_shape_as_xml(real_output):
    log = nv.parse_query_text(real_output(H100_TEXT))
    assert (log["driver_version"], log["cuda_version"], log["attached_gpus"]) == ("535.183.01", "12.2", 8)
    assert log["gpu_count"] == 8
    first = log["gpus"][0]
    assert first["bus_id"] == "00000000:53:00.0"
    assert first["uuid"] == "GPU-566e6f65-c38e-b12f-4824-6944218668b9"
    assert first["product_name"] == "NVIDIA H100 80GB HBM3"
    assert first["memory"]["total_mib"] == 81559
    assert first["pcie"] == {"gen_max": 5, "gen_current": 5, "width_max": 16, "width_current": 16}
    assert first["remapped_rows"] == {
        "correctable": 0, "uncorrectable": 0, "pending": False, "failure": False,
        "histogram": {"max": 2560, "high": 0, "partial": 0, "low": 0, "none": 0},
    }  # fmt: skip
    assert first["ecc"]["aggregate"]["sram_threshold_exceeded"] is False
    assert first["power_draw_w"] == 71.97 and first["power_draw_average_w"] is None
    # HW Thermal Slowdown is indented under HW Slowdown in the text layout.
    assert first["throttle_reasons"]["hw_thermal_slowdown"] is False
    assert first["active_throttle_reasons"] == ["gpu_idle"]
    assert first["ecc"]["volatile"] == {
        "corrected": 0, "uncorrected": 0, "sram_correctable": 0, "sram_uncorrectable": 0, "dram_correctable": 0,
        "dram_uncorrectable": 0,
    }  # fmt: skip
    assert first["power_limit_w"] == 700.0
    assert first["fabric_state"] == "Completed"
    assert first["fabric_status"] == "Success"
    assert log["gpus"][7]["bus_id"] == "00000000:CA:00.0"
    xml_keys = set(nv.parse_query_xml(real_output(RTX4090_XML))["gpus"][0])
    assert set(first) == xml_keys


def test_text_page_retirement_only(real_output):
    log = nv.parse_query_text(real_output(V100_RETIRE))
    assert (log["driver_version"], log["gpu_count"]) == ("535.86.10", 8)
    assert [g["bus_id"] for g in log["gpus"]][:2] == ["00000001:00:00.0", "00000002:00:00.0"]
    assert all(g["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False} for g in log["gpus"])
    assert log["gpus"][0]["product_name"] is None


def test_csv_with_header_units_in_header_and_na(real_output):
    result = nv.parse_query_gpu_csv(real_output(P100_CSV))
    assert result["fields"][:4] == ["name", "uuid", "fan.speed", "pstate"]
    assert result["units"]["memory.free"] == "MiB"
    row = result["rows"][0]
    assert row["name"] == "Tesla P100-PCIE-16GB"
    assert row["fan.speed"] is None
    assert (row["memory.reserved"], row["memory.free"], row["power.draw"]) == (103, 16280, 28.16)
    assert row["clocks.current.video"] == 835


def test_csv_redhat_supermicro_gpu_name_noheader(fixture_text):
    text = fixture_text("nvidia-smi/redhat_supermicro_query_gpu_name_noheader.csv")
    result = nv.parse_query_gpu_csv(text, fields=["gpu_name"])
    assert result["rows"] == [{"name": "Tesla V100-SXM2-16GB"}]
    assert nv.gpu_product_label(result["rows"][0]["name"]) == "Tesla-V100-SXM2-16GB"


def test_csv_with_units_and_not_supported():
    text = "index, memory.total [MiB], power.limit [W], ecc.mode.current\n0, 16160 MiB, 300.00 W, [Not Supported]\n"
    row = nv.parse_query_gpu_csv(text)["rows"][0]
    assert row == {"index": 0, "memory.total": 16160, "power.limit": 300.0, "ecc.mode.current": None}


def test_csv_errors():
    with pytest.raises(nv.ParseError, match="no header line"):
        nv.parse_query_gpu_csv("0, Tesla V100-SXM2-16GB\n")
    with pytest.raises(nv.ParseError, match="2 values for 3 fields"):
        nv.parse_query_gpu_csv("0, x\n", fields=["index", "name", "uuid"])


def test_topo_tabs_gpu_numa_id_and_legend(real_output):
    topo = nv.parse_topo_matrix(real_output(TOPO_TABS))
    assert topo["columns"] == ["GPU0", "GPU1", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert topo["matrix"]["GPU0"] == {"GPU0": "X", "GPU1": "PHB"}
    assert topo["gpus"][1] == {
        "name": "GPU1",
        "index": 1,
        "links": {"GPU0": "PHB"},
        "nics": {},
        "cpu_affinity": "0-63",
        "numa_affinity": "0",
        "gpu_numa_id": None,
    }
    assert topo["legend"]["NV#"] == "Connection traversing a bonded set of # NVLinks"
    assert len(topo["legend"]) == 7


def test_topo_8xh100_8nic_spaces_and_nic_legend(real_output):
    topo = nv.parse_topo_matrix(real_output(TOPO_8NIC))
    assert topo["gpu_count"] == 8
    assert topo["nic_legend"]["NIC7"] == "mlx5_7"
    gpu0, gpu7 = topo["gpus"][0], topo["gpus"][7]
    assert set(gpu0["links"].values()) == {"NV18"}
    assert gpu0["nics"] == {
        "mlx5_0": "PIX", "mlx5_1": "NODE", "mlx5_2": "NODE", "mlx5_3": "NODE",
        "mlx5_4": "SYS", "mlx5_5": "SYS", "mlx5_6": "SYS", "mlx5_7": "SYS",
    }  # fmt: skip
    assert (gpu7["cpu_affinity"], gpu7["numa_affinity"]) == ("48-95,144-191", "1")
    assert topo["nics"][3]["device"] == "mlx5_3"
    assert topo["nics"][3]["links"]["GPU3"] == "PIX"
    assert topo["nics"][3]["links"]["NIC3"] == "X"


def test_topo_no_nic_no_numa_id_no_legend(real_output):
    topo = nv.parse_topo_matrix(real_output(TOPO_NO_NIC))
    assert topo["gpu_count"] == 8
    assert topo["nics"] == [] and topo["legend"] == {}
    assert topo["gpus"][4]["cpu_affinity"] == "52-103,156-207"
    assert topo["gpus"][4]["gpu_numa_id"] is None
    assert topo["matrix"]["GPU3"]["GPU3"] == "X"


def test_topo_redp5610_dgx1_mlx_columns(fixture_text):
    topo = nv.parse_topo_matrix(fixture_text("nvidia-smi/redp5610_dgx1_topo_m_drv440.txt"))
    assert topo["gpu_count"] == 8
    assert topo["gpus"][0]["links"] == {
        "GPU1": "NV1", "GPU2": "NV1", "GPU3": "NV2", "GPU4": "NV2", "GPU5": "SYS", "GPU6": "SYS", "GPU7": "SYS",
    }  # fmt: skip
    assert topo["gpus"][2]["nics"] == {"mlx5_0": "PHB", "mlx5_1": "PIX", "mlx5_2": "SYS", "mlx5_3": "SYS"}
    assert topo["gpus"][5]["cpu_affinity"] == "20-39,60-79"
    assert topo["gpus"][5]["numa_affinity"] is None
    # hybrid cube-mesh: every V100 uses its 6 NVLinks
    for gpu in topo["gpus"]:
        assert sum(int(code[2:]) for code in gpu["links"].values() if code.startswith("NV")) == 6


def test_topo_strips_ansi_underline_and_rejects_truncation():
    text = "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tNV2\t0-9\nGPU1\tNV2\t X \t0-9\n"
    assert nv.parse_topo_matrix(text)["gpus"][1]["links"] == {"GPU0": "NV2"}
    with pytest.raises(nv.ParseError, match="no row for GPU1"):
        nv.parse_topo_matrix("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-9\n")
    # A short row is reported, never zipped short against the header.
    with pytest.raises(nv.ParseError, match="row GPU1 has 1 cells for 2 devices"):
        nv.parse_topo_matrix("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-9\nGPU1\tNV2\n")
    with pytest.raises(nv.ParseError, match="GPU0"):
        nv.parse_topo_matrix("garbage")


def test_nvlink_status_a100(real_output):
    status = nv.parse_nvlink_status(real_output(NVLINK_A100))
    assert status["gpu_count"] == 8
    gpu = status["gpus"][0]
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert (gpu["active_links"], gpu["total_speed_gbyte_per_s"]) == (12, 300.0)
    assert gpu["links"][11] == {"link": 11, "speed_gbyte_per_s": 25.0, "active": True, "state": "25 GB/s"}
    assert status["errors"] == []


def test_nvlink_inactive_link():
    status = nv.parse_nvlink_status(
        "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-1)\n\t Link 0: 25.781 GB/s\n\t Link 1: <inactive>\n"
    )
    gpu = status["gpus"][0]
    assert (gpu["active_links"], gpu["total_speed_gbyte_per_s"]) == (1, 25.781)
    assert gpu["links"][1]["active"] is False


def test_list_gpus_mig_and_error_line():
    text = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-27b94a00-ed54-5c24-b1fd-1054085de32a)\n"
        "  MIG 3g.20gb     Device  0: (UUID: MIG-aaaa)\n"
        "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
    )
    result = nv.parse_list_gpus(text)
    assert result["gpu_count"] == 1
    assert result["gpus"][0]["mig_devices"] == [{"profile": "3g.20gb", "index": 0, "uuid": "MIG-aaaa"}]
    assert result["errors"] == ["Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"]


@pytest.mark.parametrize("text", ["", "<nvidia_smi_log><gpu id='1'><product_name>x", "<html/>"])
def test_xml_malformed_raises_parse_error(text):
    with pytest.raises(nv.ParseError):
        nv.parse_query_xml(text)


def test_text_without_header_raises():
    with pytest.raises(nv.ParseError, match="NVSMI LOG"):
        nv.parse_query_text("Driver Version : 1\n")


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"


def test_a100_remapped_rows_pending_excerpt():
    """Public A100 `nvidia-smi -q` excerpt (Xid 63 case): a remap pending, one bank used (SOURCES.md)."""
    log = nv.parse_query_text((FIXTURES / "stas00_a100_q_remap_pending_drv510_EXCERPT.txt").read_text())
    gpu = log["gpus"][0]
    assert (gpu["bus_id"], gpu["product_name"]) == ("00000000:10:1C.0", "NVIDIA A100-SXM4-80GB")
    assert gpu["remapped_rows"] == {
        "correctable": 1, "uncorrectable": 0, "pending": True, "failure": False,
        "histogram": {"max": 639, "high": 1, "partial": 0, "low": 0, "none": 0},
    }  # fmt: skip
    assert gpu["ecc"]["aggregate"]["dram_correctable"] == 177
    assert gpu["ecc"]["volatile"]["corrected"] == 177
    assert gpu["memory_repair_pending"] is True


def test_h100_nvlink_errors_excerpt():
    """Public H100 `nvidia-smi nvlink -e` excerpt (links 0, 1 and 17; `[...]` marks the cut, SOURCES.md)."""
    parsed = nv.parse_nvlink_errors((FIXTURES / "stas00_h100_nvlink_e_EXCERPT.txt").read_text())
    gpu = parsed["gpus"][0]
    assert (gpu["index"], gpu["name"]) == (0, "NVIDIA H100 80GB HBM3")
    assert [link["link"] for link in gpu["links"]] == [0, 1, 17]
    assert gpu["links"][2] == {"link": 17, "replay_errors": 0, "recovery_errors": 0, "crc_errors": 0}
    assert parsed["errors"] == ["[...]"]


def test_nvlink_errors_one_line_form_and_na():
    text = "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n\t Link 3: Replay Errors: 142, Recovery Errors: N/A\n"
    assert nv.parse_nvlink_errors(text)["gpus"][0]["links"] == [
        {"link": 3, "replay_errors": 142, "recovery_errors": None}
    ]
    # No GPU with NVLink: the driver prints nothing and exits 0 (test_real_h200_captures.py).
    assert nv.parse_nvlink_errors("") == {"gpu_count": 0, "gpus": [], "errors": []}


def test_clock_event_samples_both_field_generations_and_bitmask():
    new = (
        "index, pci.bus_id, clocks_event_reasons.hw_slowdown, clocks_event_reasons.hw_power_brake_slowdown\n"
        "0, 00000000:1B:00.0, Active, Not Active\n1, 00000000:43:00.0, Not Active, Not Active\n"
    )
    samples = nv.parse_clock_event_samples(new * 3)
    assert samples["sample_count"] == 3
    assert samples["gpus"][0]["active"] == {"hw_slowdown": 3, "hw_power_brake_slowdown": 0}
    old = "0, 00000000:1B:00.0, Not Active\n"
    fields = ["index", "pci.bus_id", "clocks_throttle_reasons.hw_thermal_slowdown"]
    assert nv.parse_clock_event_samples(old * 2, fields=fields)["gpus"][0]["active"] == {"hw_thermal_slowdown": 0}
    mask = "pci.bus_id, clocks_event_reasons.active\n00000000:1B:00.0, 0x0000000000000088\n"
    active = nv.parse_clock_event_samples(mask)["gpus"][0]["active"]
    assert (active["hw_slowdown"], active["hw_power_brake_slowdown"], active["gpu_idle"]) == (1, 1, 0)
    lost = "pci.bus_id, clocks_event_reasons.active\nUnable to determine the device handle for GPU0000:85:00.0: x\n"
    assert nv.parse_clock_event_samples(lost)["unreachable"] == ["00000000:85:00.0"]
    with pytest.raises(nv.ParseError):
        nv.parse_clock_event_samples("0, Active\n")


def test_power_draw_from_average_and_instant_fields():
    xml = (
        '<?xml version="1.0" ?><nvidia_smi_log><driver_version>570.86.15</driver_version><gpu id="00000000:01:00.0">'
        "<gpu_power_readings><average_power_draw>81.20 W</average_power_draw>"
        "<instant_power_draw>85.02 W</instant_power_draw></gpu_power_readings></gpu></nvidia_smi_log>"
    )
    gpu = nv.parse_query_xml(xml)["gpus"][0]
    assert (gpu["power_draw_w"], gpu["power_draw_average_w"], gpu["power_draw_instant_w"]) == (81.2, 81.2, 85.02)
