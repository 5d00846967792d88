"""What the benchmark modules (nccl_tests, resnet50_benchmark, fio_benchmark, p2p_bandwidth) share: the
bounded run, the saved output, the run -> parse -> judge tail and the verdict gate.

Pure helpers over an AnsibleModule-like object (fail_json, exit_json); no global state. The run itself is
gpuforge_run.Tool.run_bounded, the runner every module uses.

A single-run module ends::

    run = Tool(module, cmd[0], fix, result=result).run_bounded(cmd[1:], seconds, environ=env)
    parsed = judge_run(module, result, run, parse, judge, key="fio", timed_out=..., unreadable=..., output_path=...)
    ...  # what only this module adds to result
    finish(module, result, "fio on /home:", params["fail_on"])
"""

from __future__ import annotations

import os

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import (
    FAIL,
    PASS,
    STATUS_RANK,
    WARN,
    worst_status,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import env_vars

__all__ = [
    "COMMON_OPTIONS",
    "STATUS_RANK",
    "check_common_options",
    "failing_checks",
    "finish",
    "joined_output",
    "judge_run",
    "last_lines",
    "save_output",
    "verdict_blocks",
]

# Options every benchmark module takes, with the same meaning (see each module's DOCUMENTATION).
COMMON_OPTIONS = {
    "env": {"type": "dict", "default": {}},
    "timeout": {"type": "int", "default": 1800},
    "expect": {"type": "dict", "default": {}},
    "fail_on": {"type": "str", "choices": ["fail", "warn", "never"], "default": "fail"},
}
# The verdict from which fail_on fails the task: its level, named in lower case as the option takes it.
FAIL_ON_VERDICT = {"fail": FAIL, "warn": WARN}


def check_common_options(params: dict, expect_spec) -> None:
    """env and expect of COMMON_OPTIONS checked and coerced in place ("50" -> 50.0) with expect_spec, the
    module's own expectation record; raises OptionError naming the key of a malformed value."""
    params["env"] = env_vars()("env", params["env"] or {})
    params["expect"] = expect_spec("expect", params["expect"] or {})


def joined_output(run) -> str:
    """A bounded run's stdout and stderr joined, as the benchmarks read and save them."""
    return run.out + run.err


def verdict_blocks(verdict: str, fail_on: str) -> bool:
    """True when a verdict (PASS, WARN, FAIL) is at least as bad as fail_on's (never: nothing blocks)."""
    return fail_on != "never" and STATUS_RANK[verdict] >= STATUS_RANK[FAIL_ON_VERDICT[fail_on]]


def last_lines(output: str, limit: int | None = 500) -> str:
    """The last three lines of a run's output joined with `` | `` (at most limit characters), for a message."""
    tail = " | ".join(output.strip().splitlines()[-3:])
    return tail if limit is None else tail[:limit]


def save_output(module, path: str, text: str, result: dict) -> None:
    """Write text to path (its directory created) and mark result changed; when it cannot be written the
    task fails (fail_json with result) naming the path."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        module.fail_json(msg=f"cannot write {path}: {exc}", **result)
    result["changed"] = True


def judge_run(module, result, run, parse, judge, *, key, timed_out, unreadable, output_path=None, failed=""):
    """The run -> parse -> judge tail of a benchmark module; the task fails (fail_json with result) where the
    run left nothing to judge. Returns the parsed output, with result's checks and verdict set.

    run is Tool.run_bounded's Bounded(rc, out, err, timed_out), read as joined_output(run). In order: result's
    ``rc``; the output saved to output_path (save_output); a timeout fails with the message timed_out; a non-zero
    rc fails with ``"<failed> (rc N): <last lines>"`` when failed is given (the output of a failed run is not
    read);
    parse(output) becomes result[key], and a gpuforge ParseError from it fails with the message
    unreadable(exc); judge(parsed) gives the checks, stored as result's ``checks`` with their worst status
    as its ``verdict``. finish() then gates the verdict.
    """
    rc, output, was_timed_out = run.rc, joined_output(run), run.timed_out
    result["rc"] = rc
    if output_path:
        save_output(module, output_path, output, result)
    if was_timed_out:
        module.fail_json(msg=timed_out, **result)
    if failed and rc != 0:
        module.fail_json(msg=f"{failed} (rc {rc}): {last_lines(output)}", **result)
    try:
        parsed = parse(output)
    except ParseError as exc:
        module.fail_json(msg=unreadable(exc), **result)
    result[key] = parsed
    checks = judge(parsed)
    result["checks"] = checks
    result["verdict"] = worst_status(checks)
    return parsed


def failing_checks(checks: list, label=None) -> str:
    """``name=observed (expected ...)`` of each check that did not pass, comma-separated; label(check)
    names a check (default: its name)."""
    return ", ".join(
        f"{label(check) if label else check['name']}={check['observed']} (expected {check['expected']})"
        for check in checks
        if check["status"] != PASS
    )


def finish(module, result: dict, what: str, fail_on: str, label=None) -> None:
    """The end of a benchmark module: fail_json with ``"<what> verdict <verdict>: <failing checks>"`` when
    result's verdict blocks at fail_on (verdict_blocks), else exit_json; label as for failing_checks."""
    verdict = result["verdict"]
    if verdict_blocks(verdict, fail_on):
        module.fail_json(msg=f"{what} verdict {verdict}: {failing_checks(result['checks'], label)}", **result)
    module.exit_json(**result)
