"""The lab's ib_write_bw from GPU memory (--use_cuda): the gdr_slow and gdr_unavailable faults, the peer-memory
module it needs, and a loopback (server and client of one node on one HCA port) as the GPUDirect RDMA check runs it."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_perftest import parse_perftest_bw
from gpuforge_sim import ib_write_bw
from ib_sim_helpers import free_port, loopback

from gpuforge.lab.profiles import hardware_document, load_profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from node_sim_helpers import SimNode

DGX1 = "dgx1-v100-edr"
# perftest's lines when ibv_reg_mr refuses the GPU buffer (linux-rdma/perftest issue #31).
MR_LINES = "Couldn't allocate MR\nfailed to create mr\nFailed to create MR\n Couldn't create IB resources\n"

GPU_RUN = ["-s", "8388608", "-n", "20", "--report_gbits"]


def test_gdr_slow_caps_gpu_memory_runs_of_its_hca_only(tmp_path, monkeypatch):
    SimNode(tmp_path, monkeypatch, DGX1, [{"type": "gdr_slow", "hca": "mlx5_1", "fraction": 0.0002}])
    server, client = loopback("mlx5_1", [*GPU_RUN, "--use_cuda=2"])
    assert (server.returncode, client.returncode) == (0, 0), server.stderr + client.stderr
    slow = parse_perftest_bw(client.stdout)
    assert slow["bw_average_gbit_per_s"] <= 0.02  # 0.0002 of EDR's 100 Gb/s
    assert parse_perftest_bw(server.stdout)["bw_average_gbit_per_s"] == slow["bw_average_gbit_per_s"]
    assert "Picking device No. 2" in client.stdout
    # the same HCA from host memory, and another HCA from GPU memory, keep the TCP rate (far above 0.02 Gb/s)
    host = parse_perftest_bw(loopback("mlx5_1", GPU_RUN)[1].stdout)
    other = parse_perftest_bw(loopback("mlx5_0", [*GPU_RUN, "--use_cuda=0"])[1].stdout)
    assert host["bw_average_gbit_per_s"] > 0.02 and other["bw_average_gbit_per_s"] > 0.02


def test_gdr_unavailable_fails_like_perftest_on_both_ends(tmp_path, monkeypatch, capsys):
    SimNode(tmp_path, monkeypatch, DGX1, [{"type": "gdr_unavailable", "hca": "mlx5_0"}])
    run = ["-d", "mlx5_0", "-s", "8388608", "--use_cuda=1"]
    for argv in (run, [*run, "127.0.0.1"]):
        rc = ib_write_bw.main(argv)
        captured = capsys.readouterr()
        assert rc == 1
        assert captured.err == MR_LINES
        assert "making it the current CUDA Ctx\ncuMemAlloc() of a 16777216 bytes GPU buffer\n" in captured.out
        assert "Waiting for client" not in captured.out
    # another HCA registers GPU memory: its server waits for a client
    monkeypatch.setenv("GPUFORGE_LAB_PERFTEST_TIMEOUT", "0.2")
    assert ib_write_bw.main(["-d", "mlx5_1", "-p", str(free_port()), "--use_cuda=2"]) == 1
    assert "Waiting for client to connect" in capsys.readouterr().out


def test_without_a_peer_memory_module_only_dma_buf_registers_gpu_memory(tmp_path, monkeypatch, capsys):
    node = SimNode(tmp_path, monkeypatch, DGX1)
    with contextlib.redirect_stderr(io.StringIO()):
        assert node.kernel.modprobe_main(["-r", "nvidia-peermem"]) == 0
    assert ib_write_bw.main(["-d", "mlx5_0", "--use_cuda=0", "127.0.0.1"]) == 1
    assert capsys.readouterr().err == MR_LINES
    server, client = loopback("mlx5_0", [*GPU_RUN, "--use_cuda=0", "--use_cuda_dmabuf"])
    assert (server.returncode, client.returncode) == (0, 0), client.stderr
    # host memory needs no peer-memory module
    assert loopback("mlx5_0", GPU_RUN)[1].returncode == 0


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"type": "gdr_slow", "hca": "mlx5_0", "fraction": 1.5}, "faults[0].fraction: must be a number in (0, 1)"),
        ({"type": "gdr_slow", "hca": "mlx5_9", "fraction": 0.5}, "faults[0].hca: no HCA 'mlx5_9'"),
        ({"type": "gdr_slow", "fraction": 0.5}, "gdr_slow needs hca"),
        ({"type": "gdr_unavailable", "gpu": 0}, "gdr_unavailable does not take gpu"),
    ],
)
def test_profile_validation_of_the_gdr_faults(fault, message):
    with pytest.raises(ValueError) as info:
        hardware_document(load_profile(DGX1), [fault])
    assert message in str(info.value)
