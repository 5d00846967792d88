"""Simulated sminfo: the real tool's line format (the captures of tests/fixtures/sminfo), the master elected from the
fabric's SMs (the lab's, a local OpenSM's priority), and the two lab faults as the real tool shows them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_sminfo
from gpuforge_sim import sminfo
from ib_sim_helpers import SIM_PATH, run_tool

from gpuforge.lab import mirror
from gpuforge.lab.profiles import hardware_document, load_profile

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sminfo"
HEAD_SM = "0x98039b0300a4c600"  # lab/profiles/head.yml, port 1 (LID 1)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """Write a lab node's hardware document (profile + faults); no local OpenSM unless a test adds one."""
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_PROC", str(tmp_path / "proc"))

    def write(profile="dgx1-v100-edr", faults=None, **extra):
        document = hardware_document(load_profile(profile), faults or [])
        document.update(extra)
        (tmp_path / "hardware.json").write_text(json.dumps(document), encoding="utf-8")
        monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(tmp_path / "hardware.json"))
        return document

    return write


def _shape(line: str) -> str:
    return re.sub(r"0x[0-9a-f]+", "G", re.sub(r"\b\d+\b", "N", line))


def test_line_has_the_layout_of_real_sminfo(node, capsys):
    node()
    rc, out, err = run_tool(sminfo, [], capsys)
    assert (rc, err) == (0, "")
    real = (FIXTURES / "oracle-bda_sun-dcs36-switch_master_prio14.txt").read_text(encoding="utf-8")
    assert _shape(out) == _shape(real)  # byte for byte but the numbers, the trailing newline included
    assert gpuforge_sminfo.parse_sminfo(out)["sm_guid"] == "0x98039b0300a4c600"


def test_healthy_fabric_master_is_the_lab_sm_and_activity_grows(node, capsys):
    node()
    first = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, [], capsys)[1])
    by_lid = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, ["1"], capsys)[1])
    by_guid = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, ["-G", HEAD_SM], capsys)[1])
    assert (first["sm_lid"], first["state_name"], first["priority"]) == (1, "SMINFO_MASTER", 0)
    assert first["sm_guid"] == by_lid["sm_guid"] == by_guid["sm_guid"] == HEAD_SM
    assert first["activity_count"] < by_lid["activity_count"] < by_guid["activity_count"]


def test_a_lid_without_an_sm_fails_silently_like_an_error_status(node, capsys):
    node()
    assert run_tool(sminfo, ["5"], capsys) == (255, "sminfo: iberror: failed: query\n", "")


def test_sm_missing_fails_as_the_real_tool_does(node, capsys):
    node(faults=[{"type": "sm_missing"}])
    rc, out, err = run_tool(sminfo, [], capsys)
    assert (rc, out) == (255, "sminfo: iberror: failed: query\n")
    assert re.fullmatch(r"ibwarn: \[\d+\] mad_rpc: _do_madrpc failed; dport \(Lid 1\)\n", err)
    rc, out, err = run_tool(sminfo, ["-G", HEAD_SM], capsys)
    assert (rc, out) == (255, f"sminfo: iberror: failed: can't resolve destination port {HEAD_SM}\n")
    assert "ib_path_query_via: sa call path_query failed" in err
    with pytest.raises(gpuforge_sminfo.ParseError, match="code 255: sminfo: iberror: failed: query"):
        gpuforge_sminfo.read_run(*run_tool(sminfo, [], capsys))


def test_sm_duplicate_master_shows_two_masters_at_equal_priority(node, capsys):
    node(faults=[{"type": "sm_duplicate_master", "guid": "0x0002c90300001111", "lid": 7}])
    seen = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, [], capsys)[1])
    head = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, ["-G", HEAD_SM], capsys)[1])
    assert (seen["sm_guid"], seen["sm_lid"], seen["state"]) == ("0x0002c90300001111", 7, 3)
    assert (head["sm_guid"], head["state"]) == (HEAD_SM, 3)
    assert seen["priority"] == head["priority"]


def test_subnet_managers_elect_the_highest_priority(node, capsys):
    node(
        subnet_managers=[
            {"guid": "0x0000000000000020", "lid": 3, "priority": 10},
            {"guid": "0x0000000000000010", "lid": 4, "priority": 14},
        ]
    )
    master = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, [], capsys)[1])
    standby = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, ["3"], capsys)[1])
    assert (master["sm_lid"], master["priority"], master["state_name"]) == (4, 14, "SMINFO_MASTER")
    assert (standby["priority"], standby["state_name"]) == (10, "SMINFO_STANDBY")


def _local_opensm(tmp_path, monkeypatch, conf_text: str, argv: list) -> Path:
    """A local OpenSM for sminfo: its opensm.conf, and a process in the table with argv as its command line."""
    conf = tmp_path / "opensm.conf"
    conf.write_text(conf_text, encoding="utf-8")
    monkeypatch.setenv("GPUFORGE_LAB_OPENSM_CONF", str(conf))
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (proc / "cmdline").write_bytes(b"\0".join(argv))
    return proc


def test_a_running_local_opensm_with_the_top_priority_is_master(node, tmp_path, monkeypatch, capsys):
    """The node runs the lab's opensm (its process in the table) with sm_priority 14 from its opensm.conf: it
    outranks the lab SM (priority 0), so sminfo reports the node's own port as master."""
    node(profile="storage")
    _local_opensm(
        tmp_path,
        monkeypatch,
        "# written by mlnx_ofed\nsm_priority 14\nguid 0x0\n",
        [b"/usr/bin/python3", b"/usr/sbin/opensm", b""],
    )
    master = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, [], capsys)[1])
    assert (master["sm_lid"], master["priority"], master["state"]) == (2, 14, 3)  # storage.yml's port: LID 2
    lab_sm = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, ["1"], capsys)[1])
    assert (lab_sm["sm_guid"], lab_sm["state_name"]) == (HEAD_SM, "SMINFO_STANDBY")


def test_the_opensm_the_lab_installs_is_found_in_the_process_table(node, tmp_path, monkeypatch, capsys):
    """The lab's /usr/sbin/opensm is a wrapper that execs python3 -c with the simulator's main: that process (its
    command line as the wrapper writes it) is the node's OpenSM, and with sm_priority 14 it is master."""
    wrapper = mirror._wrapper("/usr/sbin/opensm", "gpuforge_sim.opensm")
    code = re.search(r"exec /usr/bin/python3 -c '([^']+)'", wrapper).group(1)
    node(profile="storage")
    proc = _local_opensm(
        tmp_path, monkeypatch, "sm_priority 14\n", [b"/usr/bin/python3", b"-c", code.encode(), b"-B", b""]
    )
    master = gpuforge_sminfo.parse_sminfo(run_tool(sminfo, [], capsys)[1])
    assert (master["sm_lid"], master["priority"], master["state"]) == (2, 14, 3)
    (proc / "cmdline").write_bytes(b"\0".join([b"/usr/bin/python3", b"-c", code.replace("opensm", "sminfo").encode()]))
    assert gpuforge_sminfo.parse_sminfo(run_tool(sminfo, [], capsys)[1])["sm_lid"] == 1  # another tool: the lab SM


def test_a_node_without_an_infiniband_port_cannot_open_one(node, capsys):
    node(profile="supermicro-4029gp-v100")
    rc, out, err = run_tool(sminfo, [], capsys)
    assert (rc, out) == (255, "sminfo: iberror: failed: Failed to open '(null)' port '0'\n")
    assert "mad_rpc_open_port: can't open UMAD port ((null):0)" in err


def test_runs_as_a_command(node, tmp_path):
    node()
    env = {**os.environ, "PYTHONPATH": str(SIM_PATH)}
    done = subprocess.run(
        [sys.executable, "-m", "gpuforge_sim.sminfo"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sminfo: sm lid 1 sm guid 0x98039b0300a4c600, activity count ")


@pytest.mark.parametrize(
    ("profile", "fault", "why"),
    [
        ("supermicro-4029gp-v100", {"type": "sm_missing"}, "needs an InfiniBand port"),
        ("dgx1-v100-edr", {"type": "sm_duplicate_master", "guid": "0x2c9"}, "guid: must be a port GUID"),
        ("dgx1-v100-edr", {"type": "sm_duplicate_master", "lid": 0xC000}, "lid: must be a unicast LID"),
        ("dgx1-v100-edr", {"type": "sm_missing", "lid": 3}, "sm_missing does not take lid"),
    ],
)
def test_subnet_manager_faults_are_refused_where_they_cannot_apply(profile, fault, why):
    with pytest.raises(ValueError, match=why):
        hardware_document(load_profile(profile), [fault])


def _ibstat_sm_lids(capsys) -> list[int]:
    """The SM lid of each InfiniBand port ibstat prints (SM lid, Capability mask, Port GUID, Link layer lines)."""
    from gpuforge_sim import ibstat

    rc, out, _err = run_tool(ibstat, [], capsys)
    assert rc == 0
    ports = re.findall(r"SM lid: (\d+)\n[^\n]*\n[^\n]*\n\s*Link layer: (\S+)", out)
    return [int(lid) for lid, layer in ports if layer == "InfiniBand"]


@pytest.mark.parametrize(
    ("faults", "extra", "lid"),
    [
        ([], {}, 1),  # the lab SM on the head node
        ([{"type": "sm_duplicate_master", "guid": "0x0002c90300001111", "lid": 7}], {}, 7),
        ([{"type": "sm_missing"}], {}, 1),  # the LID learned before; sminfo's query to it times out
        (
            [],
            {
                "subnet_managers": [
                    {"guid": "0x10", "lid": 3, "priority": 10},
                    {"guid": "0x20", "lid": 4, "priority": 14},
                ]
            },
            4,
        ),
    ],
)
def test_ibstat_sm_lid_is_the_lid_sminfo_asks(node, capsys, faults, extra, lid):
    """ibstat's SM lid of each Active InfiniBand port agrees with sminfo: the elected master's LID (priority), the
    second master's on a split subnet, the old LID that no longer answers when no SM does."""
    node(faults=faults, **extra)
    lids = _ibstat_sm_lids(capsys)
    assert lids and set(lids) == {lid}
    rc, out, err = run_tool(sminfo, [], capsys)
    if faults and faults[0]["type"] == "sm_missing":
        assert rc != 0 and f"dport (Lid {lid})" in err
    else:
        assert rc == 0 and gpuforge_sminfo.parse_sminfo(out)["sm_lid"] == lid
