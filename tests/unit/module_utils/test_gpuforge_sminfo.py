"""sminfo parsing on real captures (tests/fixtures/sminfo/SOURCES.md) and on malformed output, and the fabric
judge: one master, the preferred one, at the priorities configured."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_sminfo as sminfo
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sminfo"


def read(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_oracle_bda_switch_master():
    got = sminfo.parse_sminfo(read("oracle-bda_sun-dcs36-switch_master_prio14.txt"))
    assert got == {
        "sm_lid": 15,
        "sm_guid": "0x0010e0406d5aa0a0",
        "activity_count": 26263191,
        "priority": 14,
        "state": 3,
        "state_name": "SMINFO_MASTER",
    }


def test_mail_wrapped_capture_reads_the_same_fields():
    got = sminfo.parse_sminfo(read("ompi-users-2008-11-7361_n01_mthca_master_prio0_EXCERPT.txt"))
    assert (got["sm_lid"], got["sm_guid"], got["activity_count"]) == (2, "0x0002c90200259201", 6881)
    assert (got["priority"], got["state"], got["state_name"]) == (0, 3, "SMINFO_MASTER")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no 'sminfo"),
        ("ibwarn: [1234] mad_rpc_open_port: can't open UMAD port ((null):0)\nsminfo: iberror: failed: query\n", "no "),
        ("sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 16 state 3 SMINFO_MASTER", "priority 16"),
        ("sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 1 state 2 SMINFO_MASTER", "state 2"),
        ("sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 1 state 3 SMINFO_MAS", "printed as SMINFO_MAS,"),
        (
            "sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 1 state 3 SMINFO_MASTER\n"
            "sminfo: sm lid 2 sm guid 0x2, activity count 5 priority 1 state 2 SMINFO_STANDBY\n",
            "2 sminfo lines",
        ),
        ("sminfo: sm lid 1 sm guid 0x12345678901234567, activity count 5 priority 1 state 3 SMINFO_MASTER", "GUID"),
    ],
)
def test_malformed_output_is_a_parse_error(text, why):
    with pytest.raises(ParseError, match=why):
        sminfo.parse_sminfo(text)


def test_states_past_master_print_question_marks():
    got = sminfo.parse_sminfo("sminfo: sm lid 1 sm guid 0x1, activity count 0 priority 0 state 5 ???")
    assert (got["state"], got["state_name"]) == (5, "???")


@pytest.mark.parametrize("guid", ["0x0002c90200259201", "0x2c90200259201", "0002:c902:0025:9201", 0x2C90200259201])
def test_guid_forms_compare_equal(guid):
    assert sminfo.normalize_guid(guid) == "0x0002c90200259201"


@pytest.mark.parametrize("guid", ["", "0x", "0xzz", "0x12345678901234567", True])
def test_bad_guid(guid):
    with pytest.raises(ValueError):
        sminfo.normalize_guid(guid)


SMS = [
    {"host": "sm-a", "guid": "0x0002c90300000001", "priority": 14},
    {"host": "sm-b", "guid": "0x0002c90300000002", "priority": 10},
]


def line(guid, priority, state, lid=1, act=100):
    name = sminfo.STATE_NAMES[state]
    return sminfo.parse_sminfo(
        f"sminfo: sm lid {lid} sm guid {guid}, activity count {act} priority {priority} state {state} {name}"
    )


def test_preferred_master_and_standby_pass():
    verdict = sminfo.judge_fabric([line("0x2c90300000001", 14, 3), line("0x2c90300000002", 10, 2, lid=2)], SMS)
    assert verdict == {"ok": True, "problems": [], "master": "0x0002c90300000001", "preferred": "0x0002c90300000001"}


def test_no_master_fails():
    verdict = sminfo.judge_fabric([line("0x2c90300000001", 14, 0), line("0x2c90300000002", 10, 2)], SMS)
    assert not verdict["ok"] and verdict["master"] is None
    assert verdict["problems"] == [
        "no SM is master: the fabric has no subnet manager running (start OpenSM on an SM node)"
    ]


def test_two_masters_at_equal_priority_fail_naming_both():
    sms = [dict(SMS[0]), dict(SMS[1], priority=14)]
    verdict = sminfo.judge_fabric([line("0x2c90300000001", 14, 3), line("0x2c90300000002", 14, 3)], sms)
    assert not verdict["ok"]
    joined = " ".join(verdict["problems"])
    assert "2 SMs are master at equal priority 14" in joined
    assert "sm-a (0x0002c90300000001)" in joined and "sm-b (0x0002c90300000002)" in joined
    assert "share the highest sm_priority 14" in joined


def test_standby_holding_master_fails():
    verdict = sminfo.judge_fabric([line("0x2c90300000002", 10, 3)], SMS)
    assert not verdict["ok"]
    assert verdict["problems"] == [
        "master is sm-b (0x0002c90300000002), not the preferred sm-a (0x0002c90300000001) (priority 14): "
        "start OpenSM on the preferred SM, or fix the priorities"
    ]


def test_priority_drift_fails_even_with_the_right_master():
    verdict = sminfo.judge_fabric([line("0x2c90300000001", 15, 3), line("0x2c90300000002", 10, 2)], SMS)
    assert not verdict["ok"] and verdict["master"] == "0x0002c90300000001"
    assert verdict["problems"] == [
        "sm-a (0x0002c90300000001) runs at priority 15, configured 14: restart its OpenSM after the configuration "
        "changed"
    ]


def test_unconfigured_master_is_named():
    verdict = sminfo.judge_fabric([line("0x10e0406d5aa0a0", 14, 3)], SMS)
    assert "master is unconfigured SM 0x0010e0406d5aa0a0" in verdict["problems"][0]


def test_nothing_configured_is_an_error():
    with pytest.raises(ValueError, match="no subnet managers"):
        sminfo.judge_fabric([], [])


# The subnet_manager check of one node: `sminfo` and `sminfo -G <guid>` of each configured SM.
HEAD = {"host": "head01", "guid": "0x98039b0300a4c600", "priority": 14}
STANDBY = {"host": "dgx01", "guid": "0x248a07030029e1fa", "priority": 10}
NO_SM = (255, "sminfo: iberror: failed: query\n", "ibwarn: [77] mad_rpc: _do_madrpc failed; dport (Lid 1)\n")


def run(lid, guid, priority, state):
    name = sminfo.STATE_NAMES[state]
    return (0, f"sminfo: sm lid {lid} sm guid {guid}, activity count 9 priority {priority} state {state} {name}\n", "")


def test_node_check_passes_on_the_preferred_master_with_its_standby():
    got = sminfo.judge_subnet_manager(
        run(1, "0x98039b0300a4c600", 14, 3),
        [
            (HEAD["guid"], *run(1, "0x98039b0300a4c600", 14, 3)),
            (STANDBY["guid"], *run(5, "0x248a07030029e1fa", 10, 2)),
        ],
        [HEAD, STANDBY],
    )
    assert got["status"] == "PASS", got
    assert got["observed"]["master"]["sm_guid"] == "0x98039b0300a4c600"
    assert [sm["sm_guid"] for sm in got["observed"]["sms"]] == ["0x248a07030029e1fa", "0x98039b0300a4c600"]


def test_node_check_fails_when_no_sm_answers():
    got = sminfo.judge_subnet_manager(NO_SM, [], [])
    assert got["status"] == "FAIL"
    assert "no subnet manager answers" in got["fault"] and "iberror: failed: query" in got["fault"]
    assert "opensmd" in got["remedy"]


def test_node_check_fails_on_two_masters_at_equal_priority():
    got = sminfo.judge_subnet_manager(
        run(7, "0x2c90300001111", 14, 3), [(HEAD["guid"], *run(1, "0x98039b0300a4c600", 14, 3))], [HEAD]
    )
    assert got["status"] == "FAIL"
    assert "2 SMs are master at equal priority 14" in got["fault"]
    assert "unconfigured SM 0x0002c90300001111" in got["fault"]


def test_node_check_without_configured_sms_fails_on_two_masters_it_sees():
    got = sminfo.judge_subnet_manager(run(7, "0x2", 0, 3), [("0x1", *run(1, "0x1", 0, 3))], [])
    assert got["status"] == "FAIL" and "2 SMs are master" in got["fault"]
    alone = sminfo.judge_subnet_manager(run(1, "0x1", 0, 3))
    assert alone["status"] == "PASS" and alone["expected"] == {"master": "one SM in state 3 SMINFO_MASTER"}


def test_node_check_fails_when_the_sm_seen_is_not_master_and_warns_on_a_silent_standby():
    standby_seen = sminfo.judge_subnet_manager(run(5, "0x248a07030029e1fa", 10, 2), [], [STANDBY])
    assert standby_seen["status"] == "FAIL" and "SMINFO_STANDBY, not master" in standby_seen["fault"]
    silent = sminfo.judge_subnet_manager(
        run(1, "0x98039b0300a4c600", 14, 3),
        [(HEAD["guid"], *run(1, "0x98039b0300a4c600", 14, 3)), (STANDBY["guid"], *NO_SM)],
        [HEAD, STANDBY],
    )
    assert silent["status"] == "WARN" and "0x248a07030029e1fa" in silent["fault"]


def test_node_check_fails_on_a_master_that_is_not_the_preferred_sm():
    got = sminfo.judge_subnet_manager(
        run(5, "0x248a07030029e1fa", 10, 3),
        [(HEAD["guid"], *NO_SM), (STANDBY["guid"], *run(5, "0x248a07030029e1fa", 10, 3))],
        [HEAD, STANDBY],
    )
    assert got["status"] == "FAIL" and "not the preferred head01" in got["fault"]
