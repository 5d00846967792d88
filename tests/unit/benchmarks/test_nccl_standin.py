"""The lab's all_reduce_perf stand-in: runs it under mpirun and reads its output with the real parser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nccl_tests import parse_nccl_tests
from hang_guard import HANG_GUARD_S

STANDIN = Path(__file__).resolve().parents[3] / "benchmarks" / "nccl_standin" / "all_reduce_perf.py"
DEBIAN_PYTHON = "/usr/bin/python3"


def _debian_python_has(*modules: str) -> bool:
    if not os.access(DEBIAN_PYTHON, os.X_OK):
        return False
    probe = subprocess.run([DEBIAN_PYTHON, "-c", f"import {', '.join(modules)}"], capture_output=True, check=False)
    return probe.returncode == 0


HAS_NUMPY = _debian_python_has("numpy")
HAS_MPI = bool(shutil.which("mpirun")) and _debian_python_has("numpy", "mpi4py")
needs_numpy = pytest.mark.skipif(not HAS_NUMPY, reason="Debian python3-numpy not installed")
needs_mpi = pytest.mark.skipif(
    not HAS_MPI, reason="mpirun or python3-mpi4py/python3-numpy absent (apt-get install openmpi-bin python3-mpi4py)"
)


def _clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "OMPI_", "PMIX_"))}
    env.update(extra)
    return env


def _mpirun(np_: int, args: list[str], **env: str) -> subprocess.CompletedProcess:
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np_)]
    for name in env:
        argv += ["-x", name]
    argv += [DEBIAN_PYTHON, str(STANDIN), *args]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=HANG_GUARD_S, env=_clean_env(**env), check=False
    )


def _single(args: list[str], **env: str) -> subprocess.CompletedProcess:
    argv = [DEBIAN_PYTHON, str(STANDIN), *args]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=HANG_GUARD_S, env=_clean_env(**env), check=False
    )


def _busbw_cells(result: dict) -> list[tuple[float, float]]:
    return [(run["algbw"], run["busbw"]) for row in result["rows"] for run in (row["out_of_place"], row["in_place"])]


@needs_mpi
def test_two_processes_parse_as_2022_format():
    run = _mpirun(2, ["-b", "8", "-e", "1M", "-f", "4"])
    assert run.returncode == 0, run.stderr
    result = parse_nccl_tests(run.stdout)
    assert result["era"] == "2022+"
    assert result["errors"] == []
    assert result["complete"] is True
    assert result["header"]["nGpus"] == 1
    assert result["header"]["minBytes"] == 8
    assert result["header"]["maxBytes"] == 1048576
    assert result["header"]["step"] == 4
    assert result["header"]["iters"] == 20
    assert [row["size"] for row in result["rows"]] == [8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288]
    assert [row["count"] for row in result["rows"]][:3] == [2, 8, 32]
    assert {(row["type"], row["redop"], row["root"]) for row in result["rows"]} == {("float", "sum", -1)}
    assert [device["rank"] for device in result["devices"]] == [0, 1]
    assert result["wrong_total"] == 0
    assert result["out_of_bounds"] == 0
    assert result["out_of_bounds_ok"] is True
    # Two ranks: busbw = algbw x 2(n-1)/n = algbw.
    assert all(busbw == algbw for algbw, busbw in _busbw_cells(result))
    cells = [busbw for _algbw, busbw in _busbw_cells(result)]
    assert abs(result["avg_busbw"] - sum(cells) / len(cells)) < 0.01
    assert result["transport"]["info_lines"] == 0  # no NCCL_DEBUG, no INFO lines


@needs_mpi
def test_info_lines_say_socket_and_would_use_ib(tmp_path):
    hardware = tmp_path / "hardware.json"
    hardware.write_text(
        json.dumps(
            {
                "hcas": [
                    {"name": "mlx5_0", "ports": [{"port": 1, "link_layer": "InfiniBand", "state": "Active"}]},
                    {"name": "mlx5_1", "ports": [{"port": 1, "link_layer": "Ethernet", "state": "Down"}]},
                ]
            }
        )
    )
    run = _mpirun(
        2,
        ["-b", "1K", "-e", "4K", "-f", "2", "-g", "2"],
        NCCL_DEBUG="INFO",
        NCCL_IB_DISABLE="0",
        NCCL_NET_GDR_LEVEL="PHB",
        GPUFORGE_LAB_HARDWARE_JSON=str(hardware),
    )
    assert run.returncode == 0, run.stderr
    result = parse_nccl_tests(run.stdout)
    assert result["transport"]["net"] == "Socket"
    assert result["transport"]["mode"] == "tcp"
    assert result["transport"]["paths"] == ["NET/Socket"]
    assert result["transport"]["ib_devices"] == []
    assert len(result["devices"]) == 4
    assert result["header"]["nGpus"] == 2
    assert [row["size"] for row in result["rows"]] == [1024, 2048, 4096]
    assert result["wrong_total"] == 0
    assert run.stdout.count("real NCCL would pick NET/IB [0]mlx5_0:1/IB with GPUDirect RDMA") == 2
    # Four ranks: busbw = algbw x 1.5, within the two-decimal rounding of the printed cells.
    assert all(abs(busbw - algbw * 1.5) <= 0.02 for algbw, busbw in _busbw_cells(result))


@needs_mpi
def test_ib_disabled_says_tcp():
    run = _mpirun(2, ["-b", "64", "-e", "64"], NCCL_DEBUG="INFO", NCCL_IB_DISABLE="1")
    assert run.returncode == 0, run.stderr
    assert "NCCL_IB_DISABLE=1 NCCL_NET_GDR_LEVEL=unset: real NCCL would pick the socket transport (TCP)" in run.stdout
    assert parse_nccl_tests(run.stdout)["transport"]["mode"] == "tcp"


@needs_numpy
def test_single_process_without_mpirun_checks_other_types():
    run = _single(["-b", "8", "-e", "64", "-f", "2", "-d", "int32", "-o", "max", "-n", "2", "-w", "1"])
    assert run.returncode == 0, run.stderr
    result = parse_nccl_tests(run.stdout)
    assert [(row["size"], row["count"], row["type"], row["redop"]) for row in result["rows"]] == [
        (8, 2, "int32", "max"),
        (16, 4, "int32", "max"),
        (32, 8, "int32", "max"),
        (64, 16, "int32", "max"),
    ]
    assert result["wrong_total"] == 0
    assert result["header"]["warmup_iters"] == 1
    # One rank: no bus traffic at all.
    assert {busbw for _algbw, busbw in _busbw_cells(result)} == {0.0}


@needs_numpy
def test_no_check_prints_na_and_step_bytes():
    run = _single(["-b", "1K", "-e", "3K", "-i", "1K", "-c", "0", "-n", "1", "-w", "0"])
    assert run.returncode == 0, run.stderr
    result = parse_nccl_tests(run.stdout)
    assert "step: 1024(bytes)" in run.stdout
    assert [row["size"] for row in result["rows"]] == [1024, 2048, 3072]
    assert result["rows"][0]["out_of_place"]["wrong"] is None
    # -c 0: nothing was checked, so there is no count of wrong values (not zero of them).
    assert result["wrong_total"] is None
    assert result["correctness"]["verdict"] == "unchecked"
    assert result["header"]["validation"] == 0


def _fake_nvidia_smi(directory: Path, gpus: int) -> dict:
    script = directory / "nvidia-smi"
    lines_l = "\\n".join(f"GPU {i}: Tesla V100-SXM2-16GB (UUID: GPU-{i})" for i in range(gpus))
    lines_bus = "\\n".join(f"00000000:0{6 + i}:00.0" for i in range(gpus))
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = "-L" ]; then printf "{lines_l}\\n"; else printf "{lines_bus}\\n"; fi\n',
        encoding="ascii",
    )
    script.chmod(0o755)
    return {"PATH": f"{directory}:{os.environ['PATH']}"}


@needs_numpy
def test_gpu_names_from_nvidia_smi(tmp_path):
    run = _single(["-b", "8", "-e", "8", "-g", "2", "-n", "1"], **_fake_nvidia_smi(tmp_path, 2))
    assert run.returncode == 0, run.stderr
    devices = parse_nccl_tests(run.stdout)["devices"]
    assert [(d["device"], d["bus_id"], d["name"]) for d in devices] == [
        (0, "0x06", "Tesla V100-SXM2-16GB"),
        (1, "0x07", "Tesla V100-SXM2-16GB"),
    ]


@needs_numpy
def test_fewer_gpus_than_requested_fails(tmp_path):
    run = _single(["-b", "8", "-e", "8", "-g", "2"], **_fake_nvidia_smi(tmp_path, 1))
    assert run.returncode == 2
    assert "Test CUDA failure all_reduce_perf.py 'invalid device ordinal'" in run.stdout
    result = parse_nccl_tests(run.stdout)
    assert result["rows"] == []
    assert len(result["failures"]) == 1
