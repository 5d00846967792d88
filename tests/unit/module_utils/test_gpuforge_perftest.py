"""perftest BW parser over the two real ib_write_bw outputs and the IBM Redpaper REDP-5610 run."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perftest import (
    ParseError,
    mib_per_s_to_gbit_per_s,
    parse_perftest_bw,
)

DEEPOPS = "ib_write_bw__NVIDIA-deepops__roce-perf-k8s.md__cx5_roce100_rdmacm.txt"
SPARK = "ib_write_bw__eugr-spark-vllm-docker__docs-NETWORKING.md__dgx-spark_cx7_roce_4qp_rdmacm.txt"


def test_deepops_roce_gbits_with_cpu_warning_inside_table(real_output):
    result = parse_perftest_bw(real_output(DEEPOPS))
    assert result["test"] == "RDMA_Write BW Test"
    assert result["bw_unit"] == "Gb/sec"
    assert (result["bytes"], result["iterations"]) == (65536, 5000)
    assert (result["bw_peak"], result["bw_average"], result["msg_rate_mpps"]) == (92.42, 92.40, 0.176230)
    assert result["bw_average_gbit_per_s"] == 92.40
    assert result["bw_average_mib_per_s"] == 11014.94
    assert result["warnings"] == [
        "Conflicting CPU frequency values detected: 1200.535000 != 1251.336000. CPU Frequency is not max."
    ]
    header = result["header"]
    assert (header["device"], header["link_type"], header["transport_type"]) == ("mlx5_0", "Ethernet", "IB")
    assert (header["mtu"], header["gid_index"], header["num_qps"]) == (4096, 3, 1)
    assert (header["rdma_cm_qps"], header["data_ex_method"]) == ("ON", "rdma_cm")
    assert result["local_addresses"] == [{"lid": 0, "qpn": "0x025d", "psn": "0x5cac14"}]
    assert result["remote_addresses"][0]["psn"] == "0xe849fe"
    assert result["errors"] == []


def test_spark_four_qps(real_output):
    result = parse_perftest_bw(real_output(SPARK))
    assert (result["bytes"], result["iterations"]) == (65536, 20000)
    assert (result["bw_peak"], result["bw_average"], result["msg_rate_mpps"]) == (111.72, 111.71, 0.213070)
    assert result["header"]["num_qps"] == 4
    assert result["header"]["device"] == "rocep1s0f1"
    assert result["header"]["mtu"] == 1024
    assert result["header"]["link_type"] == "IB"
    assert result["header"]["pcie_relax_order"] == "ON"
    assert [a["qpn"] for a in result["local_addresses"]] == ["0x03ec", "0x03ed", "0x03ee", "0x03ef"]
    assert len(result["remote_addresses"]) == 4
    assert result["warnings"] == []


def test_redp5610_dgx1_edr_mb_per_sec(fixture_text):
    result = parse_perftest_bw(fixture_text("ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt"))
    assert result["bw_unit"] == "MB/sec"
    assert (result["bytes"], result["iterations"]) == (65536, 5000)
    assert (result["bw_peak"], result["bw_average"], result["msg_rate_mpps"]) == (
        11300.40,
        11264.11,
        0.180226,
    )
    assert result["bw_average_mib_per_s"] == 11264.11
    assert result["bw_average_gbit_per_s"] == 94.49
    assert result["header"] == {
        "dual_port": "OFF",
        "device": "mlx5_1",
        "num_qps": 1,
        "transport_type": "IB",
        "connection_type": "RC",
        "using_srq": "OFF",
        "tx_depth": 128,
        "cq_moderation": 100,
        "mtu": 4096,
        "link_type": "IB",
        "max_inline_data": 0,
        "rdma_cm_qps": "OFF",
        "data_ex_method": "Ethernet",
    }
    assert result["local_addresses"][0] == {
        "lid": 13,
        "qpn": "0x16cb",
        "psn": "0xa2ff90",
        "rkey": "0x038f5c",
        "vaddr": "0x007fa65e670000",
    }
    assert result["warnings"][0].startswith("Conflicting CPU frequency values detected: 3403.930000")


def test_several_sizes_summary_is_last_row():
    text = (
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 2          5000           0.042350            0.042185            2.636533\n"
        " 65536      5000             96.10              96.05  \t\t   0.183200\n"
    )
    result = parse_perftest_bw(text)
    assert len(result["results"]) == 2
    assert result["results"][0]["bw_average"] == 0.042185
    assert (result["bytes"], result["bw_average"]) == (65536, 96.05)


def test_port_down_error_and_garbage():
    result = parse_perftest_bw(" Port number 1 state is Down\n Couldn't get context for the device\n")
    assert result["errors"] == ["Port number 1 state is Down", "Couldn't get context for the device"]
    assert result["results"] == [] and "bw_average" not in result
    with pytest.raises(ParseError):
        parse_perftest_bw("hello world\n")


def test_unit_conversion():
    # 11,000 MB/sec (IBM Redpaper REDP-5610's EDR threshold) is 92.27 Gb/s; EDR's 100 Gb/s is 11,920.93 MB/sec.
    assert round(mib_per_s_to_gbit_per_s(11000), 2) == 92.27
    assert round(100 / mib_per_s_to_gbit_per_s(1), 2) == 11920.93
