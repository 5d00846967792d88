"""spectrum_scale_config module: diff against mmlsconfig, mmchconfig only for changed keys (run_command mocked)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import spectrum_scale_config

SEED = (Path(__file__).resolve().parents[2] / "fixtures" / "mmlsconfig" / "redp5610_dgx_common.txt").read_text(
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
    """mmlsconfig -Y answers y_out (rc y_rc), plain mmlsconfig answers plain_out, mmchconfig chg_rc (a list:
    one rc per mmchconfig call, in order)."""

    def __init__(self, y_out=Y_TEXT, y_rc=0, plain_out="", chg_rc=0):
        self.y_out, self.y_rc, self.plain_out = y_out, y_rc, plain_out
        self.chg_rcs = list(chg_rc) if isinstance(chg_rc, list) else None
        self.chg_rc = chg_rc
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
        rc = self.chg_rcs.pop(0) if self.chg_rcs is not None else self.chg_rc
        return rc, "", "mmchconfig: Incorrect attribute" if rc else ""

    def mmchconfig(self):
        return [call for call in self.calls if call[0].endswith("mmchconfig")]

    def mmlsconfig(self):
        return [call for call in self.calls if call[0].endswith("mmlsconfig")]


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


def test_default_resets_only_a_value_the_class_has_and_is_then_met(run_module):
    # dgx has its own pagepool: DEFAULT removes it. verbsRdmaSend is not in dgx's stanza: nothing to reset,
    # although [common]'s or the built-in value applies (the old comparison reset it on every run).
    runner = Runner()
    result = run_module({"node_class": "dgx", "settings": {"pagepool": "DEFAULT", "verbsRdmaSend": "DEFAULT"}}, runner)
    assert runner.mmchconfig() == [[MMCHCONFIG, "pagepool=DEFAULT", "-N", "dgx"]]
    assert result["changes"] == {"pagepool": {"before": "128G", "after": "DEFAULT"}}
    converged = Runner(y_out="\n".join(line for line in Y_TEXT.splitlines() if ":pagepool:128G:" not in line) + "\n")
    result = run_module({"node_class": "dgx", "settings": {"pagepool": "DEFAULT"}}, converged)
    assert result["changed"] is False
    assert converged.mmchconfig() == []


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


# --- scopes: several node classes and the cluster-wide values in one run -------------------------------------


def test_scopes_converged_seed_reads_mmlsconfig_once_and_runs_nothing_else(run_module):
    runner = Runner(y_rc=1, y_out="", plain_out=SEED)  # the real output, through the plain fallback
    scopes = [
        {
            "node_class": "dgx",
            "settings": {
                "pagepool": "128G",
                "workerThreads": 1024,
                "verbsRdma": "enable",
                "verbsRdmaSend": True,
                "verbsPorts": ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"],
            },
        },
        {"node_class": "common", "settings": {"maxMBpS": 20000, "enforceFilesetQuotaOnRoot": True}},
    ]
    result = run_module({"scopes": scopes}, runner, diff=True)
    assert result["changed"] is False
    assert runner.calls == [["/usr/lpp/mmfs/bin/mmlsconfig", "-Y"], ["/usr/lpp/mmfs/bin/mmlsconfig"]]
    assert result["scopes"] == [
        {"scope": "dgx", "changes": {}, "command": []},
        {"scope": "common", "changes": {}, "command": []},
    ]
    assert (result["changes"], result["command"], result["scope"]) == ({}, [], ["dgx", "common"])
    assert "diff" not in result


def test_scopes_one_mmchconfig_per_differing_scope_in_order(run_module):
    runner = Runner()
    scopes = [
        {"node_class": "dgx", "settings": {"pagepool": "128G", "workerThreads": 1024}},
        {"node_class": "dgx02", "settings": {"verbsRdma": "enable"}},  # no stanza, no common value: differs
        {"node_class": "dgx01", "settings": {"pagepool": "1G"}},
        {"settings": {"maxMBpS": 20000}},
    ]
    result = run_module({"scopes": scopes, "immediate": True}, runner, diff=True)
    assert result["changed"] is True
    assert runner.mmlsconfig() == [["/usr/lpp/mmfs/bin/mmlsconfig", "-Y"]]
    commands = [
        [MMCHCONFIG, "workerThreads=1024", "-N", "dgx", "-i"],
        [MMCHCONFIG, "verbsRdma=enable", "-N", "dgx02", "-i"],
        [MMCHCONFIG, "maxMBpS=20000", "-i"],
    ]
    assert runner.mmchconfig() == commands
    assert result["command"] == commands
    assert result["scope"] == ["dgx", "dgx02", "dgx01", "common"]
    assert result["changes"] == {
        "dgx": {"workerThreads": {"before": None, "after": "1024"}},
        "dgx02": {"verbsRdma": {"before": None, "after": "enable"}},
        "common": {"maxMBpS": {"before": None, "after": "20000"}},
    }
    assert [entry["scope"] for entry in result["scopes"]] == ["dgx", "dgx02", "dgx01", "common"]
    assert result["scopes"][2] == {"scope": "dgx01", "changes": {}, "command": []}  # 1G from [common]
    assert result["scopes"][0]["command"] == commands[0]
    assert result["diff"] == {
        "before": "[dgx]\n[dgx02]\n[common]\n",
        "after": "[dgx]\nworkerThreads 1024\n[dgx02]\nverbsRdma enable\n[common]\nmaxMBpS 20000\n",
        "before_header": "mmlsconfig",
        "after_header": "mmlsconfig",
    }


def test_scopes_a_later_scope_compares_with_what_an_earlier_one_set(run_module):
    # [common] pagepool 1G -> 64G first; dgx01 has no stanza, so 64G from [common] is what applies to it then:
    # comparing with the configuration as read (1G) would run a needless `mmchconfig pagepool=64G -N dgx01`.
    # dgx keeps its own 128G stanza value, so its 64G is still a change.
    runner = Runner()
    scopes = [
        {"node_class": "", "settings": {"pagepool": "64G"}},
        {"node_class": "dgx01", "settings": {"pagepool": "64G"}},
        {"node_class": "dgx", "settings": {"pagepool": "64G"}},
    ]
    result = run_module({"scopes": scopes}, runner, diff=True)
    assert runner.mmchconfig() == [[MMCHCONFIG, "pagepool=64G"], [MMCHCONFIG, "pagepool=64G", "-N", "dgx"]]
    assert result["scopes"][1] == {"scope": "dgx01", "changes": {}, "command": []}
    assert result["changes"]["dgx"] == {"pagepool": {"before": "128G", "after": "64G"}}
    assert result["diff"]["before"] == "[common]\npagepool 1G\n[dgx]\npagepool 128G\n"


def test_scopes_check_mode_runs_only_mmlsconfig_and_predicts_the_same_commands(run_module):
    runner = Runner()
    scopes = [
        {"settings": {"pagepool": "64G"}},
        {"node_class": "dgx01", "settings": {"pagepool": "64G"}},
        {"node_class": "dgx", "settings": {"workerThreads": 512}},
    ]
    result = run_module({"scopes": scopes}, runner, check_mode=True)
    assert runner.calls == [["/usr/lpp/mmfs/bin/mmlsconfig", "-Y"]]
    assert result["changed"] is True
    assert result["command"] == [[MMCHCONFIG, "pagepool=64G"], [MMCHCONFIG, "workerThreads=512", "-N", "dgx"]]
    assert list(result["changes"]) == ["common", "dgx"]


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        ("dgx", "dgx", "scopes[1].node_class names dgx a second time (scopes[0]): merge their settings"),
        ("", "common", "scopes[1].node_class names common a second time (scopes[0])"),
    ],
)
def test_scopes_the_same_node_class_twice_is_refused(run_module, first, second, message):
    runner = Runner()
    scopes = [{"node_class": first, "settings": {"pagepool": "1G"}}, {"node_class": second, "settings": {}}]
    result = run_module({"scopes": scopes}, runner, expect_failure=True)
    assert result["msg"].startswith(message), result["msg"]
    assert runner.calls == []


def test_scopes_with_node_class_is_refused(run_module):
    runner = Runner()
    args = {"node_class": "dgx", "scopes": [{"node_class": "dgx", "settings": {"pagepool": "1G"}}]}
    result = run_module(args, runner, expect_failure=True)
    assert result["msg"] == (
        "node_class goes with settings only: with scopes, give each scope its own (scopes[].node_class)"
    )
    assert runner.calls == []


def test_scopes_with_settings_is_refused(run_module):
    runner = Runner()
    args = {"settings": {"pagepool": "1G"}, "scopes": [{"settings": {"pagepool": "1G"}}]}
    result = run_module(args, runner, expect_failure=True)
    assert result["msg"] == "parameters are mutually exclusive: settings|scopes"
    assert runner.calls == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "one of the following is required: settings, scopes"),
        ({"settings": None}, "one of the following is required: settings, scopes"),
        ({"scopes": []}, "scopes must list at least one scope"),
        ({"scopes": [{"node_class": "dgx"}]}, "missing required arguments: settings found in scopes"),
        ({"scopes": [{"node_class": "dgx", "settings": None}]}, "argument 'settings' is of type NoneType found in"),
    ],
)
def test_neither_settings_nor_a_scope(run_module, args, message):
    runner = Runner()
    result = run_module(args, runner, expect_failure=True)
    assert result["msg"].startswith(message), result["msg"]
    assert runner.calls == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"pagepool": "1G,2G"}, "scopes[1].settings.pagepool cannot hold ','"),
        ({"pagepool": None}, "scopes[1].settings.pagepool has no value (null)"),
        ({"page pool": "1G"}, "scopes[1].settings.page pool is not a configuration attribute name"),
    ],
)
def test_scopes_an_invalid_setting_in_the_second_scope_fails_before_anything_runs(run_module, settings, message):
    runner = Runner()
    scopes = [{"node_class": "dgx", "settings": {"workerThreads": 512}}, {"settings": settings}]
    result = run_module({"scopes": scopes}, runner, expect_failure=True)
    assert result["msg"].startswith(message), result["msg"]
    assert runner.calls == []
    assert result["changed"] is False


def test_scopes_a_failed_mmchconfig_reports_the_scopes_applied_before_it(run_module):
    runner = Runner(chg_rc=[0, 1])
    scopes = [
        {"node_class": "dgx", "settings": {"workerThreads": 512}},
        {"node_class": "dgx01", "settings": {"pagepool": "1G"}},  # unchanged: 1G from [common]
        {"settings": {"bogus": "1"}},
        {"node_class": "dgx02", "settings": {"verbsRdma": "enable"}},
    ]
    result = run_module({"scopes": scopes}, runner, expect_failure=True)
    assert result["msg"] == (
        "mmchconfig failed for scope common (rc=1): mmchconfig: Incorrect attribute - scopes applied before it: dgx"
    )
    applied = [MMCHCONFIG, "workerThreads=512", "-N", "dgx"]
    assert runner.mmchconfig() == [applied, [MMCHCONFIG, "bogus=1"]]  # dgx02 is not tried
    assert result["scopes"] == [
        {"scope": "dgx", "changes": {"workerThreads": {"before": None, "after": "512"}}, "command": applied},
        {"scope": "dgx01", "changes": {}, "command": []},
    ]
    assert result["changes"] == {"dgx": {"workerThreads": {"before": None, "after": "512"}}}
    assert result["command"] == [applied]
    assert (result["failed_scope"], result["failed_command"]) == ("common", [MMCHCONFIG, "bogus=1"])
    assert result["stderr"] == "mmchconfig: Incorrect attribute"
    assert result["changed"] is True


def test_scopes_the_first_mmchconfig_failing_reports_none_applied(run_module):
    result = run_module({"scopes": [{"settings": {"bogus": "1"}}]}, Runner(chg_rc=1), expect_failure=True)
    assert result["msg"].endswith("- scopes applied before it: none")
    assert (result["scopes"], result["changes"], result["command"]) == ([], {}, [])
