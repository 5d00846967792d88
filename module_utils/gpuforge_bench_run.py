"""What the benchmark modules (nccl_tests, resnet50_benchmark) share: the bounded run and the verdict gate.

Pure helpers over an AnsibleModule-like object (run_command, get_bin_path); no global state. The timeout
wrapper itself is gpuforge_run.run_bounded, which ib_write_bw uses too.
"""

from __future__ import annotations

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import env_vars
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import KILL_AFTER_S, TIMED_OUT_RCS
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import run_bounded as _run_bounded

__all__ = [
    "COMMON_OPTIONS",
    "KILL_AFTER_S",
    "STATUS_RANK",
    "TIMED_OUT_RCS",
    "check_common_options",
    "run_bounded",
    "verdict_blocks",
]

STATUS_RANK = {"ok": 0, "warn": 1, "fail": 2}

# Options every benchmark module takes, with the same meaning (see each module's DOCUMENTATION).
COMMON_OPTIONS = {
    "env": {"type": "dict", "default": {}},
    "timeout": {"type": "int", "default": 1800},
    "expect": {"type": "dict", "default": {}},
    "fail_on": {"type": "str", "choices": ["fail", "warn", "never"], "default": "fail"},
}


def check_common_options(params: dict, expect_spec) -> None:
    """env and expect of COMMON_OPTIONS checked and coerced in place ("50" -> 50.0) with expect_spec, the
    module's own expectation record; raises OptionError naming the key of a malformed value."""
    params["env"] = env_vars()("env", params["env"] or {})
    params["expect"] = expect_spec("expect", params["expect"] or {})


def run_bounded(module, cmd: list[str], seconds: int, environ: dict[str, str], fix: str = "", result=None):
    """gpuforge_run.run_bounded with stdout and stderr joined, as the benchmarks read and save them.
    Returns (rc, output, timed_out); fix is the remedy named when timeout(1) cannot start cmd[0]."""
    rc, out, err, timed_out = _run_bounded(module, cmd, seconds, environ, fix=fix, result=result)
    return rc, out + err, timed_out


def verdict_blocks(verdict: str, fail_on: str) -> bool:
    """True when a verdict is at least as bad as fail_on (never: nothing blocks)."""
    return fail_on != "never" and STATUS_RANK[verdict] >= STATUS_RANK[fail_on]
