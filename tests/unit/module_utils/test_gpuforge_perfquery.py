"""perfquery parsing, counter growth, link flaps and fleet consistency: real output, the lab's perfquery, and
every fault type of lab/profiles/SCHEMA.md that concerns them, injected on the GPU profiles they apply to."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_perfquery as pq
from gpuforge_sim import ib_ports, ibstat, perfquery
from node_sim_helpers import GPU_PROFILES, SimNode

from gpuforge.lab.profiles import hardware_document, load_profile

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "perfquery"
# GPU profiles with InfiniBand ports (perfquery needs a PMA; RoCE ports have none).
IB_PROFILES = [p for p in GPU_PROFILES if any(
    port["link_layer"] == "InfiniBand" for h in load_profile(p).get("hcas") or [] for port in h["ports"]
)]  # fmt: skip
ROCE_PROFILES = [p for p in GPU_PROFILES if p not in IB_PROFILES]


def run(main, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def snapshot(node_profile_ports) -> dict:
    """{hca/port: counters} from the lab's perfquery, one run per Active IB port (as ib_port_counters reads)."""
    counters = {}
    for hca, port in node_profile_ports:
        rc, out, _err = run(perfquery.main, ["-C", hca, "-P", str(port)])
        assert rc == 0
        counters[f"{hca}/{port}"] = pq.parse_perfquery(out)[0]["counters"]
    return counters


def active_ib_ports():
    _rc, out, _err = run(ibstat.main, [])
    hcas = ib_ports.ports_view(ib_ports.load())
    assert out
    return [(h["name"], p["port"]) for h in hcas for p in h["ports"]
            if p["link_layer"] == "InfiniBand" and p["state"] == "Active"]  # fmt: skip


def test_real_extended_output_is_read():
    blocks = pq.parse_perfquery((FIXTURES / "infiniband-diags_issue16_rhel75_perfquery_x.txt").read_text())
    assert len(blocks) == 1
    block = blocks[0]
    assert (block["lid"], block["port"], block["cap_mask"], block["extended"]) == (10, 1, "0x5300", True)
    assert block["counters"]["SymbolErrorCounter"] == 0
    assert block["counters"]["QP1Dropped"] == 0
    assert "CounterSelect2" not in block["counters"]
    assert set(pq.ERROR_COUNTERS) <= set(block["counters"])


def test_lab_output_has_the_libibmad_layout(tmp_path, monkeypatch):
    SimNode(tmp_path, monkeypatch, "dgx1-v100-edr")
    rc, out, _err = run(perfquery.main, ["-C", "mlx5_0", "-P", "1"])
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "# Port counters: Lid 5 port 1 (CapMask: 0x5A00)"
    # name, colon, dots to column 32, value - as libibmad prints it (and the real output above shows)
    assert "SymbolErrorCounter:..............0" in lines
    assert "PortRcvRemotePhysicalErrors:.....0" in lines
    block = pq.parse_perfquery(out)[0]
    assert (block["lid"], block["port"], block["extended"]) == (5, 1, False)
    assert list(block["counters"]) == [name for name, _bits in perfquery.FIELDS]


def test_empty_or_other_output_is_a_parse_error():
    with pytest.raises(pq.ParseError):
        pq.parse_perfquery("")
    with pytest.raises(pq.ParseError):
        pq.parse_perfquery("CA 'mlx5_0'\n\tCA type: MT4115\n")


def test_growth_reset_and_saturation():
    before = {"SymbolErrorCounter": 10, "LinkDownedCounter": 2, "PortRcvErrors": 5}
    after = {"SymbolErrorCounter": 14, "LinkDownedCounter": 1, "PortRcvErrors": 65535}
    growth = pq.counter_growth(before, after)
    # LinkDownedCounter went down: it was reset in between, its value now is all growth since the reset.
    assert growth == {"SymbolErrorCounter": 4, "LinkDownedCounter": 1, "PortRcvErrors": "saturated"}


def test_judge_growth_fails_only_over_the_limit():
    before = {"mlx5_0/1": {"SymbolErrorCounter": 0, "PortXmitDiscards": 0}}
    after = {"mlx5_0/1": {"SymbolErrorCounter": 3, "PortXmitDiscards": 0}}
    failed = pq.judge_counter_growth(before, after)
    assert failed["status"] == "FAIL"
    assert failed["observed"]["grew"] == {"mlx5_0/1": {"SymbolErrorCounter": 3}}
    assert "mlx5_0/1 (SymbolErrorCounter +3)" in failed["fault"]
    assert "cable" in failed["remedy"]
    assert pq.judge_counter_growth(before, after, {"SymbolErrorCounter": 3})["status"] == "PASS"
    unchanged = pq.judge_counter_growth(before, before)
    assert (unchanged["status"], unchanged["fault"], unchanged["remedy"]) == ("PASS", "", "")


def test_judge_growth_warns_on_saturated_and_unpaired_ports():
    before = {"mlx5_0/1": {"LinkErrorRecoveryCounter": 255}, "mlx5_1/1": {"SymbolErrorCounter": 0}}
    after = {"mlx5_0/1": {"LinkErrorRecoveryCounter": 255}}
    check = pq.judge_counter_growth(before, after)
    assert check["status"] == "WARN"
    assert check["observed"]["saturated"] == {"mlx5_0/1": ["LinkErrorRecoveryCounter"]}
    assert check["observed"]["unpaired"] == ["mlx5_1/1"]


def test_link_flaps_in_the_log():
    log = "\n".join(
        [
            "Nov 23 10:00:01 node1 systemd-networkd[612]: ib0: Lost carrier",
            "Nov 23 10:00:09 node1 systemd-networkd[612]: ib0: Gained carrier",
            "[  12.5] mlx5_core 0000:18:00.0 enp24s0f0np0: Link down",
            "[  13.0] mlx5_core 0000:18:00.0 enp24s0f0np0: Link up",
            "Nov 23 10:05:01 node1 systemd-networkd[612]: ib0: Lost carrier",
            "Nov 23 10:05:01 node1 systemd-networkd[612]: eno1: Lost carrier",  # not an RDMA netdev
        ]
    )
    flaps = pq.parse_link_flaps(log)
    assert flaps == {"ib0": 2, "enp24s0f0np0": 1}
    check = pq.judge_link_flaps(flaps, 1)
    assert check["status"] == "FAIL"
    assert "2 times on ib0" in check["fault"]
    assert pq.judge_link_flaps({"enp24s0f0np0": 1}, 1)["status"] == "WARN"
    assert pq.judge_link_flaps({}, 1)["status"] == "PASS"
    # An IPoIB netdev with another name is found when the facts name it.
    assert pq.parse_link_flaps("storage0: Lost carrier", ["storage0"]) == {"storage0": 1}


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_healthy_profile_counters_do_not_grow(tmp_path, monkeypatch, profile):
    SimNode(tmp_path, monkeypatch, profile)
    ports = active_ib_ports()
    assert bool(ports) == (profile in IB_PROFILES)
    before = snapshot(ports)
    after = snapshot(ports)
    check = pq.judge_counter_growth(before, after)
    assert (check["status"], check["fault"]) == ("PASS", "")
    if ports:  # traffic counters grew between the reads, the error counters did not
        key = next(iter(after))
        assert after[key]["PortXmitData"] > before[key]["PortXmitData"]


@pytest.mark.parametrize("profile", IB_PROFILES)
def test_growing_error_counters_fail_the_port(tmp_path, monkeypatch, profile):
    # the last InfiniBand HCA of the system (the DGX H100's last two are 400 GbE storage ports)
    hca = [h for h in load_profile(profile)["hcas"] if h["ports"][0]["link_layer"] == "InfiniBand"][-1]
    port = hca["ports"][0]["port"]
    fault = {
        "type": "ib_port_errors",
        "hca": hca["name"],
        "port": port,
        "counters": {"SymbolErrorCounter": 40, "PortRcvErrors": 3},
        "initial": {"SymbolErrorCounter": 7},
    }
    SimNode(tmp_path, monkeypatch, profile, [fault])
    ports = active_ib_ports()
    before, after = snapshot(ports), snapshot(ports)
    key = f"{hca['name']}/{port}"
    assert before[key]["SymbolErrorCounter"] == 7
    check = pq.judge_counter_growth(before, after)
    assert check["status"] == "FAIL"
    assert check["observed"]["grew"] == {key: {"SymbolErrorCounter": 40, "PortRcvErrors": 3}}
    # perfquery -R resets the port: the next pair of reads shows no growth from the reset values
    assert run(perfquery.main, ["-R", "-C", hca["name"], "-P", str(port)])[0] == 0
    reset = snapshot(ports)
    assert reset[key]["SymbolErrorCounter"] == 0


def test_counters_saturate_at_their_width(tmp_path, monkeypatch):
    fault = {"type": "ib_port_errors", "hca": "mlx5_0", "port": 1, "counters": {"LinkErrorRecoveryCounter": 200}}
    SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100", [fault])
    ports = active_ib_ports()
    snapshot(ports)
    second, third = snapshot(ports), snapshot(ports)
    assert third["mlx5_0/1"]["LinkErrorRecoveryCounter"] == 255
    check = pq.judge_counter_growth(second, third)
    assert check["observed"]["saturated"] == {"mlx5_0/1": ["LinkErrorRecoveryCounter"]}


def test_link_flap_fault_sets_link_downed_and_logs(tmp_path, monkeypatch):
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", [{"type": "ib_link_flap", "hca": "mlx5_2", "port": 1}])
    counters = snapshot(active_ib_ports())
    assert counters["mlx5_2/1"]["LinkDownedCounter"] == 1
    assert counters["mlx5_0/1"]["LinkDownedCounter"] == 0
    flaps = pq.parse_link_flaps(node.dmesg())
    assert flaps == {"ib2": 1}
    assert pq.judge_link_flaps(flaps, 1)["status"] == "WARN"


@pytest.mark.parametrize("profile", ROCE_PROFILES)
def test_link_flap_on_roce_is_logged_by_mlx5(tmp_path, monkeypatch, profile):
    hca = load_profile(profile)["hcas"][0]
    node = SimNode(
        tmp_path, monkeypatch, profile, [{"type": "ib_link_flap", "hca": hca["name"], "port": 1, "count": 2}]
    )
    assert pq.parse_link_flaps(node.dmesg()) == {hca["ports"][0]["netdev"]: 2}


def test_down_port_is_not_read(tmp_path, monkeypatch):
    fault = {"type": "ib_port_state", "hca": "mlx5_0", "port": 1, "state": "Down"}
    SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100", [fault])
    rc, out, err = run(perfquery.main, ["-C", "mlx5_0", "-P", "1"])
    assert (rc, out) == (255, "")
    assert "ibpanic:" in err
    assert active_ib_ports() == []


def test_fleet_outliers_are_named():
    nodes = {
        "node1": pq.fleet_facts({"hcas": [{"name": "mlx5_0", "fw_ver": "12.28.2006"}]}, {"driver_version": "550.1"}),
        "node2": pq.fleet_facts({"hcas": [{"name": "mlx5_0", "fw_ver": "12.28.2006"}]}, {"driver_version": "550.1"}),
        "node3": pq.fleet_facts(
            {"hcas": [{"name": "mlx5_0", "fw_ver": "12.23.1020"}]},
            {"driver_version": "550.1"},
            ofed="MLNX_OFED_LINUX-24.10-1.1.4.0:\n",
        ),
    }
    check = pq.judge_fleet(nodes)
    assert check["status"] == "FAIL"
    assert check["observed"]["hca_firmware.mlx5_0"] == {"node3": "12.23.1020"}
    assert check["expected"]["hca_firmware.mlx5_0"] == "12.28.2006"
    # OFED readable on one node only: the others are outliers of it (unreadable is a difference too)
    assert check["observed"]["ofed"] == {"node1": None, "node2": None}
    assert "gpu_driver" not in check["observed"]
    assert "node3 (12.23.1020)" in check["fault"]
    same = pq.judge_fleet({"a": nodes["node1"], "b": nodes["node2"]})
    assert (same["status"], same["observed"]) == ("PASS", {})


def test_firmware_fault_makes_a_fleet_outlier(tmp_path, monkeypatch):
    facts = {}
    for host, faults in (
        ("n1", []),
        ("n2", []),
        ("n3", [{"type": "hca_firmware", "hca": "mlx5_0", "fw_ver": "12.20.1010"}]),
    ):
        node = SimNode(tmp_path / host, monkeypatch, "poweredge-c4140-v100", faults)
        facts[host] = pq.fleet_facts(node.infiniband_facts(), node.nvidia_smi_facts(samples=1))
    check = pq.judge_fleet(facts)
    assert check["status"] == "FAIL"
    assert check["observed"] == {"hca_firmware.mlx5_0": {"n3": "12.20.1010"}}


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ({"type": "ib_port_errors", "hca": "mlx5_0", "port": 1, "counters": {}}, "counters"),
        ({"type": "ib_port_errors", "hca": "mlx5_0", "port": 1, "counters": {"SymbolErrors": 1}}, "SymbolErrors"),
        ({"type": "ib_port_errors", "hca": "mlx5_0", "port": 1, "counters": {"PortRcvErrors": -1}}, "non-negative"),
        ({"type": "ib_link_flap", "hca": "mlx5_0", "port": 1, "count": 0}, "count"),
        ({"type": "hca_firmware", "hca": "mlx5_0", "fw_ver": 12}, "fw_ver"),
        ({"type": "hca_firmware", "hca": "mlx5_9", "fw_ver": "1.2.3"}, "mlx5_9"),
    ],
)
def test_bad_fault_parameters_are_refused(fault, problem):
    with pytest.raises(ValueError, match=problem):
        hardware_document(load_profile("poweredge-c4140-v100"), [fault])


def test_roce_port_refuses_counter_fault():
    with pytest.raises(ValueError, match="InfiniBand port"):
        fault = {"type": "ib_port_errors", "hca": "mlx5_0", "port": 1, "counters": {"PortRcvErrors": 1}}
        hardware_document(load_profile("supermicro-4029gp-v100"), [fault])
