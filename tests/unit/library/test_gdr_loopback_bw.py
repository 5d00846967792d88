"""gdr_loopback_bw module: option handling and the run flow with a stand-in run_command (server started first,
client against the node itself, both from GPU memory under timeout), then the real flow against the lab's
simulated ib_write_bw on a booted SimNode (server and client as real processes meeting over 127.0.0.1)."""

from __future__ import annotations

import contextlib
import io
import platform
import sys
import threading
from pathlib import Path

import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_kernel as kernel
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_gdr import (
    check_thresholds,
    plan_ports,
    threshold_for,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_node_health import judge_node
from ansible_collections.gpuforge.cluster.plugins.modules import gdr_loopback_bw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from gdr_sim_helpers import lab_args, run_module
from node_sim_helpers import SimNode, expected_for

ROOT = Path(__file__).resolve().parents[3]
HARDWARE = yaml.safe_load((ROOT / "roles/gpuforge/defaults/main/expected_hardware.yml").read_text(encoding="utf-8"))
SYSTEMS = HARDWARE["gpuforge_expected_systems"]
SPEEDS = HARDWARE["gpuforge_expected_link_speeds"]
PATHS = {"ib_write_bw": "/usr/bin/ib_write_bw", "timeout": "/usr/bin/timeout", "numactl": "/usr/bin/numactl"}
BASE = {"system": SYSTEMS["dgx1-v100-edr"], "link_speeds": SPEEDS, "thresholds": {"EDR": {"min_mib_per_s": 11000}}}
MR_FAILURE = "Couldn't allocate MR\nfailed to create mr\nFailed to create MR\n Couldn't create IB resources\n"


class Perftest:
    """run_command stand-in: the server answers `server` (rc, out, err), the client `client`; records the calls."""

    def __init__(self, client, server=(0, "", "")):
        self.client, self.server = client, server
        self.calls, self.lock = [], threading.Lock()

    def __call__(self, argv, **kwargs):
        with self.lock:
            self.calls.append((list(argv), kwargs))
        return self.client if argv[-1] == "127.0.0.1" else self.server


def test_each_port_runs_a_server_then_a_client_from_its_numa_local_gpu(ansible_module, fixture_text):
    seed = fixture_text("ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt")  # 11264.11 MB/sec
    perftest = Perftest((0, seed, ""))
    result = ansible_module(gdr_loopback_bw, BASE, perftest, bin_path=PATHS.get)
    assert (result["ran"], result["healthy"], result["check"]["status"]) == (True, True, "PASS")
    assert result["check"]["name"] == "gdr_ib_write_bw"
    assert len(perftest.calls) == 8  # four InfiniBand ports, server and client each, one port after another
    servers = [argv for argv, _kw in perftest.calls if argv[-1] != "127.0.0.1"]
    clients = [argv for argv, _kw in perftest.calls if argv[-1] == "127.0.0.1"]
    assert servers[0] == [
        "/usr/bin/timeout",
        "--kill-after=30",
        "135",  # timeout + startup_timeout: the server waits for its client
        "/usr/bin/numactl",
        "-N",
        "0",
        "-m",
        "0",
        "/usr/bin/ib_write_bw",
        "-d",
        "mlx5_0",
        "-i",
        "1",
        "-p",
        "18510",
        "-s",
        "8388608",
        "-n",
        "5000",
        "-F",
        "--report_gbits",
        "--use_cuda=0",
    ]
    assert clients[0][:3] == ["/usr/bin/timeout", "--kill-after=30", "120"]
    assert clients[0][3:] == [*servers[0][3:], "127.0.0.1"]
    # mlx5_2 sits on NUMA node 1 with GPUs 4-7; each HCA its own TCP port
    assert servers[2][3:9] == ["/usr/bin/numactl", "-N", "1", "-m", "1", "/usr/bin/ib_write_bw"]
    assert servers[2][-1] == "--use_cuda=4" and servers[2][servers[2].index("-p") + 1] == "18512"
    for _argv, kwargs in perftest.calls:
        assert kwargs["environ_update"] == {"LC_ALL": "C", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert result["check"]["observed"]["ports"]["mlx5_3/1"]["mib_per_s"] == 11264.11


def test_options_reach_the_command_line(ansible_module, fixture_text):
    perftest = Perftest((0, fixture_text("ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt"), ""))
    args = {
        **BASE,
        "system": SYSTEMS["supermicro-4029gp-v100"],
        "extra_ports": ["mlx5_1/1"],
        "duration": 10,
        "dmabuf": True,
        "warm_up": True,
        "gid_index": 3,
        "numactl": False,
        "tcp_port": 20000,
    }
    result = ansible_module(gdr_loopback_bw, args, perftest, bin_path=PATHS.get)
    client = result["cmds"]["mlx5_1/1"]["client"]
    assert client == [
        "/usr/bin/ib_write_bw",
        "-d",
        "mlx5_1",
        "-i",
        "1",
        "-p",
        "20000",
        "-s",
        "8388608",
        "-D",
        "10",
        "-F",
        "--report_gbits",
        "--use_cuda=0",  # the only port measured: the first GPU of its NUMA node (no topology given)
        "--use_cuda_dmabuf",
        "-x",
        "3",  # an Ethernet (RoCE) port takes the GID index
        "--perform_warm_up",
        "127.0.0.1",
    ]
    # 25 GbE has no entry in the table: 0.9 of the line rate
    assert result["check"]["expected"] == {"mlx5_1/1": ">= 22.5 Gb/s (0.9 of the 25 Gb/s line rate)"}


def test_a_server_that_cannot_register_gpu_memory_ends_the_port_before_the_client(ansible_module):
    perftest = Perftest((0, "", ""), server=(1, "initializing CUDA\n", MR_FAILURE))
    result = ansible_module(gdr_loopback_bw, BASE, perftest, bin_path=PATHS.get)
    assert [argv[-1] for argv, _kw in perftest.calls] == [
        "--use_cuda=0",
        "--use_cuda=1",
        "--use_cuda=4",
        "--use_cuda=5",
    ]
    check = result["check"]
    assert (result["healthy"], check["status"], check["caused_by"]) == (False, "FAIL", None)
    assert check["observed"]["errors"] == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]
    assert "GPU memory could not be registered for RDMA: Couldn't allocate MR" in check["fault"]
    assert "modprobe nvidia-peermem" in check["remedy"] and "dmabuf: true" in check["remedy"]


def test_a_slow_port_fails_with_its_gpu_bus_id(ansible_module, fixture_text):
    gpus = [{"index": i, "bus_id": f"00000000:{b}:00.0", "nics": {}} for i, b in enumerate(["06", "07", "0A", "0B"])]
    args = {
        **BASE,
        "system": SYSTEMS["poweredge-c4140-v100"],
        "gpus": gpus,
        "thresholds": {"EDR": {"min_mib_per_s": 11500}},
    }
    perftest = Perftest((0, fixture_text("ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt"), ""))
    check = ansible_module(gdr_loopback_bw, args, perftest, bin_path=PATHS.get)["check"]
    assert check["status"] == "FAIL" and check["observed"]["low"] == ["mlx5_0/1"]
    assert (
        "mlx5_0/1 (GPU 00000000:06:00.0, NUMA 0): 94.49 Gb/s (11264.11 MiB/s), expected >= 11500 MiB/s"
        in check["fault"]
    )
    assert check["remedy"].startswith("mlx5_0/1 with GPU 00000000:06:00.0: check that nvidia-peermem is loaded")
    for words in ("ACSCtl", "LnkSta", "topo -m", "numactl"):
        assert words in check["remedy"]


def test_check_mode_runs_nothing(ansible_module):
    def run_command(argv, **_kwargs):
        raise AssertionError(f"ran {argv} in check mode")

    result = ansible_module(gdr_loopback_bw, BASE, run_command, check_mode=True, bin_path=PATHS.get)
    assert (result["ran"], result["healthy"], "check" in result) == (False, True, False)
    assert sorted(result["cmds"]) == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]


def test_a_system_without_gpudirect_rdma_is_not_applicable(ansible_module):
    def run_command(argv, **_kwargs):
        raise AssertionError(f"ran {argv}")

    args = {**BASE, "system": SYSTEMS["vsphere-t4-vgpu-roce"]}
    result = ansible_module(gdr_loopback_bw, args, run_command, bin_path=lambda name: None)
    assert (result["applicable"], result["ran"], result["healthy"], "check" in result) == (False, False, True, False)
    assert "peermem: false" in result["reason"]


def test_bad_options_and_a_missing_tool_are_named(ansible_module):
    cases = [
        ({"thresholds": {"EDR": {"min_gbit_per_s": 90, "min_mib_per_s": 1}}}, "thresholds.EDR needs exactly one of"),
        ({"extra_ports": ["mlx5_0/x"]}, "extra_ports[0] must be '<hca>/<port>'"),
        ({"min_fraction": 0}, "min_fraction must be in (0, 1]"),
        ({"iterations": 0}, "iterations must be at least 1"),
        ({"system": {"hcas": "mlx5_0"}}, "system.hcas must be a list"),
    ]
    for override, message in cases:
        result = ansible_module(gdr_loopback_bw, {**BASE, **override}, expect_failure=True, bin_path=PATHS.get)
        assert result["msg"].startswith(message), result["msg"]
    missing = ansible_module(gdr_loopback_bw, BASE, expect_failure=True, bin_path={"timeout": "/usr/bin/timeout"}.get)
    assert missing["msg"].startswith(
        f"ib_write_bw not found in PATH on {platform.node()}: install perftest built with CUDA"
    )


# --- The real flow against the lab's simulated ib_write_bw -------------------------------------------------------


def node_checks(node, profile):
    smi = node.nvidia_smi_facts(samples=0)
    with contextlib.redirect_stdout(io.StringIO()):
        lsmod = kernel.parse_lsmod(node.lsmod())
    return smi, judge_node(smi, node.infiniband_facts(), lsmod, [], expected_for(profile))["records"]


def test_healthy_h100_passes_on_all_eight_ndr_ports(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr")
    smi, checks = node_checks(node, "dgx-h100-ndr")
    args = lab_args("dgx-h100-ndr")
    result = run_module(monkeypatch, tmp_path, {**args, "gpus": smi["gpus"], "node_checks": checks})
    check = result["check"]
    assert (result["ran"], check["status"]) == (True, "PASS"), check["fault"]
    ports = check["observed"]["ports"]
    assert sorted(ports) == [f"mlx5_{i}/1" for i in range(8)]
    assert ports["mlx5_5/1"]["bus_id"] == "00000000:C3:00.0" and ports["mlx5_5/1"]["topo"] == "PIX"
    # Lab TCP loopback, capped at NDR's 400 Gb/s; its floor is the lab inventory's threshold (a loaded 2-core CI
    # machine measured under 1 Gb/s), not a speed this machine happens to reach.
    floor_gbit_per_s = args["thresholds"]["NDR"]["min_gbit_per_s"]
    assert all(floor_gbit_per_s <= p["gbit_per_s"] <= 400 for p in ports.values()), ports


def test_gdr_slow_fails_its_port_as_the_root_cause(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "gdr_slow", "hca": "mlx5_3", "fraction": 0.0002}])
    smi, checks = node_checks(node, "dgx1-v100-edr")
    result = run_module(
        monkeypatch, tmp_path, {**lab_args("dgx1-v100-edr"), "gpus": smi["gpus"], "node_checks": checks}
    )
    check = result["check"]
    assert (check["status"], check["caused_by"], check["observed"]["low"]) == ("FAIL", None, ["mlx5_3/1"])
    assert check["observed"]["ports"]["mlx5_3/1"]["gbit_per_s"] <= 0.02  # 0.0002 of EDR's 100 Gb/s
    assert "mlx5_3/1 (GPU 00000000:89:00.0, NUMA 1)" in check["fault"]


def test_without_nvidia_peermem_every_port_fails_as_its_consequence(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "peermem_load_failure"}])
    smi, checks = node_checks(node, "dgx1-v100-edr")
    args = {**lab_args("dgx1-v100-edr"), "gpus": smi["gpus"], "node_checks": checks}
    check = run_module(monkeypatch, tmp_path, args)["check"]
    assert (check["status"], check["caused_by"]) == ("FAIL", "peermem_loaded")
    assert {p["error_kind"] for p in check["observed"]["ports"].values()} == {"gpu_memory"}
    # dma-buf needs no peer-memory module
    dmabuf = run_module(monkeypatch, tmp_path, {**args, "dmabuf": True})["check"]
    assert dmabuf["status"] == "PASS", dmabuf["fault"]


def test_gdr_unavailable_and_a_missing_hca(tmp_path, monkeypatch):
    faults = [{"type": "gdr_unavailable", "hca": "mlx5_6"}, {"type": "hca_missing", "hca": "mlx5_2"}]
    node = SimNode(tmp_path, monkeypatch, "dgx-h100-ndr", faults)
    smi, checks = node_checks(node, "dgx-h100-ndr")
    args = {**lab_args("dgx-h100-ndr"), "gpus": smi["gpus"], "node_checks": checks}
    check = run_module(monkeypatch, tmp_path, args)["check"]
    ports = check["observed"]["ports"]
    assert check["observed"]["errors"] == ["mlx5_2/1", "mlx5_6/1"]
    assert (ports["mlx5_2/1"]["error_kind"], ports["mlx5_6/1"]["error_kind"]) == ("no_device", "gpu_memory")
    assert check["caused_by"] is None  # mlx5_6 is not explained by a node check
    only_missing = run_module(monkeypatch, tmp_path, {**args, "system": _without(SYSTEMS["dgx-h100-ndr"], "mlx5_6")})
    assert only_missing["check"]["caused_by"] == "hcas_present"


def _without(system, hca):
    return {**system, "hcas": [h for h in system["hcas"] if h["name"] != hca]}


def test_the_shipped_tables_are_valid_for_the_check():
    acceptance = yaml.safe_load(
        (ROOT / "roles/gpuforge/defaults/main/acceptance_checks.yml").read_text(encoding="utf-8")
    )
    table = check_thresholds(acceptance["gpuforge_expected_ib_write_bw"])
    assert threshold_for("EDR", 100, table, 0.9)["unit"] == "MiB/s"  # IBM REDP-5610's 11,000 MB/sec
    assert threshold_for("NDR", 400, table, 0.9)["min"] == 380.0  # Azure's H100 loopback threshold
    planned = {name: plan_ports(system, SPEEDS) for name, system in SYSTEMS.items()}
    assert {name for name, plan in planned.items() if plan["applicable"]} == {
        "dgx1-v100-edr",
        "poweredge-c4140-v100",
        "dgx-h100-ndr",
    }
    assert all(plan["unplanned"] == [] for plan in planned.values())
