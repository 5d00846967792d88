"""gpuforge_dcgm: dcgmi diag -j of DCGM 3.x and 4.x (real fixtures, tests/fixtures/dcgmi/SOURCES.md), judged per GPU
and per test. The parser on the lab simulator's output: tests/unit/lab/test_dcgmi_sim.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_dcgm import (
    ParseError,
    judge_diag,
    parse_diag,
    parse_diag_table,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError as BaseParseError

DCGMI = Path(__file__).resolve().parents[2] / "fixtures" / "dcgmi"


def fixture(name: str) -> str:
    return (DCGMI / name).read_text(encoding="utf-8")


def test_dcgm4_level1_capture_names_the_failed_software_test():
    parsed = parse_diag(fixture("dcgm-4.2.3-r1-gb10.json"))
    assert (parsed["format"], parsed["version"], parsed["driver_version"]) == ("dcgm4", "4.2.3", "580.82.09")
    (test,) = parsed["tests"]
    assert (test["category"], test["name"], test["status"]) == ("Deployment", "software", "fail")
    assert test["results"][0]["gpu"] == 0 and test["results"][0]["status"] == "fail"
    assert test["results"][0]["warnings"][0].startswith("Persistence Mode: Persistence mode for GPU 0 is disabled")
    assert test["results"][0]["warnings"][0].endswith("(DCGM error 29)")
    assert test["info"][0].startswith("Error getting the SRAM Threshold Count")
    check = judge_diag(parsed, 1, [{"index": 0, "bus_id": "0000000F:01:00.0"}])
    assert check["name"] == "dcgm_diag" and check["status"] == "FAIL"
    assert check["observed"]["failed"][0]["bus_id"] == "0000000F:01:00.0"
    assert "software on 0000000F:01:00.0 (Persistence Mode" in check["fault"]
    assert check["remedy"]


def test_dcgm4_partial_skip_lists_the_tests_that_did_not_run():
    parsed = parse_diag(fixture("dcgm-4.2.3-r2-gb10-partial-skip.json"))
    assert [(t["name"], t["status"]) for t in parsed["tests"]] == [
        ("software", "fail"),
        ("memory", "skip"),
        ("pcie", "skip"),
    ]
    assert parsed["gpus"] == {0: {"software": "fail", "memory": "skip", "pcie": "skip"}}
    check = judge_diag(parsed, 2, [])
    assert check["observed"]["skipped"] == ["memory", "pcie"]
    # no nvidia-smi facts: the GPU is still named, with the reason its bus ID is missing
    assert "GPU 0 (bus ID unknown" in check["fault"]


def test_dcgm3_capture_with_string_gpu_ids():
    parsed = parse_diag(fixture("dcgm-3.3.1-r3-t400-skips.json"))
    assert parsed["format"] == "dcgm3" and parsed["version"] is None
    assert [t["name"] for t in parsed["tests"]] == ["PCIe", "GPU Memory", "Diagnostic", "EUD Test", "Targeted Stress"]
    assert {t["status"] for t in parsed["tests"]} == {"skip"}
    assert parsed["gpus"] == {
        0: dict.fromkeys(["PCIe", "GPU Memory", "Diagnostic", "EUD Test", "Targeted Stress"], "skip")
    }
    assert judge_diag(parsed, 3, allow_skip=True)["status"] == "PASS"
    strict = judge_diag(parsed, 3, allow_skip=False)
    assert strict["status"] == "WARN" and "not run: Diagnostic, EUD Test" in strict["fault"]


def test_old_gpu_ids_list_and_uppercase_status_fan_out_per_gpu():
    document = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [{"name": "Blacklist", "results": [{"gpu_ids": "0,1", "status": "PASS"}]}],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {"gpu_id": "1", "status": "Fail", "warnings": ["DBE on GPU 1"], "info": "allocated"},
                            ],
                        }
                    ],
                },
            ]
        }
    }
    parsed = parse_diag(json.dumps(document))
    assert parsed["gpus"] == {
        0: {"Blacklist": "pass", "GPU Memory": "pass"},
        1: {"Blacklist": "pass", "GPU Memory": "fail"},
    }
    assert parsed["tests"][1]["status"] == "fail"  # worst of the GPUs when there is no test_summary
    check = judge_diag(
        parsed, 2, [{"index": 0, "bus_id": "00000000:1B:00.0"}, {"index": 1, "bus_id": "00000000:43:00.0"}]
    )
    assert check["observed"]["failed"] == [
        {"test": "GPU Memory", "gpu": 1, "bus_id": "00000000:43:00.0", "messages": ["DBE on GPU 1", "allocated"]}
    ]
    assert check["observed"]["per_gpu"]["00000000:43:00.0"] == {"Blacklist": "pass", "GPU Memory": "fail"}


def test_runtime_error_fails_without_tests():
    parsed = parse_diag(
        json.dumps({"DCGM Diagnostic": {"runtime_error": "The diagnostic was stopped", "test_categories": []}})
    )
    check = judge_diag(parsed, 3)
    assert check["status"] == "FAIL" and "did not run: The diagnostic was stopped" in check["fault"]


def test_warned_test_warns_and_a_non_gpu_entity_is_not_a_gpu():
    document = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Integration",
                    "tests": [
                        {
                            "name": "pcie",
                            "results": [
                                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Warn"},
                                {"entity_group": "CPU", "entity_group_id": 7, "entity_id": 0, "status": "Pass"},
                            ],
                            "test_summary": {"status": "Warn"},
                        }
                    ],
                }
            ]
        }
    }
    parsed = parse_diag(json.dumps(document))
    assert parsed["gpus"] == {0: {"pcie": "warn"}}
    check = judge_diag(parsed, 2, [{"index": 0, "bus_id": "00000000:1B:00.0"}])
    assert check["status"] == "WARN" and "pcie warned on 00000000:1B:00.0" in check["fault"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("Error: unable to establish a connection to the specified host: localhost", "not JSON"),
        ('{"DCGM Diagnostic": {"test_categories": [', "truncated or invalid JSON"),
        ('{"something": {}}', "no 'DCGM GPU Diagnostic'"),
        ('{"DCGM Diagnostic": {"test_categories": [{"category": "x"}]}}', "tests list"),
        (
            '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "a", "results": [{"status": "Pass"}]}]}]}}',
            "names no GPU",
        ),
        (
            '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "a", "results": '
            '[{"gpu_id": "x", "status": "Pass"}]}]}]}}',
            "not a GPU id",
        ),
        ('{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "a", "results": []}]}]}}', "neither results"),
        ('{"DCGM Diagnostic": {}}', "no test_categories"),
    ],
)
def test_unreadable_output_raises(text, message):
    with pytest.raises(ParseError, match=message):
        parse_diag(text)


def test_parse_error_is_the_shared_class():
    assert ParseError is BaseParseError


# --- the text table (dcgmi diag without -j) -------------------------------------------------------------------------


def test_table_dcgm3_h100_cuinit_failure_on_every_gpu():
    parsed = parse_diag_table(fixture("dcgm-3.3.8-r3-8xh100-cuinit-fail.txt"))
    assert (parsed["format"], parsed["version"], parsed["driver_version"]) == ("dcgm3-text", "3.3.8", "560.35.03")
    statuses = {(t["category"], t["name"]): t["status"] for t in parsed["tests"]}
    assert statuses[("Deployment", "Persistence Mode")] == "pass"
    assert statuses[("Integration", "PCIe")] == "skip"
    assert statuses[("Hardware", "GPU Memory")] == "fail"
    assert statuses[("Stress", "EUD Test")] == "skip"
    # "Fail - All" with eight device IDs in the Metadata rows: GPUs 0..7, each with its own Warning.
    assert sorted(parsed["gpus"]) == list(range(8))
    memory = next(t for t in parsed["tests"] if t["name"] == "GPU Memory")
    for result in memory["results"]:
        (warning,) = result["warnings"]
        assert warning.startswith(f"GPU {result['gpu']} Error using CUDA API cuInit Check DCGM and system logs")
        # The 45-character chunks joined exactly: no space lost or added at a row break.
        assert "Unable to initialize CUDA library: 'system not yet initialized'" in warning
        assert warning.endswith("Refer to https://github.com/nvidia/cuda-samples")
    assert memory["warnings"] == []
    persistence = next(t for t in parsed["tests"] if t["name"] == "Persistence Mode")
    assert persistence["info"][0].startswith(
        'Persistence mode for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " '
        "as root.,Persistence mode for GPU 1"
    )
    check = judge_diag(parsed, 3, [{"index": 3, "bus_id": "00000000:5D:00.0"}])
    assert check["status"] == "FAIL"
    assert [f["gpu"] for f in check["observed"]["failed"]] == list(range(8))
    assert "GPU Memory on 00000000:5D:00.0 (GPU 3 Error using CUDA API cuInit" in check["fault"]


def test_table_dcgm4_every_gpu_row_is_a_result():
    parsed = parse_diag_table(fixture("dcgm-4.0.0-r3-4gpu-pass.txt"))
    assert (parsed["format"], parsed["version"]) == ("dcgm4-text", "4.0.0")
    assert [(t["category"], t["name"]) for t in parsed["tests"]][:3] == [
        ("Deployment", "software"),
        ("Hardware", "memory"),
        ("Hardware", "diagnostic"),
    ]
    assert parsed["gpus"] == {
        gpu: dict.fromkeys(
            ["software", "memory", "diagnostic", "pcie", "memory_bandwidth", "targeted_stress", "targeted_power"],
            "pass",
        )
        for gpu in range(4)
    }
    assert judge_diag(parsed, 3, [])["status"] == "PASS"


def test_table_dcgm3_skipped_plugins_pass_unless_skips_are_refused():
    parsed = parse_diag_table(fixture("dcgm-3.3.9-r3-2gpu-skips.txt"))
    assert parsed["format"] == "dcgm3-text" and sorted(parsed["gpus"]) == [0, 1]
    assert judge_diag(parsed, 3, [])["status"] == "PASS"
    refused = judge_diag(parsed, 3, [], allow_skip=False)
    assert refused["status"] == "WARN"
    assert "EUD Test" in refused["observed"]["skipped"] and "Denylist" not in refused["observed"]["skipped"]


# The row layouts dcgmi/Diag.cpp prints for results the fixtures lack (DCGM 3.x partial results, DCGM 4.x per-GPU
# warnings), built on the stencil of the real tables above.
def _row(name: str, info: str) -> str:
    return f"| {name:<25} | {info:<46} |"


_HEAD = "\n".join(
    [
        "Successfully ran diagnostic for group.",
        "+---------------------------+------------------------------------------------+",
        _row("Diagnostic", "Result"),
        "+===========================+================================================+",
    ]
)


def test_table_dcgm3_per_gpu_statuses_on_several_rows():
    text = "\n".join(
        [
            _HEAD,
            "+-----  Hardware  ----------+------------------------------------------------+",
            _row("GPU Memory", "Pass - GPUs: 0, 2, 3   "),
            _row("", "Fail - GPU: 1   "),
            _row("Warning", "GPU 1 Error using CUDA API cuInit Check DCGM "),
            _row("", "and system logs for errors."),
            "+---------------------------+------------------------------------------------+",
        ]
    )
    parsed = parse_diag_table(text)
    (test,) = parsed["tests"]
    assert test["status"] == "fail"
    assert {r["gpu"]: r["status"] for r in test["results"]} == {0: "pass", 1: "fail", 2: "pass", 3: "pass"}
    failed = next(r for r in test["results"] if r["gpu"] == 1)
    assert failed["warnings"] == ["GPU 1 Error using CUDA API cuInit Check DCGM and system logs for errors."]


def test_table_dcgm4_warning_rows_belong_to_their_gpu():
    text = "\n".join(
        [
            _HEAD,
            "+-----  Hardware  ----------+------------------------------------------------+",
            _row("memory", "Fail"),
            _row("", "GPU0: Pass"),
            _row("", "GPU1: Fail"),
            _row("Warning: GPU1", "Found 2 uncorrectable memory errors on GPU 1"),
            _row("", "GPU2: "),
            "+---------------------------+------------------------------------------------+",
        ]
    )
    parsed = parse_diag_table(text)
    (test,) = parsed["tests"]
    assert test["status"] == "fail" and parsed["format"] == "dcgm4-text"
    assert {r["gpu"]: r["status"] for r in test["results"]} == {0: "pass", 1: "fail", 2: "not_run"}
    assert test["results"][1]["warnings"] == ["Found 2 uncorrectable memory errors on GPU 1"]
    assert test["results"][0]["warnings"] == [] and test["warnings"] == []


def test_table_dcgm3_all_without_metadata_keeps_the_test_status():
    text = "\n".join([_HEAD, "+-----  Stress  ------------+---------+", _row("Memtest", "Fail - All")])
    parsed = parse_diag_table(text)
    assert parsed["gpus"] == {} and parsed["tests"][0]["status"] == "fail"
    check = judge_diag(parsed, 4, [])
    assert check["status"] == "FAIL" and "Memtest on the node" in check["fault"]


def test_table_without_a_table():
    parsed = parse_diag_table("Error: unable to establish a connection to the specified host: localhost\n")
    assert parsed["runtime_error"].startswith("Error: unable to establish a connection")
    assert judge_diag(parsed, 1, [])["status"] == "FAIL"
    with pytest.raises(ParseError, match="JSON, not the text table"):
        parse_diag_table(fixture("dcgm-4.2.3-r1-gb10.json"))
    with pytest.raises(ParseError, match="empty output"):
        parse_diag_table("  \n")
    with pytest.raises(ParseError, match="no dcgmi diag table"):
        parse_diag_table("Successfully ran diagnostic for group.\n")
    with pytest.raises(ParseError, match="lists no test"):
        parse_diag_table("\n".join([_HEAD, "|-----  Metadata  ----------+-----|", _row("DCGM Version", "3.3.8")]))
