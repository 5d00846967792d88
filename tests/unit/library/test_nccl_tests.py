"""nccl_tests module: command lines, NCCL modes, GPU checks, timeout and verdicts (run_command mocked)."""

from __future__ import annotations

from functools import partial

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import nccl_tests

SEED_1X8 = "nccl-tests/redp5610_ex4-1_1x8xv100_nvlink_legacy.txt"
SEED_2X8 = "nccl-tests/redp5610_ex4-2_2x8xv100_ib_legacy.txt"
SEED_16X1 = "nccl-tests/redp5610_ex4-3_16x1xv100_ib_gdr_legacy.txt"
# The sweep arguments every command ends with (module defaults).
BENCH_ARGS = [
    *("-b", "8", "-e", "256M", "-f", "2", "-g", "1"),
    *("-n", "20", "-w", "5", "-c", "1", "-d", "float", "-o", "sum"),
]


class FakeRunner:
    """Stands in for AnsibleModule.run_command: nvidia-smi -L answers, the benchmark returns `output`."""

    def __init__(self, output="", rc=0, gpus=8):
        self.output, self.rc, self.gpus = output, rc, gpus
        self.calls = []

    def __call__(self, args, **kwargs):
        self.calls.append((args, kwargs))
        if args[0].endswith("nvidia-smi"):
            return 0, "".join(f"GPU {i}: Tesla V100-SXM2-16GB (UUID: GPU-{i})\n" for i in range(self.gpus)), ""
        return self.rc, self.output, ""

    @property
    def bench_calls(self):
        return [call for call in self.calls if not call[0][0].endswith("nvidia-smi")]


@pytest.fixture
def binary(tmp_path):
    path = tmp_path / "all_reduce_perf"
    path.write_text("#!/bin/sh\n", encoding="ascii")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def bin_paths():
    return {"timeout": "/usr/bin/timeout", "nvidia-smi": "/usr/bin/nvidia-smi"}


@pytest.fixture
def run_module(ansible_module, bin_paths):
    return partial(ansible_module, nccl_tests, bin_path=bin_paths.get)


def test_local_run_writes_output_and_judges(run_module, binary, tmp_path, fixture_text):
    text = fixture_text(SEED_1X8)
    runner = FakeRunner(text, gpus=8)
    out = tmp_path / "nccl.txt"
    result = run_module(
        {"binary": binary, "gpus": 8, "output_path": str(out), "expect": {"min_busbw_gbyte_per_s": 120}}, runner
    )
    assert result["cmd"] == [binary, *BENCH_ARGS[:6], "-g", "8", *BENCH_ARGS[8:]]
    args, kwargs = runner.bench_calls[0]
    assert args[:3] == ["/usr/bin/timeout", "--kill-after=30", "1800"]
    assert args[3:] == result["cmd"]
    assert kwargs["environ_update"] == {"LC_ALL": "C", "NCCL_DEBUG": "INFO"}
    assert result["nccl_env"] == {"NCCL_DEBUG": "INFO"}
    assert out.read_text(encoding="utf-8") == text
    assert result["changed"] is True
    assert result["gpus_available"] == 8
    assert result["nccl"]["peak_busbw"] == 129.15
    assert len(result["nccl"]["rows"]) == 26
    checks = {check["name"]: check["status"] for check in result["checks"]}
    assert checks == {"large_message_busbw": "PASS", "wrong_values": "WARN"}
    assert result["verdict"] == "WARN"
    assert result["hostfile"] is None


def test_mpirun_ib_gdr_hostfile_and_env(run_module, binary, tmp_path, fixture_text):
    runner = FakeRunner(fixture_text(SEED_16X1))
    out = tmp_path / "nccl-16x1.txt"
    result = run_module(
        {
            "binary": binary,
            "launcher": "mpirun",
            "hosts": [{"name": "dgx01", "slots": 8}, {"name": "dgx02", "slots": 8}],
            "mode": "ib_gdr",
            "mpirun_args": ["--mca", "pml", "ob1"],
            "output_path": str(out),
            "gpus_per_host": 8,
            "expect": {"min_busbw_gbyte_per_s": 5.0},
        },
        runner,
    )
    hostfile = f"{out}.hosts"
    assert result["hostfile"] == hostfile
    assert (tmp_path / "nccl-16x1.txt.hosts").read_text(encoding="utf-8") == "dgx01 slots=8\ndgx02 slots=8\n"
    assert result["cmd"] == [
        "mpirun",
        "-np",
        "16",
        "--hostfile",
        hostfile,
        "--bind-to",
        "none",
        "--map-by",
        "slot",
        "-x",
        "NCCL_ALGO=Ring",
        "-x",
        "NCCL_DEBUG=INFO",
        "-x",
        "NCCL_IB_DISABLE=0",
        "-x",
        "NCCL_NET_GDR_LEVEL=PHB",
        "--mca",
        "pml",
        "ob1",
        binary,
        *BENCH_ARGS,
    ]
    assert runner.bench_calls and all(not call[0][0].endswith("nvidia-smi") for call in runner.calls)
    checks = {check["name"]: check for check in result["checks"]}
    assert checks["transport"]["status"] == "PASS"
    assert checks["transport"]["observed"] == "ib_gdr"
    assert checks["small_message_latency"]["observed"] == 91.61
    assert checks["large_message_busbw"]["observed"] == 5.72
    assert result["nccl"]["transport"]["ib_devices"] == ["mlx5_3:1", "mlx5_2:1", "mlx5_1:1", "mlx5_0:1"]


@pytest.mark.parametrize(
    ("mode", "env"),
    [
        ("tcp", {"NCCL_IB_DISABLE": "1", "NCCL_NET_GDR_LEVEL": "0", "NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"}),
        ("ib", {"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "0", "NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"}),
        ("none", {"NCCL_DEBUG": "INFO"}),
    ],
)
def test_mode_environment(run_module, binary, fixture_text, mode, env):
    runner = FakeRunner(fixture_text(SEED_2X8))
    result = run_module(
        {"binary": binary, "launcher": "srun", "np": 16, "mode": mode, "fail_on": "never"},
        runner,
    )
    assert result["nccl_env"] == env
    assert runner.bench_calls[0][1]["environ_update"] == {"LC_ALL": "C", **env}
    assert result["cmd"] == ["srun", "--ntasks", "16", binary, *BENCH_ARGS]


def test_ib_gdr_expected_but_not_used_fails(run_module, binary, fixture_text):
    runner = FakeRunner(fixture_text(SEED_2X8))
    result = run_module(
        {"binary": binary, "launcher": "srun", "hosts": [{"name": "dgx01"}, {"name": "dgx02"}], "mode": "ib_gdr"},
        runner,
        expect_failure=True,
    )
    assert result["msg"] == "NCCL verdict FAIL: transport=ib (expected ib_gdr)"
    assert result["verdict"] == "FAIL"
    assert result["cmd"][:5] == ["srun", "--ntasks", "2", "--nodes", "2"]
    assert result["cmd"][5:7] == ["--nodelist", "dgx01,dgx02"]


def test_missing_binary(run_module, tmp_path):
    runner = FakeRunner()
    missing = str(tmp_path / "nope" / "all_reduce_perf")
    result = run_module({"binary": missing}, runner, expect_failure=True)
    assert result["msg"].startswith(f"benchmark binary {missing} not found on ")
    assert runner.calls == []


def test_fewer_gpus_than_requested(run_module, binary):
    runner = FakeRunner(gpus=4)
    result = run_module({"binary": binary, "gpus": 8}, runner, expect_failure=True)
    assert result["msg"] == "fewer GPUs than requested: 4 available, gpus=8"
    assert runner.bench_calls == []


def test_fewer_gpus_per_host_with_mpirun(run_module, binary, tmp_path):
    runner = FakeRunner()
    result = run_module(
        {
            "binary": binary,
            "launcher": "mpirun",
            "gpus": 2,
            "hosts": [{"name": "a", "slots": 4}, {"name": "b", "slots": 2}],
            "gpus_per_host": 4,
            "output_path": str(tmp_path / "o.txt"),
        },
        runner,
        expect_failure=True,
    )
    assert result["msg"] == "fewer GPUs than requested on: a (4 x 2 > 4)"
    assert runner.calls == []


def test_no_nvidia_smi(run_module, binary, bin_paths):
    bin_paths.clear()
    result = run_module({"binary": binary}, FakeRunner(), expect_failure=True)
    assert result["msg"].startswith("nvidia-smi not found in PATH on ")
    assert result["msg"].endswith(": install the NVIDIA driver, or set gpus_per_host or count_gpus=false")


def test_timeout_kills_group(run_module, binary, tmp_path):
    runner = FakeRunner("# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n", rc=124)
    out = tmp_path / "t.txt"
    result = run_module(
        {"binary": binary, "timeout": 60, "count_gpus": False, "output_path": str(out)}, runner, expect_failure=True
    )
    assert result["msg"] == "benchmark timed out after 60 s; its process group was terminated"
    assert runner.bench_calls[0][0][:3] == ["/usr/bin/timeout", "--kill-after=30", "60"]
    assert out.read_text(encoding="utf-8").startswith("# nThread 1")
    assert result["rc"] == 124


def test_unreadable_output(run_module, binary):
    runner = FakeRunner("bash: /opt/all_reduce_perf: cannot execute binary file\n", rc=126)
    result = run_module({"binary": binary, "count_gpus": False}, runner, expect_failure=True)
    assert result["msg"] == (
        "could not read nccl-tests output (rc 126): no nccl-tests header, device list or result table found"
    )


def test_nonzero_rc_reports_failure_line(run_module, binary, fixture_text):
    text = fixture_text(SEED_2X8) + "dgx01: Test NCCL failure common.cu:958 'unhandled system error'\n"
    result = run_module({"binary": binary, "count_gpus": False}, FakeRunner(text, rc=1), expect_failure=True)
    failure = "dgx01: Test NCCL failure common.cu:958 'unhandled system error'"
    assert result["msg"] == f"benchmark exited with rc 1: {failure}"


def test_check_mode_runs_nothing(run_module, binary, tmp_path):
    runner = FakeRunner(gpus=8)
    out = tmp_path / "never.txt"
    result = run_module(
        {"binary": binary, "launcher": "mpirun", "hosts": [{"name": "n1", "slots": 2}], "output_path": str(out)},
        runner,
        check_mode=True,
    )
    assert runner.calls == []
    assert not out.exists()
    assert not (tmp_path / "never.txt.hosts").exists()
    assert result["changed"] is False
    assert result["cmd"][:5] == ["mpirun", "-np", "2", "--hostfile", f"{out}.hosts"]


def test_interpreter_for_standin(run_module, tmp_path):
    script = tmp_path / "all_reduce_perf.py"
    script.write_text("print()\n", encoding="ascii")  # readable, not executable: fine with an interpreter
    runner = FakeRunner("# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n")
    result = run_module(
        {"binary": str(script), "interpreter": ["/usr/bin/python3"], "count_gpus": False, "fail_on": "never"},
        runner,
        expect_failure=True,
    )
    assert result["cmd"][:2] == ["/usr/bin/python3", str(script)]
    assert result["msg"] == "no result rows in the output: no result rows"


def test_json_output_and_per_iteration_read_the_file_it_wrote(run_module, binary, tmp_path, fixture_text):
    """-J: nccl-tests writes FILE.0 when FILE exists and says so; the module reads that file, the log adds transport."""
    asked = tmp_path / "ar.json"
    written = tmp_path / "ar.json.0"
    written.write_text(fixture_text("nccl-tests/constructed_json_v2_per_iter_wrong.json"), encoding="utf-8")
    log = f"# Writing JSON output to {written}\n" + fixture_text(SEED_16X1)
    runner = FakeRunner(log, gpus=8)
    result = run_module(
        {"binary": binary, "json_output": str(asked), "per_iter_timing": True, "fail_on": "never"}, runner
    )
    cmd = runner.bench_calls[0][0]
    assert cmd[cmd.index("-I") + 1] == "1"
    assert cmd[cmd.index("-J") + 1] == str(asked)
    assert result["json_output"] == str(written)
    assert result["nccl"]["format"] == "json"
    assert result["nccl"]["wrong_total"] == 3
    assert result["nccl"]["transport"]["mode"] == "ib_gdr"
    assert result["verdict"] == "FAIL"
    assert [c["name"] for c in result["checks"] if c["status"] == "FAIL"] == ["wrong_values"]


def test_json_output_missing_falls_back_to_the_table(run_module, binary, tmp_path, fixture_text):
    runner = FakeRunner(fixture_text(SEED_1X8), gpus=8)
    result = run_module({"binary": binary, "gpus": 8, "json_output": str(tmp_path / "none.json")}, runner)
    assert result["nccl"]["format"] == "text"
    assert "json_output" not in result
    assert any("not read" in error for error in result["nccl"]["errors"])


def test_min_bw_failed_fails_the_task(run_module, binary, fixture_text):
    text = fixture_text("nccl-tests/constructed_v2.18_per_iter_I1_min_bw_failed.txt")
    runner = FakeRunner(text, gpus=8)
    result = run_module({"binary": binary, "gpus": 8, "env": {"NCCL_TESTS_MIN_BW": "170"}}, runner, expect_failure=True)
    assert "nccl_tests_min_bw=146.001" in result["msg"]
    assert "(170 GB/s)" in result["msg"]
