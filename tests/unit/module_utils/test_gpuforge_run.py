"""gpuforge_run.Tool, the one command runner: argv, the C locale, the bounded run (timeout wrapper, one kill
delay), bounded output, background start, and one message shape for a missing, broken, failing or hung tool."""

from __future__ import annotations

import importlib.util
import platform
import time
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_run
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import (
    KILL_AFTER_S,
    Bounded,
    Ran,
    Tool,
    ToolNotRun,
    missing_tool,
)

HOST = platform.node()
# gpuforge-health's own runner over subprocess (LocalHost), which module_utils may not hold from ansible-core 2.21 on:
# the launcher's body, loaded from its file as the launcher runs it (beside the installed module_utils).
_LOCAL = Path(__file__).resolve().parents[3] / "roles" / "node_health" / "files" / "gpuforge_health_local.py"
_SPEC = importlib.util.spec_from_file_location("gpuforge_health_local", _LOCAL)
local = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(local)


class Failed(Exception):
    pass


class FakeModule:
    """get_bin_path from a table, run_command answering `reply` (or raising it), fail_json raising Failed."""

    def __init__(self, reply=(0, "", ""), paths=None):
        self.reply = reply
        self.paths = {"timeout": "/usr/bin/timeout"} if paths is None else paths
        self.calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        self.calls.append(("get_bin_path", name, opt_dirs))
        return self.paths.get(name)

    def run_command(self, args, **kwargs):
        self.calls.append((args, kwargs))
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply

    def fail_json(self, **result):
        raise Failed(result)

    def runs(self):
        return [call for call in self.calls if call[0] != "get_bin_path"]


def failure(call):
    with pytest.raises(Failed) as info:
        call()
    return info.value.args[0]


def test_one_kill_delay_for_every_bounded_run():
    assert KILL_AFTER_S == 30


def test_run_passes_argv_in_the_c_locale_and_returns_the_streams():
    module = FakeModule((0, "out\n", "err\n"))
    ran = Tool(module, "ibstat", "install infiniband-diags").run(["mlx5_0", 1], environ={"X": "1"})
    assert ran == Ran(0, "out\n", "err\n") and ran.out == "out\n"
    args, kwargs = module.runs()[0]
    assert args == ["ibstat", "mlx5_0", "1"]
    assert kwargs == {"environ_update": {"LC_ALL": "C", "X": "1"}, "handle_exceptions": False}


def test_run_refuses_a_shell_string():
    with pytest.raises(TypeError, match="argv"):
        Tool(FakeModule(), "ls", "fix").run("-l /tmp")


def test_run_uses_the_path_require_found_and_passes_cwd_and_expand():
    module = FakeModule(paths={"make": "/usr/bin/make"})
    tool = Tool(module, "make", "install make")
    assert tool.require() == "/usr/bin/make"
    tool.run(["-f", "Makefile"], cwd="/tmp/build", expand=False)
    args, kwargs = module.runs()[0]
    assert args == ["/usr/bin/make", "-f", "Makefile"]
    assert kwargs["cwd"] == "/tmp/build" and kwargs["expand_user_and_vars"] is False


def test_require_names_where_it_looked():
    module = FakeModule(paths={})
    result = failure(lambda: Tool(module, "lsmod", "install kmod", opt_dirs=["/sbin"], result={"name": "x"}).require())
    assert result == {"msg": f"lsmod not found in PATH, /sbin on {HOST}: install kmod", "name": "x"}
    assert ("get_bin_path", "lsmod", ["/sbin"]) in module.calls


def test_find_is_none_when_absent_and_raise_mode_raises():
    module = FakeModule(paths={})
    tool = Tool(module, "perfquery", "install infiniband-diags", on_error="raise")
    assert tool.find() is None
    with pytest.raises(ToolNotRun, match=f"perfquery not found in PATH on {HOST}: install infiniband-diags"):
        tool.require()
    with pytest.raises(ValueError):
        Tool(module, "x", "fix", on_error="ignore")


def test_a_missing_program_is_named_with_its_directory_and_the_fix():
    module = FakeModule(FileNotFoundError(2, "No such file or directory"))
    fix = "is IBM Storage Scale (gpfs.base) installed?"
    result = failure(lambda: Tool(module, "/usr/lpp/mmfs/bin/mmlsconfig", fix, result={"a": 1}).run(["-Y"]))
    assert result == {"msg": f"mmlsconfig not found at /usr/lpp/mmfs/bin on {HOST}: {fix}", "a": 1}


def test_a_program_that_cannot_run_is_not_called_missing():
    module = FakeModule(PermissionError(13, "Permission denied"))
    result = failure(lambda: Tool(module, "/usr/sbin/ibstat", "install infiniband-diags").run())
    assert result["msg"] == f"/usr/sbin/ibstat could not be run on {HOST} (Permission denied): install infiniband-diags"


def test_a_wrapper_script_that_cannot_find_its_program_is_missing():
    module = FakeModule((127, "", "/usr/bin/scontrol: 3: exec: scontrol.real: not found\n"))
    with pytest.raises(ToolNotRun) as info:
        Tool(module, "/usr/bin/scontrol", "install slurm-client", on_error="raise").run(["show", "node"])
    assert str(info.value).startswith(f"scontrol not found at /usr/bin on {HOST}: install slurm-client (")


def test_other_results_pass_through_unless_checked():
    module = FakeModule((1, "", "Unit nvidia-fabricmanager.service not loaded.\n"))
    tool = Tool(module, "systemctl", "install systemd")
    assert tool.run(["restart", "x"]) == (1, "", "Unit nvidia-fabricmanager.service not loaded.\n")
    result = failure(lambda: tool.run(["restart", "x"], check=True))
    assert result["msg"] == (
        f"`systemctl restart x` failed on {HOST} (rc 1): Unit nvidia-fabricmanager.service not loaded.\n"
        "Fix: install systemd"
    )


def test_run_bounded_wraps_the_command_and_keeps_the_streams_apart():
    module = FakeModule((0, "out\n", "err\n"))
    ran = Tool(module, "ib_write_bw", "install perftest").run_bounded(["-d", "mlx5_0"], 65)
    assert ran == Bounded(0, "out\n", "err\n", False)
    args, kwargs = module.runs()[0]
    assert args == ["/usr/bin/timeout", "--kill-after=30", "65", "ib_write_bw", "-d", "mlx5_0"]
    assert kwargs == {"environ_update": {"LC_ALL": "C"}}


@pytest.mark.parametrize("rc", [124, 137])
def test_run_bounded_reports_the_timeout(rc):
    assert Tool(FakeModule((rc, "", "")), "x", "fix").run_bounded([], 5).timed_out is True


def test_run_bounded_checked_names_a_timeout_and_a_failure():
    result = failure(
        lambda: Tool(FakeModule((124, "", "")), "dcgmi", "restart nvidia-dcgm").run_bounded([], 5, check=True)
    )
    assert result["msg"] == f"`dcgmi` did not finish within 5 s on {HOST}: restart nvidia-dcgm"
    result = failure(lambda: Tool(FakeModule((3, "", "boom\n")), "x", "fix").run_bounded(["-a"], 5, check=True))
    assert result["msg"] == f"`x -a` failed on {HOST} (rc 3): boom\nFix: fix"


def test_a_command_timeout_cannot_start_names_it_the_host_and_the_fix():
    module = FakeModule((127, "", "timeout: failed to run command 'mpirun': No such file or directory\n"))
    result = failure(lambda: Tool(module, "mpirun", "install Open MPI", result={"a": 1}).run_bounded(["-np", "2"], 60))
    assert result["msg"] == (
        f"mpirun not found in PATH on {HOST}: install Open MPI (timeout: failed to run command 'mpirun': "
        "No such file or directory)"
    )
    assert result["a"] == 1


def test_a_command_timeout_cannot_run_is_not_called_missing():
    module = FakeModule((126, "", "timeout: failed to run command '/opt/x': Permission denied\n"))
    result = failure(lambda: Tool(module, "/opt/x", "check that it is executable").run_bounded([], 60))
    assert result["msg"].startswith(f"/opt/x could not be run on {HOST}: check that it is executable")


def test_a_benchmark_that_exits_127_by_itself_is_its_own_result():
    module = FakeModule((127, "NCCL WARN something", "mpirun noticed that process rank 1 exited with 127"))
    assert Tool(module, "mpirun", "install Open MPI").run_bounded([], 60).rc == 127


def test_no_timeout_binary():
    result = failure(lambda: Tool(FakeModule(paths={}), "x", "fix").run_bounded([], 5))
    assert result["msg"] == f"timeout not found on {HOST}: install coreutils"


def test_output_is_bounded_to_its_end(monkeypatch):
    monkeypatch.setattr(gpuforge_run, "OUTPUT_LIMIT_CHARS", 10)
    ran = Tool(FakeModule((0, "0123456789abcdef", "short")), "x", "fix").run()
    assert ran.out == "[gpuforge: the first 6 characters of this output were dropped]\n6789abcdef"
    assert ran.err == "short"


class Process:
    def __init__(self):
        self.terminated = False

    def poll(self):
        return 0 if self.terminated else None

    def terminate(self):
        self.terminated = True


class ServingModule(FakeModule):
    """run_command for a server: hands its 'process' to before_communicate_callback, then runs until terminated
    (or returns at once with `reply` when quick)."""

    def __init__(self, reply=(0, "served\n", ""), quick=True):
        super().__init__(reply)
        self.quick = quick
        self.process = Process()

    def run_command(self, args, **kwargs):
        self.calls.append((args, kwargs))
        kwargs["before_communicate_callback"](self.process)
        while not self.quick and not self.process.terminated:
            time.sleep(0.01)
        return self.reply if self.quick else (124, "", "Terminated\n")


def test_background_runs_bounded_and_collects_the_result():
    module = ServingModule()
    server = Tool(module, "ib_write_bw", "install perftest").start_background(["-d", "mlx5_0"], 90, environ={"A": "1"})
    assert server.wait(5) is True and not server.running()
    assert server.result == Bounded(0, "served\n", "", False)
    args, kwargs = module.runs()[0]
    assert args == ["/usr/bin/timeout", "--kill-after=30", "90", "ib_write_bw", "-d", "mlx5_0"]
    assert kwargs["environ_update"] == {"LC_ALL": "C", "A": "1"} and kwargs["handle_exceptions"] is False


def test_background_stop_terminates_a_server_that_hangs():
    module = ServingModule(quick=False)
    server = Tool(module, "ib_write_bw", "install perftest").start_background([], 90)
    assert server.wait(0.05) is False and server.running()
    assert server.stop(5) is True
    assert module.process.terminated and server.result.timed_out is True


def test_background_that_cannot_start_is_recorded_not_raised():
    server = Tool(FakeModule(FileNotFoundError(2, "No such file")), "ib_write_bw", "fix").start_background([], 9)
    assert server.wait(5) is True
    assert server.result.rc is None and server.result.err.startswith(f"could not start ib_write_bw on {HOST}:")


def test_missing_tool_message():
    assert missing_tool("ibstat", "install infiniband-diags") == f"ibstat not found on {HOST}: install infiniband-diags"
    assert missing_tool("/opt/bin/x", "fix", "PATH") == f"x not found at /opt/bin on {HOST}: fix"
    assert gpuforge_run.this_host() == HOST


def test_output_tail_quotes_the_end_of_the_output():
    output_tail = gpuforge_run.output_tail
    lines = [f"line {number}" for number in range(40)]
    assert output_tail("\n".join(lines) + "\n\n") == "\n".join(lines[-gpuforge_run.OUTPUT_TAIL_LINES :])
    assert output_tail("  \n\n") == output_tail(None) == "(no output)"
    assert len(output_tail("x" * 5000)) == 1500


def test_local_host_runs_real_programs_the_way_run_command_does(tmp_path):
    host = local.LocalHost(timeout_seconds=10)
    sh = Tool(host, "sh", "install a POSIX shell")
    assert sh.require().endswith("/sh")
    ran = sh.run(["-c", 'printf "%s %s" "$LC_ALL" "$GF_X"; echo oops >&2', "ignored"], environ={"GF_X": "1"})
    assert ran == Ran(0, "C 1", "oops\n")
    assert Tool(host, "cat", "install coreutils").run([], data="in\n").out == "in\n"
    assert Tool(host, "pwd", "install coreutils").run([], cwd=str(tmp_path)).out.strip() == str(tmp_path)


def test_local_host_missing_program_and_its_own_timeout():
    host = local.LocalHost(timeout_seconds=0.2)
    with pytest.raises(ToolNotRun, match=f"no-such-gpuforge-tool not found in PATH on {HOST}: fix it"):
        Tool(host, "no-such-gpuforge-tool", "fix it").run()
    ran = Tool(host, "sleep", "install coreutils").run(["5"])
    assert ran.rc == 124 and "did not finish within 0.2 s" in ran.err


def test_local_host_bounded_run_stops_the_program_with_timeout():
    ran = Tool(local.LocalHost(), "sleep", "install coreutils").run_bounded(["5"], 1)
    assert ran.timed_out is True and ran.rc == 124
