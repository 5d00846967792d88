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


# nvbandwidth v0.8 on one NVIDIA H200, built by the benchmark_tools recipe (SOURCES.md: gpuforge-device_1xh200_*).
H200_ALL = "gpuforge-device_1xh200_drv580.159.04_v0.8_all.txt"
H200_LIST = "gpuforge-device_1xh200_drv580.159.04_v0.8_list.txt"
# The 18 testcases that ran, in the order printed, with the one value each matrix holds (read off the file).
H200_RAN = {
    "host_to_device_memcpy_ce": 54.54,
    "device_to_host_memcpy_ce": 55.28,
    "host_to_device_bidirectional_memcpy_ce": 43.40,
    "device_to_host_bidirectional_memcpy_ce": 52.30,
    "all_to_host_memcpy_ce": 54.82,
    "all_to_host_bidirectional_memcpy_ce": 52.02,
    "host_to_all_memcpy_ce": 54.25,
    "host_to_all_bidirectional_memcpy_ce": 42.96,
    "host_to_device_memcpy_sm": 50.82,
    "device_to_host_memcpy_sm": 52.38,
    "host_to_device_bidirectional_memcpy_sm": 41.97,
    "device_to_host_bidirectional_memcpy_sm": 42.02,
    "all_to_host_memcpy_sm": 52.29,
    "all_to_host_bidirectional_memcpy_sm": 39.82,
    "host_to_all_memcpy_sm": 46.06,
    "host_to_all_bidirectional_memcpy_sm": 41.76,
    "host_device_latency_sm": 1261.44,
    "device_local_copy": 2078.38,
}
H200_BUS = "00000000:00:06.0"


def test_v08_full_run_of_one_h200_every_testcase_and_the_nameless_waivers():
    parsed = parse_output(fixture(H200_ALL))
    assert (parsed["version"], parsed["driver_version"]) == ("v0.8", "580.159.04")
    assert parsed["devices"] == {0: {"name": "NVIDIA H200", "bus_id": H200_BUS}}
    assert list(parsed["testcases"]) == list(H200_RAN)
    for name, value in H200_RAN.items():
        case = parsed["testcases"][name]
        assert case["waived"] is False, name
        assert (case["columns"], case["matrix"], case["sum"], case["cv"]) == ([0], {0: {0: value}}, value, None), name
        # one matrix per testcase, keyed by its SUM line's key, the same as the testcase's own fields
        assert list(case["matrices"]) == [name], name
        assert case["matrices"][name] == {k: case[k] for k in ("title", "unit", "columns", "matrix", "sum")}, name
    # 17 `Waived: ` lines with no name: the device-to-device testcases, one GPU. 18 run + 17 waived = the 35 of -l.
    assert parsed["waived_unnamed"] == 17
    listed = [line for line in fixture(H200_LIST).splitlines() if line[:1].isdigit()]
    assert len(listed) == 35 == len(parsed["testcases"]) + parsed["waived_unnamed"]


def test_v08_latency_matrix_in_ns_is_read_not_waived():
    """testcases_sm.cpp's title `memory latency SM CPU(row) <-> GPU(column) (ns)`: the parser used to know only
    `memcpy ... bandwidth` titles, left the testcase without a matrix and pinned the next `Waived: ` (that of
    device_to_device_latency_sm) on it."""
    case = parse_output(fixture(H200_ALL))["testcases"]["host_device_latency_sm"]
    assert case["title"] == "memory latency SM CPU(row) <-> GPU(column) (ns)"
    assert (case["unit"], case["matrix"], case["sum"], case["waived"]) == ("ns", {0: {0: 1261.44}}, 1261.44, False)
    local = parse_output(fixture(H200_ALL))["testcases"]["device_local_copy"]
    assert (local["title"], local["unit"]) == ("memcpy local GPU(column) bandwidth (GB/s)", "GB/s")
    assert per_gpu("device_local_copy", local) == {0: 2078.38}


def test_v08_h200_judged_by_its_bus_id():
    parsed = parse_output(fixture(H200_ALL))
    check = judge_bandwidth(parsed, {H2D: 50, D2H: 50}, [])
    assert check["status"] == "PASS"
    assert check["observed"]["testcases"] == {H2D: {H200_BUS: 54.54}, D2H: {H200_BUS: 55.28}}
    check = judge_bandwidth(parsed, {H2D: 55, D2H: 50, P2P: 100}, [])
    assert check["status"] == "FAIL"
    assert [(e["testcase"], e["bus_id"], e["gbyte_per_s"]) for e in check["observed"]["low"]] == [
        (H2D, H200_BUS, 54.54)
    ]
    assert check["observed"]["missing"] == [P2P]  # waived with no name: not printed as run


def test_v08_a_run_of_only_waived_testcases_is_output_not_an_error():
    """`nvbandwidth -t device_to_device_memcpy_read_ce` on this one-GPU machine: v0.8 prints its header, `Waived: `
    and the closing note, no `Running` line (the header and the note are the H200 capture's own lines). The
    parser used to raise "no 'Running <testcase>.' line", failing the module; now the testcase is missing and the
    judge warns."""
    lines = fixture(H200_ALL).splitlines(keepends=True)
    header = lines[: lines.index("Device 0: NVIDIA H200 (00000000:00:06)\n") + 2]
    note = lines[lines.index("NOTE: The reported results may not reflect the full capabilities of the platform.\n") :]
    parsed = parse_output("".join([*header, "Waived: \n", *note]))
    assert (parsed["testcases"], parsed["waived_unnamed"], parsed["version"]) == ({}, 1, "v0.8")
    check = judge_bandwidth(parsed, {P2P: 100}, [])
    assert (check["status"], check["observed"]["missing"]) == ("WARN", [P2P])


# Constructed, not captured (one GPU waives them): a bidirectional device-to-device testcase of v0.8 on two GPUs, laid
# out as NVIDIA/nvbandwidth v0.8 prints it (testcases_ce.cpp: three matrices keyed <testcase>_read1, _read2, _total;
# inline_common.h operator<<: column indices in width 10, rows labelled in width 2, `SUM <key> <sum>`); numbers made up.
BIDIR = "device_to_device_bidirectional_memcpy_read_ce"
BIDIR_TEXT = f"""Running {BIDIR}.
memcpy CE GPU(row) <-> GPU(column) Read1 bandwidth (GB/s)
           0         1
 0       N/A    368.20
 1    367.90       N/A

SUM {BIDIR}_read1 736.10

memcpy CE GPU(row) <-> GPU(column) Read2 bandwidth (GB/s)
           0         1
 0       N/A    367.50
 1    368.00       N/A

SUM {BIDIR}_read2 735.50

memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)
           0         1
 0       N/A    735.70
 1    735.90       N/A

SUM {BIDIR}_total 1471.60

"""
BIDIR_TEXT += "Waived: \n"  # v0.8's nameless waiver (its message is empty)


def test_v08_bidirectional_device_to_device_keeps_its_three_matrices():
    parsed = parse_output(BIDIR_TEXT)
    case = parsed["testcases"][BIDIR]
    assert list(case["matrices"]) == [f"{BIDIR}_read1", f"{BIDIR}_read2", f"{BIDIR}_total"]
    assert [m["sum"] for m in case["matrices"].values()] == [736.10, 735.50, 1471.60]
    assert case["matrices"][f"{BIDIR}_read2"]["matrix"] == {0: {0: None, 1: 367.50}, 1: {0: 368.00, 1: None}}
    assert case["matrices"][f"{BIDIR}_read1"]["title"] == "memcpy CE GPU(row) <-> GPU(column) Read1 bandwidth (GB/s)"
    # The testcase's own matrix and SUM are the Total ones (the figure the testcase reports).
    assert (case["title"], case["sum"]) == ("memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)", 1471.60)
    assert per_gpu(BIDIR, case) == {(0, 1): 735.70, (1, 0): 735.90}
    # the waiver after a printed matrix is another (nameless) testcase's, not this one's
    assert (case["waived"], parsed["waived_unnamed"]) == (False, 1)


# A multinode run (MULTINODE build under MPI, 4 nodes x 4 GPUs): laid out from nvbandwidth v0.8's source and marked
# constructed (tests/fixtures/nvbandwidth/SOURCES.md); no capture from an NVLink multi-node clique is on record.
MULTINODE = "constructed_v0.8_multinode_4x4xgb200.txt"
MN_D2D = "multinode_device_to_device_memcpy_read_ce"
MN_ALL_TO_ONE = "multinode_device_to_device_all_to_one_write_sm"
MN_BISECT = "multinode_bisect_write_ce"


def test_a_multinode_run_names_each_rank_by_node_and_gpu():
    parsed = parse_output(fixture(MULTINODE))
    assert parsed["devices"] == {} and len(parsed["processes"]) == 16
    assert parsed["processes"][10] == {
        "host": "nvl72-tray03",
        "device": 2,
        "name": "NVIDIA GB200",
        "bus_id": "00000018:01:00.0",
    }
    assert list(parsed["testcases"]) == [MN_D2D, MN_ALL_TO_ONE, MN_BISECT]
    d2d = parsed["testcases"][MN_D2D]
    assert d2d["columns"] == list(range(16)) and d2d["matrix"][5][12] == 410.17 and d2d["matrix"][3][3] is None
    assert d2d["sum"] == pytest.approx(sum(v for row in d2d["matrix"].values() for v in row.values() if v), abs=0.01)


def test_the_bisect_rows_are_rank_to_peer_pairs_in_gbyte_per_s():
    bisect = parse_output(fixture(MULTINODE))["testcases"][MN_BISECT]
    assert bisect["unit"] == "GB/s" and bisect["title"] == "Bisect benchmarking, simultaneous write CE BW"
    pairs = per_gpu(MN_BISECT, bisect)
    assert len(pairs) == 16 and pairs[(3, 11)] == 512.5 and pairs[(8, 0)] == 758.25 and pairs[(15, 7)] == 758.25
    assert bisect["sum"] == pytest.approx(sum(pairs.values()))


def test_a_per_device_total_of_a_multinode_run_is_one_value_per_rank():
    total = parse_output(fixture(MULTINODE))["testcases"][MN_ALL_TO_ONE]
    values = per_gpu(MN_ALL_TO_ONE, total)
    assert sorted(values) == list(range(16)) and values[0] == 1620.5 and values[3] == 1622.0


def test_a_slow_pair_of_a_multinode_run_fails_naming_both_nodes_and_gpus():
    parsed = parse_output(fixture(MULTINODE))
    check = judge_bandwidth(parsed, {MN_D2D: 700, MN_BISECT: 700, MN_ALL_TO_ONE: 1600}, GPUS)
    assert check["status"] == "FAIL"
    low = [(e["testcase"], e["bus_id"], e["peer"], e["gbyte_per_s"]) for e in check["observed"]["low"]]
    assert low == [
        (MN_BISECT, "nvl72-tray01:00000019:01:00.0", "nvl72-tray03:00000019:01:00.0", 512.5),
        (MN_D2D, "nvl72-tray02:00000009:01:00.0", "nvl72-tray04:00000008:01:00.0", 410.17),
    ]
    assert "NVLink switch trays and the IMEX service" in check["remedy"]
    assert judge_bandwidth(parsed, {MN_D2D: 400, MN_BISECT: 500, MN_ALL_TO_ONE: 1600}, GPUS)["status"] == "PASS"


def test_a_multinode_run_with_more_ranks_than_gpus_keeps_its_warning():
    text = fixture(MULTINODE).replace(
        "\nRunning multinode_device_to_device_memcpy_read_ce.",
        "\nWarning: there are more processes than GPUs on nvl72-tray02. Please reduce number of processes to match "
        "GPU count.\nRunning multinode_device_to_device_memcpy_read_ce.",
    )
    parsed = parse_output(text)
    assert parsed["warnings"] == [
        "there are more processes than GPUs on nvl72-tray02. Please reduce number of processes to match GPU count."
    ]


def test_a_bisect_row_cut_short_is_refused():
    text = fixture(MULTINODE).replace(" 3->11    512.50", " 3->11")
    with pytest.raises(ParseError, match=r"Bisect benchmarking.*row 3->11 has 0 values"):
        parse_output(text)
