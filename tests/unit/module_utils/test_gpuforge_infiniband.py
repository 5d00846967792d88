"""Parsers for ibstat, ibstatus, ibv_devinfo, ibdev2netdev and ofed_info -s over real outputs and fixtures
from the reference documents
(the `ofed_info -s` lines of the vendor facts registry: tests/unit/library/test_infiniband_facts.py, which may
read YAML; these tests also run under the nodes' oldest Python, without PyYAML)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_infiniband import (
    ParseError,
    parse,
    parse_ibdev2netdev,
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_ofed_info_release,
)

IBSTAT_H100 = "ibstat__leptonai-gpud__h100_cx7_roce400_some_down_polling.txt"
IBSTAT_A100_MIXED = "ibstat__leptonai-gpud__a100_mt4126_mixed_eth_ib.txt"
IBSTAT_AZURE_PANIC = "ibstat__leptonai-gpud__a100_azure_cx6vf_partial_exit255.txt"
DEVINFO_AZURE = "ibv_devinfo__Azure-azhpc-images__PR44__hbv2_cx4lx-vf_roce_EXCERPT_first_hca.txt"
DEVINFO_CX7 = "ibv_devinfo__deepseek-ai-DeepEP__issue38__h100_cx7_roce_EXCERPT_one_hca.txt"
DEVINFO_IB = "ibv_devinfo__deepseek-ai-DeepEP__issue55__mt4126_ib_EXCERPT_one_hca.txt"
DEVINFO_DOWN = "ibv_devinfo__deepseek-ai-DeepEP__issue60__cx6dx_port_down_EXCERPT_one_hca.txt"


def _ports(result: dict) -> dict:
    return {(ca["name"], p["port"]): p for ca in result["cas"] for p in ca["ports"]}


def test_ibstat_h100_roce_some_down(real_output):
    result = parse_ibstat(real_output(IBSTAT_H100))
    assert result["errors"] == []
    names = [ca["name"] for ca in result["cas"]]
    assert len(names) == 12
    assert names[:4] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"]
    types = [ca["ca_type"] for ca in result["cas"]]
    assert types.count("MT4129") == 8 and types.count("MT4125") == 4
    ports = _ports(result)
    assert ports[("mlx5_0", 1)] == {
        "port": 1,
        "state": "Active",
        "state_code": 4,
        "phys_state": "LinkUp",
        "phys_state_code": 5,
        "rate_gbit_per_s": 400,
        "lid": 0,
        "lmc": 0,
        "sm_lid": 0,
        "capability_mask": "0x00010000",
        "port_guid": "0xa288c2fffeadeab8",
        "link_layer": "Ethernet",
    }
    assert (ports[("mlx5_11", 1)]["state"], ports[("mlx5_11", 1)]["phys_state"]) == ("Down", "Polling")
    assert (ports[("mlx5_5", 1)]["state"], ports[("mlx5_5", 1)]["phys_state"]) == ("Down", "Disabled")
    assert ports[("mlx5_11", 1)]["rate_gbit_per_s"] == 40
    assert ports[("mlx5_1", 1)]["rate_gbit_per_s"] == 100
    assert ports[("mlx5_1", 1)]["port_guid"] == "0x0000000000000000"
    rates = sorted(p["rate_gbit_per_s"] for p in ports.values())
    assert rates.count(400) == 6 and rates.count(100) == 4 and rates.count(40) == 2
    assert all(p["link_layer"] == "Ethernet" for p in ports.values())
    ca0 = result["cas"][0]
    assert (ca0["fw_ver"], ca0["hw_ver"], ca0["num_ports"]) == ("28.39.1002", "0", 1)
    assert ca0["node_guid"] == "0xa088c20300adeab8"
    assert ca0["sys_image_guid"] == "0xa088c20300adeab8"


def test_ibstat_a100_mixed_ethernet_and_infiniband(real_output):
    result = parse_ibstat(real_output(IBSTAT_A100_MIXED))
    assert result["errors"] == []
    assert len(result["cas"]) == 9
    ports = _ports(result)
    assert ports[("mlx5_0", 1)]["link_layer"] == "Ethernet"
    assert [p["link_layer"] for p in ports.values()].count("InfiniBand") == 8
    ib = ports[("mlx5_1", 1)]
    assert (ib["lid"], ib["sm_lid"], ib["rate_gbit_per_s"]) == (1369, 83, 200)
    assert ib["port_guid"] == "0x6b9d7f2c99902a63"
    assert ports[("mlx5_8", 1)]["lid"] == 1396
    assert result["cas"][0]["fw_ver"] == "22.35.2302"
    assert result["cas"][1]["fw_ver"] == "28.37.1014"


def test_ibstat_partial_output_ending_in_ibpanic(real_output):
    result = parse_ibstat(real_output(IBSTAT_AZURE_PANIC))
    assert [ca["name"] for ca in result["cas"]] == [f"mlx5_{i}" for i in range(8)]
    panic = "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    assert result["errors"] == [panic]
    ca7 = result["cas"][7]
    assert ca7["ca_type"] == "MT4124"
    assert ca7["fw_ver"] == "20.41.1000"
    assert ca7["node_guid"] == "0x00155dfffe3411f2"
    assert ca7["sys_image_guid"] == "0xb83fd203006e277c"
    port = ca7["ports"][0]
    assert (port["state"], port["rate_gbit_per_s"], port["lid"], port["sm_lid"]) == ("Active", 200, 13305, 1)
    assert port["port_guid"] == "0x00155dfffd3411f2"
    assert port["capability_mask"] == "0xa651ec48"


def test_ibstat_truncated_block_is_reported_not_raised():
    text = "CA 'mlx5_0'\n\tCA type: MT4115\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n"
    result = parse_ibstat(text)
    assert result["cas"][0]["ports"][0]["state"] == "Active"
    assert result["errors"] == ["mlx5_0 port 1: incomplete block, missing phys_state, rate_gbit_per_s, link_layer"]


def test_ibstat_single_port_form_and_special_rates():
    text = "CA: 'mlx4_0'\nPort 2:\nState: Initializing\nPhysical state: LinkUp\nRate: 40 (FDR10)\n"
    text += "Base lid: 0\nLMC: 0\nSM lid: 0\nCapability mask: 0x02514868\nPort GUID: 0x0002c90300a1b2c4\n"
    text += "Link layer: InfiniBand\n"
    port = parse_ibstat(text)["cas"][0]["ports"][0]
    assert (port["port"], port["state_code"], port["rate_gbit_per_s"], port["speed"]) == (2, 2, 40, "FDR10")
    sdr = parse_ibstat(text.replace("Rate: 40 (FDR10)", "Rate: 2.5"))["cas"][0]["ports"][0]
    assert sdr["rate_gbit_per_s"] == 2.5


def test_ibstat_garbage_raises_parse_error():
    with pytest.raises(ParseError):
        parse_ibstat("bash: ibstat: command not found\n")
    assert parse_ibstat("") == {"cas": [], "errors": []}


def test_ibstatus_redp5610_dgx1(fixture_text):
    result = parse_ibstatus(fixture_text("ibstatus/dgx1_edr_4port_redp5610.txt"))
    assert result["errors"] == []
    assert [ca["name"] for ca in result["cas"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    ports = _ports(result)
    assert [ports[(f"mlx5_{i}", 1)]["lid"] for i in range(4)] == [0xB, 0xD, 0xC, 0xE]
    port = ports[("mlx5_1", 1)]
    assert port == {
        "port": 1,
        "default_gid": "fe80:0000:0000:0000:ec0d:9a03:0044:d608",
        "port_guid": "0xec0d9a030044d608",
        "lid": 13,
        "sm_lid": 9,
        "state": "Active",
        "state_code": 4,
        "phys_state": "LinkUp",
        "phys_state_code": 5,
        "rate_gbit_per_s": 100,
        "width": "4X",
        "speed": "EDR",
        "link_layer": "InfiniBand",
    }


def test_ibstatus_down_port_and_fatal_error():
    text = (
        "Infiniband device 'mlx5_1' port 1 status:\n"
        "\tdefault gid:\t fe80:0000:0000:0000:0000:0000:0000:0000\n"
        "\tbase lid:\t 0x0\n\tsm lid:\t\t 0x0\n\tstate:\t\t 1: DOWN\n\tphys state:\t 3: Disabled\n"
        "\trate:\t\t 40 Gb/sec (4X QDR)\n\tlink_layer:\t Ethernet\n\n"
        "Fatal error:  device 'mlx5_9': sys files not found (/sys/class/infiniband/mlx5_9/ports)\n"
    )
    result = parse_ibstatus(text)
    port = result["cas"][0]["ports"][0]
    assert (port["state"], port["phys_state"], port["rate_gbit_per_s"], port["speed"]) == (
        "Down",
        "Disabled",
        40,
        "QDR",
    )
    assert result["errors"] == [
        "Fatal error:  device 'mlx5_9': sys files not found (/sys/class/infiniband/mlx5_9/ports)"
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            DEVINFO_AZURE,
            ("rdmaP23800p0s2", "14.25.8102", 4118, "0x80", "MSF0010110035", "Active", 1024, "Ethernet"),
        ),
        (DEVINFO_CX7, ("mlx5_2", "28.42.1000", 4129, "0x0", "MT_0000000838", "Active", 4096, "Ethernet")),
        (DEVINFO_IB, ("mlx5_3", "28.37.1700", 4126, "0x0", "MT_0000000970", "Active", 4096, "InfiniBand")),
        (DEVINFO_DOWN, ("mlx5_12", "22.38.1900", 4125, "0x0", "MT_0000000436", "Down", 1024, "Ethernet")),
    ],
)
def test_ibv_devinfo_real_excerpts(real_output, name, expected):
    result = parse_ibv_devinfo(real_output(name))
    assert result["errors"] == []
    [hca] = result["cas"]
    [port] = hca["ports"]
    got = (
        hca["name"],
        hca["fw_ver"],
        hca["vendor_part_id"],
        hca["hw_ver"],
        hca["board_id"],
        port["state"],
        port["active_mtu"],
        port["link_layer"],
    )
    assert got == expected
    assert hca["transport"] == "InfiniBand"
    assert hca["vendor_id"] == "0x02c9"
    assert (hca["num_ports"], port["max_mtu"]) == (1, 4096)


def test_ibv_devinfo_guids_and_lids(real_output):
    ib = parse_ibv_devinfo(real_output(DEVINFO_IB))["cas"][0]
    assert ib["node_guid"] == "0x2dc3190f3d851cb6"
    assert ib["sys_image_guid"] == "0x946dae0300f00b6a"
    assert (ib["ports"][0]["sm_lid"], ib["ports"][0]["lid"], ib["ports"][0]["lmc"]) == (1, 1690, 0)
    down = parse_ibv_devinfo(real_output(DEVINFO_DOWN))["cas"][0]
    assert down["ports"][0]["state_code"] == 1
    assert down["sys_image_guid"] == "0xa088c20300309a0c"


def test_ibv_devinfo_verbose_gives_rate_and_phys_state():
    text = (
        "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n"
        "\tdevice_cap_flags:\t\t0x00001000\n\t\t\t\t\tRC_RNR_NAK_GEN\n"
        "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_INIT (2)\n\t\t\tlink_layer:\t\tInfiniBand\n"
        "\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t14.0 Gbps (16)\n"
        "\t\t\tphys_state:\t\tLINK_UP (5)\n"
    )
    port = parse_ibv_devinfo(text)["cas"][0]["ports"][0]
    assert (port["state"], port["phys_state"], port["width"], port["speed"]) == (
        "Initializing",
        "LinkUp",
        "4X",
        "FDR",
    )
    assert port["rate_gbit_per_s"] == 56


def test_ibv_devinfo_errors_and_garbage():
    assert parse_ibv_devinfo("No IB devices found\n")["errors"] == ["No IB devices found"]
    with pytest.raises(ParseError):
        parse_ibv_devinfo("Segmentation fault\n")


def test_ibdev2netdev_plain_and_verbose():
    text = (
        "mlx5_0 port 1 ==> ib0 (Up)\nmlx5_1 port 1 ==> ib1 (Down)\n"
        "0000:1a:00.0 mlx5_2 (MT4129 - NA)  fw 28.39.1002 port 1 (ACTIVE) ==> ens1np0 (Up)\n"
    )
    result = parse_ibdev2netdev(text)
    assert result["errors"] == []
    assert result["mappings"][:2] == [
        {"ca": "mlx5_0", "port": 1, "netdev": "ib0", "netdev_state": "Up"},
        {"ca": "mlx5_1", "port": 1, "netdev": "ib1", "netdev_state": "Down"},
    ]
    assert result["mappings"][2] == {
        "ca": "mlx5_2",
        "port": 1,
        "netdev": "ens1np0",
        "netdev_state": "Up",
        "bus_id": "0000:1a:00.0",
        "fw_ver": "28.39.1002",
        "port_state": "ACTIVE",
    }
    with pytest.raises(ParseError):
        parse_ibdev2netdev("ibdev2netdev: command not found\n")


def test_ibdev2netdev_real_plain_and_verbose_with_virtual_functions():
    """tests/fixtures/ibdev2netdev/SOURCES.md: a ConnectX-4 before and after four SR-IOV virtual functions."""
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "ibdev2netdev"
    plain = parse_ibdev2netdev((fixtures / "ib-sriov-cni-readme_cx4_2port.txt").read_text(encoding="utf-8"))
    assert plain == {
        "mappings": [
            {"ca": "mlx5_0", "port": 1, "netdev": "ib0", "netdev_state": "Up"},
            {"ca": "mlx5_1", "port": 1, "netdev": "ib1", "netdev_state": "Down"},
        ],
        "errors": [],
    }
    verbose = parse_ibdev2netdev((fixtures / "ib-sriov-cni-readme_cx4_4vf_v.txt").read_text(encoding="utf-8"))
    assert verbose["errors"] == []
    assert [(m["bus_id"], m["ca"], m["port_state"], m["netdev"], m["netdev_state"]) for m in verbose["mappings"]] == [
        ("0000:02:00.0", "mlx5_0", "ACTIVE", "ib0", "Up"),
        ("0000:02:00.1", "mlx5_1", "ACTIVE", "ib1", "Down"),
        ("0000:02:00.5", "mlx5_2", "DOWN", "ib2", "Down"),
        ("0000:02:00.6", "mlx5_3", "DOWN", "ib3", "Down"),
        ("0000:02:00.7", "mlx5_4", "DOWN", "ib4", "Down"),
        ("0000:02:00.2", "mlx5_5", "DOWN", "ib5", "Down"),
    ]
    assert {m["fw_ver"] for m in verbose["mappings"]} == {"12.23.1020"}


def test_dispatch_by_kind(real_output):
    assert len(parse("ibstat", real_output(IBSTAT_A100_MIXED))["cas"]) == 9
    assert parse("ibdev2netdev", "mlx5_0 port 1 ==> ib0 (Up)\n")["mappings"][0]["netdev"] == "ib0"
    with pytest.raises(ParseError):
        parse("ibnetdiscover", "")


def test_ofed_info_release_empty_and_not_a_release():
    assert parse_ofed_info_release("") is None and parse_ofed_info_release("\n\n") is None
    with pytest.raises(ParseError, match="not a release"):
        parse_ofed_info_release("bash: ofed_info: command not found\n")


@pytest.mark.parametrize("parser", [parse_ibstat, parse_ibstatus, parse_ibdev2netdev])
def test_a_runaway_output_keeps_ten_unrecognised_lines_and_counts_the_rest(real_output, parser):
    """A tool that prints a debug log after its output (100,000 noise lines here) gives 10 lines verbatim and one
    count, not one error (and one Ansible warning of infiniband_facts) per line. (ibv_devinfo skips bare words:
    its -v capability lists.)"""
    real = {
        parse_ibstat: real_output(IBSTAT_H100),
        parse_ibstatus: "Infiniband device 'mlx5_0' port 1 status:\n\tstate:\t\t 4: ACTIVE\n",
        parse_ibdev2netdev: "mlx5_0 port 1 ==> ib0 (Up)\n",
    }[parser]
    before = [error for error in parser(real)["errors"] if ": unrecognised: " in error]
    result = parser(real.rstrip("\n") + "\n" + "debug noise\n" * 100_000)
    unrecognised = [error for error in result["errors"] if ": unrecognised: " in error]
    assert len(unrecognised) == 10, unrecognised[:3]
    assert unrecognised[-1].endswith("unrecognised: debug noise")
    assert result["errors"][-1] == f"{100_000 + len(before) - 10} more unrecognised lines not listed"
    assert result["cas" if parser is not parse_ibdev2netdev else "mappings"], result
