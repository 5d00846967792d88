"""What the benchmark modules (nccl_tests, resnet50_benchmark) share: the bounded run and the verdict gate.

Pure helpers over an AnsibleModule-like object (run_command, get_bin_path); no global state.
"""

from __future__ import annotations

# Seconds timeout(1) waits after its TERM before it KILLs the process group.
KILL_AFTER_S = 30
STATUS_RANK = {"ok": 0, "warn": 1, "fail": 2}
TIMED_OUT_RCS = (124, 137)

# Options every benchmark module takes, with the same meaning (see each module's DOCUMENTATION).
COMMON_OPTIONS = {
    "env": {"type": "dict", "default": {}},
    "timeout": {"type": "int", "default": 1800},
    "expect": {"type": "dict", "default": {}},
    "fail_on": {"type": "str", "choices": ["fail", "warn", "never"], "default": "fail"},
}


def run_bounded(module, cmd: list[str], seconds: int, environ: dict[str, str]):
    """Run cmd under coreutils timeout, which starts it in its own process group and signals the whole
    group, so a hung rank (mpirun's, torchrun's children) is not left behind. Returns (rc, output, timed_out)."""
    timeout = module.get_bin_path("timeout", required=True)
    wrapped = [timeout, f"--kill-after={KILL_AFTER_S}", str(seconds), *cmd]
    rc, out, err = module.run_command(wrapped, environ_update={"LC_ALL": "C", **environ})
    return rc, out + (err or ""), rc in TIMED_OUT_RCS


def verdict_blocks(verdict: str, fail_on: str) -> bool:
    """True when a verdict is at least as bad as fail_on (never: nothing blocks)."""
    return fail_on != "never" and STATUS_RANK[verdict] >= STATUS_RANK[fail_on]
