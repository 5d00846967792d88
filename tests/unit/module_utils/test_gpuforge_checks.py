"""gpuforge_checks: the node and benchmark check shapes and the verdict of a list of checks."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import (
    bench_check,
    node_check,
    worst_status,
)

ADVICE = {"fault": "link down", "remedy": "reseat the cable", "caused_by": "ib_link_flaps"}


def test_node_check_drops_the_advice_of_a_passing_check():
    assert node_check("ib_ports", "PASS", {"mlx5_0/1": "Active"}, "Active", **ADVICE) == {
        "name": "ib_ports",
        "status": "PASS",
        "observed": {"mlx5_0/1": "Active"},
        "expected": "Active",
        "fault": "",
        "remedy": "",
        "caused_by": None,
    }


@pytest.mark.parametrize("status", ["WARN", "FAIL"])
def test_node_check_keeps_the_advice_of_a_check_that_did_not_pass(status):
    check = node_check("ib_ports", status, {"mlx5_0/1": "Down"}, "Active", **ADVICE)
    shape = {"name": "ib_ports", "status": status, "observed": {"mlx5_0/1": "Down"}, "expected": "Active"}
    assert check == {**shape, **ADVICE}


def test_node_check_defaults_to_no_advice():
    assert node_check("x", "FAIL", 1, 0) == {
        "name": "x",
        "status": "FAIL",
        "observed": 1,
        "expected": 0,
        "fault": "",
        "remedy": "",
        "caused_by": None,
    }


@pytest.mark.parametrize("status", ["ok", "fail", "Fail", None])
def test_node_check_refuses_a_status_outside_the_one_vocabulary(status):
    with pytest.raises(ValueError, match="PASS, WARN, FAIL, UNKNOWN"):
        node_check("x", status, 1, 0)


@pytest.mark.parametrize("status", ["PASS", "WARN", "FAIL"])
def test_bench_check_keeps_what_it_is_given(status):
    assert bench_check("busbw", status, 150.0, ">= 170", "check NVLink") == {
        "name": "busbw",
        "status": status,
        "observed": 150.0,
        "expected": ">= 170",
        "remedy": "check NVLink",
    }
    assert bench_check("busbw", status, 1, 2)["remedy"] == ""


@pytest.mark.parametrize(
    ("statuses", "worst"),
    [
        ([], "PASS"),
        (["PASS"], "PASS"),
        (["PASS", "WARN"], "WARN"),
        (["FAIL", "WARN", "PASS"], "FAIL"),
        (["WARN"], "WARN"),
    ],
)
def test_worst_status(statuses, worst):
    assert worst_status([{"status": status} for status in statuses]) == worst


@pytest.mark.parametrize("status", ["ok", "warn", "fail", "UNKNOWN", None])
def test_bench_check_refuses_a_status_outside_pass_warn_fail(status):
    with pytest.raises(ValueError, match="PASS, WARN, FAIL"):
        bench_check("busbw", status, 1, 2)
