"""gpuforge_nvbandwidth: nvbandwidth text output (real fixtures, tests/fixtures/nvbandwidth/SOURCES.md, and the lab's
simulated nvbandwidth), judged per GPU and per GPU pair against the SKU minimums."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError as BaseParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nvbandwidth import (
    TESTCASES,
    ParseError,
    judge_bandwidth,
    parse_output,
    per_gpu,
)

NVBW = Path(__file__).resolve().parents[2] / "fixtures" / "nvbandwidth"
H2D, D2H, P2P = TESTCASES["h2d"], TESTCASES["d2h"], TESTCASES["p2p"]
GPUS = [{"index": 0, "bus_id": "00000000:17:00.0"}, {"index": 1, "bus_id": "00000000:65:00.0"}]


def fixture(name: str) -> str:
    return (NVBW / name).read_text(encoding="utf-8")


def test_v010_output_of_azure_nhc():
    parsed = parse_output(fixture("v0.10-azure-nhc-2gpu.txt"))
    assert list(parsed["testcases"]) == [H2D, D2H, P2P]
    h2d = parsed["testcases"][H2D]
    assert h2d["title"] == "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)" and h2d["unit"] == "GB/s"
    assert (h2d["sum"], h2d["cv"], h2d["columns"]) == (51.97, 0.01, [0, 1])
    assert per_gpu(H2D, h2d) == {0: 26.03, 1: 25.94}
    assert per_gpu(D2H, parsed["testcases"][D2H]) == {0: 25.97, 1: 26.0}
    assert per_gpu(P2P, parsed["testcases"][P2P]) == {(0, 1): 276.07, (1, 0): 276.19}
    assert parsed["testcases"][P2P]["matrix"][0][0] is None  # N/A: a GPU with itself


def test_azure_fixture_passes_the_a100_minimums_and_fails_higher_ones():
    parsed = parse_output(fixture("v0.10-azure-nhc-2gpu.txt"))
    assert judge_bandwidth(parsed, {H2D: 21, D2H: 21, P2P: 235}, GPUS)["status"] == "PASS"
    check = judge_bandwidth(parsed, {H2D: 26.0, D2H: 21, P2P: 276.1}, GPUS)
    assert check["status"] == "FAIL"
    low = [(e["testcase"], e["bus_id"], e["peer"], e["gbyte_per_s"]) for e in check["observed"]["low"]]
    assert low == [
        (P2P, "00000000:17:00.0", "00000000:65:00.0", 276.07),
        (H2D, "00000000:65:00.0", None, 25.94),
    ]
    assert "host_to_device_memcpy_ce 00000000:65:00.0 25.94 GB/s < 26.0" in check["fault"]
    assert check["observed"]["testcases"][H2D] == {"00000000:17:00.0": 26.03, "00000000:65:00.0": 25.94}


def test_readme_format_without_sum_lines():
    parsed = parse_output(fixture("readme-h2d-2gpu.txt"))
    assert parsed["version"] is None and parsed["testcases"][H2D]["sum"] is None
    check = judge_bandwidth(parsed, {H2D: 10}, [])
    assert check["status"] == "FAIL" and [e["bus_id"] for e in check["observed"]["low"]] == ["GPU 0"]


def test_a_testcase_asked_for_but_not_printed_warns():
    parsed = parse_output(fixture("readme-h2d-bidir-2gpu.txt"))
    check = judge_bandwidth(parsed, {H2D: 1}, GPUS)
    assert check["status"] == "WARN" and check["observed"]["missing"] == [H2D]


def test_device_lines_and_waived_testcase():
    text = (
        "nvbandwidth Version: v0.6\nBuilt from Git version:\n\nDriver Version: 550.54.15\n\n"
        "Device 0: NVIDIA H100 80GB HBM3 (00000000:1b:00)\nDevice 1: NVIDIA H100 80GB HBM3 (00000000:43:00)\n\n"
        "Running device_to_device_memcpy_read_ce.\nWaived:\n"
        "Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
        "           0         1\n 0     52.30     20.10\n\nSUM host_to_device_memcpy_ce 72.40\n"
    )
    parsed = parse_output(text)
    assert (parsed["version"], parsed["driver_version"]) == ("v0.6", "550.54.15")
    assert parsed["devices"][1] == {"name": "NVIDIA H100 80GB HBM3", "bus_id": "00000000:43:00.0"}
    assert parsed["testcases"][P2P]["waived"] is True
    # nvbandwidth's own Device lines name the GPU, whatever the facts say
    check = judge_bandwidth(parsed, {H2D: 48, P2P: 335}, [{"index": 1, "bus_id": "wrong"}])
    assert check["status"] == "FAIL" and check["observed"]["waived"] == [P2P]
    assert [e["bus_id"] for e in check["observed"]["low"]] == ["00000000:43:00.0"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no 'Running"),
        ("CUDA_ERROR_NO_DEVICE\n", "no 'Running"),
        ("Running host_to_device_memcpy_ce.\n", "no bandwidth matrix"),
        ("Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n", "ends after"),
        ("Running h.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\nx y\n", "column indices"),
        ("Running h.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n 0 1\n0 5.0\n", "1 values for 2 columns"),
        ("Running h.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n 0\n\n", "no rows"),
        ("Running h.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n 0\n0 fast\n", "not a bandwidth"),
    ],
)
def test_unreadable_output_raises(text, message):
    with pytest.raises(ParseError, match=message):
        parse_output(text)


def test_parse_error_is_the_shared_class():
    assert ParseError is BaseParseError
