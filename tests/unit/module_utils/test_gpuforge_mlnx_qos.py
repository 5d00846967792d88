"""mlnx_qos parsing on real outputs (tests/fixtures/mlnx_qos/SOURCES.md) and on malformed output, and the judgement
of one RoCE port's lossless settings (trust, PFC priority, ECN, ToS, traffic class, GID type)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_mlnx_qos as qos
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mlnx_qos"
NETARBITER = "att-netarbiter_eth4_trust-dscp_pfc3.txt"
COMMUNITY = "mellanox-community-doc-2792_eth2_ofed4.2_ets_pfc0267_REFLOWED.txt"


def read(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_netarbiter_trust_dscp_pfc_on_priority_3():
    got = qos.parse_mlnx_qos(read(NETARBITER))
    assert got["dcbx_mode"] == "os"
    assert got["trust"] == "dscp"
    assert got["pfc_enabled"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert got["pfc_priorities"] == [3]
    assert got["pfc_buffer"] is None and got["receive_buffer_size_bytes"] is None  # older release: no buffers
    assert got["cable_len"] == 7
    assert len(got["dscp2prio"]) == 64
    assert got["dscp2prio"][26] == 3 and got["dscp2prio"][0] == 0 and got["dscp2prio"][63] == 7
    # mlx5's default mapping: priority 0 on tc 1, priority 1 on tc 0, the others on their own number
    assert got["prio_tc"] == {1: 0, 0: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7}
    assert {tc["tsa"] for tc in got["tcs"]} == {"vendor"}
    assert got["tcs"][0] == {"tc": 0, "ratelimit": "unlimited", "tsa": "vendor", "bw_percent": None, "priorities": [1]}


def test_community_page_ets_and_strict_reflowed():
    got = qos.parse_mlnx_qos(read(COMMUNITY))
    assert got["pfc_priorities"] == [0, 2, 6, 7]
    assert got["cable_len"] == 10
    assert [tc["bw_percent"] for tc in got["tcs"]] == [10, 10, 10, 10, 10, 10, None, 40]
    assert got["tcs"][6]["tsa"] == "strict"


def test_newer_release_buffers_default_priority_and_lldpad_warning():
    # The lines a newer mlnx_qos adds (Mellanox/mlnx-tools python/mlnx_qos pretty_print), on the real output's values.
    text = read(NETARBITER)
    text = text.replace(
        "Cable len: 7\n",
        "default priority:\nReceive buffer size (bytes): 130944,130944,0,0,0,0,0,0,total_size=262016\nCable len: 7\n",
    )
    text = text.replace(
        "0   0   0   0   \ntc: 0", "0   0   0   0   \n\tbuffer      0   0   0   1   0   0   0   0   \ntc: 0"
    )
    text = "****** WARNING: lldpad service is running and may overwrite your settings ******\n\n" + text
    got = qos.parse_mlnx_qos(text)
    assert got["receive_buffer_size_bytes"] == [130944, 130944, 0, 0, 0, 0, 0, 0]
    assert got["pfc_buffer"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert got["warnings"] == ["WARNING: lldpad service is running and may overwrite your settings"]


def test_trust_pcp_has_no_dscp_map():
    text = read(NETARBITER)
    _head, tail = text.split("Cable len:")
    text = "DCBX mode: OS controlled\nPriority trust state: pcp\nCable len:" + tail
    got = qos.parse_mlnx_qos(text)
    assert got["trust"] == "pcp" and got["dscp2prio"] == {}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        (
            "sminfo: sm lid 15 sm guid 0x10e0406d5aa0a0, activity count 1 priority 14 state 3 SMINFO_MASTER",
            "unexpected",
        ),
        ("DCBX mode: OS controlled\nCable len: 7\n", "no 'Priority trust state"),
        ("Priority trust state: pcp\nPFC configuration:\n\tpriority 0 1 2 3 4 5 6 7\n", "no PFC 'enabled'"),
        ("Priority trust state: pcp\nPFC configuration:\n\tenabled 0 0 0 1 0 0 0\n", "8 values"),
        ("Priority trust state: pcp\nPFC configuration:\n\tenabled 0 0 0 2 0 0 0 0\n", "0-1"),
        ("Priority trust state: dscp\nPFC configuration:\n\tenabled 0 0 0 1 0 0 0 0\n", "dscp2prio"),
        (
            "Priority trust state: pcp\nPFC configuration:\n\tenabled 0 0 0 1 0 0 0 0\n"
            "tc: 0 ratelimit: unlimited, tsa: vendor\n\t priority:  1\ntc: 1 ratelimit: unlimited, tsa: vendor\n"
            "\t priority:  1\n",
            "mapped to tc 0 and tc 1",
        ),
    ],
)
def test_malformed_output_names_the_problem(text, why):
    with pytest.raises(ParseError, match=why):
        qos.parse_mlnx_qos(text)


def test_truncated_real_output_fails():
    text = read(NETARBITER)
    with pytest.raises(ParseError):
        qos.parse_mlnx_qos(text.split("PFC configuration:")[0])


def test_sysfs_readers():
    assert qos.read_traffic_class("Global tclass=106\n") == 106
    assert qos.read_traffic_class("") is None
    assert qos.read_gid_type("RoCE v2\n") == "RoCE v2"
    assert qos.read_number("1\n", "ecn") == 1
    assert qos.dscp_of_tos(106) == 26
    with pytest.raises(ParseError):
        qos.read_traffic_class("tclass=abc")
    with pytest.raises(ParseError):
        qos.read_gid_type("RoCE v3")
    with pytest.raises(ParseError):
        qos.read_number("enabled", "ecn")


EXPECTED = {"roce_trust": "dscp", "roce_pfc_priority": 3, "roce_tos": 106, "roce_gid_index": 3}


def port(**changes):
    state = {
        "netdev": "eth4",
        "hca": "mlx5_2",
        "port": 1,
        "qos": qos.parse_mlnx_qos(read(NETARBITER)),
        "ecn_np": {3: 1},
        "ecn_rp": {3: 1},
        "roce_tos": 106,
        "traffic_class": 106,
        "gid_type": "RoCE v2",
    }
    state.update(changes)
    return state


def test_lossless_port_passes():
    assert qos.judge_roce_port(port(), EXPECTED) == []


def test_each_wrong_setting_is_one_problem_naming_the_fix():
    pcp = dict(qos.parse_mlnx_qos(read(NETARBITER)), trust="pcp")
    (problem,) = qos.judge_roce_port(port(qos=pcp), EXPECTED)
    assert "trust state pcp, expected dscp" in problem and "--trust dscp" in problem
    off = dict(qos.parse_mlnx_qos(read(NETARBITER)), pfc_priorities=[])
    (problem,) = qos.judge_roce_port(port(qos=off), EXPECTED)
    assert "PFC enabled on priority none, expected only 3" in problem and "--pfc 0,0,0,1,0,0,0,0" in problem
    (problem,) = qos.judge_roce_port(port(ecn_rp={3: 0}), EXPECTED)
    assert "roce_rp on priority 3 is 0" in problem
    problems = qos.judge_roce_port(port(roce_tos=0, traffic_class=None), EXPECTED)
    assert len(problems) == 2 and "cma_roce_tos -d mlx5_2 -p 1 -t 106" in problems[0]
    (problem,) = qos.judge_roce_port(port(gid_type="IB/RoCE v1"), EXPECTED)
    assert "GID index 3 is IB/RoCE v1, not RoCE v2" in problem


def test_tos_whose_dscp_maps_elsewhere_is_caught():
    # ToS 184 is DSCP 46 (EF), priority 5 in the default map: traffic would miss the lossless priority 3.
    problems = qos.judge_roce_port(port(roce_tos=184, traffic_class=184), dict(EXPECTED, roce_tos=184))
    assert problems == [
        "eth4 (mlx5_2 port 1): DSCP 46 (ToS 184) maps to priority 5, expected 3: mlnx_qos -i eth4 --dscp2prio set,46,3"
    ]


def test_keys_not_given_are_not_judged():
    pcp = dict(qos.parse_mlnx_qos(read(NETARBITER)), trust="pcp")
    assert qos.judge_roce_port(port(qos=pcp, gid_type=None), {"roce_pfc_priority": 3}) == []
