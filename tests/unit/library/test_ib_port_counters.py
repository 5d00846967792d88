"""ib_port_counters and fleet_consistency modules: perfquery answered by the lab's simulator in-process."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

from ansible_collections.gpuforge.cluster.plugins.modules import fleet_consistency, ib_port_counters
from gpuforge_sim import perfquery

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
import pcie_sim_helpers
from node_sim_helpers import SimNode


def sim_perfquery(calls):
    def run_command(argv, **_kwargs):
        calls.append(argv)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = perfquery.main(list(argv[1:]))
        return rc, out.getvalue(), err.getvalue()

    return run_command


def bin_path(name):
    return "/usr/sbin/perfquery" if name == "perfquery" else None


def test_reads_active_ib_ports_and_fails_growth(tmp_path, monkeypatch, ansible_module):
    faults = [
        {"type": "ib_port_errors", "hca": "mlx5_1", "port": 1, "counters": {"LinkDownedCounter": 1}},
        {"type": "ib_port_state", "hca": "mlx5_3", "port": 1, "state": "Down"},
    ]
    node = SimNode(tmp_path, monkeypatch, "dgx1-v100-edr", faults)
    facts = node.infiniband_facts()
    calls = []
    before = ansible_module(ib_port_counters, {"infiniband": facts}, sim_perfquery(calls), bin_path=bin_path)
    assert sorted(before["counters"]) == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1"]  # mlx5_3 is Down: not read
    assert calls[0] == ["/usr/sbin/perfquery", "-C", "mlx5_0", "-P", "1"]
    assert before["healthy"] is True and "check" not in before
    args = {"infiniband": facts, "baseline": before["counters"]}
    after = ansible_module(ib_port_counters, args, sim_perfquery(calls), check_mode=True, bin_path=bin_path)
    assert after["healthy"] is False
    assert after["check"]["name"] == "ib_port_counters"
    assert after["check"]["observed"]["grew"] == {"mlx5_1/1": {"LinkDownedCounter": 1}}
    # one more read grows LinkDownedCounter by one again: allowed by a limit of 1
    allowed = {"infiniband": facts, "baseline": after["counters"], "max_growth": {"LinkDownedCounter": "1"}}
    assert ansible_module(ib_port_counters, allowed, sim_perfquery(calls), bin_path=bin_path)["healthy"] is True


def test_roce_only_node_reads_nothing(tmp_path, monkeypatch, ansible_module):
    node = SimNode(tmp_path, monkeypatch, "supermicro-4029gp-v100")
    calls = []
    result = ansible_module(
        ib_port_counters,
        {"infiniband": node.infiniband_facts(), "baseline": {}},
        sim_perfquery(calls),
        bin_path=bin_path,
    )
    assert (result["counters"], calls, result["healthy"]) == ({}, [], True)


def test_missing_perfquery_is_named(tmp_path, monkeypatch, ansible_module):
    node = SimNode(tmp_path, monkeypatch, "poweredge-c4140-v100")
    result = ansible_module(
        ib_port_counters, {"infiniband": node.infiniband_facts()}, expect_failure=True, bin_path=lambda name: None
    )
    assert "perfquery not found" in result["msg"] and "infiniband-diags" in result["msg"]


def test_bad_limit_is_refused(tmp_path, monkeypatch, ansible_module):
    args = {"infiniband": {"hcas": []}, "max_growth": {"SymbolErrorCounter": "many"}}
    result = ansible_module(ib_port_counters, args, expect_failure=True)
    assert "max_growth.SymbolErrorCounter" in result["msg"]


def test_fleet_names_the_node_with_other_firmware(tmp_path, monkeypatch, ansible_module):
    nodes = {}
    for host in ("gpu01", "gpu02", "gpu03"):
        faults = [{"type": "hca_firmware", "hca": "mlx5_2", "fw_ver": "12.20.1010"}] if host == "gpu02" else []
        node = SimNode(tmp_path / host, monkeypatch, "dgx1-v100-edr", faults)
        nodes[host] = {
            "infiniband": node.infiniband_facts(),
            "nvidia_smi": node.nvidia_smi_facts(samples=1),
            "ofed": "MLNX_OFED_LINUX-24.10-1.1.4.0:",
            "system": "dgx1-v100-edr",
        }
    nodes["head"] = {"system": "head", "ofed": "MLNX_OFED_LINUX-23.10-2.1.3.1:"}  # another system: not compared
    result = ansible_module(fleet_consistency, {"nodes": nodes}, check_mode=True)
    assert result["healthy"] is False
    assert result["outliers"] == ["gpu02"]
    check = result["checks"]["dgx1-v100-edr"]
    assert check["observed"] == {"hca_firmware.mlx5_2": {"gpu02": "12.20.1010"}}
    assert check["expected"]["hca_firmware.mlx5_2"] == "12.23.1020"
    assert result["checks"]["head"]["status"] == "PASS"


def test_fleet_names_the_node_whose_port_is_in_other_partitions(tmp_path, monkeypatch, ansible_module):
    # P_Keys per rail (HCA port) as gpu_node_check returns them (`pkeys`), read from the lab's sysfs tree.
    nodes = {}
    for host in ("gpu01", "gpu02", "gpu03", "gpu04"):
        faults = [{"type": "pkey_mismatch", "hca": "mlx5_1", "pkeys": ["0x7fff"]}] if host == "gpu03" else []
        SimNode(tmp_path / host, monkeypatch, "dgx1-v100-edr", faults)
        nodes[host] = {"pkeys": pcie_sim_helpers.pkeys(), "system": "dgx1-v100-edr"}
    result = ansible_module(fleet_consistency, {"nodes": nodes}, check_mode=True)
    assert result["outliers"] == ["gpu03"]
    check = result["checks"]["dgx1-v100-edr"]
    assert check["observed"] == {"pkeys.mlx5_1/1": {"gpu03": "0x7fff"}}
    assert check["expected"]["pkeys.mlx5_1/1"] == "0xffff"
    assert check["expected"]["pkeys.mlx5_0/1"] == "0xffff"
    assert "P_Keys of HCA port mlx5_1/1 differs from the majority (0xffff) on gpu03 (0x7fff)" in check["fault"]
    assert "partitions" in check["remedy"]


def test_fleet_without_pkeys_compares_nothing_for_them(ansible_module):
    nodes = {"a": {"pkeys": {}, "kernel": "6.1"}, "b": {"pkeys": None, "kernel": "6.1"}}
    result = ansible_module(fleet_consistency, {"nodes": nodes}, check_mode=True)
    assert result["healthy"] is True
    assert result["checks"]["all"]["expected"] == {"kernel": "6.1"}
