"""scontrol show node -o / sinfo parsers (module_utils/gpuforge_slurm.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_slurm import (
    ParseError,
    parse_gres,
    parse_show_node,
    parse_sinfo_states,
    parse_state,
)


@pytest.fixture
def nodes(fixture_text):
    return {n["name"]: n for n in parse_show_node(fixture_text("slurm/scontrol_show_node_o.txt"))}


def test_three_nodes_with_gres_and_resources(nodes):
    assert sorted(nodes) == ["node008", "node011", "node013"]
    node = nodes["node008"]
    assert node["gres"] == [{"name": "gpu", "type": "v100", "count": 4}]
    assert node["gpus"] == 4
    assert node["cpus"] == 80
    assert node["real_memory_mb"] == 383562
    assert node["partitions"] == ["sxm2", "requestq"]
    assert node["version"] == "22.05.8"
    # OS= holds spaces and must not swallow the next field.
    assert node["fields"]["OS"] == "Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"
    assert node["fields"]["RealMemory"] == "383562"


def test_mixed_node_is_in_service(nodes):
    state = nodes["node008"]["state"]
    assert state["base"] == "mixed"
    assert state["drain"] is False
    assert nodes["node008"]["reason"] is None


def test_drained_node_reason_keeps_key_value_words(nodes):
    node = nodes["node011"]
    assert node["state"]["drained"] is True
    assert node["state"]["draining"] is False
    # "xid=79" is not a node field, so it stays in the reason; the [user@time] stamp is removed.
    assert node["reason"] == "gpu 3 xid=79 fell off the bus"
    assert node["reason_raw"].endswith("[root@2024-03-04T10:15:00]")


def test_not_responding_node(nodes):
    state = nodes["node013"]["state"]
    assert state["base"] == "down"
    assert state["responding"] is False
    assert state["flags"] == ["drain"]
    assert nodes["node013"]["reason"] == "Not responding"


def test_allocated_drain_is_draining():
    state = parse_state("ALLOCATED+DRAIN")
    assert (state["drain"], state["drained"], state["draining"]) == (True, False, True)


def test_gres_forms():
    assert parse_gres("gpu:a100:2(S:0),gpu:v100:4(S:1)") == [
        {"name": "gpu", "type": "a100", "count": 2},
        {"name": "gpu", "type": "v100", "count": 4},
    ]
    assert parse_gres("gpu:8") == [{"name": "gpu", "type": None, "count": 8}]
    assert parse_gres("(null)") == []


@pytest.mark.parametrize(
    "text",
    ["", "Node node008 not found", "NodeName=node008 Arch=x86_64 CoresPerSoc", "NodeName=x State=SLEEPY"],
)
def test_malformed_output_raises_parse_error(text):
    with pytest.raises(ParseError):
        parse_show_node(text)


def test_sinfo_states():
    states = parse_sinfo_states("slurm-c4140 idle\nslurm-dgx1 drained\nnode013 down*\n")
    assert states["slurm-c4140"]["state"] == "idle"
    assert states["slurm-dgx1"]["state"] == "drained"
    assert states["node013"]["responding"] is False
    with pytest.raises(ParseError):
        parse_sinfo_states("")
