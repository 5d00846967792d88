"""The benchmark modules' shared run -> parse -> judge tail and verdict gate."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_common import (
    failing_checks,
    finish,
    joined_output,
    judge_run,
    last_lines,
    save_output,
    verdict_blocks,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import bench_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Bounded


def test_joined_output_is_stdout_then_stderr():
    assert joined_output(Bounded(0, "out\n", "err\n", False)) == "out\nerr\n"


@pytest.mark.parametrize(
    ("verdict", "fail_on", "blocks"),
    [
        ("WARN", "fail", False),
        ("FAIL", "fail", True),
        ("WARN", "warn", True),
        ("FAIL", "warn", True),
        ("PASS", "warn", False),
        ("FAIL", "never", False),
    ],
)
def test_verdict_blocks(verdict, fail_on, blocks):
    assert verdict_blocks(verdict, fail_on) is blocks


class Ended(Exception):
    """Raised by EndingModule's exit_json/fail_json, as AnsibleModule's end the process; args: (how, result)."""


class EndingModule:
    def exit_json(self, **result):
        raise Ended("exit", result)

    def fail_json(self, **result):
        raise Ended("fail", result)


def ended(call, *args, **kwargs):
    with pytest.raises(Ended) as info:
        call(*args, **kwargs)
    return info.value.args


def parse_lines(text):
    if not text.strip():
        raise ParseError("no lines")
    return {"lines": text.split()}


def judge_lines(parsed):
    status = "PASS" if len(parsed["lines"]) >= 2 else "FAIL"
    return [bench_check("lines", status, len(parsed["lines"]), ">= 2", "print more")]


def tail_up(run, **kwargs):
    """judge_run over a run given as (rc, output, timed_out), the output on stdout."""
    rc, output, timed_out = run
    run = Bounded(rc, output, "", timed_out)
    options = {"key": "bench", "timed_out": "bench timed out", "unreadable": lambda exc: f"could not read: {exc}"}
    result = {"changed": False}
    return judge_run(EndingModule(), result, run, parse_lines, judge_lines, **{**options, **kwargs}), result


def test_last_lines_joins_the_last_three_within_the_limit():
    assert last_lines("a\nb\nc\nd\n\n") == "b | c | d"
    assert last_lines("x" * 600) == "x" * 500
    assert last_lines("x" * 600, limit=None) == "x" * 600


def test_save_output_creates_the_directory_and_marks_changed(tmp_path):
    result = {"changed": False}
    path = tmp_path / "deep" / "out.txt"
    save_output(EndingModule(), str(path), "raw\n", result)
    assert path.read_text(encoding="utf-8") == "raw\n"
    assert result["changed"] is True


def test_save_output_fails_naming_the_path(tmp_path):
    (tmp_path / "file").write_text("", encoding="utf-8")
    path = tmp_path / "file" / "out.txt"
    how, result = ended(save_output, EndingModule(), str(path), "raw", {"changed": False, "cmd": ["x"]})
    assert how == "fail"
    assert result["msg"].startswith(f"cannot write {path}: ")
    assert (result["changed"], result["cmd"]) == (False, ["x"])


def test_judge_run_parses_judges_and_records(tmp_path):
    out = tmp_path / "out.txt"
    parsed, result = tail_up((0, "one two\n", False), output_path=str(out))
    assert parsed == {"lines": ["one", "two"]}
    assert result["rc"] == 0 and result["changed"] is True
    assert result["bench"] is parsed
    assert [check["status"] for check in result["checks"]] == ["PASS"]
    assert result["verdict"] == "PASS"
    assert out.read_text(encoding="utf-8") == "one two\n"


def test_judge_run_verdict_is_the_worst_check():
    _parsed, result = tail_up((0, "one\n", False))
    assert result["verdict"] == "FAIL"


def test_judge_run_saves_the_output_of_a_timed_out_run_then_fails(tmp_path):
    out = tmp_path / "out.txt"
    how, result = ended(tail_up, (124, "partial\n", True), output_path=str(out))
    assert (how, result["msg"], result["rc"]) == ("fail", "bench timed out", 124)
    assert out.read_text(encoding="utf-8") == "partial\n"
    assert "checks" not in result


def test_judge_run_fails_a_nonzero_rc_only_when_asked():
    how, result = ended(tail_up, (1, "a\nb\nc\nCUDA error\n", False), failed="bench failed")
    assert (how, result["msg"]) == ("fail", "bench failed (rc 1): b | c | CUDA error")
    _parsed, result = tail_up((1, "a b\n", False))
    assert (result["rc"], result["verdict"]) == (1, "PASS")


def test_judge_run_fails_unreadable_output_with_the_modules_words():
    how, result = ended(tail_up, (0, "\n", False))
    assert (how, result["msg"]) == ("fail", "could not read: no lines")
    assert "bench" not in result


def test_failing_checks_lists_those_that_did_not_pass():
    checks = [bench_check("a", "PASS", 1, 1), bench_check("b", "WARN", 2, "<= 1"), bench_check("c", "FAIL", 3, 0)]
    assert failing_checks(checks) == "b=2 (expected <= 1), c=3 (expected 0)"
    assert failing_checks(checks, label=lambda check: check["name"].upper()) == "B=2 (expected <= 1), C=3 (expected 0)"
    assert failing_checks(checks[:1]) == ""


@pytest.mark.parametrize(
    ("verdict", "fail_on", "how"),
    [("PASS", "fail", "exit"), ("WARN", "fail", "exit"), ("WARN", "warn", "fail"), ("FAIL", "never", "exit")],
)
def test_finish_gates_the_verdict(verdict, fail_on, how):
    checks = [bench_check("busbw", verdict, 150, ">= 170")]
    result = {"changed": False, "checks": checks, "verdict": verdict}
    ended_how, ended_result = ended(finish, EndingModule(), result, "NCCL", fail_on)
    assert ended_how == how
    if how == "fail":
        assert ended_result["msg"] == "NCCL verdict WARN: busbw=150 (expected >= 170)"
        assert ended_result["checks"] == checks
    else:
        assert ended_result == result
