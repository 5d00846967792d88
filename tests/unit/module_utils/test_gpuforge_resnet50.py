"""ResNet-50 output parser, scaling efficiency and the per-SKU judge (numbers of IBM Redpaper REDP-5610 and of the
VMware vGPU/PVRDMA paper)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_resnet50 import (
    REFERENCES,
    ParseError,
    judge_precision_comparison,
    judge_resnet50,
    judge_scaling,
    overall_status,
    parse_resnet50,
    precision_comparison,
    reference_per_gpu,
    scaling_efficiency,
    sweep_counts,
)

GPUFORGE_OUTPUT = """\
W1122 torch/distributed/run.py:874] Setting OMP_NUM_THREADS environment variable for each process to be 1
RESNET50 CONFIG launcher=torchrun world_size=2 backend=nccl device=cuda precision=bf16 batch_size=256 \
image_size=224 warmup_steps=10 steps=50 channels_last=1 torch=2.13.0
RESNET50 rank=0 local_rank=0 host=node1 device=cuda:0 device_name='NVIDIA H100 80GB HBM3' elapsed_s=9.1200 \
imgs_per_sec=2807.02
RESNET50 rank=1 local_rank=1 host=node1 device=cuda:1 device_name='NVIDIA H100 80GB HBM3' elapsed_s=9.1300 \
imgs_per_sec=2803.94
RESNET50 RESULT world_size=2 batch_size=256 global_batch_size=512 image_size=224 steps=50 \
total_imgs_per_sec=5607.89 per_gpu=2803.94 device=cuda device_name='NVIDIA H100 80GB HBM3' precision=bf16 \
backend=nccl launcher=torchrun elapsed_s=9.1300 loss=6.9078
"""


def test_gpuforge_output():
    result = parse_resnet50(GPUFORGE_OUTPUT)
    assert result["kind"] == "resnet50"
    assert result["source"] == "gpuforge"
    assert (result["world_size"], result["batch_size"], result["global_batch_size"]) == (2, 256, 512)
    assert result["total_imgs_per_sec"] == 5607.89
    assert result["per_gpu"] == 2803.94
    assert result["device_name"] == "NVIDIA H100 80GB HBM3"
    assert (result["precision"], result["backend"], result["launcher"]) == ("bf16", "nccl", "torchrun")
    assert result["loss"] == 6.9078
    assert result["config"]["channels_last"] == 1
    assert result["config"]["warmup_steps"] == 10
    assert [(r["rank"], r["device"], r["imgs_per_sec"]) for r in result["ranks"]] == [
        (0, "cuda:0", 2807.02),
        (1, "cuda:1", 2803.94),
    ]
    assert result["errors"] == []


def test_gpuforge_missing_rank_lines_and_repeated_result():
    lines = GPUFORGE_OUTPUT.replace("\\\n", "").splitlines()
    text = "\n".join([lines[0], lines[1], lines[2], lines[4], lines[4].replace("5607.89", "5000.00")])
    result = parse_resnet50(text)
    assert result["total_imgs_per_sec"] == 5000.0
    assert result["errors"] == ["2 RESULT lines; the last one is used", "1 per-rank lines for world_size 2"]


def test_truncated_quote_is_an_error_not_a_crash():
    text = GPUFORGE_OUTPUT.replace("\\\n", "") + "RESNET50 rank=2 device_name='NVIDIA H1"
    result = parse_resnet50(text)
    assert result["errors"] == ["line 6: unreadable RESNET50 line (No closing quotation)"]


@pytest.mark.parametrize(
    ("name", "total", "world", "per_gpu", "batch"),
    [
        ("resnet50/tf_redp5610_dgx1_8xv100.txt", 7096.0, 8, 887.0, 64),
        ("resnet50/tf_redp5610_dgx1_16xv100.txt", 13745.0, 16, 859.06, 64),
        ("resnet50/tf_vmware_t4_1vgpu.txt", 340.0, 1, 340.0, 32),
        ("resnet50/tf_vmware_t4_4vgpu_rdma.txt", 1021.0, 4, 255.25, 32),
        ("resnet50/tf_vmware_t4_4vgpu_tcp.txt", 550.0, 4, 137.5, 32),
    ],
)
def test_tf_cnn_benchmarks_fixtures(fixture_text, name, total, world, per_gpu, batch):
    result = parse_resnet50(fixture_text(name))
    assert result["source"] == "tf_cnn_benchmarks"
    assert result["total_imgs_per_sec"] == total
    assert result["world_size"] == world
    assert result["per_gpu"] == per_gpu
    assert result["batch_size"] == batch
    assert result["backend"] == "horovod"
    assert result["model"] == "resnet50"


def test_tf_per_rank_reports_and_steps():
    text = (
        "Step\tImg/sec\ttotal_loss\n"
        "1\timages/sec: 339.9 +/- 0.0 (jitter = 0.0)\t7.873\n"
        "10\timages/sec: 340.2 +/- 0.3 (jitter = 1.2)\t7.915\n"
        "total images/sec: 1020.00\n"
        "total images/sec: 1022.00\n"
    )
    result = parse_resnet50(text)
    assert result["tf_total_reports"] == [1020.0, 1022.0]
    assert result["total_imgs_per_sec"] == 1021.0
    assert result["world_size"] is None
    assert result["per_gpu"] is None
    assert result["ranks"] == [{"step": 1, "imgs_per_sec": 339.9}, {"step": 10, "imgs_per_sec": 340.2}]


@pytest.mark.parametrize("text", ["", "Traceback (most recent call last):\nRuntimeError: CUDA out of memory\n"])
def test_no_result_raises(text):
    with pytest.raises(ParseError, match="no 'RESNET50 RESULT' line"):
        parse_resnet50(text)


def test_scaling_vmware_rdma_and_tcp():
    rdma = [{"world_size": n, "total_imgs_per_sec": t} for n, t in REFERENCES["GRID T4-16C"]["totals"].items()]
    rows = scaling_efficiency(list(reversed(rdma)))
    # The VMware vGPU/PVRDMA paper Table 2 speedups: 1, 1.57, 2.30, 3.00.
    assert [row["speedup"] for row in rows] == [1.0, 1.57, 2.3, 3.0]
    assert [row["efficiency"] for row in rows] == [1.0, 0.7838, 0.7657, 0.7507]
    assert rows[3]["ideal_imgs_per_sec"] == 1360.0
    tcp = [{"world_size": n, "total_imgs_per_sec": t} for n, t in REFERENCES["GRID T4-16C"]["tcp_totals"].items()]
    tcp_rows = scaling_efficiency(tcp)
    assert [row["speedup"] for row in tcp_rows] == [1.0, 1.07, 1.29, 1.62]
    checks = judge_scaling(tcp_rows, min_efficiency=0.7)
    assert [check["status"] for check in checks] == ["FAIL", "FAIL", "FAIL"]
    assert checks[2]["name"] == "scaling_efficiency_4"
    assert checks[2]["observed"] == 0.4044
    assert [c["status"] for c in judge_scaling(rows, min_efficiency=0.8)] == ["WARN", "WARN", "WARN"]


def test_scaling_redp5610(fixture_text):
    runs = [parse_resnet50(fixture_text(f"resnet50/tf_redp5610_dgx1_{n}xv100.txt")) for n in (8, 16)]
    rows = scaling_efficiency(runs)
    assert rows[1] == {
        "world_size": 16,
        "total_imgs_per_sec": 13745.0,
        "per_gpu": 859.06,
        "speedup": 1.94,
        "ideal_imgs_per_sec": 14192.0,
        "efficiency": 0.9685,
    }
    assert judge_scaling(rows)[0]["status"] == "PASS"
    assert scaling_efficiency([{"world_size": None, "total_imgs_per_sec": 5.0}]) == []


def test_reference_lookup():
    assert reference_per_gpu("Tesla V100-SXM2-16GB", 16)["per_gpu"] == 859.06
    assert reference_per_gpu("Tesla V100-SXM2-16GB", 12)["reference_gpus"] == 8
    assert reference_per_gpu("Tesla V100-SXM2-16GB", 2)["per_gpu"] == 887.0  # below all points: smallest
    assert reference_per_gpu("GRID T4-16C", 3)["per_gpu"] == 260.33
    assert reference_per_gpu("NVIDIA B200", 8) is None


def _by_name(checks):
    return {check["name"]: check for check in checks}


def test_judge_against_redp5610_reference():
    run = {"world_size": 8, "per_gpu": 850.0, "loss": 6.9}
    checks = _by_name(judge_resnet50(run, {"sku": "Tesla V100-SXM2-16GB", "world_size": 8}))
    assert checks["per_gpu_throughput"]["status"] == "PASS"  # 850 >= 0.9 x 887 = 798.3
    expected = ">= 798.3 img/s per GPU (0.9 x 887.0 from IBM Redpaper REDP-5610"
    assert checks["per_gpu_throughput"]["expected"].startswith(expected)
    assert checks["world_size"]["status"] == "PASS"
    warn = _by_name(judge_resnet50({**run, "per_gpu": 700.0}, {"sku": "Tesla V100-SXM2-16GB"}))
    assert warn["per_gpu_throughput"]["status"] == "WARN"  # between 0.75 and 0.9 of 887
    fail = judge_resnet50({**run, "per_gpu": 600.0}, {"sku": "Tesla V100-SXM2-16GB", "world_size": 16})
    assert [c["status"] for c in fail] == ["FAIL", "FAIL"]
    assert overall_status(fail) == "FAIL"


def test_judge_vmware_tcp_fails_rdma_reference():
    tcp4 = {"world_size": 4, "per_gpu": 137.5}
    checks = _by_name(judge_resnet50(tcp4, {"sku": "GRID T4-16C"}))
    assert checks["per_gpu_throughput"]["status"] == "FAIL"  # 137.5 < 0.75 x 255.25
    assert "nccl_tests" in checks["per_gpu_throughput"]["remedy"]


def test_judge_min_per_gpu_nan_loss_and_unknown_sku():
    checks = _by_name(judge_resnet50({"world_size": 1, "per_gpu": 1.0, "loss": float("nan")}, {"min_per_gpu": 1.0}))
    assert checks["loss"]["status"] == "FAIL"
    assert checks["per_gpu_throughput"]["status"] == "PASS"
    unknown = judge_resnet50({"world_size": 1, "per_gpu": 1.0}, {"sku": "NVIDIA B200"})
    assert unknown == [
        {
            "name": "per_gpu_throughput",
            "status": "WARN",
            "observed": 1.0,
            "expected": "reference for NVIDIA B200",
            "remedy": "",
        }
    ]
    assert judge_resnet50({"per_gpu": 1.0}) == []


def test_every_truncation_parses_or_raises_parse_error():
    text = GPUFORGE_OUTPUT.replace("\\\n", "")
    outcomes = set()
    for cut in range(len(text)):
        try:
            result = parse_resnet50(text[:cut])
        except ParseError:
            outcomes.add("raised")
            continue
        outcomes.add("parsed")
        assert result["world_size"] in (2, None)
    assert outcomes == {"raised", "parsed"}


@pytest.mark.parametrize(
    ("per_node", "nodes", "counts"),
    [(8, 2, [1, 2, 4, 8, 16]), (1, 3, [1, 2, 3]), (4, 1, [1, 2, 4]), (6, 2, [1, 2, 4, 6, 12])],
)
def test_sweep_counts(per_node, nodes, counts):
    assert sweep_counts(per_node, nodes) == counts


def test_sweep_counts_rejects_zero():
    with pytest.raises(ValueError):
        sweep_counts(0, 2)


def test_fp32_run_is_not_judged_against_the_fp16_sku_reference():
    text = (
        "RESNET50 RESULT world_size=8 batch_size=64 total_imgs_per_sec=3000.0 per_gpu=375.0 device=cuda "
        "precision=fp32 requested_precision=fp32 loss=6.9\n"
    )
    result = parse_resnet50(text)
    assert result["requested_precision"] == "fp32"
    assert judge_resnet50(result, {"sku": "Tesla V100-SXM2-16GB"}) == []
    mixed = parse_resnet50(
        text.replace("precision=fp32 requested_precision=fp32", "precision=fp16 requested_precision=amp")
    )
    assert [c["status"] for c in judge_resnet50(mixed, {"sku": "Tesla V100-SXM2-16GB"})] == ["FAIL"]  # 375 < 0.75 x 887


def test_precision_comparison_and_its_site_floor():
    runs = [
        {"precision": "fp32", "gpus": 4, "images_per_second": 1000.0},
        {"precision": "amp", "gpus": 4, "images_per_second": 1650.0},
        {"precision": "amp", "gpus": 8, "images_per_second": 3300.0},  # no fp32 run at 8 GPUs: no row
        {"precision": "bf16", "gpus": 4, "images_per_second": None},  # failed run: no row
    ]
    rows = precision_comparison(runs)
    assert rows == [
        {
            "gpus": 4,
            "baseline": "fp32",
            "precision": "amp",
            "baseline_images_per_second": 1000.0,
            "images_per_second": 1650.0,
            "speedup": 1.65,
        }
    ]
    assert judge_precision_comparison(rows) == []  # no site floor: reported, not judged
    [check] = judge_precision_comparison(rows, 1.9)
    assert (check["name"], check["status"], check["precision"], check["gpus"]) == (
        "precision_speedup_4",
        "FAIL",
        "amp",
        4,
    )
