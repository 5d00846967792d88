"""Simulated ibstat/ibstatus/ibv_devinfo/ibdev2netdev: real layout, same parse shape, consistent faults."""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_infiniband import (
    parse_ibdev2netdev,
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
)
from gpuforge_sim import ibdev2netdev, ibstat, ibstatus, ibv_devinfo
from ib_sim_helpers import run_tool, write_hardware

IBSTAT_REAL = "ibstat__leptonai-gpud__a100_mt4126_mixed_eth_ib.txt"
DEVINFO_REAL = "ibv_devinfo__deepseek-ai-DeepEP__issue55__mt4126_ib_EXCERPT_one_hca.txt"
DGX1 = "dgx1-v100-edr"


def _key_sets(result: dict) -> tuple[set, set]:
    ca_keys = {key for ca in result["cas"] for key in ca}
    port_keys = {key for ca in result["cas"] for port in ca["ports"] for key in port}
    return ca_keys, port_keys


def _first_block(text: str, start: str) -> list[str]:
    """Labels of the first CA/HCA block with their indentation and padding, tabs expanded to 8."""
    lines = text.expandtabs(8).splitlines()
    begin = next(i for i, line in enumerate(lines) if line.startswith(start))
    end = next((i for i in range(begin + 1, len(lines)) if lines[i].startswith(start)), len(lines))
    return [re.sub(r"^(\s*[^:]+:\s*).*$", r"\1", line) for line in lines[begin:end] if line.strip()]


def _states(tool_result: dict) -> dict:
    return {(ca["name"], p["port"]): p["state"] for ca in tool_result["cas"] for p in ca["ports"]}


def test_ibstat_layout_and_shape_match_real_output(tmp_path, monkeypatch, capsys, real_output):
    write_hardware(tmp_path, monkeypatch, DGX1)
    rc, out, err = run_tool(ibstat, [], capsys)
    assert (rc, err) == (0, "")
    real = real_output(IBSTAT_REAL)
    # Same labels, same tab indentation and spacing as the real binary.
    assert _first_block(out, "CA '") == _first_block(real, "CA '")
    sim, ref = parse_ibstat(out), parse_ibstat(real)
    assert sim["errors"] == []
    assert _key_sets(sim) == _key_sets(ref)
    assert [ca["name"] for ca in sim["cas"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    port = sim["cas"][0]["ports"][0]
    assert (port["state"], port["phys_state"], port["rate_gbit_per_s"], port["lid"], port["sm_lid"]) == (
        "Active",
        "LinkUp",
        100,
        5,
        1,
    )
    assert sim["cas"][0]["node_guid"] == "0x248a07030029e1fa"
    assert port["port_guid"] == "0x248a07030029e1fa"  # single-port ConnectX: port GUID = node GUID
    assert sim["cas"][0]["ca_type"] == "MT4115"


def test_ibv_devinfo_layout_and_shape_match_real_output(tmp_path, monkeypatch, capsys, real_output):
    write_hardware(tmp_path, monkeypatch, DGX1)
    rc, out, _err = run_tool(ibv_devinfo, ["-d", "mlx5_0"], capsys)
    assert rc == 0
    real = real_output(DEVINFO_REAL)
    assert _first_block(out, "hca_id:") == _first_block(real, "hca_id:")
    sim = parse_ibv_devinfo(out)
    assert _key_sets(sim) == _key_sets(parse_ibv_devinfo(real))
    hca = sim["cas"][0]
    assert (hca["fw_ver"], hca["vendor_part_id"], hca["board_id"]) == ("12.23.1020", 4115, "MT_2180110032")
    assert hca["node_guid"] == "0x248a07030029e1fa"
    assert out.splitlines()[3] == "\tnode_guid:\t\t\t248a:0703:0029:e1fa"
    assert out.endswith("link_layer:\t\tInfiniBand\n\n")


def test_ibstatus_layout_and_shape_match_seed(tmp_path, monkeypatch, capsys, fixture_text):
    write_hardware(tmp_path, monkeypatch, DGX1)
    rc, out, _err = run_tool(ibstatus, [], capsys)
    assert rc == 0
    seed = fixture_text("ibstatus/dgx1_edr_4port_redp5610.txt")
    assert _first_block(out, "Infiniband device") == _first_block(seed, "Infiniband device")
    sim = parse_ibstatus(out)
    assert _key_sets(sim) == _key_sets(parse_ibstatus(seed))
    port = sim["cas"][0]["ports"][0]
    assert (port["lid"], port["sm_lid"], port["rate_gbit_per_s"], port["width"], port["speed"]) == (
        5,
        1,
        100,
        "4X",
        "EDR",
    )
    assert "\tbase lid:\t 0x5\n\tsm lid:\t\t 0x1\n\tstate:\t\t 4: ACTIVE\n" in out


def test_ibdev2netdev_maps_every_port(tmp_path, monkeypatch, capsys):
    write_hardware(tmp_path, monkeypatch, DGX1)
    rc, out, _err = run_tool(ibdev2netdev, [], capsys)
    assert rc == 0
    assert out == "".join(f"mlx5_{i} port 1 ==> ib{i} (Up)\n" for i in range(4))
    _rc, verbose, _err = run_tool(ibdev2netdev, ["-v"], capsys)
    first = parse_ibdev2netdev(verbose)["mappings"][0]
    assert (first["bus_id"], first["fw_ver"], first["port_state"]) == ("0000:05:00.0", "12.23.1020", "ACTIVE")


def _all_views(capsys) -> dict:
    return {
        "ibstat": parse_ibstat(run_tool(ibstat, [], capsys)[1]),
        "ibstatus": parse_ibstatus(run_tool(ibstatus, [], capsys)[1]),
        "ibv_devinfo": parse_ibv_devinfo(run_tool(ibv_devinfo, ["-v"], capsys)[1]),
        "ibdev2netdev": parse_ibdev2netdev(run_tool(ibdev2netdev, [], capsys)[1]),
    }


@pytest.mark.parametrize(
    ("fault", "state", "phys", "netdev_state", "lid"),
    [
        ({"state": "Down"}, "Down", "Polling", "Down", 0),
        ({"state": "Down", "phys_state": "Disabled"}, "Down", "Disabled", "Down", 0),
        ({"state": "Init"}, "Initializing", "LinkUp", "Down", 0),
        ({"state": "Armed"}, "Armed", "LinkUp", "Down", 6),
    ],
)
def test_port_state_fault_is_the_same_in_every_tool(
    tmp_path, monkeypatch, capsys, fault, state, phys, netdev_state, lid
):
    fault = {"type": "ib_port_state", "hca": "mlx5_1", "port": 1, **fault}
    write_hardware(tmp_path, monkeypatch, DGX1, [fault])
    views = _all_views(capsys)
    for name in ("ibstat", "ibstatus", "ibv_devinfo"):
        ports = {(ca["name"], p["port"]): p for ca in views[name]["cas"] for p in ca["ports"]}
        assert (ports[("mlx5_1", 1)]["state"], ports[("mlx5_1", 1)]["phys_state"]) == (state, phys), name
        assert ports[("mlx5_1", 1)]["lid"] == lid, name
        assert ports[("mlx5_0", 1)]["state"] == "Active", name
    netdevs = {m["ca"]: m["netdev_state"] for m in views["ibdev2netdev"]["mappings"]}
    assert netdevs == {"mlx5_0": "Up", "mlx5_1": netdev_state, "mlx5_2": "Up", "mlx5_3": "Up"}


def test_rate_fault_is_the_same_in_every_tool(tmp_path, monkeypatch, capsys):
    fault = {"type": "ib_port_rate", "hca": "mlx5_2", "port": 1, "rate_gbit_per_s": 56}
    write_hardware(tmp_path, monkeypatch, DGX1, [fault])
    views = _all_views(capsys)
    for name in ("ibstat", "ibstatus", "ibv_devinfo"):
        rates = {ca["name"]: ca["ports"][0]["rate_gbit_per_s"] for ca in views[name]["cas"]}
        assert rates == {"mlx5_0": 100, "mlx5_1": 100, "mlx5_2": 56, "mlx5_3": 100}, name
    for name in ("ibstatus", "ibv_devinfo"):
        port = views[name]["cas"][2]["ports"][0]
        assert (port["width"], port["speed"]) == ("4X", "FDR"), name


def test_missing_hca_is_absent_everywhere(tmp_path, monkeypatch, capsys):
    write_hardware(tmp_path, monkeypatch, DGX1, [{"type": "hca_missing", "hca": "mlx5_3"}])
    views = _all_views(capsys)
    for name in ("ibstat", "ibstatus", "ibv_devinfo"):
        assert [ca["name"] for ca in views[name]["cas"]] == ["mlx5_0", "mlx5_1", "mlx5_2"], name
    assert [m["ca"] for m in views["ibdev2netdev"]["mappings"]] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    rc, _out, err = run_tool(ibstat, ["mlx5_3"], capsys)
    assert rc == 255 and re.fullmatch(r"ibpanic: \[\d+\] main: 'mlx5_3' IB device can't be found\n", err)
    assert run_tool(ibv_devinfo, ["-d", "mlx5_3"], capsys)[::2] == (255, "IB device 'mlx5_3' wasn't found\n")
    rc, out, _err = run_tool(ibstatus, ["mlx5_3"], capsys)
    assert (rc, parse_ibstatus(out)["errors"][0][:34]) == (255, "Fatal error:  device 'mlx5_3': sys")


def test_roce_profile_ethernet_port(tmp_path, monkeypatch, capsys):
    hw = write_hardware(tmp_path, monkeypatch, "vsphere-t4-vgpu-roce")
    hca = hw["hcas"][0]
    port = parse_ibstat(run_tool(ibstat, [], capsys)[1])["cas"][0]["ports"][0]
    assert (port["link_layer"], port["lid"], port["capability_mask"]) == ("Ethernet", 0, "0x00010000")
    node = int(hca["node_guid"], 16).to_bytes(8, "big")
    mac = node[:3] + node[5:]
    eui64 = bytes([mac[0] ^ 2]) + mac[1:3] + b"\xff\xfe" + mac[3:]
    assert port["port_guid"] == "0x" + eui64.hex()
    devinfo = parse_ibv_devinfo(run_tool(ibv_devinfo, [], capsys)[1])["cas"][0]["ports"][0]
    assert (devinfo["active_mtu"], devinfo["link_layer"]) == (hca["ports"][0]["mtu"], "Ethernet")
    netdev = hca["ports"][0]["netdev"]
    assert run_tool(ibdev2netdev, [], capsys)[1] == f"{hca['name']} port 1 ==> {netdev} (Up)\n"


def test_single_port_and_list_forms(tmp_path, monkeypatch, capsys):
    write_hardware(tmp_path, monkeypatch, DGX1)
    assert run_tool(ibstat, ["-l"], capsys)[1] == "mlx5_0\nmlx5_1\nmlx5_2\nmlx5_3\n"
    out = run_tool(ibstat, ["mlx5_2", "1"], capsys)[1]
    assert out.startswith("CA: 'mlx5_2'\nPort 1:\nState: Active\n")
    assert parse_ibstat(out)["cas"][0]["ports"][0]["lid"] == 7
    assert run_tool(ibstat, ["-p"], capsys)[1].splitlines()[0] == "0x248a07030029e1fa"
    listing = run_tool(ibv_devinfo, ["-l"], capsys)[1]
    assert listing == "4 HCAs found:\n\tmlx5_0\n\tmlx5_1\n\tmlx5_2\n\tmlx5_3\n\n"
    out = run_tool(ibstatus, ["mlx5_1:1"], capsys)[1]
    assert [ca["name"] for ca in parse_ibstatus(out)["cas"]] == ["mlx5_1"]
