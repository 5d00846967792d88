"""Running tools on the managed node: the one bounded (timeout) run, and failing with a message that names a
missing tool, the host and the fix instead of Ansible's "Error executing command.".

Helpers over an AnsibleModule-like object (get_bin_path, run_command, fail_json); no global state.
"""

from __future__ import annotations

import os
import platform

__all__ = [
    "KILL_AFTER_S",
    "TIMED_OUT_RCS",
    "ToolNotRun",
    "find_tool",
    "missing_tool",
    "output_tail",
    "run_bounded",
    "run_tool",
    "start_tool",
    "this_host",
]

# Seconds timeout(1) waits after its TERM before it KILLs the process group: time for mpirun/srun/torchrun
# to take their ranks down. One value for every bounded run (benchmarks, ib_write_bw).
KILL_AFTER_S = 30
# timeout(1): 124 when the command timed out, 137 (128 + KILL) when it had to be killed.
TIMED_OUT_RCS = (124, 137)
# timeout(1) and shells: 127 the command was not found, 126 it was found but could not run.
NOT_RUN_RCS = (126, 127)


# How much of a failed command's output a message quotes: its end, where tools print why they stopped.
OUTPUT_TAIL_LINES = 15
OUTPUT_TAIL_CHARS = 1500


def output_tail(text: str) -> str:
    """The last non-empty lines of a command's output (at most OUTPUT_TAIL_LINES and OUTPUT_TAIL_CHARS), for a
    failure message; "(no output)" when there is none."""
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    kept = "\n".join(lines[-OUTPUT_TAIL_LINES:])
    return kept[-OUTPUT_TAIL_CHARS:] if kept else "(no output)"


def this_host() -> str:
    return platform.node() or "this host"


def missing_tool(tool: str, fix: str, searched: str = "") -> str:
    """'<tool> not found [at <dir>] on <host>: <fix>'. tool may be a path (its directory is named)."""
    name, where = os.path.basename(tool) or tool, os.path.dirname(tool)
    place = f" at {where}" if where else (f" in {searched}" if searched else "")
    return f"{name} not found{place} on {this_host()}: {fix}"


def find_tool(module, name: str, fix: str, opt_dirs=None, result=None) -> str:
    """get_bin_path, failing the module with missing_tool()'s message (not Ansible's) when it is absent."""
    path = module.get_bin_path(name, opt_dirs=opt_dirs or [])
    if not path:
        searched = "PATH" + (f", {', '.join(opt_dirs)}" if opt_dirs else "")
        module.fail_json(msg=missing_tool(name, fix, searched), **(result or {}))
    return path


class ToolNotRun(Exception):
    """A tool that could not be started; the message names it, the host and the fix."""


def start_tool(module, argv: list, fix: str, environ=None, expand: bool = True):
    """run_command(argv) in the C locale -> (rc, out, err); a tool that cannot be started (FileNotFoundError, another
    OSError, or a wrapper script's 127) raises ToolNotRun naming it instead of "Error executing command.".
    expand=False passes the arguments as given (run_command expands ~ and $VARS in each by default)."""
    try:
        rc, out, err = module.run_command(
            argv,
            environ_update={"LC_ALL": "C", **(environ or {})},
            handle_exceptions=False,
            **({} if expand else {"expand_user_and_vars": False}),
        )
    except OSError as exc:
        problem = missing_tool(argv[0], fix)
        if not isinstance(exc, FileNotFoundError):
            problem = f"{argv[0]} could not be run on {this_host()} ({exc.strerror or exc}): {fix}"
        raise ToolNotRun(problem) from exc
    if rc == 127 and "not found" in (err or "").lower():
        raise ToolNotRun(f"{missing_tool(argv[0], fix)} ({(err or '').strip()[:200]})")
    return rc, out, err


def run_tool(module, argv: list, fix: str, environ=None, result=None):
    """start_tool(), failing the module with its message (and `result`) when the tool cannot be started."""
    try:
        return start_tool(module, argv, fix, environ)
    except ToolNotRun as exc:
        module.fail_json(msg=str(exc), **(result or {}))
        raise  # not reached: fail_json exits


def run_bounded(module, cmd: list, seconds: int, environ=None, fix: str = "", result=None):
    """Run cmd under coreutils timeout, which starts it in its own process group and signals the whole group,
    so a hung rank (mpirun's, torchrun's children) or a perftest server whose client never came is not left
    behind. Returns (rc, stdout, stderr, timed_out). A command timeout(1) cannot start fails the module,
    naming it, the host and fix."""
    timeout = module.get_bin_path("timeout")
    if not timeout:
        module.fail_json(msg=missing_tool("timeout", "install coreutils"), **(result or {}))
    wrapped = [timeout, f"--kill-after={KILL_AFTER_S}", str(seconds), *cmd]
    rc, out, err = module.run_command(wrapped, environ_update={"LC_ALL": "C", **(environ or {})})
    out, err = out or "", err or ""
    if rc in NOT_RUN_RCS and "failed to run command" in err:
        what = missing_tool(cmd[0], fix or "install it or give its full path")
        if rc == 126:
            what = f"{cmd[0]} could not be run on {this_host()}: {fix or 'check that it is executable'}"
        module.fail_json(msg=f"{what} ({err.strip()[:200]})", **(result or {}))
    return rc, out, err, rc in TIMED_OUT_RCS
