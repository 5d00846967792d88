"""command_reads: several read-only commands in one module run, run in-process (conftest.py's harness) with real
executables on this machine (stat, cat, a Python script that logs its argv and locale) and a command that does not
exist - the results under their names, accepted and rejected exit statuses, check mode, bad options."""

from __future__ import annotations

import json
import platform
import sys

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import command_reads

HOST = platform.node()


def test_each_command_s_outcome_under_its_name(ansible_module, tmp_path):
    present = tmp_path / "present"
    present.mkdir()
    result = ansible_module(
        command_reads,
        {
            "commands": [
                {"name": "paths", "argv": ["stat", "--format=%n", "--", str(present), str(tmp_path / "gone")],
                 "ok_rcs": [0, 1]},
                {"name": "filesystems", "argv": ["cat", "/proc/filesystems"]},
            ]
        },
    )  # fmt: skip
    assert result["changed"] is False
    paths, filesystems = result["outputs"]["paths"], result["outputs"]["filesystems"]
    # stat exits 1 when one path is missing, and prints the ones that are there.
    assert (paths["rc"], paths["stdout_lines"]) == (1, [str(present)])
    assert "No such file or directory" in paths["stderr"]
    assert paths["argv"][0] == "stat"
    assert filesystems["rc"] == 0
    assert any(line.split()[-1] == "proc" for line in filesystems["stdout_lines"])


def test_argv_reaches_the_command_unchanged_and_in_the_c_locale(ansible_module, tmp_path):
    log = tmp_path / "calls.json"
    tool = tmp_path / "tool"
    tool.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"open({str(log)!r}, 'w').write(json.dumps([sys.argv[1:], os.environ.get('LC_ALL')]))\n"
        "print('out'); print('err', file=sys.stderr)\n",
        encoding="utf-8",
    )
    tool.chmod(0o755)
    result = ansible_module(command_reads, {"commands": [{"name": "t", "argv": [str(tool), "a b", "$HOME", ";"]}]})
    # No shell: the space, the variable and the semicolon arrive as written.
    assert json.loads(log.read_text(encoding="utf-8")) == [["a b", "$HOME", ";"], "C"]
    assert result["outputs"]["t"] == {
        "argv": [str(tool), "a b", "$HOME", ";"],
        "rc": 0,
        "stdout": "out\n",
        "stdout_lines": ["out"],
        "stderr": "err\n",
    }


def test_a_status_not_accepted_fails_naming_the_host_the_command_and_its_error(ansible_module, tmp_path):
    result = ansible_module(
        command_reads,
        {
            "commands": [
                {"name": "first", "argv": ["stat", "--", str(tmp_path / "gone")]},
                {"name": "second", "argv": ["cat", "/proc/filesystems"]},
            ]
        },
        expect_failure=True,
    )
    assert result["msg"].startswith(f"{HOST}: `stat -- {tmp_path / 'gone'}` exited 1 (accepted: 0): ")
    assert "No such file or directory" in result["msg"]
    # Every command ran before the task failed, and the results are returned with the failure.
    assert result["outputs"]["second"]["rc"] == 0


def test_a_command_that_cannot_start_is_127_with_the_reason(ansible_module):
    missing = {"name": "showmount", "argv": ["gpuforge-no-such-tool", "-e"]}
    failed = ansible_module(command_reads, {"commands": [missing]}, expect_failure=True)
    assert "gpuforge-no-such-tool not found" in failed["msg"] and f"on {HOST}" in failed["msg"]
    assert failed["outputs"]["showmount"]["rc"] == 127
    # An empty ok_rcs accepts every status, the missing command's included.
    read = ansible_module(command_reads, {"commands": [{**missing, "ok_rcs": []}]})
    assert read["outputs"]["showmount"]["rc"] == 127
    assert "gpuforge-no-such-tool not found" in read["outputs"]["showmount"]["stderr"]


def test_check_mode_runs_the_reads(ansible_module):
    result = ansible_module(command_reads, {"commands": [{"name": "fs", "argv": ["cat", "/proc/filesystems"]}]},
                            check_mode=True)  # fmt: skip
    assert result["changed"] is False and result["outputs"]["fs"]["rc"] == 0


@pytest.mark.parametrize(
    ("commands", "problem"),
    [
        ([{"name": "a", "argv": ["true"]}, {"name": "a", "argv": ["false"]}], "unique name per command; repeated: a"),
        ([{"name": "a", "argv": []}], "no argv for a"),
    ],
)
def test_bad_commands_are_refused_before_anything_runs(ansible_module, commands, problem):
    calls = []
    result = ansible_module(
        command_reads,
        {"commands": commands},
        run_command=lambda argv, **kw: calls.append(argv) or (0, "", ""),
        expect_failure=True,
    )
    assert result["msg"] == f"{HOST}: command_reads: {problem}" or result["msg"].endswith(problem)
    assert calls == []
