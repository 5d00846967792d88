"""The one way a gpuforge module runs a program on the managed node: ``Tool``.

A ``Tool`` is one host-side program (``nvidia-smi``, ``dcgmi``, ``ib_write_bw``, ``systemctl`` ...) together with
the fix a user needs when it is missing or broken. It wraps ``AnsibleModule.run_command`` the way
community.general's ``CmdRunner`` does ("a reusable runner with consistent argument formatting and sensible
defaults", community.general ``plugins/module_utils/cmd_runner.py``), with gpuforge's own defaults:

- argv only (a list, never a shell string);
- the C locale (``LC_ALL=C``), so parsers read the tool's untranslated output;
- an optional bound in seconds (coreutils ``timeout``, which starts the program in its own process group and
  signals the whole group, so an MPI rank or a perftest server is not left behind);
- bounded output: at most ``OUTPUT_LIMIT_CHARS`` of each stream is kept (its end, where tools say why they
  stopped);
- one message shape for a program that is missing, cannot start, fails or times out: it names the program, the
  host, what failed and the fix.

What happens on such a problem is chosen once per tool: ``on_error="fail"`` (the default) ends the module with
``fail_json(msg=..., **result)``; ``on_error="raise"`` raises ``ToolNotRun`` with the same message, for callers
that record the problem and carry on (a node check that still judges its other inputs).

Over an AnsibleModule, or over the same three methods of gpuforge-health's own runner on the node without Ansible
(LocalHost in roles/node_health/files/gpuforge_health_local.py: a subprocess call is refused in module_utils by
ansible-test from ansible-core 2.21 on); this file is the only one in module_utils/ and library/ that starts a
process (a unit test holds every other file to that). No global state. Node Python 3.8+.
"""

from __future__ import annotations

import os
import platform
import threading
from collections import namedtuple

__all__ = [
    "KILL_AFTER_S",
    "OUTPUT_LIMIT_CHARS",
    "TIMED_OUT_RCS",
    "Background",
    "Bounded",
    "Ran",
    "Tool",
    "ToolNotRun",
    "missing_tool",
    "output_tail",
    "this_host",
]

# Seconds timeout(1) waits after its TERM before it KILLs the process group: time for mpirun/srun/torchrun
# to take their ranks down. One value for every bounded run (benchmarks, ib_write_bw, the GDR loopback).
KILL_AFTER_S = 30
# timeout(1): 124 when the command timed out, 137 (128 + KILL) when it had to be killed (coreutils manual,
# "timeout invocation").
TIMED_OUT_RCS = (124, 137)
# timeout(1) and shells: 127 the command was not found, 126 it was found but could not run.
NOT_RUN_RCS = (126, 127)
# The most a run keeps of each stream (characters). No tool gpuforge runs prints near this much; a runaway one
# must not fill the module's result (and the controller's memory) with it.
OUTPUT_LIMIT_CHARS = 16 * 1024 * 1024

# How much of a failed command's output a message quotes: its end, where tools print why they stopped.
OUTPUT_TAIL_LINES = 15
OUTPUT_TAIL_CHARS = 1500

# What run() returns, and run_bounded() (timed_out: the bound in seconds was reached and the program stopped).
Ran = namedtuple("Ran", "rc out err")
Bounded = namedtuple("Bounded", "rc out err timed_out")


def output_tail(text: str) -> str:
    """The last non-empty lines of a command's output (at most OUTPUT_TAIL_LINES and OUTPUT_TAIL_CHARS), for a
    failure message; "(no output)" when there is none."""
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    kept = "\n".join(lines[-OUTPUT_TAIL_LINES:])
    return kept[-OUTPUT_TAIL_CHARS:] if kept else "(no output)"


def this_host() -> str:
    return platform.node() or "this host"


def missing_tool(tool: str, fix: str, searched: str = "") -> str:
    """'<tool> not found [at <dir>|in <searched>] on <host>: <fix>'. tool may be a path (its directory is named)."""
    name, where = os.path.basename(tool) or tool, os.path.dirname(tool)
    place = f" at {where}" if where else (f" in {searched}" if searched else "")
    return f"{name} not found{place} on {this_host()}: {fix}"


def bounded(text) -> str:
    """text ("" for None), cut to its last OUTPUT_LIMIT_CHARS characters behind a line saying how much was cut."""
    text = text or ""
    if len(text) <= OUTPUT_LIMIT_CHARS:
        return text
    dropped = len(text) - OUTPUT_LIMIT_CHARS
    return f"[gpuforge: the first {dropped} characters of this output were dropped]\n{text[-OUTPUT_LIMIT_CHARS:]}"


class ToolNotRun(Exception):
    """A tool that could not be found, started, finished in time or run successfully (on_error="raise"); the
    message names it, the host, what failed and the fix."""


class Tool:
    """One program on the managed node and the fix for it.

    module: the AnsibleModule (or a stand-in answering get_bin_path, run_command, fail_json).
    name: the program, a bare name looked up in PATH (and opt_dirs) or a path.
    fix: what the user does when it is missing or broken ("install infiniband-diags").
    result: what fail_json returns beside the message (the module's partial result), on_error="fail" only.
    on_error: "fail" ends the module on a problem, "raise" raises ToolNotRun.
    """

    def __init__(self, module, name: str, fix: str, *, opt_dirs=None, result=None, on_error: str = "fail"):
        if on_error not in ("fail", "raise"):
            raise ValueError(f"on_error must be 'fail' or 'raise', not {on_error!r}")
        self.module = module
        self.name = name
        self.fix = fix
        self.opt_dirs = list(opt_dirs or [])
        self.result = result if result is not None else {}
        self.on_error = on_error
        self.path = None  # set by find()/require(); run() uses name as given until then

    # --- problems: one message shape, one policy ---

    def problem(self, message: str):
        """End the module with message (on_error="fail") or raise ToolNotRun(message)."""
        if self.on_error == "raise":
            raise ToolNotRun(message)
        self.module.fail_json(msg=message, **self.result)
        raise ToolNotRun(message)  # not reached with a real AnsibleModule: fail_json exits

    def missing(self, argv0: str = "") -> str:
        """The not-found message for this tool."""
        searched = "" if os.path.dirname(self.name) else "PATH" + "".join(f", {where}" for where in self.opt_dirs)
        return missing_tool(argv0 or self.name, self.fix, searched)

    def failed(self, argv: list, rc: int, out: str, err: str) -> str:
        """'`<command>` failed on <host> (rc N): <output tail>\\nFix: <fix>'."""
        shown = " ".join(str(arg) for arg in argv)
        return f"`{shown}` failed on {this_host()} (rc {rc}): {output_tail(err or out)}\nFix: {self.fix}"

    # --- finding the program ---

    def find(self):
        """The program's path (get_bin_path over PATH and opt_dirs), or None when it is not there."""
        if self.path is None:
            self.path = self.module.get_bin_path(self.name, opt_dirs=self.opt_dirs) or None
        return self.path

    def require(self) -> str:
        """find(), with the not-found problem when the program is not there."""
        return self.find() or self.problem(self.missing())

    def argv(self, args) -> list:
        if isinstance(args, (str, bytes)):
            raise TypeError(f"{self.name}: arguments are a list (argv), not a string: {args!r}")
        return [self.path or self.name, *[str(arg) for arg in args]]

    # --- running it ---

    def run(self, args=(), *, environ=None, cwd=None, expand: bool = True, data=None, check: bool = False) -> Ran:
        """Run the program with args in the C locale -> Ran(rc, out, err). A program that cannot start
        (FileNotFoundError, another OSError, a wrapper script's 127 "not found") is a problem naming it; so is a
        non-zero rc with check=True. expand=False passes the arguments as given (run_command expands ~ and $VARS
        in each by default)."""
        argv = self.argv(args)
        options = {"environ_update": {"LC_ALL": "C", **(environ or {})}, "handle_exceptions": False}
        if cwd is not None:
            options["cwd"] = cwd
        if data is not None:
            options["data"] = data
        if not expand:
            options["expand_user_and_vars"] = False
        try:
            rc, out, err = self.module.run_command(argv, **options)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                return self.problem(self.missing(argv[0]))
            return self.problem(f"{argv[0]} could not be run on {this_host()} ({exc.strerror or exc}): {self.fix}")
        out, err = bounded(out), bounded(err)
        if rc == 127 and "not found" in err.lower():
            return self.problem(f"{self.missing(argv[0])} ({err.strip()[:200]})")
        if check and rc != 0:
            return self.problem(self.failed(argv, rc, out, err))
        return Ran(rc, out, err)

    def timeout_argv(self, seconds: int) -> list:
        timeout = self.module.get_bin_path("timeout")
        if not timeout:
            self.problem(missing_tool("timeout", "install coreutils"))
        return [timeout, f"--kill-after={KILL_AFTER_S}", str(int(seconds))]

    def run_bounded(self, args, seconds: int, *, environ=None, check: bool = False) -> Bounded:
        """Run the program under coreutils timeout for at most `seconds` (then TERM to its process group, KILL
        KILL_AFTER_S later) -> Bounded(rc, out, err, timed_out). A program timeout(1) cannot start is a problem
        naming it; so, with check=True, is a timeout or a non-zero rc. A program that exits 126/127 by itself
        (mpirun when a rank does) is its own result."""
        argv = self.argv(args)
        rc, out, err = self.module.run_command(
            [*self.timeout_argv(seconds), *argv], environ_update={"LC_ALL": "C", **(environ or {})}
        )
        out, err = bounded(out), bounded(err)
        if rc in NOT_RUN_RCS and "failed to run command" in err:
            what = self.missing(argv[0])
            if rc == 126:
                what = f"{argv[0]} could not be run on {this_host()}: {self.fix}"
            self.problem(f"{what} ({err.strip()[:200]})")
        timed_out = rc in TIMED_OUT_RCS
        if check and timed_out:
            self.problem(f"`{' '.join(argv)}` did not finish within {seconds} s on {this_host()}: {self.fix}")
        if check and rc != 0:
            self.problem(self.failed(argv, rc, out, err))
        return Bounded(rc, out, err, timed_out)

    def start_background(self, args, seconds: int, *, environ=None) -> Background:
        """Start the program under timeout(1) (as run_bounded) in a thread and return at once; the Background
        collects its result. For a server whose client this module runs next (the GPUDirect RDMA loopback)."""
        return Background(self, [*self.timeout_argv(seconds), *self.argv(args)], environ)


class Background:
    """A program started by Tool.start_background. result is None until it ends, then a Bounded (rc None and the
    reason in err when it could not be started: that is recorded, not raised, in the thread)."""

    def __init__(self, tool: Tool, argv: list, environ=None):
        self.tool = tool
        self.argv = argv
        self.result = None
        self.processes = []  # the Popen handles run_command passes to before_communicate_callback
        self.thread = threading.Thread(target=self.work, args=(environ,), name=f"{tool.name} (background)")
        self.thread.daemon = True
        self.thread.start()

    def work(self, environ) -> None:
        try:
            rc, out, err = self.tool.module.run_command(
                self.argv,
                environ_update={"LC_ALL": "C", **(environ or {})},
                before_communicate_callback=self.processes.append,
                handle_exceptions=False,  # fail_json from this thread would print a result and end only the thread
            )
            self.result = Bounded(rc, bounded(out), bounded(err), rc in TIMED_OUT_RCS)
        except OSError as exc:
            self.result = Bounded(None, "", f"could not start {self.tool.name} on {this_host()}: {exc}", False)

    def running(self) -> bool:
        return self.thread.is_alive()

    def wait(self, seconds: float) -> bool:
        """Wait at most `seconds` for the program to end; True when it has."""
        self.thread.join(seconds)
        return not self.thread.is_alive()

    def stop(self, grace_seconds: float) -> bool:
        """TERM the program (timeout(1) passes it on to the program's process group) and wait grace_seconds;
        True when it has ended."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        return self.wait(grace_seconds)
