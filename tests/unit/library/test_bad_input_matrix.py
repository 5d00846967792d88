"""Bad input never crashes a module and never passes silently: every module of library/ against malformed
free-form options, empty, truncated, binary and 10 MB tool output, a missing tool, and check mode.

Case ids are ``module/family``. The harness (conftest.py) turns fail_json and exit_json into exceptions and
pytest.raises catches only those two, so a TypeError or AttributeError escaping a module fails its case with
the traceback. On top of that each case asserts what it ended in: fail_json with a message that names the
option path or the tool, or exit_json with a clean result (that Ansible could serialise).
"""

from __future__ import annotations

import functools
import json
import platform
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.warnings import get_warning_messages
from ansible_collections.gpuforge.cluster.plugins.modules import (
    apt_archive_components,
    command_reads,
    container_gpu_smoke,
    dcgm_diag,
    fio_benchmark,
    fleet_consistency,
    gdr_loopback_bw,
    gpu_node_check,
    ib_port_counters,
    ib_write_bw,
    infiniband_facts,
    k8s_manifest_validate,
    kernel_module,
    managed_files,
    nccl_tests,
    nvbandwidth,
    nvidia_smi_facts,
    p2p_bandwidth,
    package_closure_guard,
    package_version_floor,
    resnet50_benchmark,
    roce_qos,
    selinux_policy_module,
    selinux_relabel,
    slurm_node_state,
    spectrum_scale_config,
    spectrum_scale_facts,
    subnet_manager_check,
    systemd_units,
    vendor_apt_repository,
)

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
REAL_OUTPUTS = ROOT.parent / "shared" / "real-outputs"
EXPECTED_HARDWARE = ROOT / "roles" / "gpuforge" / "defaults" / "main" / "expected_hardware.yml"
HOST = platform.node()
HUGE = 10 * 1024 * 1024  # characters of the 10 MB output
MODULES = {
    module.__name__.rpartition(".")[2]: module
    for module in (
        apt_archive_components,
        command_reads,
        container_gpu_smoke,
        dcgm_diag,
        fio_benchmark,
        fleet_consistency,
        gdr_loopback_bw,
        gpu_node_check,
        ib_port_counters,
        ib_write_bw,
        infiniband_facts,
        k8s_manifest_validate,
        kernel_module,
        managed_files,
        nccl_tests,
        nvbandwidth,
        nvidia_smi_facts,
        p2p_bandwidth,
        package_closure_guard,
        package_version_floor,
        resnet50_benchmark,
        roce_qos,
        selinux_policy_module,
        selinux_relabel,
        slurm_node_state,
        spectrum_scale_config,
        spectrum_scale_facts,
        subnet_manager_check,
        systemd_units,
        vendor_apt_repository,
    )
}


def test_the_matrix_covers_every_module_in_library():
    # A file of library/ that documents an action plugin (action_plugins/<name>.py) runs no module code; the
    # plugin's bad input is tested with it (tests/unit/action_plugins/).
    modules = [
        path.stem for path in (ROOT / "library").glob("*.py") if not (ROOT / "action_plugins" / path.name).is_file()
    ]
    assert sorted(modules) == sorted(MODULES)


# ---------------------------------------------------------------------------------------------------------
# Inputs: real outputs (tests/fixtures, REAL_OUTPUTS of tests/conftest.py) and what becomes of them.


def fixture(relative: str) -> str:
    return (FIXTURES / relative).read_text(encoding="utf-8")


def real(name: str) -> str:
    path = REAL_OUTPUTS / name
    if not path.is_file():
        pytest.skip(f"real output {name} not available ({REAL_OUTPUTS} absent)")
    return path.read_text(encoding="utf-8")


# Synthetic where the repository holds no real capture; shaped as the tools print them.
LSMOD = (
    "Module                  Size  Used by\n"
    "nvidia_peermem         16384  0\n"
    "nvidia_uvm           1523712  0\n"
    "nvidia              56799232  2 nvidia_uvm,nvidia_peermem\n"
    "ib_core               434176  1 nvidia_peermem\n"
)
DMESG = (
    "[    0.000000] Linux version 6.1.0-18-amd64\n"
    "[ 1234.567890] NVRM: Xid (PCI:0000:34:00): 48, pid=1234, name=python, An uncorrectable double bit error\n"
)
IBDEV2NETDEV = "mlx5_0 port 1 ==> ib0 (Up)\n"
NODE_MANIFEST = "apiVersion: v1\nkind: Node\nmetadata:\n  name: dgx01\n  labels: {scale: 'true'}\n"
MMLSCONFIG_Y = (
    "mmlsconfig::HEADER:version:reserved:reserved:configParameter:value:nodeList:\n"
    "mmlsconfig::0:1:::pagepool:1G::\n"
    "mmlsconfig::0:1:::pagepool:128G:dgx:\n"
)


def empty(text: str) -> str:
    return ""


def truncated(text: str) -> str:
    return text[: len(text) // 2]


def garbage(text: str) -> str:
    """64 KiB of seeded random bytes, as run_command hands undecodable output over (surrogateescape)."""
    return random.Random(20240501).randbytes(65536).decode("utf-8", "surrogateescape")


@functools.lru_cache(maxsize=1)
def _filler() -> str:
    line = "gpuforge filler: a line of no tool, repeated until the output is 10 MB long\n"
    return line * (HUGE // len(line) + 1)


def huge(text: str) -> str:
    """The real output followed by noise lines, 10 MB in all (a runaway debug log)."""
    return (text + _filler())[:HUGE]


OUTPUTS = {"empty-output": empty, "truncated-output": truncated, "binary-garbage": garbage, "huge-output": huge}


# ---------------------------------------------------------------------------------------------------------
# Assertions


def assert_no_traceback_and_serialisable(result: dict) -> None:
    json.dumps(result)  # exit_json/fail_json serialise the result; a set or bytes would crash there
    if result.get("failed"):
        assert isinstance(result.get("msg"), str) and result["msg"].strip(), result


def assert_handled(result: dict, names: tuple[str, ...]) -> None:
    """fail_json naming one of names (the tool), or exit_json."""
    assert_no_traceback_and_serialisable(result)
    if result.get("failed"):
        assert any(name in result["msg"] for name in names), f"{result['msg']!r} names none of {names}"


def assert_option_failure(result: dict, path: str, fragment: str = "") -> None:
    assert_no_traceback_and_serialisable(result)
    assert result.get("failed"), f"{path}: the module accepted the value: {result}"
    assert result["msg"].startswith(f"{path} "), result["msg"]
    assert fragment in result["msg"], result["msg"]


def check_by_name(result: dict) -> dict:
    """A benchmark module's checks by name; gpu_node_check's node_check records by check name."""
    if "records" in result:
        return {record["check"]: record for record in result["records"]}
    return {check["name"]: check for check in result["checks"]}


# ---------------------------------------------------------------------------------------------------------
# One runner per module: run(ansible_module, tmp_path, change, args) -> result, where change maps each real
# tool output to the family's output and args override the module's baseline arguments.


class Runner:
    """run_command stand-in: answer(argv) -> (rc, out, err), or an exception to raise; records every call."""

    def __init__(self, answer: Callable):
        self.answer, self.calls = answer, []

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        reply = self.answer(list(argv))
        if isinstance(reply, BaseException):
            raise reply
        return reply


def bins(*names: str, where: str = "/usr/bin") -> Callable:
    paths = {name: f"{where}/{name}" for name in names}
    return paths.get


def expected_spec() -> dict:
    data = yaml.safe_load(EXPECTED_HARDWARE.read_text(encoding="utf-8"))
    system = data["gpuforge_expected_systems"]["dgx1-v100-edr"]
    return {
        **data["gpuforge_expected_gpu_skus"][system["gpu_sku"]],
        **system,
        "link_speeds": data["gpuforge_expected_link_speeds"],
        "driver_branch": "535",
        "retired_pages_max": data["gpuforge_expected_retired_pages_max"],
        "xid_fatal": data["gpuforge_expected_xid_fatal"],
    }


def smi_facts() -> dict:
    gpus = [
        {
            "index": index,
            "product_name": "Tesla V100-SXM2-16GB",
            "persistence_mode": "Enabled",
            "ecc": {"mode_current": "Enabled", "volatile": {"corrected": 0, "uncorrected": 0}},
            "retired_pages": {"single_bit": 0, "double_bit": 0, "pending": False},
            "pcie": {"gen_max": 3, "gen_current": 3, "width_max": 16, "width_current": 16},
            "throttle_reasons": {"hw_slowdown": False, "gpu_idle": True},
            "nvlink": {"active_links": 6},
            "numa_affinity": "0" if index < 4 else "1",
            "nics": {f"mlx5_{n}": ("PIX" if n // 2 == index // 4 else "SYS") for n in range(4)},
        }
        for index in range(8)
    ]
    return {"driver_version": "535.183.01", "errors": [], "gpus": gpus}


def ib_facts() -> dict:
    port = {"port": 1, "state": "Active", "phys_state": "LinkUp", "rate_gbit_per_s": 100, "link_layer": "InfiniBand"}
    return {"errors": [], "hcas": [{"name": f"mlx5_{n}", "ports": [dict(port)]} for n in range(4)]}


def run_gpu_node_check(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    answers = {"lsmod": change(LSMOD), "dmesg": change(DMESG)}
    runner = Runner(answer or (lambda argv: (0, answers[Path(argv[0]).name], "")))
    base = {"nvidia_smi": smi_facts(), "infiniband": ib_facts(), "expected": expected_spec()}
    result = ansible_module(
        gpu_node_check, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths or bins("lsmod", "dmesg")
    )
    return result, runner


def run_nvidia_smi_facts(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    answers = {
        "-q": change(real("nvidia-smi-q-x__netdata-go.d.plugin__a100-sxm4-40gb-mig_drv510.xml")),
        "topo": change(fixture("nvidia-smi/redp5610_dgx1_topo_m_drv440.txt")),
        "nvlink": change(real("nvidia-smi-nvlink-status__leptonai-gpud__a100.txt")),
        # clock event samples: the module's CLOCK_EVENT_FIELDS, one A100 row
        "--query-gpu": change(
            "timestamp, index, pci.bus_id, serial, clocks_event_reasons.hw_slowdown, "
            "clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.hw_power_brake_slowdown\n"
            "2024/01/01 00:00:00.000, 0, 00000000:00:05.0, 1562521001000, Not Active, Not Active, Not Active\n"
        ),
    }
    runner = Runner(answer or (lambda argv: (0, answers[argv[1].split("=", 1)[0]], "")))
    result = ansible_module(
        nvidia_smi_facts,
        {"clock_event_samples": 2, "clock_event_interval_ms": 0, **(args or {})},
        runner,
        None,
        check_mode,
        bin_path=paths or bins("nvidia-smi"),
    )
    return result, runner


def run_infiniband_facts(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    answers = {
        "ibstat": change(real("ibstat__leptonai-gpud__a100_mt4126_mixed_eth_ib.txt")),
        "ibv_devinfo": change(real("ibv_devinfo__deepseek-ai-DeepEP__issue55__mt4126_ib_EXCERPT_one_hca.txt")),
        "ibdev2netdev": change(IBDEV2NETDEV),
    }
    runner = Runner(answer or (lambda argv: (0, answers[Path(argv[0]).name], "")))
    paths = paths or bins("ibstat", "ibv_devinfo", "ibdev2netdev", where="/usr/sbin")
    result = ansible_module(infiniband_facts, dict(args or {}), runner, None, check_mode, bin_path=paths)
    return result, runner


def run_nccl_tests(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\n", encoding="ascii")
    binary.chmod(0o755)
    output = change(fixture("nccl-tests/redp5610_ex4-1_1x8xv100_nvlink_legacy.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {"binary": str(binary), "gpus": 8, "count_gpus": False, "expect": {"min_busbw_gbyte_per_s": 100}}
    result = ansible_module(
        nccl_tests, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths or bins("timeout", "nvidia-smi")
    )
    return result, runner


def run_resnet50_benchmark(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    script = tmp_path / "resnet50_bench.py"
    script.write_text("print()\n", encoding="ascii")
    output = change(fixture("resnet50/tf_redp5610_dgx1_8xv100.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {"script": str(script), "gpu_counts": [8], "expect": {"sku": "Tesla V100-SXM2-16GB"}}
    paths = paths or bins("timeout", "torchrun", "mpirun", "srun")
    result = ansible_module(resnet50_benchmark, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_fio_benchmark(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    output = change(fixture("fio/fio-3.33_ext4_seq_rand_4jobs.json"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {"directory": str(tmp_path), "expect": {"seq_read_mib_per_s": 100}}
    paths = paths or bins("timeout", "fio")
    result = ansible_module(fio_benchmark, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_container_gpu_smoke(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    output = change(fixture("nvidia-smi/stas00_h100_nvlink_e_EXCERPT.txt").splitlines()[0] + "\n")
    runner = Runner(answer or (lambda argv: (0, output, "")))
    gpus = [{"index": 0, "uuid": "GPU-abcdefab-cdef-abdc-abcd-abababababab"}]
    base = {"runtimes": ["podman-cdi"], "image": "nvcr.io/nvidia/cuda@sha256:00", "expected_gpus": gpus}
    paths = paths or bins("timeout", "podman")
    result = ansible_module(container_gpu_smoke, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_p2p_bandwidth(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    binary = tmp_path / "p2pBandwidthLatencyTest"
    binary.write_text("#!/bin/sh\n", encoding="ascii")
    binary.chmod(0o755)
    output = change(fixture("p2p/dellemc_c4140_4xv100_sxm2_cuda91.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {"binary": str(binary), "expect": {"gpus": 4}}
    paths = paths or bins("timeout")
    result = ansible_module(p2p_bandwidth, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_dcgm_diag(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    output = change(fixture("dcgmi/dcgm-4.2.3-r2-gb10-partial-skip.json"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    paths = paths or bins("timeout", "dcgmi")
    result = ansible_module(dcgm_diag, {"level": 2, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_nvbandwidth(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    output = change(fixture("nvbandwidth/v0.10-azure-nhc-2gpu.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {"testcases": ["h2d", "d2h", "p2p"], "thresholds": {"h2d": 21, "d2h": 21, "p2p": 235}}
    paths = paths or bins("timeout", "nvbandwidth")
    result = ansible_module(nvbandwidth, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_ib_write_bw(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    output = change(fixture("ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {"device": "mlx5_1", "server": "dgx01", "line_rate_gbit_per_s": 100}
    paths = paths or bins("timeout", "ib_write_bw")
    result = ansible_module(ib_write_bw, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_kernel_module(ansible_module, tmp_path, change, args=None, check_mode=True, answer=None, paths=None):
    output = change(LSMOD)
    runner = Runner(answer or (lambda argv: (0, output, "") if argv[0].endswith("lsmod") else (0, "", "")))
    base = {
        "name": "nvidia_peermem",
        "persistent": "present",
        "params": "peerdirect_support=1",
        "modules_load_dir": str(tmp_path / "modules-load.d"),
        "modprobe_dir": str(tmp_path / "modprobe.d"),
    }
    paths = paths or bins("lsmod", "modprobe", where="/usr/sbin")
    result = ansible_module(kernel_module, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_slurm_node_state(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    output = change(fixture("slurm/scontrol_show_node_o.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "") if argv[1] == "show" else (0, "", "")))
    base = {"name": "node008", "state": "query"}
    paths = paths or bins("scontrol")
    result = ansible_module(slurm_node_state, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_spectrum_scale_config(ansible_module, tmp_path, change, args=None, check_mode=True, answer=None, paths=None):
    y_text, plain = change(MMLSCONFIG_Y), change(fixture("mmlsconfig/redp5610_dgx_common.txt"))

    def default(argv):
        if argv[0].endswith("mmlsconfig"):
            return (0, y_text, "") if "-Y" in argv else (0, plain, "")
        return 0, "", ""

    runner = Runner(answer or default)
    base = {"settings": {"pagepool": "128G"}, "node_class": "dgx"}
    if "scopes" in (args or {}):  # the several-scope form takes neither (a case adds one back to be refused)
        base = {}
    result = ansible_module(spectrum_scale_config, {**base, **(args or {})}, runner, None, check_mode)
    return result, runner


def run_spectrum_scale_facts(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The spectrum_scale_client role's call: every gather, so each family reaches every parser."""
    (tmp_path / "mmlscluster").write_text("#!/bin/sh\n", encoding="ascii")
    outputs = {
        tool: change(fixture(relative))
        for tool, relative in {
            "mmlscluster": "mmlscluster/redp5610_Y.txt",
            "mmlsnodeclass": "mmlsnodeclass/redp5610_dgx.txt",
            "mmgetstate": "mmgetstate/redp5610_dgx01_Y.txt",
            "mmremotecluster": "mmremotecluster/redp5610_show_all.txt",
            "mmremotefs": "mmremotefs/redp5610_show_all.txt",
            "mmlsmount": "mmlsmount/redp5610_L.txt",
        }.items()
    }
    runner = Runner(answer or (lambda argv: (0, outputs[Path(argv[0]).name], "")))
    base = {
        "mmfs_bin": str(tmp_path),
        "gather": ["cluster", "nodeclass", "state", "remote_clusters", "remote_filesystems", "mounts"],
        "node": "dgx01",
        "node_classes": ["dgx"],
        "devices": ["ess3000_4M"],
    }
    result = ansible_module(spectrum_scale_facts, {**base, **(args or {})}, runner, None, check_mode)
    return result, runner


def run_k8s_manifest_validate(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The 'tool output' of this module is the manifest: given as content, and read from a file as bytes."""
    raw = change(NODE_MANIFEST).encode("utf-8", "surrogateescape")
    on_disk = tmp_path / "rendered.yaml"
    on_disk.write_bytes(raw)
    manifest = tmp_path / "written" / "node.yaml"
    base = {
        "kubernetes_version": "1.33",
        # Module arguments travel as JSON, which carries no undecodable bytes: they arrive replaced.
        "manifests": [{"path": str(manifest), "content": raw.decode("utf-8", "replace")}],
        "paths": [str(on_disk)],
    }
    result = ansible_module(k8s_manifest_validate, {**base, **(args or {})}, None, None, check_mode)
    return result, Runner(lambda argv: (0, "", ""))


PERFQUERY = (FIXTURES / "perfquery" / "infiniband-diags_issue16_rhel75_perfquery_x.txt").read_text(encoding="utf-8")


def run_ib_port_counters(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    output = change(PERFQUERY)
    runner = Runner(answer or (lambda argv: (0, output, "")))
    facts = {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "state": "Active", "link_layer": "InfiniBand"}]}]}
    base = {"infiniband": facts, "baseline": {"mlx5_0/1": {"SymbolErrorCounter": 0}}}
    paths = paths or bins("perfquery", where="/usr/sbin")
    result = ansible_module(ib_port_counters, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_fleet_consistency(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The 'tool output' of this module is the ofed_info -s text each node reported."""
    # Module arguments travel as JSON: undecodable bytes in a registered command's output reach this module as
    # U+FFFD (Ansible decodes stdout with errors='replace' before it can become an argument).
    ofed = change("MLNX_OFED_LINUX-24.10-1.1.4.0:\n").encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    nodes = {host: {"ofed": ofed, "kernel": "6.1.0-18-amd64"} for host in "ab"}
    result = ansible_module(fleet_consistency, {"nodes": nodes, **(args or {})}, None, None, check_mode)
    return result, Runner(lambda argv: (0, "", ""))


def run_gdr_loopback_bw(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """Server and client of every InfiniBand port answer the IBM Redpaper REDP-5610 client output (the fake server
    ends at once)."""
    output = change(fixture("ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    spec = expected_spec()
    base = {
        "system": {key: spec[key] for key in ("hcas", "numa_affinity")},
        "link_speeds": spec["link_speeds"],
        "thresholds": {"EDR": {"min_mib_per_s": 11000}},
        "startup_timeout": 0,
    }
    paths = paths or bins("timeout", "ib_write_bw")
    result = ansible_module(gdr_loopback_bw, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


# The policy store as Debian 12's semodule -l prints it (tests/fixtures/semodule/SOURCES.md).
SEMODULE_L = fixture("semodule/debian12_selinux-policy-default_l.txt")
POLICY_SOURCES = [
    {"name": "nvidia_container", "source": "policy_module(nvidia_container, 1.0)\n"},
    {"name": "infiniband", "source": "policy_module(infiniband, 1.0)\n"},
]


def run_selinux_policy_module(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The tool output is `semodule -l`; make writes the .pp, semodule -i adds the module to the listing."""
    listing = change(SEMODULE_L)
    installed: list = []
    makefile = tmp_path / "devel" / "Makefile"
    makefile.parent.mkdir(exist_ok=True)
    makefile.write_text("# stand-in\n", encoding="ascii")
    base = {"modules": POLICY_SOURCES, "build_dir": str(tmp_path / "selinux"), "makefile": str(makefile)}
    args = {**base, **(args or {})}

    def default(argv):
        if Path(argv[0]).name == "make":  # runs in build_dir
            (Path(str(args["build_dir"])) / argv[3]).write_bytes(b"pp")
            return 0, "", ""
        if argv[1:2] == ["-i"]:
            installed.append(Path(argv[2]).stem)
            return 0, "", ""
        return 0, listing + "".join(f"{module}\n" for module in installed), ""

    runner = Runner(answer or default)
    paths = paths or bins("semodule", "make", where="/usr/sbin")
    result = ansible_module(selinux_policy_module, args, runner, None, check_mode, bin_path=paths)
    return result, runner


# What nvidia-container-cli list prints (lab/sim/gpuforge_sim/nvidia_container_cli.py, driver 535.183.01).
CONTAINER_CLI_LIST = (
    "/dev/nvidiactl\n/dev/nvidia-uvm\n/dev/nvidia-uvm-tools\n/dev/nvidia-modeset\n/dev/nvidia0\n"
    "/usr/bin/nvidia-smi\n/usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01\n/run/nvidia-persistenced/socket\n"
)


def run_selinux_relabel(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The tool outputs are nvidia-container-cli's list and restorecon -v's lines."""
    (tmp_path / "dev").mkdir(exist_ok=True)
    listing = change(CONTAINER_CLI_LIST)
    word = "Would relabel" if check_mode else "Relabeled"
    relabel = change(f"{word} {tmp_path}/dev from system_u:object_r:tmp_t:s0 to system_u:object_r:device_t:s0\n")
    runner = Runner(
        answer or (lambda argv: (0, listing if Path(argv[0]).name == "nvidia-container-cli" else relabel, ""))
    )
    base = {"paths": [str(tmp_path / "dev")], "hook_files_from_container_cli": True}
    paths = paths or bins("restorecon", "nvidia-container-cli", where="/usr/sbin")
    result = ansible_module(selinux_relabel, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


# What dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Abbrev}\n' prints for the gpu_monitoring floors.
DPKG_QUERY_W = "prometheus\t2.42.0+ds-5+deb12u1\tii \nprometheus-node-exporter\t1.5.0-1+b6\tii \n"


def run_package_version_floor(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The tool output is dpkg-query's; dpkg --compare-versions answers 'at or above'."""
    output = change(DPKG_QUERY_W)
    runner = Runner(answer or (lambda argv: (0, output, "") if argv[0].endswith("dpkg-query") else (0, "", "")))
    floors = [
        {"name": "prometheus", "version": "2.42.0+ds-5+deb12u1"},
        {"name": "prometheus-node-exporter", "version": "1.5.0-1"},
    ]
    base = {"packages": floors, "manager": "dpkg"}
    paths = paths or bins("dpkg-query", "dpkg")
    result = ansible_module(package_version_floor, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_package_closure_guard(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The tool output is apt-get --simulate's, recorded from the real apt (tests/fixtures/package_closure)."""
    output = change(fixture("package_closure/apt-simulate-install-pinned.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {
        "manager": "apt",
        "name": ["datacenter-gpu-manager-4-core=1:4.4.1-1", "datacenter-gpu-manager-4-cuda12=1:4.4.1-1"],
        "pins": [{"packages": ["datacenter-gpu-manager-4-*"], "version": "1:4.4.1-1"}],
    }
    paths = paths or bins("apt-get")
    result = ansible_module(package_closure_guard, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


# The "tool output" of vendor_apt_repository is the key file it is served: a real ASCII-armored key
# (tests/fixtures/apt/SOURCES.md) whose fingerprint gpg printed as below.
ARMORED_KEY = (ROOT / "tests" / "fixtures" / "apt" / "rsa3072-with-subkey.asc").read_text(encoding="ascii")


def run_vendor_apt_repository(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The served key is what each family changes (the module reads its fingerprints itself, no command); the key
    is served from a file:// URL, /etc/apt is tmp_path/apt."""
    runner = Runner(answer or (lambda argv: AssertionError(f"vendor_apt_repository ran {argv}")))
    key = tmp_path / "srv" / "key.asc"
    key.parent.mkdir(exist_ok=True)
    key.write_bytes(change(ARMORED_KEY).encode("utf-8", "surrogateescape"))
    (tmp_path / "ansible-tmp").mkdir(exist_ok=True)
    base = {
        "name": "cuda",
        "url": "http://mirror/cuda/repos/debian12/x86_64",
        "key_url": key.as_uri(),
        "key_fingerprint": "5A7A0518C2971AF62EE0700BEA54EAEBC1A218DD",
        "preferences": "Package: cuda-drivers-550\nPin: version 550.90.07-*\nPin-Priority: 1001\n",
        "keyring_dir": str(tmp_path / "apt" / "keyrings"),
        "sources_dir": str(tmp_path / "apt" / "sources.list.d"),
        "preferences_dir": str(tmp_path / "apt" / "preferences.d"),
        "_ansible_tmpdir": str(tmp_path / "ansible-tmp"),
    }
    result = ansible_module(vendor_apt_repository, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


# The "tool output" of apt_archive_components is the host's sources: Debian 12 image's debian.sources
# (tests/fixtures/apt/SOURCES.md); /etc/apt is tmp_path/apt.
DEBIAN_SOURCES = (ROOT / "tests" / "fixtures" / "apt" / "debian12-image-debian.sources").read_text(encoding="utf-8")


def run_apt_archive_components(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """No tool: each family changes the debian.sources file the module reads."""
    runner = Runner(answer or (lambda argv: AssertionError(f"apt_archive_components ran {argv}")))
    folder = tmp_path / "apt" / "sources.list.d"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "debian.sources").write_bytes(change(DEBIAN_SOURCES).encode("utf-8", "surrogateescape"))
    base = {
        "release": "bookworm",
        "components": ["contrib"],
        "sources_list": str(tmp_path / "apt" / "sources.list"),
        "sources_dir": str(folder),
    }
    result = ansible_module(apt_archive_components, {**base, **(args or {})}, runner, None, check_mode)
    return result, runner


# What the reads of the nfs_client role print on a converged lab node (stat of showmount and a mount point,
# /proc/filesystems' first lines as Linux prints them): command_reads returns them as they are.
STAT_AND_FILESYSTEMS = {
    "stat": "/usr/sbin/showmount\n/srv/shared\n",
    "cat": "nodev\tsysfs\nnodev\ttmpfs\nnodev\tproc\n\text4\n",
}


def run_command_reads(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The tool output is each command's; the module parses none of it, so every family must read back clean."""
    runner = Runner(answer or (lambda argv: (0, change(STAT_AND_FILESYSTEMS[argv[0]]), "")))
    base = {
        "commands": [
            {"name": "paths", "argv": ["stat", "--format=%n", "--", "/usr/sbin/showmount", "/srv/shared"],
             "ok_rcs": [0, 1]},
            {"name": "filesystems", "argv": ["cat", "/proc/filesystems"]},
        ]
    }  # fmt: skip
    result = ansible_module(command_reads, {**base, **(args or {})}, runner, None, check_mode)
    return result, runner


# A CRI-O drop-in as the crio role renders it: the "tool output" of managed_files is the content it is handed.
CRIO_DROPIN = (
    '[crio.runtime]\ndefault_runtime = "nvidia"\n\n'
    '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
)


def run_managed_files(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """No tool: the content written is what each family changes; /etc is tmp_path/etc."""
    runner = Runner(answer or (lambda argv: AssertionError(f"managed_files ran {argv}")))
    directory = tmp_path / "etc" / "crio" / "crio.conf.d"
    # Module arguments come from the controller as JSON, always valid Unicode: bytes a family garbles arrive as
    # replacement characters, never as the lone surrogates a decoded tool output can hold.
    content = change(CRIO_DROPIN).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    base = {
        "directories": [{"path": str(directory), "mode": "0755"}],
        "files": [{"path": str(directory / "99-nvidia.conf"), "content": content, "mode": "0644"}],
    }
    result = ansible_module(managed_files, {**base, **(args or {})}, runner, None, check_mode)
    return result, runner


# `systemctl show --property=Id,LoadState,ActiveState,UnitFileState -- NAME...` as systemd prints it: a block per
# unit asked, an empty line between two (tests/unit/module_utils/test_gpuforge_systemd.py says where from).
SYSTEMCTL_BLOCKS = {
    "munge.service": "Id=munge.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n",
    "slurmd.service": "Id=slurmd.service\nLoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n",
}


def run_systemd_units(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """The tool output is systemctl show's blocks for the units asked (a unit it does not hold is not-found);
    enable/start answer success."""

    def default(argv):
        if argv[1] != "show":
            return 0, "", ""
        names = argv[argv.index("--") + 1 :]
        missing = "Id={}\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n"
        return 0, change("\n".join(SYSTEMCTL_BLOCKS.get(name, missing.format(name)) for name in names)), ""

    runner = Runner(answer or default)
    base = {
        "units": [
            {"name": "munge", "enabled": True, "state": "started"},
            {"name": "slurmd", "enabled": True, "state": "started"},
        ]
    }
    paths = paths or bins("systemctl")
    result = ansible_module(systemd_units, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_roce_qos(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """mlnx_qos answers with a real output (trust dscp, PFC on priority 3); the port's sysfs/configfs files under
    tmp_path hold ECN on, ToS 106 and a RoCE v2 GID at index 3, so the unchanged baseline is converged."""
    root = tmp_path / "sys"
    files = {
        "class/net/eth4/ecn/roce_np/enable/3": "1\n",
        "class/net/eth4/ecn/roce_rp/enable/3": "1\n",
        "kernel/config/rdma_cm/mlx5_2/ports/1/default_roce_tos": "106\n",
        "class/infiniband/mlx5_2/tc/1/traffic_class": "Global tclass=106\n",
        "class/infiniband/mlx5_2/ports/1/gid_attrs/types/3": "RoCE v2\n",
    }
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="ascii")
    output = change(fixture("mlnx_qos/att-netarbiter_eth4_trust-dscp_pfc3.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {
        "ports": [{"netdev": "eth4", "hca": "mlx5_2", "port": 1}],
        "pfc_priority": 3,
        "tos": 106,
        "gid_index": 3,
        "sysfs_root": str(root),
    }
    paths = paths or bins("mlnx_qos", where="/usr/sbin")
    result = ansible_module(roce_qos, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


def run_subnet_manager_check(ansible_module, tmp_path, change, args=None, check_mode=False, answer=None, paths=None):
    """sminfo answers the Oracle BDA capture (tests/fixtures/sminfo) for the plain query and for the configured SM."""
    output = change(fixture("sminfo/oracle-bda_sun-dcs36-switch_master_prio14.txt"))
    runner = Runner(answer or (lambda argv: (0, output, "")))
    base = {"subnet_managers": [{"host": "bdax01sw-ib1", "guid": "0x0010e0406d5aa0a0", "priority": 14}]}
    paths = paths or bins("sminfo")
    result = ansible_module(subnet_manager_check, {**base, **(args or {})}, runner, None, check_mode, bin_path=paths)
    return result, runner


RUNNERS = {
    "apt_archive_components": (run_apt_archive_components, ("apt source file",)),
    "command_reads": (run_command_reads, ("stat", "cat")),
    "container_gpu_smoke": (run_container_gpu_smoke, ("podman",)),
    "dcgm_diag": (run_dcgm_diag, ("dcgmi",)),
    "fio_benchmark": (run_fio_benchmark, ("fio",)),
    "fleet_consistency": (run_fleet_consistency, ("nodes",)),
    "gdr_loopback_bw": (run_gdr_loopback_bw, ("ib_write_bw",)),
    "gpu_node_check": (run_gpu_node_check, ("lsmod", "dmesg")),
    "ib_port_counters": (run_ib_port_counters, ("perfquery",)),
    "ib_write_bw": (run_ib_write_bw, ("ib_write_bw",)),
    "infiniband_facts": (run_infiniband_facts, ("ibstat", "ibv_devinfo", "ibdev2netdev")),
    "k8s_manifest_validate": (run_k8s_manifest_validate, ("manifest", "YAML", "rendered.yaml", "node.yaml")),
    "kernel_module": (run_kernel_module, ("lsmod",)),
    "managed_files": (run_managed_files, ("files[", "directories[")),
    "nccl_tests": (run_nccl_tests, ("nccl-tests", "NCCL", "benchmark", "result rows")),
    "nvbandwidth": (run_nvbandwidth, ("nvbandwidth",)),
    "nvidia_smi_facts": (run_nvidia_smi_facts, ("nvidia-smi",)),
    "p2p_bandwidth": (run_p2p_bandwidth, ("p2pBandwidthLatencyTest",)),
    "package_closure_guard": (run_package_closure_guard, ("apt-get",)),
    "package_version_floor": (run_package_version_floor, ("dpkg-query",)),
    "resnet50_benchmark": (run_resnet50_benchmark, ("ResNet-50", "benchmark output", "GPUs")),
    "roce_qos": (run_roce_qos, ("mlnx_qos",)),
    "selinux_policy_module": (run_selinux_policy_module, ("semodule",)),
    "selinux_relabel": (run_selinux_relabel, ("restorecon", "nvidia-container-cli")),
    "slurm_node_state": (run_slurm_node_state, ("scontrol",)),
    "spectrum_scale_config": (run_spectrum_scale_config, ("mmlsconfig",)),
    "spectrum_scale_facts": (
        run_spectrum_scale_facts,
        ("mmlscluster", "mmlsnodeclass", "mmgetstate", "mmremotecluster", "mmremotefs", "mmlsmount"),
    ),
    "subnet_manager_check": (run_subnet_manager_check, ("sminfo",)),
    "systemd_units": (run_systemd_units, ("systemctl",)),
    "vendor_apt_repository": (run_vendor_apt_repository, ("the key at", "the key URL")),
}


def test_every_module_has_a_runner():
    assert sorted(RUNNERS) == sorted(MODULES)


def _unchanged(text: str) -> str:
    return text


@pytest.mark.parametrize("module", sorted(RUNNERS))
def test_baseline_runs_clean(ansible_module, tmp_path, module):
    """The baseline every family changes one thing of: it must end in exit_json (or fail only on a verdict)."""
    run, names = RUNNERS[module]
    result, _ = run(ansible_module, tmp_path, _unchanged)
    assert_handled(result, names)
    assert not result.get("failed") or "verdict" in result["msg"], result["msg"]


# ---------------------------------------------------------------------------------------------------------
# Tool output: empty, truncated (a real output cut in half), binary garbage (seeded), 10 MB.


@pytest.mark.parametrize(
    ("module", "family"),
    [(module, family) for module in sorted(RUNNERS) for family in OUTPUTS],
    ids=[f"{module}/{family}" for module in sorted(RUNNERS) for family in OUTPUTS],
)
def test_tool_output(ansible_module, tmp_path, capsys, module, family):
    run, names = RUNNERS[module]
    result, runner = run(ansible_module, tmp_path, OUTPUTS[family])
    assert_handled(result, names)
    if module == "k8s_manifest_validate" and family == "empty-output":  # valid, but said out loud
        # ansible-core collects module warnings, or prints them at once when a controller display is already
        # set up in this test process (test order decides): either way the warning must be there.
        said = [*get_warning_messages(), capsys.readouterr().err]
        assert any("holds no YAML document" in text for text in said)
    if module == "gpu_node_check":  # a report, never a failed task: unreadable text is a failed *_readable check
        checks = check_by_name(result)
        assert checks["lsmod_readable"]["verdict"] in ("PASS", "FAIL")
        if family == "empty-output" or family == "binary-garbage":
            assert checks["lsmod_readable"]["verdict"] == "FAIL"
            assert "lsmod" in checks["lsmod_readable"]["fault"]
    if module == "selinux_policy_module" and family != "truncated-output":  # never installs over an unread store
        assert result.get("failed") and "from semodule -l on" in result["msg"], result
        assert [argv for argv in runner.calls if Path(argv[0]).name == "make" or "-i" in argv] == []


# ---------------------------------------------------------------------------------------------------------
# A missing tool: the message names the tool, this host and the fix.


def _missing_tool_cases():
    """module -> (args override, bin_path override or None, run_command answer or None, words of the message)."""

    def not_found(argv):
        return FileNotFoundError(2, "No such file or directory", argv[0])

    def timeout_cannot_start(argv):
        command = argv[3]
        return 127, "", f"timeout: failed to run command '{command}': No such file or directory\n"

    return {
        "command_reads": (
            {},
            None,
            not_found,
            ("stat not found in PATH on", "exited 127", "install it or give its full path"),
        ),
        "container_gpu_smoke": ({}, bins("timeout"), None, ("podman not found in PATH on", "remove podman-cdi")),
        "dcgm_diag": ({}, bins("timeout"), None, ("dcgmi not found in PATH on", "nvidia_driver_dcgm_enabled")),
        "nvbandwidth": (
            {},
            bins("timeout"),
            None,
            ("nvbandwidth not found in PATH on", "github.com/NVIDIA/nvbandwidth"),
        ),
        "gdr_loopback_bw": (
            {},
            bins("timeout"),
            None,
            ("ib_write_bw not found in PATH on", "perftest built with CUDA"),
        ),
        "gpu_node_check": ({}, bins(), None, ("lsmod not found in PATH on", "install kmod")),
        "ib_port_counters": ({}, bins(), None, ("perfquery not found in PATH on", "infiniband-diags")),
        "ib_write_bw": ({}, bins("timeout"), None, ("ib_write_bw not found in PATH on", "perftest")),
        "infiniband_facts": ({}, bins(), None, ("Neither ibstat nor ibv_devinfo is installed on", "infiniband-diags")),
        "k8s_manifest_validate": ({}, None, None, ("kubernetes-validate",)),
        "kernel_module": ({}, bins(), None, ("lsmod not found in PATH, /usr/local/sbin", "install kmod")),
        "nccl_tests": (
            {"launcher": "mpirun", "np": 8},
            None,
            timeout_cannot_start,
            ("mpirun not found in PATH on", "install Open MPI"),
        ),
        "nvidia_smi_facts": ({}, bins(), None, ("nvidia-smi not found in PATH on", "NVIDIA driver")),
        "package_closure_guard": ({}, bins(), None, ("apt-get not found in PATH, /usr/bin", "install apt")),
        "package_version_floor": ({}, bins(), None, ("dpkg-query not found in PATH, /usr/bin", "install dpkg")),
        "resnet50_benchmark": ({}, None, timeout_cannot_start, ("torchrun not found in PATH on", "install torch")),
        "roce_qos": ({}, bins(), None, ("mlnx_qos not found in PATH, /usr/sbin", "install mlnx-tools")),
        "selinux_policy_module": ({}, bins(), None, ("semodule not found in PATH on", "policycoreutils")),
        "selinux_relabel": ({}, bins(), None, ("restorecon not found in PATH on", "install policycoreutils")),
        "slurm_node_state": ({}, bins(), None, ("scontrol not found in PATH on", "Slurm client")),
        "spectrum_scale_config": (
            {},
            None,
            not_found,
            ("mmlsconfig not found at /usr/lpp/mmfs/bin on", "is IBM Storage Scale (gpfs.base) installed?"),
        ),
        "spectrum_scale_facts": ({}, None, None, ("mmlscluster not found at", "is IBM Storage Scale (gpfs.base)")),
        "subnet_manager_check": ({}, bins(), None, ("sminfo not found in PATH on", "infiniband-diags")),
        "systemd_units": ({}, bins(), None, ("systemctl not found in PATH on", "needs systemd")),
    }


MISSING_TOOL = _missing_tool_cases()


@pytest.mark.parametrize("module", sorted(MISSING_TOOL), ids=[f"{m}/missing-tool" for m in sorted(MISSING_TOOL)])
def test_missing_tool(ansible_module, tmp_path, monkeypatch, module):
    args, paths, answer, words = MISSING_TOOL[module]
    run, _names = RUNNERS[module]
    if module == "k8s_manifest_validate":
        monkeypatch.setattr(k8s_manifest_validate, "KV_IMPORT_ERROR", "Traceback: No module named kubernetes_validate")
    if module == "spectrum_scale_facts":
        args = {"mmfs_bin": str(tmp_path / "no-gpfs")}
    result, _ = run(ansible_module, tmp_path, _unchanged, args, answer=answer, paths=paths)
    assert_no_traceback_and_serialisable(result)
    if module == "gpu_node_check":  # reported, not failed: the module judges what it can
        fault = check_by_name(result)["lsmod_readable"]["fault"]
        assert all(word in fault for word in words), fault
        assert HOST in fault
        return
    assert result.get("failed"), result
    assert all(word in result["msg"] for word in words), result["msg"]
    if module != "k8s_manifest_validate":  # missing_required_lib names the Python, not the host
        assert HOST in result["msg"], result["msg"]


# ---------------------------------------------------------------------------------------------------------
# Check mode writes nothing and changes nothing.


@pytest.mark.parametrize("module", sorted(RUNNERS), ids=[f"{m}/check-mode" for m in sorted(RUNNERS)])
def test_check_mode_writes_nothing(ansible_module, tmp_path, module):
    run, names = RUNNERS[module]
    target = tmp_path / "target"
    args = {
        "nccl_tests": {
            "output_path": str(target / "nccl" / "out.txt"),
            "launcher": "mpirun",
            "hosts": [{"name": "a", "slots": 8}],
        },
        "resnet50_benchmark": {"output_dir": str(target / "resnet50")},
        "fio_benchmark": {"output_path": str(target / "fio" / "out.json")},
        "p2p_bandwidth": {"output_path": str(target / "p2p" / "out.txt")},
        "k8s_manifest_validate": {
            "manifests": [{"path": str(target / "manifests" / "node.yaml"), "content": NODE_MANIFEST}],
            "paths": [],
        },
        "kernel_module": {
            "modules_load_dir": str(target / "modules-load.d"),
            "modprobe_dir": str(target / "modprobe.d"),
            "name": "nouveau",
        },
        "slurm_node_state": {"state": "drain", "reason": "gpu 3 xid 79"},
        "spectrum_scale_config": {"settings": {"pagepool": "256G"}},
        "selinux_policy_module": {"build_dir": str(target / "selinux")},
        "managed_files": {
            "directories": [{"path": str(target / "etc" / "crio.conf.d"), "mode": "0755"}],
            "files": [{"path": str(target / "etc" / "crio.conf.d" / "99-nvidia.conf"), "content": "x", "mode": "0644"}],
        },
        "apt_archive_components": {"sources_list": str(target / "apt" / "sources.list")},
        "vendor_apt_repository": {
            "keyring_dir": str(target / "apt" / "keyrings"),
            "sources_dir": str(target / "apt" / "sources.list.d"),
            "preferences_dir": str(target / "apt" / "preferences.d"),
        },
    }.get(module, {})
    result, runner = run(ansible_module, tmp_path, _unchanged, args, check_mode=True)
    assert_handled(result, names)
    # Every path a module could write (output, hostfile, manifests, modules-load.d) is under target.
    assert not target.exists(), f"check mode wrote {sorted(target.rglob('*'))}"
    changing = [argv for argv in runner.calls if Path(argv[0]).name in ("modprobe", "mmchconfig", "timeout")]
    changing += [argv for argv in runner.calls if "update" in argv]
    changing += [
        argv for argv in runner.calls if Path(argv[0]).name == "make" or argv[:2] == ["/usr/sbin/semodule", "-i"]
    ]
    changing += [argv for argv in runner.calls if Path(argv[0]).name == "restorecon" and "-n" not in argv]
    changing += [argv for argv in runner.calls if Path(argv[0]).name == "systemctl" and argv[1] != "show"]
    assert changing == [], f"check mode ran {changing}"


# ---------------------------------------------------------------------------------------------------------
# Free-form dict options: malformed values fail naming the option path; what -e produces is coerced.


@dataclass(frozen=True)
class Case:
    name: str
    args: dict
    path: str | None = None  # None: the module must accept the value
    fragment: str = ""


EXPECTED_BAD = expected_spec()

OPTION_CASES: dict[tuple[str, str], list[Case]] = {
    ("nccl_tests", "expect"): [
        Case(
            "word",
            {"expect": {"min_busbw_gbyte_per_s": "fifty"}},
            "expect.min_busbw_gbyte_per_s",
            "must be a number, got 'fifty'",
        ),
        Case("numeric string (-e)", {"expect": {"min_busbw_gbyte_per_s": "50"}}),
        Case(
            "boolean", {"expect": {"min_busbw_gbyte_per_s": True}}, "expect.min_busbw_gbyte_per_s", "must be a number"
        ),
        Case("list", {"expect": {"min_busbw_gbyte_per_s": [50]}}, "expect.min_busbw_gbyte_per_s", "must be a number"),
        Case("dict", {"expect": {"warn_ratio": {"a": 1}}}, "expect.warn_ratio", "must be a number"),
        Case("nan", {"expect": {"min_busbw_gbyte_per_s": "nan"}}, "expect.min_busbw_gbyte_per_s", "finite"),
        Case("negative", {"expect": {"max_wrong": -1}}, "expect.max_wrong", "at least 0"),
        Case("ratio above 1", {"expect": {"warn_ratio": 2}}, "expect.warn_ratio", "at most 1"),
        Case("misspelt key", {"expect": {"min_bus_bw": 50}}, "expect.min_bus_bw", "known: large_message_bytes"),
        Case("unknown transport", {"expect": {"transport": "infiniband"}}, "expect.transport", "tcp, ib, ib_gdr"),
        Case("bytes with a unit", {"expect": {"small_message_bytes": "1k"}}, "expect.small_message_bytes"),
        Case("integral string", {"expect": {"large_message_bytes": "1048576", "max_wrong": "0"}}),
        Case("null value", {"expect": {"min_busbw_gbyte_per_s": None}}),
        Case("not a dict", {"expect": "fifty"}, "argument 'expect'"),
    ],
    ("nccl_tests", "env"): [
        Case("boolean", {"env": {"NCCL_IB_DISABLE": True}}, "env.NCCL_IB_DISABLE", "is a boolean"),
        Case("null", {"env": {"NCCL_SOCKET_IFNAME": None}}, "env.NCCL_SOCKET_IFNAME", "got None"),
        Case("list", {"env": {"NCCL_IB_HCA": ["mlx5_0"]}}, "env.NCCL_IB_HCA", "string or a number"),
        Case("bad name", {"env": {"A=B": "1"}}, "env.A=B", "environment variable name"),
        Case("number", {"env": {"NCCL_IB_DISABLE": 1, "NCCL_BUFFSIZE": 4194304}}),
        Case("null option", {"env": None}, "argument 'env'", "unable to convert to dict"),
    ],
    ("nccl_tests", "hosts"): [
        Case("no slots", {"launcher": "mpirun", "hosts": [{"name": "a", "slots": 0}]}, "hosts[0].slots"),
        Case("slots word", {"launcher": "mpirun", "hosts": [{"name": "a", "slots": "x"}]}, "argument 'slots'", "hosts"),
    ],
    ("resnet50_benchmark", "expect"): [
        Case("word", {"expect": {"min_per_gpu": "fast"}}, "expect.min_per_gpu", "must be a number, got 'fast'"),
        Case("numeric string (-e)", {"expect": {"min_per_gpu": "800", "min_scaling_efficiency": "0.9"}}),
        Case("boolean ratio", {"expect": {"ratio": False}}, "expect.ratio", "must be a number"),
        Case("zero floor", {"expect": {"min_per_gpu": 0}}, "expect.min_per_gpu", "greater than 0"),
        Case("fractional ranks", {"expect": {"world_size": "2.5"}}, "expect.world_size", "integer"),
        Case("sku number", {"expect": {"sku": 100}}, "expect.sku", "must be a string"),
        Case("misspelt key", {"expect": {"min_scaling_eff": 0.9}}, "expect.min_scaling_eff", "known:"),
        Case("negative margin", {"expect": {"scaling_warn_margin": -0.1}}, "expect.scaling_warn_margin"),
        Case("list", {"expect": {"fail_ratio": [0.5]}}, "expect.fail_ratio", "must be a number"),
    ],
    ("resnet50_benchmark", "env"): [
        Case("boolean", {"env": {"NCCL_IB_DISABLE": False}}, "env.NCCL_IB_DISABLE", "is a boolean"),
        Case("dict", {"env": {"GLOO_SOCKET_IFNAME": {"a": 1}}}, "env.GLOO_SOCKET_IFNAME", "string or a number"),
        Case("number", {"env": {"OMP_NUM_THREADS": 4}}),
    ],
    ("gpu_node_check", "expected"): [
        Case("count as -e string", {"expected": {**EXPECTED_BAD, "gpu_count": "8", "retired_pages_max": "60"}}),
        Case("count word", {"expected": {**EXPECTED_BAD, "gpu_count": "eight"}}, "expected.gpu_count", "integer"),
        Case("limit list", {"expected": {**EXPECTED_BAD, "retired_pages_max": [60]}}, "expected.retired_pages_max"),
        Case("bool as string", {"expected": {**EXPECTED_BAD, "persistence_mode": "no", "ecc": "yes"}}),
        Case("bool word", {"expected": {**EXPECTED_BAD, "ecc": "maybe"}}, "expected.ecc", "boolean"),
        Case("width fraction", {"expected": {**EXPECTED_BAD, "pcie_width_max": 16.5}}, "expected.pcie_width_max"),
        Case("width string", {"expected": {**EXPECTED_BAD, "pcie_width_max": "16", "pcie_gen_max": "3"}}),
        Case("xid not a list", {"expected": {**EXPECTED_BAD, "xid_fatal": "48"}}, "expected.xid_fatal", "list"),
        Case("xid as strings", {"expected": {**EXPECTED_BAD, "xid_fatal": ["48", 79]}}),
        Case("xid null item", {"expected": {**EXPECTED_BAD, "xid_fatal": [48, None]}}, "expected.xid_fatal[1]"),
        Case("nvlinks word", {"expected": {**EXPECTED_BAD, "nvlink_links": "six"}}, "expected.nvlink_links"),
        Case("driver branch number", {"expected": {**EXPECTED_BAD, "driver_branch": 535}}),
        Case("model number", {"expected": {**EXPECTED_BAD, "gpu_model": 100}}, "expected.gpu_model", "string"),
        Case("empty spec", {"expected": {}}),
    ],
    ("gpu_node_check", "expected.hcas"): [
        Case("a string", {"expected": {**EXPECTED_BAD, "hcas": "mlx5_0"}}, "expected.hcas", "must be a list"),
        Case("names only", {"expected": {**EXPECTED_BAD, "hcas": ["mlx5_0"]}}, "expected.hcas[0]", "must be a dict"),
        Case(
            "missing name",
            {"expected": {**EXPECTED_BAD, "hcas": [{"ports": [{"port": 1, "link": "EDR"}]}]}},
            "expected.hcas[0].name",
            "is required",
        ),
        Case(
            "ports a dict",
            {"expected": {**EXPECTED_BAD, "hcas": [{"name": "mlx5_0", "ports": {"port": 1}}]}},
            "expected.hcas[0].ports",
            "must be a list",
        ),
        Case(
            "port word",
            {"expected": {**EXPECTED_BAD, "hcas": [{"name": "mlx5_0", "ports": [{"port": "one"}]}]}},
            "expected.hcas[0].ports[0].port",
            "integer",
        ),
        Case(
            "port string (-e)",
            {"expected": {**EXPECTED_BAD, "hcas": [{"name": "mlx5_0", "ports": [{"port": "1", "link": "EDR"}]}]}},
        ),
        Case(
            "unknown link",
            {"expected": {**EXPECTED_BAD, "hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "link": "EDRR"}]}]}},
            "expected.hcas[0].ports[0].link",
            "is not a key of expected.link_speeds",
        ),
        Case(
            "link layer case",
            {"expected": {**EXPECTED_BAD, "hcas": [{"name": "mlx5_0", "ports": [{"link_layer": "infiniband"}]}]}},
            "expected.hcas[0].ports[0].link_layer",
            "InfiniBand, Ethernet",
        ),
        Case(
            "misspelt key",
            {"expected": {**EXPECTED_BAD, "hcas": [{"name": "mlx5_0", "prots": []}]}},
            "expected.hcas[0].prots",
            "known: name, ports",
        ),
        Case(
            "rate word",
            {"expected": {**EXPECTED_BAD, "hcas": [{"name": "mlx5_0", "ports": [{"rate_gbit_per_s": "fast"}]}]}},
            "expected.hcas[0].ports[0].rate_gbit_per_s",
        ),
    ],
    ("gpu_node_check", "expected.numa_affinity"): [
        Case(
            "a dict",
            {"expected": {**EXPECTED_BAD, "numa_affinity": {"gpus": [0], "numa": 0}}},
            "expected.numa_affinity",
            "must be a list",
        ),
        Case(
            "gpu range string",
            {"expected": {**EXPECTED_BAD, "numa_affinity": [{"gpus": "0-3", "hcas": ["mlx5_0"], "numa": 0}]}},
            "expected.numa_affinity[0].gpus",
            "must be a list",
        ),
        Case(
            "missing numa",
            {"expected": {**EXPECTED_BAD, "numa_affinity": [{"gpus": [0], "hcas": ["mlx5_0"]}]}},
            "expected.numa_affinity[0].numa",
            "is required",
        ),
        Case(
            "indices as strings (-e)",
            {"expected": {**EXPECTED_BAD, "numa_affinity": [{"gpus": ["0", "1"], "hcas": ["mlx5_0"], "numa": "0"}]}},
        ),
        Case("a number", {"expected": {**EXPECTED_BAD, "numa_affinity": [5]}}, "expected.numa_affinity[0]", "dict"),
        Case(
            "hca list of lists",
            {"expected": {**EXPECTED_BAD, "numa_affinity": [{"gpus": [0], "hcas": [["mlx5_0"]], "numa": 0}]}},
            "expected.numa_affinity[0].hcas[0]",
            "string",
        ),
    ],
    ("gpu_node_check", "expected.link_speeds"): [
        Case(
            "rate only",
            {"expected": {**EXPECTED_BAD, "link_speeds": {"EDR": 100}}},
            "expected.link_speeds.EDR",
            "must be a dict",
        ),
        Case(
            "rate word",
            {
                "expected": {
                    **EXPECTED_BAD,
                    "link_speeds": {"EDR": {"rate_gbit_per_s": "fast", "link_layer": "InfiniBand"}},
                }
            },
            "expected.link_speeds.EDR.rate_gbit_per_s",
        ),
    ],
    ("spectrum_scale_config", "settings"): [
        Case("null", {"settings": {"pagepool": None}}, "settings.pagepool", "has no value"),
        Case("dict", {"settings": {"pagepool": {"size": "1G"}}}, "settings.pagepool", "string, number or boolean"),
        Case("list of lists", {"settings": {"verbsPorts": [["mlx5_0/1"]]}}, "settings.verbsPorts[0]"),
        Case("bad name", {"settings": {"page pool": "1G"}}, "settings.page pool", "attribute name"),
        Case("comma", {"settings": {"pagepool": "1G,2G"}}, "settings.pagepool", "cannot hold ','"),
        Case("empty", {"settings": {"pagepool": ""}}, "settings.pagepool", "must not be empty"),
        Case("list and bool", {"settings": {"verbsPorts": ["mlx5_0/1", "mlx5_1/1"], "verbsRdma": True}}),
    ],
    ("spectrum_scale_config", "scopes"): [
        Case(
            "null in the second",
            {"scopes": [{"settings": {"maxMBpS": 20000}}, {"node_class": "dgx", "settings": {"pagepool": None}}]},
            "scopes[1].settings.pagepool",
            "has no value",
        ),
        Case("comma", {"scopes": [{"settings": {"pagepool": "1G,2G"}}]}, "scopes[0].settings.pagepool", "','"),
        Case("bad name", {"scopes": [{"settings": {"page pool": "1G"}}]}, "scopes[0].settings.page pool", "name"),
        Case(
            "class twice",
            {"scopes": [{"node_class": "dgx", "settings": {}}, {"node_class": "dgx", "settings": {"a": 1}}]},
            "scopes[1].node_class",
            "names dgx a second time (scopes[0])",
        ),
        Case(
            "common twice",
            {"scopes": [{"settings": {}}, {"node_class": "common", "settings": {"a": 1}}]},
            "scopes[1].node_class",
            "names common a second time",
        ),
        Case("with node_class", {"node_class": "dgx", "scopes": [{"settings": {}}]}, "node_class", "settings only"),
        Case(
            "with settings",
            {"settings": {"pagepool": "1G"}, "scopes": [{"settings": {}}]},
            "parameters are mutually exclusive:",
            "settings|scopes",
        ),
        Case("no settings", {"scopes": [{"node_class": "dgx"}]}, "missing required arguments:", "settings found in"),
        Case("null settings", {"scopes": [{"settings": {}}, {"settings": None}]}, "argument", "NoneType found in"),
        Case("no scope", {"scopes": []}, "scopes", "at least one scope"),
        Case("neither form", {"scopes": None}, "one", "is required: settings, scopes"),
        Case("settings a list", {"scopes": [{"settings": ["pagepool=1G"]}]}, "argument", "list found in 'scopes'"),
        Case("a scope a word", {"scopes": ["dgx"]}, "dictionary", "requested, could not parse"),  # Ansible's words
        Case("misspelt key", {"scopes": [{"settings": {}, "node_clas": "dgx"}]}, "Unsupported", "scopes.node_clas"),
        Case(
            "three scopes",
            {
                "scopes": [
                    {"node_class": "dgx", "settings": {"pagepool": "128G", "verbsRdma": True}},
                    {"node_class": "dgx01", "settings": {"verbsPorts": ["mlx5_0/1", "mlx5_1/1"]}},
                    {"node_class": "", "settings": {"maxMBpS": 20000}},
                ]
            },
        ),
    ],
    ("spectrum_scale_facts", "gather"): [
        Case("unknown item", {"gather": ["cluster", "mount"]}, "value of gather", "must be one or more of"),
        Case("comma string (-e)", {"gather": "cluster,state,mounts", "node_classes": []}),
        Case("devices without mounts", {"gather": ["cluster", "nodeclass"]}, "devices", "add mounts to gather"),
        Case("classes without nodeclass", {"gather": ["mounts"]}, "node_classes", "add nodeclass to gather"),
    ],
    ("spectrum_scale_facts", "names"): [
        Case("node an option", {"node": "-N"}, "node", "is not a node name"),
        Case("node with a blank", {"node": "dgx 01"}, "node", "is not a node name"),
        Case("class an option", {"node_classes": ["--all"]}, "node_classes[0]", "is not a node class name"),
        Case("device a path", {"devices": ["/dev/ess3000_4M"]}, "devices[0]", "is not a file system device name"),
        Case("device a list (-e)", {"devices": [["ess3000_4M"]]}, "devices[0]", "is not a file system device name"),
        Case("full daemon name", {"node": "dgx01.ocp4.scale.com"}),
    ],
    ("package_version_floor", "packages"): [
        Case("float floor", {"packages": [{"name": "prometheus", "version": 2.42}]}, "packages[0].version", "quote it"),
        Case("empty floor", {"packages": [{"name": "prometheus", "version": " "}]}, "packages[0].version"),
        Case("integer floor", {"packages": [{"name": "prometheus", "version": 2}]}),
        Case("glob name", {"packages": [{"name": "prometheus*", "version": "1"}]}, "packages[0].name", "'*?[]'"),
        Case("option name", {"packages": [{"name": "-a", "version": "1"}]}, "packages[0].name", "leading '-'"),
        Case(
            "name twice",
            {"packages": [{"name": "a", "version": "1"}, {"name": "a", "version": "2"}]},
            "packages[1].name",
            "a second time",
        ),
        # No floor: the package is read, not judged (the read before an apt install).
        Case("no floor", {"packages": [{"name": "prometheus"}]}),
        Case("no name", {"packages": [{"version": "1"}]}, "missing required arguments:", "name found in"),
        Case(
            "misspelt key", {"packages": [{"name": "a", "version": "1", "flor": "2"}]}, "Unsupported", "packages.flor"
        ),
        Case(
            "rpm epoch word",
            {"manager": "rpm", "packages": [{"name": "slurm", "version": "x:1.0"}]},
            "packages[0].version",
            "not an RPM version",
        ),
        Case("manager", {"manager": "apt"}, "value", "manager must be one of: auto, dpkg, rpm, got: apt"),
    ],
    ("selinux_policy_module", "modules"): [
        Case(
            "space in name",
            {"modules": [{"name": "nvidia container", "source": "x"}]},
            "modules[0].name",
            "module name",
        ),
        Case("name a number", {"modules": [{"name": 5, "source": "x"}]}, "modules[0].name", "got '5'"),
        Case("name twice", {"modules": [POLICY_SOURCES[0], POLICY_SOURCES[0]]}, "modules[1].name", "a second time"),
        Case("empty source", {"modules": [{"name": "a", "source": " "}]}, "modules[0].source", "must not be empty"),
        Case("no source", {"modules": [{"name": "a"}]}, "missing required arguments:", "source found in modules"),
        Case("misspelt key", {"modules": [{"name": "a", "source": "x", "sorce": "y"}]}, "Unsupported", "modules.sorce"),
        Case(
            "variant without a module",
            {"modules": [{"name": "a", "source": "x", "variants": [{"if_listed": "", "source": "y"}]}]},
            "modules[0].variants[0].if_listed",
            "module name",
        ),
        Case("no module", {"modules": []}, "modules", "at least one"),
        Case("both forms", {"name": "a", "source": "x"}, "parameters are mutually exclusive:", "name|modules"),
        Case("relative build_dir", {"build_dir": "selinux"}, "build_dir", "absolute path"),
        Case("dotted name", {"modules": [{"name": "gpu.forge-1", "source": "policy_module(gpu.forge-1, 1.0)\n"}]}),
    ],
    ("managed_files", "options"): [
        Case(
            "unquoted mode",
            {"files": [{"path": "/etc/a.conf", "content": "", "mode": 420}]},
            "files[0].mode",
            "quote it",
        ),
        Case("symbolic mode", {"directories": [{"path": "/etc/a", "mode": "u=rwx"}]}, "directories[0].mode"),
        Case(
            "relative path", {"files": [{"path": "a.conf", "content": "", "mode": "0644"}]}, "files[0].path", "absolute"
        ),
        Case(
            "dotted path", {"directories": [{"path": "/etc/../a", "mode": "0755"}]}, "directories[0].path", "write /a"
        ),
        Case(
            "path twice",
            {
                "directories": [{"path": "/etc/a", "mode": "0755"}],
                "files": [{"path": "/etc/a", "content": "", "mode": "0644"}],
            },
            "files[0].path",
            "a second time",
        ),
        Case("no mode", {"files": [{"path": "/etc/a.conf", "content": ""}]}, "missing required arguments:", "mode"),
        Case(
            "misspelt key",
            {"files": [{"path": "/etc/a", "content": "", "mode": "0644", "owenr": "root"}]},
            "Unsupported",
        ),
        Case(
            "blank owner", {"files": [{"path": "/etc/a", "content": "", "mode": "0644", "owner": ""}]}, "files[0].owner"
        ),
    ],
    ("vendor_apt_repository", "options"): [
        Case("suite with a space", {"suites": ["bookworm main"]}, "suites[0]", "one word without white space"),
        Case("suites empty", {"suites": []}, "suites", "at least one suite"),
        Case("suites comma string (-e)", {"suites": "bookworm,bookworm-updates"}),
        Case("short sha256", {"key_sha256": "abc"}, "key_sha256", "64 hex digits"),
        Case("neither check", {"key_fingerprint": ""}, "key_fingerprint", "or key_sha256 is required"),
        Case("fingerprint word", {"key_fingerprint": "NVIDIA"}, "key_fingerprint", "hex fingerprint"),
        Case("name a path", {"name": "../cuda"}, "name", "letter or digit"),
        Case("relative keyring_dir", {"keyring_dir": "keyrings"}, "keyring_dir", "absolute path"),
        Case("url without scheme", {"url": "mirror/cuda"}, "url", "http://, https:// or file:// URL"),
        Case("timeout word", {"key_timeout": "soon"}, "argument 'key_timeout'"),
    ],
    ("systemd_units", "units"): [
        Case("pattern", {"units": [{"name": "nvidia-*"}]}, "units[0].name", "not a pattern"),
        Case("path", {"units": [{"name": "/dev/sda"}]}, "units[0].name", "not a path"),
        Case("two names in one", {"units": [{"name": "munge slurmd"}]}, "units[0].name", "must be a unit name"),
        Case("template", {"units": [{"name": "getty@.service"}]}, "units[0].name", "name an instance"),
        Case("name twice", {"units": [{"name": "munge"}, {"name": "munge.service"}]}, "units[1].name", "second time"),
        Case("no unit", {"units": []}, "units", "at least one unit"),
        Case("no name", {"units": [{"enabled": True}]}, "missing required arguments:", "name found in units"),
        Case("state word", {"units": [{"name": "munge", "state": "running"}]}, "value", "state must be one of"),
        Case("enabled word", {"units": [{"name": "munge", "enabled": "maybe"}]}, "argument 'enabled'", "units"),
        Case("misspelt key", {"units": [{"name": "munge", "enabeld": True}]}, "Unsupported", "units.enabeld"),
        Case("a unit a word (-e)", {"units": "munge"}, "dictionary", "requested, could not parse"),  # Ansible's words
        Case("bool word (-e)", {"units": [{"name": "munge", "enabled": "yes", "state": "started"}]}),
        Case("left alone", {"units": [{"name": "slurmd"}]}),
    ],
    ("selinux_relabel", "paths"): [
        Case("relative", {"paths": ["dev"]}, "paths[0]", "absolute path"),
        Case("empty string", {"paths": ["/dev", ""]}, "paths[1]", "absolute path"),
        Case("list of lists", {"paths": [["/dev"]]}, "paths[0]", "absolute path"),
        Case("comma string (-e)", {"paths": "/tmp,/var/tmp"}),
        Case("bool word", {"hook_files_from_container_cli": "maybe"}, "argument 'hook_files_from_container_cli'"),
    ],
}

# Facts are reported, not failed (gpu_node_check's contract): a malformed field fails `*_readable`, naming it.
FACTS_CASES: dict[str, list[tuple[str, dict, str, str]]] = {
    "nvidia_smi": [
        ("gpus a number", {"gpus": 5}, "nvidia_smi_readable", "nvidia_smi.gpus must be a list"),
        ("gpu a string", {"gpus": ["GPU0"]}, "nvidia_smi_readable", "nvidia_smi.gpus[0] must be a dict"),
        ("index a list", {"gpus": [{"index": [0]}]}, "nvidia_smi_readable", "nvidia_smi.gpus[0].index"),
        (
            "width a word",
            {"gpus": [{"index": 0, "pcie": {"width_current": "x16", "width_max": 16}}]},
            "nvidia_smi_readable",
            "nvidia_smi.gpus[0].pcie.width_current must be an integer",
        ),
        (
            "pages a word",
            {"gpus": [{"index": 0, "retired_pages": {"single_bit": "many"}}]},
            "nvidia_smi_readable",
            "nvidia_smi.gpus[0].retired_pages.single_bit",
        ),
        ("errors a string", {"errors": "boom"}, "nvidia_smi_readable", "nvidia_smi.errors must be a list"),
        (
            "indices mixed",
            {"gpus": [{"index": 0, "persistence_mode": "Disabled"}, {"persistence_mode": "Disabled"}]},
            "persistence_mode",
            "persistence mode not enabled",
        ),
    ],
    "infiniband": [
        ("hcas a dict", {"hcas": {"mlx5_0": {}}}, "infiniband_readable", "infiniband.hcas must be a list"),
        ("no name", {"hcas": [{"ports": []}]}, "infiniband_readable", "infiniband.hcas[0].name is required"),
        (
            "port word",
            {"hcas": [{"name": "mlx5_0", "ports": [{"port": "one", "state": "Active"}]}]},
            "infiniband_readable",
            "infiniband.hcas[0].ports[0].port",
        ),
        (
            "rate word",
            {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "rate_gbit_per_s": "EDR"}]}]},
            "infiniband_readable",
            "infiniband.hcas[0].ports[0].rate_gbit_per_s",
        ),
    ],
}

OPTION_IDS = sorted(OPTION_CASES)


@pytest.mark.parametrize(("module", "family"), OPTION_IDS, ids=[f"{m}/{f}" for m, f in OPTION_IDS])
def test_free_form_option(ansible_module, tmp_path, module, family):
    run, names = RUNNERS[module]
    for case in OPTION_CASES[(module, family)]:
        (tmp_path / case.name).mkdir()
        result, _ = run(ansible_module, tmp_path / case.name, _unchanged, case.args)
        if case.path is None:
            assert_handled(result, names)
            assert not result.get("failed") or "verdict" in result["msg"], f"{case.name}: {result['msg']}"
        else:
            assert_option_failure(result, case.path, case.fragment)


@pytest.mark.parametrize("source", sorted(FACTS_CASES), ids=[f"gpu_node_check/{s}-facts" for s in sorted(FACTS_CASES)])
def test_malformed_facts_are_reported(ansible_module, tmp_path, source):
    for name, facts, check, fragment in FACTS_CASES[source]:
        result, _ = run_gpu_node_check(ansible_module, tmp_path, _unchanged, {source: facts})
        assert_no_traceback_and_serialisable(result)
        assert not result.get("failed"), f"{name}: {result}"
        found = check_by_name(result)[check]
        assert found["verdict"] == "FAIL", f"{name}: {found}"
        assert fragment in found["fault"], f"{name}: {found['fault']}"


def test_coerced_values_reach_the_judges(ansible_module, tmp_path):
    """What -e hands a module ("50") is judged as the number, not skipped and not compared as text."""
    result, _ = run_nccl_tests(ansible_module, tmp_path, _unchanged, {"expect": {"min_busbw_gbyte_per_s": "500"}})
    assert result["failed"] and result["msg"].startswith("NCCL verdict FAIL: large_message_busbw=")
    assert check_by_name(result)["large_message_busbw"]["expected"] == ">= 500.0 GB/s"
    result, _ = run_gpu_node_check(
        ansible_module, tmp_path, _unchanged, {"expected": {**EXPECTED_BAD, "gpu_count": "8", "nvlink_links": "6"}}
    )
    checks = check_by_name(result)
    assert (checks["gpu_count"]["verdict"], checks["nvlink_active"]["verdict"]) == ("PASS", "PASS")
