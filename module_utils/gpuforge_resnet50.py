"""Parse ResNet-50 throughput output (gpuforge's resnet50_bench.py and tf_cnn_benchmarks), compute scaling
efficiency against linear scaling, and judge per-GPU throughput against per-SKU references from the reference documents.

Stdlib only, and the gpuforge_errors/gpuforge_options files Ansible ships with it.
"""

from __future__ import annotations

import math
import re
import shlex

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, WARN, bench_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import worst_status as overall_status
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import integer, number, record, string

__all__ = [
    "EXPECT",
    "REFERENCES",
    "judge_precision_comparison",
    "judge_resnet50",
    "judge_scaling",
    "overall_status",
    "parse_resnet50",
    "precision_comparison",
    "reference_per_gpu",
    "scaling_efficiency",
]


# The resnet50_benchmark module's `expect` option: the keys judge_resnet50 reads, world_size (the module
# sets it per run) and the sweep's judge_scaling inputs. EXPECT("expect", value) coerces numeric strings
# and raises OptionError naming the key for a value of the wrong type or a key nothing reads.
EXPECT = record(
    {
        "sku": string(),
        "min_per_gpu": number(above=0),
        "ratio": number(above=0),
        "fail_ratio": number(above=0),
        "world_size": integer(minimum=1),
        "min_scaling_efficiency": number(minimum=0),
        "scaling_warn_margin": number(minimum=0),
        "min_amp_speedup": number(above=0),
    }
)

# Precisions that compute in a 16-bit type (mixed precision): the reference documents' figures are of this kind.
MIXED_PRECISIONS = ("amp", "fp16", "bf16")


# Per-SKU reference throughput, total images/sec by GPU count, with the run that produced it. These are
# tf_cnn_benchmarks numbers (TensorFlow, Horovod, synthetic data); gpuforge's PyTorch benchmark is a
# different program, so they are a floor to compare against with a margin, not an exact target.
REFERENCES = {
    # IBM Redpaper REDP-5610 (2020) section 4.5, Figure 4-1: DGX-1, multi-GPU pods, tf_cnn_benchmarks
    # resnet50 --batch_size=64 --use_fp16 --variable_update=horovod, NGC TensorFlow 20.03, 4x EDR IB with
    # GDRDMA between the two nodes. 8 GPUs: 7,096 img/s; 16 GPUs on two DGX-1: 13,745 img/s.
    "Tesla V100-SXM2-16GB": {
        "totals": {8: 7096.0, 16: 13745.0},
        "precision": "fp16",
        "batch_size": 64,
        "source": "IBM Redpaper REDP-5610 Figure 4-1, tf_cnn_benchmarks fp16 batch 64, DGX-1 over EDR IB",
    },
    # The VMware vGPU/PVRDMA paper (2019) Table 2: GRID T4-16C vGPU, one per VM, tf_cnn_benchmarks resnet50 fp16
    # batch 32 with Horovod over PVRDMA (RoCE, ConnectX-5). 1 vGPU: 340; 2: 533; 3: 781; 4: 1,021 img/s.
    # Over TCP the same runs gave 340/364/437/550.
    "GRID T4-16C": {
        "totals": {1: 340.0, 2: 533.0, 3: 781.0, 4: 1021.0},
        "tcp_totals": {1: 340.0, 2: 364.0, 3: 437.0, 4: 550.0},
        "precision": "fp16",
        "batch_size": 32,
        "source": "VMware vGPU/PVRDMA paper Table 2, tf_cnn_benchmarks fp16 batch 32, RDMA",
    },
}

_GPUFORGE_LINE = re.compile(r"^RESNET50 (.*)$")
_TF_TOTAL = re.compile(r"^\s*total images/sec:\s*([0-9.]+)\s*$", re.IGNORECASE)
_TF_STEP = re.compile(r"^\s*(\d+)\s+images/sec:\s*([0-9.]+)\s*\+/-\s*([0-9.]+)")
_TF_FIELDS = {
    "model": re.compile(r"^Model:\s*(\S+)"),
    "mode": re.compile(r"^Mode:\s*(\S+)"),
    "batch_size_global": re.compile(r"^Batch size:\s*(\d+)\s+global"),
    "batch_size": re.compile(r"^\s*(\d+)\s+per device"),
    "num_batches": re.compile(r"^Num batches:\s*(\d+)"),
    "num_gpus": re.compile(r"^Num GPUs:\s*(\d+)"),
    "data_format": re.compile(r"^Data format:\s*(\S+)"),
    "variables": re.compile(r"^Variables:\s*(\S+)"),
}
_INT_KEYS = {"world_size", "batch_size", "global_batch_size", "image_size", "steps", "warmup_steps", "rank"}
_INT_KEYS |= {"local_rank", "channels_last"}
_FLOAT_KEYS = {"total_imgs_per_sec", "per_gpu", "imgs_per_sec", "elapsed_s", "loss"}


def _fields(rest: str) -> dict:
    """key=value pairs of one RESNET50 line; values may be shell-quoted (device names have spaces)."""
    fields = {}
    for word in shlex.split(rest):
        if "=" not in word:
            continue
        key, value = word.split("=", 1)
        if key in _INT_KEYS:
            try:
                fields[key] = int(value)
            except ValueError:
                fields[key] = None
        elif key in _FLOAT_KEYS:
            try:
                fields[key] = float(value)
            except ValueError:
                fields[key] = None
        else:
            fields[key] = value
    return fields


def _parse_gpuforge(lines: list[str]) -> dict | None:
    config, ranks, results, errors = {}, [], [], []
    for line_number, line in lines:
        match = _GPUFORGE_LINE.match(line.strip())
        if not match:
            continue
        rest = match.group(1)
        try:
            if rest.startswith("RESULT"):
                results.append(_fields(rest[len("RESULT") :]))
            elif rest.startswith("CONFIG"):
                config = _fields(rest[len("CONFIG") :])
            elif rest.startswith("rank="):
                ranks.append(_fields(rest))
        except ValueError as exc:  # unbalanced quotes in a truncated line
            errors.append(f"line {line_number}: unreadable RESNET50 line ({exc})")
    if not results:
        return None
    if len(results) > 1:
        errors.append(f"{len(results)} RESULT lines; the last one is used")
    result = results[-1]
    world = result.get("world_size")
    if world is not None and ranks and len(ranks) != world:
        errors.append(f"{len(ranks)} per-rank lines for world_size {world}")
    return {
        "source": "gpuforge",
        "model": "resnet50",
        "world_size": world,
        "batch_size": result.get("batch_size"),
        "global_batch_size": result.get("global_batch_size"),
        "image_size": result.get("image_size"),
        "steps": result.get("steps"),
        "total_imgs_per_sec": result.get("total_imgs_per_sec"),
        "per_gpu": result.get("per_gpu"),
        "device": result.get("device"),
        "device_name": result.get("device_name"),
        "precision": result.get("precision"),
        "requested_precision": result.get("requested_precision"),
        "backend": result.get("backend"),
        "launcher": result.get("launcher"),
        "elapsed_s": result.get("elapsed_s"),
        "loss": result.get("loss"),
        "config": config,
        "ranks": ranks,
        "tf_total_reports": [],
        "errors": errors,
    }


def _parse_tf(lines: list[str]) -> dict | None:
    totals, steps, fields = [], [], {}
    for _number, line in lines:
        match = _TF_TOTAL.match(line)
        if match:
            totals.append(float(match.group(1)))
            continue
        match = _TF_STEP.match(line)
        if match:
            steps.append({"step": int(match.group(1)), "imgs_per_sec": float(match.group(2))})
            continue
        for key, pattern in _TF_FIELDS.items():
            found = pattern.match(line)
            if found and key not in fields:
                value = found.group(1)
                fields[key] = int(value) if value.isdigit() else value
    if not totals:
        return None
    # With Horovod every rank prints its own "total images/sec" line, and each already counts all workers
    # (tf_cnn_benchmarks multiplies by the number of workers): the reports agree, their mean is the total.
    total = sum(totals) / len(totals)
    world = fields.get("num_gpus")
    if fields.get("batch_size_global") and fields.get("batch_size"):
        world = fields["batch_size_global"] // fields["batch_size"]
    return {
        "source": "tf_cnn_benchmarks",
        "model": fields.get("model", "resnet50"),
        "world_size": world,
        "batch_size": fields.get("batch_size"),
        "global_batch_size": fields.get("batch_size_global"),
        "image_size": None,
        "steps": fields.get("num_batches"),
        "total_imgs_per_sec": round(total, 2),
        "per_gpu": round(total / world, 2) if world else None,
        "device": "cuda",
        "device_name": None,
        "precision": None,
        "requested_precision": None,
        "backend": fields.get("variables"),
        "launcher": None,
        "elapsed_s": None,
        "loss": None,
        "config": fields,
        "ranks": steps,
        "tf_total_reports": totals,
        "errors": [],
    }


def parse_resnet50(text: str) -> dict:
    """Parse one run's output; raise ParseError when it holds no result line of either format."""
    lines = list(enumerate(text.splitlines(), start=1))
    result = _parse_gpuforge(lines) or _parse_tf(lines)
    if result is None:
        raise ParseError("no 'RESNET50 RESULT' line and no 'total images/sec:' line found")
    result["kind"] = "resnet50"
    if result["total_imgs_per_sec"] is None:
        result["errors"].append("RESULT line without a readable total_imgs_per_sec")
    return result


def sweep_counts(gpus_per_node: int, nodes: int) -> list[int]:
    """The default GPU-count sweep: 1, 2, 4, ... below one node's GPUs, then 1, 2, ... whole nodes.

    8 GPUs per node on 2 nodes -> [1, 2, 4, 8, 16] (IBM Redpaper REDP-5610's 1 -> 16 V100 scaling run).
    """
    if gpus_per_node < 1 or nodes < 1:
        raise ValueError("gpus_per_node and nodes must be at least 1")
    counts = []
    power = 1
    while power < gpus_per_node:
        counts.append(power)
        power *= 2
    return counts + [gpus_per_node * whole for whole in range(1, nodes + 1)]


def scaling_efficiency(results: list[dict]) -> list[dict]:
    """Speedup and efficiency of each run against linear scaling from the smallest run's per-GPU rate.

    ``results`` are parsed runs (``world_size`` and ``total_imgs_per_sec``); runs missing either are left
    out. Efficiency = total / (world_size x per-GPU throughput of the smallest world size).
    """
    usable = sorted(
        (r for r in results if r.get("world_size") and r.get("total_imgs_per_sec")), key=lambda r: r["world_size"]
    )
    if not usable:
        return []
    base = usable[0]
    base_per_gpu = base["total_imgs_per_sec"] / base["world_size"]
    rows = []
    for run in usable:
        ideal = base_per_gpu * run["world_size"]
        rows.append(
            {
                "world_size": run["world_size"],
                "total_imgs_per_sec": run["total_imgs_per_sec"],
                "per_gpu": round(run["total_imgs_per_sec"] / run["world_size"], 2),
                "speedup": round(run["total_imgs_per_sec"] / base["total_imgs_per_sec"], 2),
                "ideal_imgs_per_sec": round(ideal, 2),
                "efficiency": round(run["total_imgs_per_sec"] / ideal, 4),
            }
        )
    return rows


def reference_per_gpu(sku: str, world_size: int) -> dict | None:
    """Per-GPU reference for ``sku`` at ``world_size``: the largest reference count not above it, else the
    smallest count (per-GPU throughput only falls as jobs grow, so this never asks for more than measured)."""
    reference = REFERENCES.get(sku)
    if not reference or not world_size:
        return None
    counts = sorted(reference["totals"])
    below = [count for count in counts if count <= world_size]
    count = below[-1] if below else counts[0]
    return {
        "sku": sku,
        "reference_gpus": count,
        "per_gpu": round(reference["totals"][count] / count, 2),
        "source": reference["source"],
    }


def judge_resnet50(result: dict, expect: dict | None = None) -> list[dict]:
    """Checks of one parsed run.

    ``expect`` keys (all optional):
      sku                 GPU product name, looks up REFERENCES (``Tesla V100-SXM2-16GB``, ``GRID T4-16C``);
                          they are fp16 (mixed-precision) figures, so an fp32 run is not judged against them;
      min_per_gpu         per-GPU images/sec floor; overrides the SKU reference;
      ratio (0.9)         fraction of the reference that is ok; below it is a warning ...
      fail_ratio (0.75)   ... and below this a failure;
      world_size          expected number of ranks (a smaller job is a failure).
    A NaN loss is a failure whatever the throughput. A value of the wrong type or an unknown key raises
    OptionError (see EXPECT).
    """
    expect = EXPECT("expect", expect or {})
    checks = []
    world = result.get("world_size")
    if expect.get("world_size") is not None:
        status = PASS if world == expect["world_size"] else FAIL
        checks.append(
            bench_check(
                "world_size",
                status,
                world,
                expect["world_size"],
                "" if status == PASS else "not every rank joined: check the launcher hostfile/slots and GPU count",
            )
        )
    loss = result.get("loss")
    if loss is not None and math.isnan(loss):
        checks.append(
            bench_check("loss", FAIL, "nan", "finite", "training diverged: check precision (fp16 needs loss scaling)")
        )
    floor, source = expect.get("min_per_gpu"), "min_per_gpu"
    if floor is None and expect.get("sku") and result.get("precision") != "fp32":
        reference = reference_per_gpu(expect["sku"], world or 1)
        if reference:
            floor, source = reference["per_gpu"], reference["source"]
        else:
            checks.append(
                bench_check("per_gpu_throughput", WARN, result.get("per_gpu"), f"reference for {expect['sku']}", "")
            )
    if floor is not None:
        observed = result.get("per_gpu")
        ratio, fail_ratio = expect.get("ratio", 0.9), expect.get("fail_ratio", 0.75)
        if observed is None or observed < floor * fail_ratio:
            status = FAIL
        elif observed < floor * ratio:
            status = WARN
        else:
            status = PASS
        checks.append(
            bench_check(
                "per_gpu_throughput",
                status,
                observed,
                f">= {round(floor * ratio, 2)} img/s per GPU ({ratio:g} x {floor} from {source})",
                ""
                if status == PASS
                else "check GPU clocks and throttling (nvidia-smi -q -d PERFORMANCE), precision (fp16/bf16 with "
                "channels_last), and for multi-node runs the NCCL transport (nccl_tests with mode ib_gdr)",
            )
        )
    return checks


def judge_scaling(rows: list[dict], min_efficiency: float = 0.9, warn_margin: float = 0.1) -> list[dict]:
    """One check per run of a sweep (rows from scaling_efficiency) except the baseline.

    ok at ``min_efficiency`` or better, warn within ``warn_margin`` below it, fail lower. IBM Redpaper REDP-5610 scales
    8 -> 16 V100 at 0.97 over EDR IB; the VMware vGPU/PVRDMA paper over TCP reaches 0.40 at 4 vGPUs (0.75 over RDMA).
    """
    checks = []
    for row in rows[1:]:
        efficiency = row["efficiency"]
        if efficiency >= min_efficiency:
            status = PASS
        elif efficiency >= min_efficiency - warn_margin:
            status = WARN
        else:
            status = FAIL
        checks.append(
            bench_check(
                f"scaling_efficiency_{row['world_size']}",
                status,
                efficiency,
                f">= {min_efficiency:g}",
                ""
                if status == PASS
                else "scaling falls short of linear: run nccl_tests across the same hosts; TCP instead of RDMA "
                "(NCCL_IB_DISABLE, missing HCAs in the pods) is the usual cause (VMware vGPU/PVRDMA paper)",
            )
        )
    return checks


def precision_comparison(runs: list[dict]) -> list[dict]:
    """Mixed precision against FP32 at each GPU count where both ran: ``runs`` are the module's runs
    (``precision``, ``gpus``, ``images_per_second``); one row per other precision and count.

    Dell EMC Ready Solutions for AI (section 3.1.1, Figure 5) ran ResNet-50 in FP16 (mixed precision, batch doubled) and
    FP32 on up to two PowerEdge C4140 and found FP16 65 % to 91 % faster.
    """
    fp32 = {run["gpus"]: run.get("images_per_second") for run in runs if run.get("precision") == "fp32"}
    rows = []
    for run in runs:
        baseline = fp32.get(run["gpus"])
        value = run.get("images_per_second")
        if run.get("precision") == "fp32" or not baseline or not value:
            continue
        rows.append(
            {
                "gpus": run["gpus"],
                "baseline": "fp32",
                "precision": run["precision"],
                "baseline_images_per_second": baseline,
                "images_per_second": value,
                "speedup": round(value / baseline, 3),
            }
        )
    return rows


def judge_precision_comparison(rows: list[dict], min_speedup: float | None = None) -> list[dict]:
    """One check per comparison row when the site sets ``min_speedup`` (mixed precision / FP32); none
    otherwise (the comparison is reported, not judged: gpuforge ships no speedup figure of its own)."""
    if min_speedup is None:
        return []
    checks = []
    for row in rows:
        status = PASS if row["speedup"] >= min_speedup else FAIL
        checks.append(
            {
                **bench_check(
                    f"precision_speedup_{row['gpus']}",
                    status,
                    row["speedup"],
                    f">= {min_speedup:g} x fp32 (min_amp_speedup)",
                    ""
                    if status == PASS
                    else "mixed precision is not faster enough than FP32: check that the GPU has tensor cores, that "
                    "autocast ran in 16 bits (the run's precision field) and channels_last",
                ),
                "gpus": row["gpus"],
                "precision": row["precision"],
            }
        )
    return checks
