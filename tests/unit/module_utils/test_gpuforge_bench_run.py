"""The benchmark modules' shared run wrapper and verdict gate."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_run import run_bounded, verdict_blocks


class RecordingModule:
    def __init__(self, rc, out="", err=""):
        self.reply = (rc, out, err)
        self.calls = []

    def get_bin_path(self, name, required=False):
        return f"/usr/bin/{name}"

    def run_command(self, args, environ_update=None):
        self.calls.append((args, environ_update))
        return self.reply


def test_run_bounded_wraps_in_timeout_with_c_locale():
    module = RecordingModule(0, "out\n", "err\n")
    rc, output, timed_out = run_bounded(module, ["all_reduce_perf", "-g", "8"], 600, {"NCCL_DEBUG": "INFO"})
    assert (rc, output, timed_out) == (0, "out\nerr\n", False)
    args, env = module.calls[0]
    assert args == ["/usr/bin/timeout", "--kill-after=30", "600", "all_reduce_perf", "-g", "8"]
    assert env == {"LC_ALL": "C", "NCCL_DEBUG": "INFO"}


@pytest.mark.parametrize("rc", [124, 137])
def test_run_bounded_reports_the_timeout(rc):
    assert run_bounded(RecordingModule(rc), ["x"], 5, {})[2] is True


@pytest.mark.parametrize(
    ("verdict", "fail_on", "blocks"),
    [
        ("warn", "fail", False),
        ("fail", "fail", True),
        ("warn", "warn", True),
        ("ok", "warn", False),
        ("fail", "never", False),
    ],
)
def test_verdict_blocks(verdict, fail_on, blocks):
    assert verdict_blocks(verdict, fail_on) is blocks
