"""nccl-tests parser and judge: real outputs of every format era and the IBM Redpaper REDP-5610 tables."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nccl_tests import (
    ParseError,
    decode_nccl_version,
    json_output_path,
    judge_nccl,
    overall_status,
    parse_nccl_tests,
    parse_nccl_tests_json,
)

WOHLBIER = "nccl-all_reduce_perf__wohlbier-nccl-tests__README.md__dgx2_12xv100_old_format.txt"
DEEPOPS = "nccl-all_reduce_perf__NVIDIA-deepops__slurm-perf-cluster.md__4x8xdgxa100_ib_table_only.txt"
OCI_A100 = "nccl-all_reduce_perf__oracle-japan-ocitutorials__run-nccltests.md__2x8xa100-40gb_roce.txt"
OCI_H100 = "nccl-all_reduce_perf__oracle-japan-ocitutorials__run-nccltests-h100.md__2x8xh100_roce.txt"
CSCS_217 = "nccl-all_reduce_perf__eth-cscs-cscs-docs__nccl.md__gh200_2x4_slingshot_v2.17.1.txt"
CSCS_218 = "nccl-all_reduce_perf__eth-cscs-cscs-docs__sarus-suite__gh200_2x1_v2.18.2.txt"
SEED_1X8 = "nccl-tests/redp5610_ex4-1_1x8xv100_nvlink_legacy.txt"
SEED_2X8 = "nccl-tests/redp5610_ex4-2_2x8xv100_ib_legacy.txt"
SEED_16X1 = "nccl-tests/redp5610_ex4-3_16x1xv100_ib_gdr_legacy.txt"

# name, era, devices, rows, peak busbw, avg busbw, wrong_total, max_error
REAL_CASES = [
    (WOHLBIER, "pre-2022", 12, 31, 123.57, 42.5578, 0, 2e-07),
    (DEEPOPS, "pre-2022", 0, 13, 191.56, 113.289, 0, 1e-06),
    (OCI_A100, "2022+", 16, 1, 222.88, 220.921, 0, None),
    (OCI_H100, "2022+", 16, 5, 464.79, 458.452, 0, None),
    (CSCS_217, "2.17+", 8, 25, 123.11, 19.7866, 0, None),
    (CSCS_218, "2.18+", 2, 8, 22.88, 14.9966, 0, None),
]


@pytest.mark.parametrize(("name", "era", "devices", "rows", "peak", "avg", "wrong", "max_error"), REAL_CASES)
def test_real_outputs(real_output, name, era, devices, rows, peak, avg, wrong, max_error):
    result = parse_nccl_tests(real_output(name))
    assert result["kind"] == "nccl-tests"
    assert result["era"] == era
    assert len(result["devices"]) == devices
    assert len(result["rows"]) == rows
    assert result["peak_busbw"] == peak
    assert result["avg_busbw"] == avg
    assert result["wrong_total"] == wrong
    assert result["max_error"] == max_error
    assert result["errors"] == []
    assert result["complete"] is True
    # None of these real outputs carries NCCL INFO lines.
    assert result["transport"]["mode"] is None
    assert result["transport"]["info_lines"] == 0


def test_old_format_row_and_header(real_output):
    result = parse_nccl_tests(real_output(WOHLBIER))
    assert result["collective"] == "all_reduce_perf"  # from the "Running:" line
    assert result["header"]["nGpus"] == 12
    assert result["header"]["maxBytes"] == 10737418240
    assert result["header"]["agg_iters"] is None
    assert result["columns"][4:8] == ["time", "algbw", "busbw", "error"]
    first = result["rows"][0]
    assert (first["size"], first["count"], first["type"], first["redop"], first["root"]) == (8, 2, "float", "sum", None)
    assert first["out_of_place"] == {"time_us": 61.03, "algbw": 0.0, "busbw": 0.0, "wrong": None, "error": 2e-07}
    assert first["in_place"]["error"] == 1e-07
    last = result["rows"][-1]
    assert last["size"] == 8589934592
    assert last["out_of_place"]["busbw"] == 123.56
    assert last["in_place"]["time_us"] == 127443
    assert result["devices"][11] == {
        "rank": 11,
        "group": None,
        "pid": 88131,
        "host": "seville",
        "device": 11,
        "bus_id": "0xe7",
        "name": "Tesla V100-SXM3-32GB",
    }


def test_deepops_table_without_header(real_output):
    result = parse_nccl_tests(real_output(DEEPOPS))
    assert result["header"] == {}
    assert result["rows"][-1]["out_of_place"]["busbw"] == 191.05
    assert result["out_of_bounds"] == 0
    assert result["out_of_bounds_ok"] is True


def test_2022_format_root_and_group(real_output):
    result = parse_nccl_tests(real_output(OCI_H100))
    assert result["header"]["agg_iters"] == 1
    assert result["header"]["graph"] == 0
    assert result["header"]["minBytes"] == 1073741824
    row = result["rows"][-1]
    assert (row["size"], row["root"], row["redop"]) == (17179869184, -1, "sum")
    assert row["out_of_place"] == {"time_us": 69338, "algbw": 247.77, "busbw": 464.57, "wrong": 0, "error": None}
    assert result["devices"][8]["host"] == "instance-20240722-0955"
    assert result["devices"][8]["group"] == 0
    assert result["devices"][15]["name"] == "NVIDIA H100 80GB HBM3"


def test_217_and_218_markers(real_output):
    r217 = parse_nccl_tests(real_output(CSCS_217))
    assert r217["collective"] == "all_reduce_perf"
    assert r217["tests_version"] is None
    assert r217["devices"][4]["bus_id"] == "0009:01:00"
    assert r217["devices"][4]["host"] == "nid005487"
    r218 = parse_nccl_tests(real_output(CSCS_218))
    assert r218["tests_version"] == "2.18.2"
    assert r218["header"]["unalign"] == 0
    assert r218["columns"].count("#wrong") == 2
    assert r218["rows"][-1]["in_place"]["time_us"] == 5867.43


# fixture, devices, rows, peak, avg, wrong_total, mode, smallest-size oop time
SEED_CASES = [
    (SEED_1X8, 8, 26, 129.15, None, None, None, 40.92),
    (SEED_2X8, 16, 26, 55.22, 12.3088, 0, "ib", 52.72),
    (SEED_16X1, 11, 26, 5.72, None, None, "ib_gdr", 78.92),
]


@pytest.mark.parametrize(("name", "devices", "rows", "peak", "avg", "wrong", "mode", "t8"), SEED_CASES)
def test_redp5610_tables(fixture_text, name, devices, rows, peak, avg, wrong, mode, t8):
    result = parse_nccl_tests(fixture_text(name))
    assert result["era"] == "pre-2022"
    assert len(result["devices"]) == devices
    assert len(result["rows"]) == rows
    assert result["peak_busbw"] == peak
    assert result["avg_busbw"] == avg
    assert result["wrong_total"] == wrong
    assert result["transport"]["mode"] == mode
    assert result["rows"][0]["out_of_place"]["time_us"] == t8
    assert result["max_error"] == 5e-07
    assert result["errors"] == []


def test_redp5610_ib_transport_details(fixture_text):
    two = parse_nccl_tests(fixture_text(SEED_2X8))
    assert two["transport"]["net"] == "IB"
    assert two["transport"]["gdrdma"] is False
    assert two["transport"]["ib_devices"] == ["mlx5_3:1", "mlx5_2:1", "mlx5_1:1", "mlx5_0:1"]
    assert two["transport"]["info_lines"] == 2  # NET/IB and the "Launch mode" line inside the table
    sixteen = parse_nccl_tests(fixture_text(SEED_16X1))
    assert sixteen["transport"]["paths"] == ["NET/IB/GDRDMA"]
    assert sixteen["transport"]["gdrdma"] is True


def test_redp5610_average_is_mean_of_both_runs(fixture_text):
    # nccl-tests averages out-of-place and in-place busbw together; the Redpaper's 12.3088 confirms it.
    result = parse_nccl_tests(fixture_text(SEED_2X8))
    cells = [run["busbw"] for row in result["rows"] for run in (row["out_of_place"], row["in_place"])]
    assert round(sum(cells) / len(cells), 4) == result["avg_busbw"]


HEADER_2022 = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
    "validation: 1 graph: 0\n"
)
SOCKET_LOG = (
    HEADER_2022
    + """\
#
# Using devices
#  Rank  0 Group  0 Pid   4711 on      node1 device  0 [0x06] Tesla V100-SXM2-16GB
#  Rank  1 Group  0 Pid   4712 on      node2 device  0 [0x06] Tesla V100-SXM2-16GB
node1:4711:4711 [0] NCCL INFO NCCL version 2.18.3+cuda12.2
node1:4711:4711 [0] NCCL INFO NET/IB : No device found.
node1:4711:4711 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:10.1.0.1<0>
node1:4711:4711 [0] NCCL INFO Using network Socket
node1:4711:4720 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1   2310.5    0.00    0.00      0   2298.1    0.00    0.00      0
node2:4712:4712 [0] NCCL WARN Call to connect returned Connection refused, retrying
        1024           256     float     sum      -1   2402.0    0.00    0.00      3   2398.7    0.00    0.00    N/A
# Out of bounds values : 3 FAILED
# Avg bus bandwidth    : 0.0001
#
"""
)


def test_socket_transport_interleaved_and_wrong_values():
    result = parse_nccl_tests(SOCKET_LOG)
    assert result["transport"]["net"] == "Socket"
    assert result["transport"]["mode"] == "tcp"
    assert result["transport"]["socket_interfaces"] == ["eth0", "eth1"]
    assert result["transport"]["nccl_version"] == "2.18.3+cuda12.2"
    assert result["transport"]["ib_devices"] == []
    assert result["nccl_warnings"] == ["Call to connect returned Connection refused, retrying"]
    assert result["wrong_total"] == 3
    assert result["rows"][1]["in_place"]["wrong"] is None  # N/A
    assert result["out_of_bounds"] == 3
    assert result["out_of_bounds_ok"] is False


def test_truncated_output_reports_errors():
    text = SOCKET_LOG.split("node2:4712")[0] + "        1024           256     float     sum      -1   2402.0\n"
    result = parse_nccl_tests(text)
    assert len(result["rows"]) == 1
    assert result["complete"] is False
    assert result["errors"] == ["line 16: unreadable result row: 1024           256     float     sum      -1   2402.0"]


def test_header_without_rows():
    result = parse_nccl_tests("# nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5\n")
    assert result["rows"] == []
    assert result["errors"] == ["no result rows"]
    assert result["header"]["nGpus"] == 2


@pytest.mark.parametrize("text", ["", "bash: all_reduce_perf: command not found\n", "garbage\n1 2 3\n"])
def test_not_nccl_tests_raises(text):
    with pytest.raises(ParseError, match="no nccl-tests header"):
        parse_nccl_tests(text)


def test_failure_lines_collected():
    text = SOCKET_LOG + "node1: Test NCCL failure common.cu:958 'unhandled system error'\n"
    assert parse_nccl_tests(text)["failures"] == ["node1: Test NCCL failure common.cu:958 'unhandled system error'"]


def _by_name(checks):
    return {check["name"]: check for check in checks}


def test_judge_redp5610_ib_gdr_passes(fixture_text):
    checks = _by_name(
        judge_nccl(parse_nccl_tests(fixture_text(SEED_16X1)), {"transport": "ib_gdr", "min_busbw_gbyte_per_s": 5.0})
    )
    assert checks["large_message_busbw"]["status"] == "PASS"
    assert checks["large_message_busbw"]["observed"] == 5.72
    assert checks["small_message_latency"]["status"] == "PASS"
    assert checks["small_message_latency"]["observed"] == 91.61  # max time up to 1 KiB
    assert checks["small_message_latency"]["expected"] == "< 100.0 us"
    assert checks["transport"]["status"] == "PASS"
    # The Redpaper omits the summary lines: nothing says the values were checked.
    assert checks["wrong_values"]["status"] == "WARN"


def test_judge_2x8_thresholds(fixture_text):
    result = parse_nccl_tests(fixture_text(SEED_2X8))
    checks = _by_name(judge_nccl(result, {"transport": "ib_gdr", "min_busbw_gbyte_per_s": 60.0}))
    assert checks["large_message_busbw"]["status"] == "WARN"  # 55.22 >= 0.9 * 60
    assert checks["transport"]["status"] == "FAIL"  # GDRDMA not seen
    assert "nvidia-peermem" in checks["transport"]["remedy"]
    assert checks["wrong_values"]["status"] == "PASS"
    assert overall_status(list(checks.values())) == "FAIL"
    low = _by_name(judge_nccl(result, {"min_busbw_gbyte_per_s": 70.0}))
    assert low["large_message_busbw"]["status"] == "FAIL"
    sized = _by_name(judge_nccl(result, {"min_busbw_gbyte_per_s": 40.0, "large_message_bytes": 33554432}))
    assert sized["large_message_busbw"]["observed"] == 55.22


def test_judge_tcp_latency_and_wrong():
    checks = _by_name(judge_nccl(parse_nccl_tests(SOCKET_LOG), {"transport": "ib"}))
    assert checks["small_message_latency"]["status"] == "FAIL"
    assert checks["small_message_latency"]["observed"] == 2402.0
    assert checks["transport"]["observed"] == "tcp"
    assert checks["transport"]["status"] == "FAIL"
    assert checks["wrong_values"] == {
        "name": "wrong_values",
        "status": "FAIL",
        "observed": 3,
        "expected": "<= 0",
        "remedy": "wrong results point at broken GPU memory, PCIe/NVLink errors or a bad NIC: "
        "check Xid/ECC errors and rerun with -c 1",
    }
    assert _by_name(judge_nccl(parse_nccl_tests(SOCKET_LOG), {"transport": "tcp"}))["transport"]["status"] == "PASS"


def test_judge_no_rows_and_no_info(real_output):
    checks = _by_name(judge_nccl({"rows": [], "wrong_total": None}, {"transport": "ib"}))
    assert checks["result_rows"]["status"] == "FAIL"
    assert checks["transport"]["status"] == "WARN"
    assert checks["small_message_latency"]["status"] == "FAIL"
    oci = _by_name(judge_nccl(parse_nccl_tests(real_output(OCI_H100)), {"min_busbw_gbyte_per_s": 400}))
    assert oci["large_message_busbw"]["observed"] == 464.79
    assert oci["large_message_busbw"]["status"] == "PASS"
    assert "transport" not in oci


@pytest.mark.parametrize("name", [SEED_2X8, SEED_16X1])
def test_every_truncation_parses_or_raises_parse_error(fixture_text, name):
    text = fixture_text(name) + "host:1:1 [0] NCCL INFO Channel 00 : via 0\n"
    for cut in range(0, len(text), 97):
        try:
            result = parse_nccl_tests(text[:cut])
        except ParseError:
            continue
        assert len(result["rows"]) <= 26


# --- nccl-tests of today: -I columns, -J files, #wrong/Out of bounds verdict, NCCL_TESTS_MIN_BW, versions ---

TABLE_HEAD = (
    "#       size         count      type   redop    root"
    "     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
)
ISSUE82 = "nccl-tests/issue82_broadcast_perf_c0_nccl296_excerpt.txt"
ISSUE287 = "nccl-tests/issue287_alltoall_perf_rtx5090_inplace_na.txt"
PER_ITER = "nccl-tests/constructed_v2.18_per_iter_I1_min_bw_failed.txt"
JSON_V1 = "nccl-tests/constructed_json_v1_misspelt_min_bw_failed.json"
JSON_V2 = "nccl-tests/constructed_json_v2_per_iter_wrong.json"


@pytest.mark.parametrize(
    ("code", "version"),
    [(22703, "2.27.3"), (23007, "2.30.7"), (20906, "2.9.6"), (2408, "2.4.8"), (0, None), ("x", None)],
)
def test_decode_nccl_version(code, version):
    assert decode_nccl_version(code) == version


def test_nccl_banner_without_info_prefix_and_c0_is_unchecked(fixture_text):
    result = parse_nccl_tests(fixture_text(ISSUE82))
    assert result["nccl_version"] == "2.9.6"
    assert result["nccl_version_source"] == "NCCL banner"
    assert result["header"]["validation"] == 0
    assert result["correctness"]["verdict"] == "unchecked"
    assert len(result["nccl_warnings"]) == 2
    wrong = next(check for check in judge_nccl(result) if check["name"] == "wrong_values")
    assert wrong["status"] == "WARN"
    assert "-c 1" in wrong["remedy"]


def test_version_codes_of_the_nccl_tests_line(real_output):
    result = parse_nccl_tests(real_output(CSCS_218))
    assert result["tests_version"] == "2.18.2"
    assert (result["nccl_version"], result["nccl_version_source"]) == (
        "2.30.7",
        "nccl-tests version line (nccl-library)",
    )


def test_in_place_na_counts_the_checked_cells(fixture_text):
    result = parse_nccl_tests(fixture_text(ISSUE287))
    row = result["rows"][0]
    assert row["out_of_place"]["wrong"] == 0
    assert row["in_place"]["wrong"] is None
    assert result["wrong_total"] == 0
    assert result["correctness"]["verdict"] == "ok"
    assert result["min_bw_check"] is None  # no NCCL_TESTS_MIN_BW: no OK/FAILED after the average
    assert "nccl_tests_min_bw" not in [check["name"] for check in judge_nccl(result)]


def test_per_iteration_columns_and_min_bw_failed(fixture_text):
    result = parse_nccl_tests(fixture_text(PER_ITER))
    assert result["errors"] == []
    assert len(result["rows"]) == 3
    last = result["rows"][-1]
    assert last["out_of_place"] == {
        "time_us": 1905.7,
        "algbw": 140.86,
        "busbw": 246.51,
        "wrong": 0,
        "error": None,
        "iter_min_us": 1893.0,
        "iter_max_us": 2950.4,
        "iter_p99_us": 2950.4,
        "iter_cv_pct": 12.44,
    }
    assert result["per_iteration"] == {"max_cv_pct": 12.44, "max_p99_us": 2950.4, "max_us": 2950.4}
    assert result["avg_busbw"] == 146.001
    assert result["min_bw_check"] == "FAILED"
    assert result["nccl_version"] == "2.27.3"
    checks = {check["name"]: check for check in judge_nccl(result, {"max_iter_cv_pct": 10})}
    assert checks["nccl_tests_min_bw"]["status"] == "FAIL"
    assert checks["nccl_tests_min_bw"]["observed"] == 146.001
    assert checks["iteration_variation"]["status"] == "FAIL"
    assert checks["iteration_variation"]["observed"] == 12.44
    assert checks["wrong_values"]["status"] == "PASS"
    assert judge_nccl(result, {"max_iter_cv_pct": 20})[-1]["status"] == "PASS"


def test_min_bw_ok_footer_passes():
    text = (
        f"{TABLE_HEAD}\n"
        "     1048576        262144     float     sum      -1    41.20   25.45   44.54      0"
        "    40.95   25.61   44.81      0\n"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 44.675 OK\n"
    )
    result = parse_nccl_tests(text)
    gate = next(check for check in judge_nccl(result) if check["name"] == "nccl_tests_min_bw")
    assert (gate["status"], gate["observed"]) == ("PASS", 44.675)


def test_timestamp_and_cputime_columns():
    text = (
        "#       size         count      type   redop    root  cputime   algbw   busbw #wrong  cputime   algbw   busbw"
        " #wrong           timestamp\n"
        "     1048576        262144     float     sum      -1    41.20   25.45   44.54      0    40.95   25.61   44.81"
        "      0  2026-03-04 08:00:02\n"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 44.675\n"
    )
    result = parse_nccl_tests(text)
    assert result["errors"] == []
    row = result["rows"][0]
    assert row["timestamp"] == "2026-03-04 08:00:02"
    assert row["in_place"]["time_us"] == 40.95


def test_out_of_bounds_failed_is_a_failed_correctness_verdict():
    text = (
        f"{TABLE_HEAD}\n"
        "           8             2     float     sum      -1    12.10    0.00    0.00      2"
        "    11.90    0.00    0.00      0\n"
        "# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 0.0\n"
    )
    result = parse_nccl_tests(text)
    assert result["out_of_bounds_ok"] is False
    assert result["correctness"] == {"verdict": "fail", "validation": None, "wrong_total": 2, "out_of_bounds": 2}
    assert next(check for check in judge_nccl(result) if check["name"] == "wrong_values")["status"] == "FAIL"


def test_json_output_path_from_stdout():
    assert (
        json_output_path("# nccl-tests version 2.17.1\n# Writing JSON output to /tmp/ar.json.1\n") == "/tmp/ar.json.1"
    )
    assert json_output_path("# nThread 1 nGpus 1\n") is None


def test_json_v1_misspelt_average(fixture_text):
    result = parse_nccl_tests_json(fixture_text(JSON_V1))
    assert result["format"] == "json"
    assert result["json_version"] == 1
    assert result["json_average_key"] == "average_bus_bandwidith"
    assert result["avg_busbw"] == 26.935
    assert result["min_bw_check"] == "FAILED"
    assert result["min_bw_env"] == "40"
    assert result["nccl_version"] == "2.27.3"
    assert result["collective"] == "all_reduce_perf"
    assert result["header"]["nGpus"] == 1
    assert result["header"]["step"] == 8
    assert [device["host"] for device in result["devices"]] == ["node07", "node08"]
    assert [row["size"] for row in result["rows"]] == [1048576, 8388608, 67108864]
    assert result["rows"][0]["root"] == -1
    assert result["peak_busbw"] == 35.77
    assert result["correctness"]["verdict"] == "ok"
    assert result["complete"] is True
    gate = next(check for check in judge_nccl(result) if check["name"] == "nccl_tests_min_bw")
    assert gate["status"] == "FAIL"
    assert "(40 GB/s)" in gate["expected"]


def test_json_v2_corrected_average_per_iteration_and_wrong(fixture_text):
    result = parse_nccl_tests_json(fixture_text(JSON_V2))
    assert result["json_average_key"] == "average_bus_bandwidth"
    assert result["avg_busbw"] == 111.228
    assert result["min_bw_check"] is None  # "unchecked": NCCL_TESTS_MIN_BW not set
    assert result["out_of_bounds"] == 3
    assert result["out_of_bounds_ok"] is False
    assert result["wrong_total"] == 3
    assert result["rows"][-1]["in_place"]["wrong"] is None  # "nan" is no count
    assert result["rows"][1]["out_of_place"]["iter_cv_pct"] == 14.6
    assert result["per_iteration"]["max_cv_pct"] == 14.6
    assert result["correctness"]["verdict"] == "fail"
    statuses = {check["name"]: check["status"] for check in judge_nccl(result, {"min_busbw_gbyte_per_s": 150})}
    assert statuses == {"large_message_busbw": "PASS", "wrong_values": "FAIL"}


def test_json_takes_transport_from_the_log(fixture_text):
    log = fixture_text(SEED_16X1)
    result = parse_nccl_tests_json(fixture_text(JSON_V2), text=log)
    assert result["transport"]["mode"] == "ib_gdr"
    assert result["nccl_version"] == "2.28.3"  # the file's code wins over the log


@pytest.mark.parametrize(
    "data",
    [
        '{"version":2,"config":{"nthreads":1},"results":[{"size":8,',  # aborted before the file was closed
        "[]",
        '{"version": 2}',
        "not json",
    ],
)
def test_json_not_complete_raises(data):
    with pytest.raises(ParseError):
        parse_nccl_tests_json(data)


def test_json_rows_without_size_are_errors():
    result = parse_nccl_tests_json({"config": {}, "results": [{"count": 2}, "x"]})
    assert result["errors"] == ["results[0]: no size", "results[1]: no size", "no result rows"]
    assert result["complete"] is False


def test_the_retired_min_busbw_key_is_refused_naming_its_new_name(fixture_text):
    rows = parse_nccl_tests(fixture_text(SEED_2X8))
    with pytest.raises(OptionError, match=r"^expect.min_busbw was renamed to min_busbw_gbyte_per_s"):
        judge_nccl(rows, {"min_busbw": 50})  # the retired key
    assert _by_name(judge_nccl(rows, {"min_busbw_gbyte_per_s": 50}))["large_message_busbw"]["status"] == "PASS"


# nccl-tests 2.19.6 with NCCL 2.28.9 on one NVIDIA H200, built by the benchmark_tools recipe (SOURCES.md,
# gpuforge-device_1xh200_*): real text, its -J file of the same run, -I 1, and NCCL_DEBUG=INFO.
H200 = "nccl-tests/gpuforge-device_1xh200_nccl2.28.9_"


def _nccl_tests_cell(value: float, width: int) -> str:
    """nccl-tests 2.19.6 `getFloatStr` (src/util.cu): %.2f, else %.1f, else %.0f, else %.0e (width 6) or %.1e
    (width 7), the first that fits the width."""
    for text in (f"{value:{width}.2f}", f"{value:{width}.1f}", f"{value:{width}.0f}"):
        if len(text) <= width:
            return text
    return f"{value:{width}.{1 if width >= 7 else 0}e}"


def test_h200_text_and_its_json_file_agree(fixture_text):
    text = parse_nccl_tests(fixture_text(H200 + "all_reduce_perf.txt"))
    data = parse_nccl_tests_json(fixture_text(H200 + "all_reduce_perf.json"))
    assert (text["errors"], data["errors"], text["complete"], data["complete"]) == ([], [], True, True)
    assert text["json_output"] == "/root/out/r/all_reduce_perf_1xh200.json"
    assert data["json_version"] == 3 and data["json_average_key"] == "average_bus_bandwidth"
    # NCCL 2.28.9: the text's version line (nccl-library=22809) and the file's code 22809
    assert (text["tests_version"], text["nccl_version"], text["nccl_version_source"]) == (
        "2.19.6",
        "2.28.9",
        "nccl-tests version line (nccl-library)",
    )
    assert (data["nccl_version"], data["nccl_version_source"]) == ("2.28.9", "JSON nccl_version")
    assert text["collective"] == data["collective"] == "all_reduce_perf"
    assert text["devices"] == data["devices"]
    assert data["devices"] == [
        {"rank": 0, "group": 0, "pid": 2163, "host": "vm", "device": 0, "bus_id": "0000:00:06", "name": "NVIDIA H200"}
    ]
    assert {key: text["header"][key] for key in data["header"]} == data["header"]
    sizes = [row["size"] for row in text["rows"]]
    assert sizes == [row["size"] for row in data["rows"]] == [8 << n for n in range(28)]
    for index, printed in enumerate(text["rows"]):  # (zip(strict=) is 3.10+; these tests also run on 3.8/3.9)
        exact = data["rows"][index]
        assert (printed["count"], printed["type"], printed["redop"], printed["root"]) == (
            exact["count"],
            exact["type"],
            exact["redop"],
            exact["root"],
        )
        for run in ("out_of_place", "in_place"):
            # each printed cell is the file's value as nccl-tests formats it
            assert printed[run]["algbw"] == float(_nccl_tests_cell(exact[run]["algbw"], 6)), (printed["size"], run)
            assert printed[run]["time_us"] == float(_nccl_tests_cell(exact[run]["time_us"], 7)), printed["size"]
            assert printed[run]["busbw"] == exact[run]["busbw"] == 0  # one rank moves nothing between ranks
            assert printed[run]["wrong"] == exact[run]["wrong"] == 0
    # 1 GiB: out-of-place 2109.8 printed, 2109.785577 in the file; in place the cell `4e+06` (%6.0e) reads as
    # 4000000, the file holds 4054916.253776
    assert (text["rows"][-1]["out_of_place"]["algbw"], data["rows"][-1]["out_of_place"]["algbw"]) == (
        2109.8,
        2109.785577,
    )
    assert (text["rows"][-1]["in_place"]["algbw"], data["rows"][-1]["in_place"]["algbw"]) == (4000000, 4054916.253776)
    assert text["rows"][-2]["in_place"]["algbw"] == 906877  # %6.0f
    # One rank: the average bus bandwidth is 0, printed without OK/FAILED and "unchecked" in the file
    assert (text["avg_busbw"], data["avg_busbw"], text["min_bw_check"], data["min_bw_check"]) == (0, 0.0, None, None)
    assert text["correctness"] == data["correctness"]
    assert data["correctness"] == {"verdict": "ok", "validation": 1, "wrong_total": 0, "out_of_bounds": 0}
    # the log adds what only it says; the file's version code still wins
    log = fixture_text(H200 + "all_reduce_perf.txt")
    joined = parse_nccl_tests_json(fixture_text(H200 + "all_reduce_perf.json"), text=log)
    assert (joined["tests_version"], joined["nccl_version_source"]) == ("2.19.6", "JSON nccl_version")


def test_h200_per_iteration_columns_of_a_real_run(fixture_text):
    result = parse_nccl_tests(fixture_text(H200 + "all_reduce_perf_I1.txt"))
    assert result["errors"] == [] and result["complete"] is True
    assert result["columns"][9:13] == ["i_min", "i_max", "i_p99", "i_cv%"] == result["columns"][17:21]
    assert [row["size"] for row in result["rows"]] == [1048576, 4194304, 16777216]
    assert result["rows"][1]["in_place"] == {
        "time_us": 4.20,
        "algbw": 997.67,
        "busbw": 0,
        "wrong": 0,
        "error": None,
        "iter_min_us": 1.28,
        "iter_max_us": 15.04,
        "iter_p99_us": 15.04,
        "iter_cv_pct": 124.41,
    }
    assert result["rows"][2]["out_of_place"]["iter_p99_us"] == 15.97
    assert result["per_iteration"] == {"max_cv_pct": 124.41, "max_p99_us": 15.97, "max_us": 15.97}
    check = _by_name(judge_nccl(result, {"max_iter_cv_pct": 100}))["iteration_variation"]
    assert (check["status"], check["observed"]) == ("FAIL", 124.41)


def test_h200_all_gather_first_row_of_size_zero(fixture_text):
    result = parse_nccl_tests(fixture_text(H200 + "all_gather_perf.txt"))
    assert result["errors"] == [] and result["collective"] == "all_gather_perf"
    assert [row["size"] for row in result["rows"]] == [0] + [32 << (2 * n) for n in range(12)]
    first = result["rows"][0]
    assert (first["count"], first["redop"], first["out_of_place"]["time_us"]) == (0, "none", 0.48)
    assert result["rows"][-1]["out_of_place"]["algbw"] == 2016.8
    assert result["rows"][-1]["in_place"]["algbw"] == 160672


def test_h200_nccl_debug_info_of_one_gpu_has_no_network_transport(fixture_text):
    """NCCL 2.28.9 loads and names its Socket plugin (`NET/Socket : Using [0]eth0:...`, `Using network Socket`) on
    one GPU too, but `nNodes 1` and no `via NET/` channel: nothing crossed a network. The parser used to call this
    run `tcp`, which a `transport: tcp` expectation passed."""
    result = parse_nccl_tests(fixture_text(H200 + "alltoall_perf_nccl_debug_info.txt"))
    assert result["errors"] == [] and result["complete"] is True
    assert result["transport"] == {
        "net": None,
        "mode": None,
        "gdrdma": False,
        "ib_devices": [],
        "socket_interfaces": ["eth0"],
        "paths": [],
        "nccl_version": "2.28.9+cuda13.0",
        "info_lines": 95,
        "nodes": 1,
        "net_plugin": "Socket",
    }
    assert result["nccl_version"] == "2.28.9" and result["nccl_warnings"] == []
    # four rows between the INFO lines; alltoall does not check in place: N/A
    assert [row["size"] for row in result["rows"]] == [1048576, 4194304, 16777216, 67108864]
    assert [row["in_place"]["wrong"] for row in result["rows"]] == [None] * 4
    assert result["correctness"]["verdict"] == "ok"
    check = _by_name(judge_nccl(result, {"transport": "tcp"}))["transport"]
    assert (check["status"], check["observed"]) == ("WARN", None)
    assert "one node" in check["remedy"]
