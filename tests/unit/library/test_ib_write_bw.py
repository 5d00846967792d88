"""ib_write_bw module: command lines, timeout wrapper, thresholds and verdicts (run_command mocked)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import ib_write_bw

SEED = "ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt"
DEEPOPS = "ib_write_bw__NVIDIA-deepops__roce-perf-k8s.md__cx5_roce100_rdmacm.txt"
IBSTAT_PORT = "CA: 'mlx5_0'\nPort 1:\nState: Active\nPhysical state: LinkUp\nRate: 100\nLink layer: IB\n"


class FakeRunner:
    """run_command stand-in: ibstat answers IBSTAT_PORT, the benchmark (under timeout) answers `output`."""

    def __init__(self, output="", rc=0, err=""):
        self.output, self.rc, self.err = output, rc, err
        self.calls = []

    def __call__(self, args, **kwargs):
        self.calls.append((args, kwargs))
        if args[0].endswith("ibstat"):
            return 0, IBSTAT_PORT, ""
        return self.rc, self.output, self.err

    @property
    def bench(self):
        return [call for call in self.calls if call[0][0].endswith("timeout")]


@pytest.fixture
def run_module(ansible_module):
    def run(args, runner, expect_failure=False, check_mode=False, have_ibstat=True):
        known = {"timeout": "/usr/bin/timeout", "ib_write_bw": "/usr/bin/ib_write_bw"}
        if have_ibstat:
            known["ibstat"] = "/usr/sbin/ibstat"
        return ansible_module(
            ib_write_bw, args, runner, expect_failure=expect_failure, check_mode=check_mode, bin_path=known.get
        )

    return run


def test_client_seed_run_passes_default_fraction(run_module, fixture_text):
    runner = FakeRunner(fixture_text(SEED))
    result = run_module({"device": "mlx5_1", "server": "dgx02", "line_rate_gbit_per_s": 100}, runner)
    assert result["verdict"] == {
        "status": "PASS",
        "observed": 11264.11,
        "expected": 10728.84,  # 0.9 x 100 Gb/s in perftest MB/sec (2^20 bytes)
        "observed_gbit_per_s": 94.49,
        "line_rate_gbit_per_s": 100.0,
        "remedy": "",
    }
    assert result["role"] == "client"
    assert result["cmd"] == [
        *("/usr/bin/ib_write_bw", "-d", "mlx5_1", "-i", "1", "-p", "18515", "-D", "5"),
        *("-s", "65536", "-q", "1", "-F", "dgx02"),
    ]
    [(argv, kwargs)] = runner.bench
    assert argv[:3] == ["/usr/bin/timeout", "--kill-after=30", "65"]  # duration 5 + 60 for a client
    assert kwargs == {"environ_update": {"LC_ALL": "C"}}
    assert result["result"]["header"]["device"] == "mlx5_1"


def test_seed_threshold_11000_and_a_stricter_one(run_module, fixture_text):
    args = {"device": "mlx5_1", "server": "dgx02", "min_mib_per_s": 11000}
    assert run_module(args, FakeRunner(fixture_text(SEED)))["verdict"]["status"] == "PASS"
    result = run_module({**args, "min_mib_per_s": 11300}, FakeRunner(fixture_text(SEED)), expect_failure=True)
    assert result["verdict"]["status"] == "FAIL"
    assert result["verdict"]["remedy"].startswith("11264.11 MB/sec is below 11300.00 MB/sec on mlx5_1 port 1")
    assert "verdict fail" in result["msg"]
    report_only = {**args, "min_mib_per_s": 11300, "fail_on_verdict": False}
    reported = run_module(report_only, FakeRunner(fixture_text(SEED)))
    assert reported["verdict"]["status"] == "FAIL"


def test_server_gbits_line_rate_from_ibstat(run_module, real_output):
    runner = FakeRunner(real_output(DEEPOPS))
    result = run_module({"device": "mlx5_0", "report_gbits": True, "duration": 10, "use_cuda": 2}, runner)
    assert result["role"] == "server"
    assert result["cmd"][-2:] == ["--report_gbits", "--use_cuda=2"]
    assert runner.calls[0][0] == ["/usr/sbin/ibstat", "mlx5_0", "1"]
    assert runner.bench[0][0][2] == "130"  # duration 10 + 120 for a server waiting for its client
    verdict = result["verdict"]
    assert (
        verdict["status"],
        verdict["observed"],
        verdict["observed_gbit_per_s"],
        verdict["line_rate_gbit_per_s"],
    ) == (
        "PASS",
        11014.94,
        92.4,
        100.0,
    )


def test_port_down_verdict(run_module):
    runner = FakeRunner("", rc=1, err=" Port number 1 state is Down\n Couldn't get context for the device\n")
    args = {"device": "mlx5_0", "server": "n1", "line_rate_gbit_per_s": 100}
    result = run_module(args, runner, expect_failure=True)
    assert result["verdict"]["status"] == "FAIL"
    assert result["verdict"]["observed"] is None
    assert "mlx5_0 port 1 is not Active (Port number 1 state is Down)" in result["verdict"]["remedy"]


def test_timeout_verdict_names_the_peer(run_module):
    waiting = "\n************************************\n* Waiting for client to connect... *\n"
    runner = FakeRunner(waiting, rc=124)
    args = {"device": "mlx5_0", "line_rate_gbit_per_s": 100, "timeout": 30, "fail_on_verdict": False}
    result = run_module(args, runner)
    assert result["rc"] == 124
    remedy = result["verdict"]["remedy"]
    assert remedy.startswith("ib_write_bw did not finish within 30 s: is a client running and reachable")
    assert remedy.endswith(" on TCP port 18515 (firewall)?")


def test_no_threshold_without_ibstat(run_module, fixture_text):
    args = {"device": "mlx5_1", "server": "dgx02"}
    result = run_module(args, FakeRunner(fixture_text(SEED)), expect_failure=True, have_ibstat=False)
    assert result["verdict"]["expected"] is None
    assert result["verdict"]["remedy"].startswith("no threshold")


def test_unreadable_output_and_bad_arguments(run_module):
    result = run_module({"device": "mlx5_0", "server": "n1"}, FakeRunner("hello\n"), expect_failure=True)
    assert result["msg"].startswith("could not read ib_write_bw output (rc=0)")
    result = run_module({"device": "mlx5_0", "min_fraction": 1.5}, FakeRunner(), expect_failure=True)
    assert result["msg"] == "min_fraction must be in (0, 1], got 1.5"


def test_check_mode_runs_nothing(run_module):
    runner = FakeRunner()
    result = run_module({"device": "mlx5_0", "server": "n1", "duration": 0}, runner, check_mode=True)
    assert runner.calls == []
    assert result["verdict"] is None
    assert "-D" not in result["cmd"]
