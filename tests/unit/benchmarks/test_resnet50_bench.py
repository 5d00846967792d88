"""ResNet-50 benchmark: the model, launcher detection, and tiny CPU runs (1 process, 2 with torchrun/gloo)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_resnet50 import parse_resnet50
from hang_guard import HANG_GUARD_S

torch = pytest.importorskip("torch", reason="torch not installed in the venv (pip install the CPU wheel)")

BENCH_DIR = Path(__file__).resolve().parents[3] / "benchmarks" / "resnet50"
BENCH = BENCH_DIR / "resnet50_bench.py"
TINY = ["--image-size", "64", "--batch-size", "2", "--steps", "2", "--warmup-steps", "1"]
sys.path.insert(0, str(BENCH_DIR))
import resnet50_bench  # noqa: E402

LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_", "SLURM_")


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARS)}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_model_is_resnet50():
    model = resnet50_bench.ResNet50()
    # The bottleneck ResNet-50 with 1000 classes has 25,557,032 parameters.
    assert sum(p.numel() for p in model.parameters()) == 25_557_032
    assert len(model.blocks) == 16  # 3 + 4 + 6 + 3 bottlenecks
    with torch.no_grad():
        out = model.eval()(torch.zeros(2, 3, 32, 32))
    assert tuple(out.shape) == (2, 1000)


@pytest.fixture
def clean_launch_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith(LAUNCH_VARS):
            monkeypatch.delenv(name)
    return monkeypatch


def test_detect_single(clean_launch_env):
    assert resnet50_bench.detect_launch(None, 29500) == {
        "launcher": "single",
        "rank": 0,
        "world_size": 1,
        "local_rank": 0,
    }


def test_detect_mpirun(clean_launch_env):
    env = clean_launch_env
    env.setenv("OMPI_COMM_WORLD_RANK", "3")
    env.setenv("OMPI_COMM_WORLD_SIZE", "16")
    env.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3")
    with pytest.raises(SystemExit, match="launched by mpirun with 16 ranks: set MASTER_ADDR"):
        resnet50_bench.detect_launch(None, 29500)
    info = resnet50_bench.detect_launch("node1", 29555)
    assert info == {"launcher": "mpirun", "rank": 3, "world_size": 16, "local_rank": 3}
    assert [os.environ[k] for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")] == [
        "node1",
        "29555",
        "3",
        "16",
        "3",
    ]


def test_detect_srun_uses_launch_node(clean_launch_env):
    env = clean_launch_env
    env.setenv("SLURM_PROCID", "9")
    env.setenv("SLURM_NTASKS", "16")
    env.setenv("SLURM_LOCALID", "1")
    env.setenv("SLURM_LAUNCH_NODE_IPADDR", "10.0.0.7")
    env.setenv("PATH", "/nonexistent")  # no scontrol: falls back to the launch node address
    info = resnet50_bench.detect_launch(None, 29500)
    assert info == {"launcher": "srun", "rank": 9, "world_size": 16, "local_rank": 1}
    assert os.environ["MASTER_ADDR"] == "10.0.0.7"
    assert os.environ["RANK"] == "9"


def test_detect_torchrun(clean_launch_env):
    env = clean_launch_env
    for name, value in {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h"}.items():
        env.setenv(name, value)
    assert resnet50_bench.detect_launch(None, 29500)["launcher"] == "torchrun"


def test_fp16_needs_gpu():
    args = resnet50_bench.build_parser().parse_args(["--device", "cpu", "--precision", "fp16"])
    with pytest.raises(SystemExit, match="fp16 needs a GPU"):
        resnet50_bench.choose(args, {"local_rank": 0})
    args = resnet50_bench.build_parser().parse_args(["--device", "cpu"])
    assert resnet50_bench.choose(args, {"local_rank": 0}) == (torch.device("cpu"), "fp32", "gloo")


def test_amp_is_bf16_autocast_on_cpu_and_auto_is_fp32_there():
    parser = resnet50_bench.build_parser()
    amp = parser.parse_args(["--device", "cpu", "--precision", "amp"])
    assert resnet50_bench.choose(amp, {"local_rank": 0}) == (torch.device("cpu"), "bf16", "gloo")
    auto = parser.parse_args(["--device", "cpu"])
    assert resnet50_bench.choose(auto, {"local_rank": 0}) == (torch.device("cpu"), "fp32", "gloo")


@pytest.mark.slow
def test_single_process_amp_cpu_run():
    # A subprocess: Ansible's module tests patch sys.intern in this process, which torch's autocast
    # (dynamo) refuses.
    run = subprocess.run(
        [sys.executable, str(BENCH), *TINY, "--precision", "amp"],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env=_env(),
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = parse_resnet50(run.stdout)
    assert (result["world_size"], result["batch_size"], result["image_size"], result["steps"]) == (1, 2, 64, 2)
    assert (result["device"], result["precision"], result["backend"], result["launcher"]) == (
        "cpu",
        "bf16",
        "none",
        "single",
    )
    assert result["requested_precision"] == "amp"
    assert result["total_imgs_per_sec"] > 0
    assert result["per_gpu"] == result["total_imgs_per_sec"]
    assert [rank["rank"] for rank in result["ranks"]] == [0]
    assert result["errors"] == []


@pytest.mark.slow
def test_two_processes_torchrun_gloo():
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun not next to the venv python")
    argv = [str(torchrun), "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={_free_port()}"]
    run = subprocess.run(
        [*argv, str(BENCH), *TINY], capture_output=True, text=True, timeout=HANG_GUARD_S, env=_env(), check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = parse_resnet50(run.stdout)
    assert (result["world_size"], result["global_batch_size"]) == (2, 4)
    assert (result["backend"], result["launcher"], result["precision"]) == ("gloo", "torchrun", "fp32")
    assert [(r["rank"], r["local_rank"], r["device"]) for r in result["ranks"]] == [(0, 0, "cpu"), (1, 1, "cpu")]
    assert abs(result["per_gpu"] * 2 - result["total_imgs_per_sec"]) <= 0.02
    # The total is paced by the slowest rank, so it never exceeds the sum of the per-rank rates.
    assert result["total_imgs_per_sec"] <= sum(r["imgs_per_sec"] for r in result["ranks"]) + 0.02
    assert result["errors"] == []
