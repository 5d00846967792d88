"""The one bounded run (timeout wrapper, one kill delay) and the missing-tool messages."""

from __future__ import annotations

import platform

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_bench_run, gpuforge_run
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import (
    KILL_AFTER_S,
    find_tool,
    missing_tool,
    run_bounded,
    run_tool,
)

HOST = platform.node()


class Failed(Exception):
    pass


class FakeModule:
    """get_bin_path from a table, run_command answering `reply` (or raising it), fail_json raising Failed."""

    def __init__(self, reply=(0, "", ""), paths=None):
        self.reply = reply
        self.paths = {"timeout": "/usr/bin/timeout"} if paths is None else paths
        self.calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.paths.get(name)

    def run_command(self, args, **kwargs):
        self.calls.append((args, kwargs))
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply

    def fail_json(self, **result):
        raise Failed(result)


def failure(call):
    with pytest.raises(Failed) as info:
        call()
    return info.value.args[0]


def test_one_kill_delay_for_every_bounded_run():
    assert KILL_AFTER_S == 30
    assert gpuforge_bench_run.KILL_AFTER_S is KILL_AFTER_S


def test_run_bounded_wraps_the_command_and_keeps_the_streams_apart():
    module = FakeModule((0, "out\n", "err\n"))
    assert run_bounded(module, ["ib_write_bw", "-d", "mlx5_0"], 65) == (0, "out\n", "err\n", False)
    args, kwargs = module.calls[0]
    assert args == ["/usr/bin/timeout", "--kill-after=30", "65", "ib_write_bw", "-d", "mlx5_0"]
    assert kwargs == {"environ_update": {"LC_ALL": "C"}}


@pytest.mark.parametrize("rc", [124, 137])
def test_run_bounded_reports_the_timeout(rc):
    assert run_bounded(FakeModule((rc, "", "")), ["x"], 5)[3] is True


def test_a_command_timeout_cannot_start_names_it_the_host_and_the_fix():
    module = FakeModule((127, "", "timeout: failed to run command 'mpirun': No such file or directory\n"))
    result = failure(lambda: run_bounded(module, ["mpirun", "-np", "2"], 60, fix="install Open MPI", result={"a": 1}))
    assert result["msg"] == (
        f"mpirun not found on {HOST}: install Open MPI (timeout: failed to run command 'mpirun': "
        "No such file or directory)"
    )
    assert result["a"] == 1


def test_a_command_that_cannot_run_is_not_called_missing():
    module = FakeModule((126, "", "timeout: failed to run command '/opt/x': Permission denied\n"))
    result = failure(lambda: run_bounded(module, ["/opt/x"], 60))
    assert result["msg"].startswith(f"/opt/x could not be run on {HOST}: check that it is executable")


def test_a_benchmark_that_exits_127_by_itself_is_its_own_result():
    module = FakeModule((127, "NCCL WARN something", "mpirun noticed that process rank 1 exited with 127"))
    assert run_bounded(module, ["mpirun"], 60)[0] == 127


def test_no_timeout_binary():
    result = failure(lambda: run_bounded(FakeModule(paths={}), ["x"], 5))
    assert result["msg"] == f"timeout not found on {HOST}: install coreutils"


def test_bench_run_joins_the_streams():
    module = FakeModule((0, "out\n", "err\n"))
    assert gpuforge_bench_run.run_bounded(module, ["x"], 5, {"A": "1"}) == (0, "out\nerr\n", False)
    assert module.calls[0][1] == {"environ_update": {"LC_ALL": "C", "A": "1"}}


def test_run_tool_turns_file_not_found_into_a_message():
    module = FakeModule(FileNotFoundError(2, "No such file or directory"))
    fix = "is IBM Storage Scale (gpfs.base) installed?"
    result = failure(lambda: run_tool(module, ["/usr/lpp/mmfs/bin/mmlsconfig", "-Y"], fix))
    assert result["msg"] == f"mmlsconfig not found at /usr/lpp/mmfs/bin on {HOST}: {fix}"
    assert module.calls[0][1] == {"environ_update": {"LC_ALL": "C"}, "handle_exceptions": False}


def test_run_tool_permission_denied():
    module = FakeModule(PermissionError(13, "Permission denied"))
    result = failure(lambda: run_tool(module, ["/usr/sbin/ibstat"], "install infiniband-diags"))
    assert result["msg"] == f"/usr/sbin/ibstat could not be run on {HOST} (Permission denied): install infiniband-diags"


def test_run_tool_wrapper_script_127():
    module = FakeModule((127, "", "/usr/bin/scontrol: 3: exec: scontrol.real: not found\n"))
    result = failure(lambda: run_tool(module, ["/usr/bin/scontrol", "show", "node"], "install slurm-client"))
    assert result["msg"].startswith(f"scontrol not found at /usr/bin on {HOST}: install slurm-client (")


def test_run_tool_passes_other_results_through():
    assert run_tool(FakeModule((1, "", "failed")), ["x"], "fix") == (1, "", "failed")


def test_find_tool():
    assert find_tool(FakeModule(paths={"lsmod": "/sbin/lsmod"}), "lsmod", "install kmod") == "/sbin/lsmod"
    result = failure(lambda: find_tool(FakeModule(paths={}), "lsmod", "install kmod", ["/sbin"], {"name": "x"}))
    assert result == {"msg": f"lsmod not found in PATH, /sbin on {HOST}: install kmod", "name": "x"}


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
