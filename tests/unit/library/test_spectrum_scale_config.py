"""spectrum_scale_config module: diff against mmlsconfig, mmchconfig only for changed keys (run_command mocked)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import spectrum_scale_config

SEED = (Path(__file__).resolve().parents[2] / "fixtures" / "mmlsconfig" / "seed001_dgx_common.txt").read_text(
    encoding="utf-8"
)
Y_TEXT = (
    "mmlsconfig::HEADER:version:reserved:reserved:configParameter:value:nodeList:\n"
    "mmlsconfig::0:1:::pagepool:1G::\n"
    "mmlsconfig::0:1:::pagepool:128G:dgx:\n"
    "mmlsconfig::0:1:::verbsRdma:enable:dgx:\n"
)
MMCHCONFIG = "/usr/lpp/mmfs/bin/mmchconfig"


class Runner:
    """mmlsconfig -Y answers y_out (rc y_rc), plain mmlsconfig answers plain_out, mmchconfig chg_rc."""

    def __init__(self, y_out=Y_TEXT, y_rc=0, plain_out="", chg_rc=0):
        self.y_out, self.y_rc, self.plain_out, self.chg_rc = y_out, y_rc, plain_out, chg_rc
        self.calls = []

    def __call__(self, args, **kwargs):
        self.calls.append(args)
        assert kwargs["environ_update"] == {"LC_ALL": "C"}
        if args[0].endswith("mmlsconfig"):
            if "-Y" in args:
                return self.y_rc, self.y_out, ""
            return (
                (0, self.plain_out, "")
                if self.plain_out
                else (1, "", "mmlsconfig: This node does not belong to a GPFS cluster.")
            )
        return self.chg_rc, "", "mmchconfig: Incorrect attribute" if self.chg_rc else ""


@pytest.fixture
def run_module(ansible_module):
    return partial(ansible_module, spectrum_scale_config)


def test_changes_only_differing_keys_for_the_class(run_module):
    runner = Runner()
    settings = {"pagepool": "128G", "verbsRdma": "enable", "workerThreads": 1024, "verbsRdmaSend": True}
    result = run_module({"node_class": "dgx", "settings": settings}, runner, diff=True)
    assert result["changed"] is True
    assert runner.calls[-1] == [MMCHCONFIG, "workerThreads=1024,verbsRdmaSend=yes", "-N", "dgx"]
    assert result["changes"]["workerThreads"] == {"before": None, "after": "1024"}
    assert result["diff"]["after"] == "workerThreads 1024\nverbsRdmaSend yes\n"
    assert result["diff"]["before"] == ""


def test_no_change_runs_no_mmchconfig(run_module):
    runner = Runner()
    result = run_module({"node_class": "dgx", "settings": {"pagepool": "128G"}}, runner)
    assert result["changed"] is False
    assert len(runner.calls) == 1


def test_common_scope_and_immediate(run_module):
    runner = Runner()
    result = run_module({"settings": {"pagepool": "4G"}, "immediate": True}, runner)
    assert runner.calls[-1] == [MMCHCONFIG, "pagepool=4G", "-i"]
    assert result["changes"] == {"pagepool": {"before": "1G", "after": "4G"}}


def test_check_mode_reports_without_running(run_module):
    runner = Runner()
    result = run_module({"settings": {"maxMBpS": 20000}}, runner, check_mode=True)
    assert result["changed"] is True
    assert result["command"] == [MMCHCONFIG, "maxMBpS=20000"]
    assert all(not call[0].endswith("mmchconfig") for call in runner.calls)


def test_plain_fallback_when_y_unsupported(run_module):
    runner = Runner(y_rc=1, y_out="", plain_out=SEED)
    result = run_module({"node_class": "dgx", "settings": {"pagepool": "128G", "maxMBpS": "20000"}}, runner)
    assert result["changed"] is False


def test_not_a_member_fails_with_hint(run_module):
    result = run_module({"settings": {"pagepool": "1G"}}, Runner(y_rc=1, y_out=""), expect_failure=True)
    assert result["msg"].startswith("mmlsconfig failed (rc=1): mmlsconfig: This node does not belong")
    assert "delegate_to a member of spectrum_scale_cluster" in result["msg"]


def test_truncated_output_fails_naming_mmlsconfig(run_module):
    runner = Runner(y_out="mmlsconfig::0:1:::pagepool:1G::\n")
    result = run_module({"settings": {"pagepool": "1G"}}, runner, expect_failure=True)
    assert result["msg"].startswith("could not read the cluster configuration from mmlsconfig")
    assert "before the HEADER" in result["msg"]


def test_mmchconfig_failure(run_module):
    result = run_module({"settings": {"bogus": "1"}}, Runner(chg_rc=1), expect_failure=True)
    assert result["msg"] == "mmchconfig failed (rc=1): mmchconfig: Incorrect attribute"
