"""gpuforge_p2p: p2pBandwidthLatencyTest of Dell EMC Ready Solutions for AI (CUDA 9.1) and of a current public run
(tests/fixtures/p2p)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_p2p import (
    REFERENCES,
    ParseError,
    judge_p2p,
    overall_status,
    pair_ratios,
    parse_p2p,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "p2p"
DELLEMC_C4140 = (FIXTURES / "dellemc_c4140_4xv100_sxm2_cuda91.txt").read_text(encoding="utf-8")
A100 = (FIXTURES / "distserve_issue3_8xa100_sxm4_80gb.txt").read_text(encoding="utf-8")


def checks_of(result, expect=None):
    return {check["name"]: check for check in judge_p2p(result, expect)}


def test_dellemc_devices_and_matrices():
    result = parse_p2p(DELLEMC_C4140)
    assert result["gpus"] == 4 and result["sku"] == "Tesla V100-SXM2-16GB"
    assert result["devices"][1] == {
        "index": 1,
        "name": "Tesla V100-SXM2-16GB",
        "pci_bus_id": "1c",
        "pci_device_id": "0",
        "pci_domain_id": "0",
    }
    assert len(result["access"]) == 12 and all(entry["can"] for entry in result["access"])
    assert result["errors"] == []
    matrices = result["matrices"]
    assert sorted(matrices) == [
        *("bi_disabled", "bi_enabled", "connectivity", "latency_disabled", "latency_enabled"),
        *("uni_disabled", "uni_enabled"),
    ]
    assert matrices["connectivity"] == [[1] * 4] * 4
    assert matrices["uni_enabled"][1] == [47.86, 738.42, 34.18, 38.74]
    # The second code block of the Dell EMC guide lost its leading spaces ("D\D   0 ...", "0 754.83 ..."): still read.
    assert matrices["bi_enabled"][0] == [754.83, 75.25, 78.63, 78.80]
    assert matrices["latency_enabled"][3] == [6.44, 6.47, 6.48, 3.58]


def test_current_format_writes_matrix_and_cpu_latency_blocks():
    result = parse_p2p(A100)
    assert result["gpus"] == 8 and result["sku"] == "NVIDIA A100-SXM4-80GB"
    matrices = result["matrices"]
    assert matrices["uni_enabled"][1][0] == 265.05  # "(P2P Writes)" is the enabled unidirectional matrix
    assert matrices["latency_disabled"][7][7] == 2.48
    assert matrices["latency_disabled_cpu"][0][1] == 7.27
    assert matrices["latency_enabled_cpu"][7][6] == 2.80
    assert len(result["access"]) == 56


@pytest.mark.parametrize(
    ("text", "sku"), [(DELLEMC_C4140, "Tesla V100-SXM2-16GB"), (A100, "NVIDIA A100-SXM4-80GB")], ids=["dellemc", "a100"]
)
def test_each_reference_is_the_lowest_ratio_of_its_source_run(text, sku):
    result = parse_p2p(text)
    for kind in ("uni", "bi"):
        assert min(row["ratio"] for row in pair_ratios(result, kind)) == REFERENCES[sku][kind]
    checks = checks_of(result, {"require_p2p": True})
    assert overall_status(list(checks.values())) == "PASS", checks


def test_a_slow_nvlink_pair_fails_against_the_sku_reference():
    # Pair 1->2 of Dell EMC Ready Solutions for AI as if its NVLink had dropped to PCIe speed: 34.18 -> 10.50 GB/s
    # unidirectional.
    slow = DELLEMC_C4140.replace("  1 47.86 738.42 34.18 38.74", "  1 47.86 738.42 10.50 38.74")
    checks = checks_of(parse_p2p(slow))
    assert checks["p2p_uni_ratio"]["status"] == "FAIL"
    assert checks["p2p_uni_ratio"]["observed"]["slow_pairs"] == ["1->2"]
    assert checks["p2p_uni_ratio"]["observed"]["worst"]["ratio"] == 1.05
    assert checks["p2p_bi_ratio"]["status"] == "PASS"


def test_no_reference_enabled_must_not_be_slower_and_site_floor():
    result = parse_p2p(DELLEMC_C4140)
    checks = checks_of(result, {"sku": "Tesla P100-PCIE-16GB", "min_bidirectional_gbyte_per_s": 80})
    assert checks["p2p_uni_ratio"]["status"] == "PASS"
    assert "must not be slower" in checks["p2p_uni_ratio"]["expected"]
    assert checks["p2p_bi_gbyte_per_s"]["status"] == "FAIL"  # 75.25, 78.x GB/s pairs are below 80
    assert "0->1" in checks["p2p_bi_gbyte_per_s"]["observed"]["slow_pairs"]


def test_missing_peer_access_and_too_few_gpus():
    text = DELLEMC_C4140.replace("  2     1    1    1    1", "  2     0    0    1    0").replace(
        "Device=2 CAN Access Peer Device=0", "Device=2 CANNOT Access Peer Device=0"
    )
    checks = checks_of(parse_p2p(text), {"require_p2p": True, "gpus": 8})
    assert checks["p2p_access"]["status"] == "FAIL"
    assert checks["p2p_access"]["observed"] == ["2->0", "2->1", "2->3"]
    assert checks["p2p_gpus"]["status"] == "FAIL"


def test_truncated_matrix_is_an_error_not_a_verdict():
    result = parse_p2p(DELLEMC_C4140.split("\n2  95.48")[0])
    assert "bi_enabled" not in result["matrices"]
    assert result["errors"] == ["bi_enabled: 2 rows for 4 devices (truncated output?)"]


@pytest.mark.parametrize("text", ["", "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n", "node008\n"])
def test_no_matrix(text):
    with pytest.raises(ParseError):
        parse_p2p(text)


def test_bad_expect():
    with pytest.raises(OptionError, match=r"expect\.tolerance"):
        judge_p2p(parse_p2p(DELLEMC_C4140), {"tolerance": 2})


def test_cuda_samples_13_on_one_h200():
    """cuda-samples 13.0 built by the benchmark_tools recipe, run on one NVIDIA H200 (SOURCES.md): one device, no
    peer to access, every matrix 1x1 (the GPU with itself); the connectivity row is `0` then a tab."""
    text = (FIXTURES / "gpuforge-device_1xh200_drv580.159.04_cuda13.0.txt").read_text(encoding="utf-8")
    assert "     0\t     1\n" in text
    result = parse_p2p(text)
    assert (result["gpus"], result["sku"], result["access"], result["errors"]) == (1, "NVIDIA H200", [], [])
    assert result["devices"] == [
        {"index": 0, "name": "NVIDIA H200", "pci_bus_id": "0", "pci_device_id": "6", "pci_domain_id": "0"}
    ]
    assert result["matrices"] == {
        "connectivity": [[1]],
        "uni_disabled": [[3947.58]],
        "uni_enabled": [[3939.80]],
        "bi_disabled": [[4081.47]],
        "bi_enabled": [[4080.13]],
        "latency_disabled": [[1.79]],
        "latency_disabled_cpu": [[4.39]],
        "latency_enabled": [[1.77]],
        "latency_enabled_cpu": [[4.24]],
    }
    assert pair_ratios(result, "uni") == pair_ratios(result, "bi") == []  # no pair of GPUs
