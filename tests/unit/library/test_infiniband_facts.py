"""infiniband_facts module: ibstat / ibv_devinfo / ibdev2netdev merging, partial output, missing tools."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_infiniband_reader
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_infiniband import parse_ofed_info_release
from ansible_collections.gpuforge.cluster.plugins.modules import infiniband_facts
from gpuforge_sim import ibdev2netdev, ibstat, ibv_devinfo

IBSTAT_H100 = "ibstat__leptonai-gpud__h100_cx7_roce400_some_down_polling.txt"
IBSTAT_PANIC = "ibstat__leptonai-gpud__a100_azure_cx6vf_partial_exit255.txt"
DEVINFO_CX7 = "ibv_devinfo__deepseek-ai-DeepEP__issue38__h100_cx7_roce_EXCERPT_one_hca.txt"
PROFILES = Path(__file__).resolve().parents[3] / "lab" / "profiles"


class FakeTools:
    """Stands in for run_command and get_bin_path: `tools` maps a tool name to (rc, stdout, stderr)."""

    def __init__(self, tools: dict):
        self.tools = tools
        self.calls = []

    def path(self, name):
        return f"/usr/sbin/{name}" if name in self.tools else None

    def __call__(self, args, **kwargs):
        self.calls.append((args, kwargs))
        return self.tools[args[0].rsplit("/", 1)[-1]]


@pytest.fixture
def run_module(ansible_module):
    def run(args, tools: FakeTools, expect_failure=False, check_mode=False):
        return ansible_module(
            infiniband_facts, args, tools, expect_failure=expect_failure, check_mode=check_mode, bin_path=tools.path
        )

    return run


def _simulated(tool, argv, tmp_path, monkeypatch, faults=None) -> str:
    """Output of a lab simulator for the DGX-1 profile (with faults)."""
    hw = yaml.safe_load((PROFILES / "dgx1-v100-edr.yml").read_text(encoding="utf-8"))
    hw["faults"] = faults or []
    path = tmp_path / "hardware.json"
    path.write_text(json.dumps(hw), encoding="utf-8")
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(path))
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        tool.main(argv)
    return buffer.getvalue()


def test_ibstat_only_roce_with_down_ports(run_module, real_output):
    tools = FakeTools({"ibstat": (0, real_output(IBSTAT_H100), "")})
    result = run_module({}, tools)
    facts = result["ansible_facts"]["infiniband"]
    assert result["changed"] is False
    assert (facts["available"], facts["source"], len(facts["hcas"])) == (True, "ibstat", 12)
    assert facts["inactive_ports"] == ["mlx5_11/1", "mlx5_5/1"]
    assert len(facts["active_ports"]) == 10 and facts["active_ports"][:3] == [
        "mlx5_0/1",
        "mlx5_1/1",
        "mlx5_10/1",
    ]
    port = facts["hcas"][0]["ports"][0]
    assert (port["rate_gbit_per_s"], port["link_layer"], port["width"], port["netdev"]) == (
        400,
        "Ethernet",
        None,
        None,
    )
    assert facts["errors"] == []
    # handle_exceptions=False: a tool that cannot start fails naming it, not "Error executing command."
    assert tools.calls == [(["/usr/sbin/ibstat"], {"environ_update": {"LC_ALL": "C"}, "handle_exceptions": False})]


def test_partial_ibstat_exit_255_keeps_adapters(run_module, real_output):
    tools = FakeTools({"ibstat": (255, real_output(IBSTAT_PANIC), "")})
    facts = run_module({}, tools)["ansible_facts"]["infiniband"]
    assert len(facts["hcas"]) == 8
    assert facts["active_ports"] == [f"mlx5_{i}/1" for i in range(8)]
    assert facts["errors"] == [
        "ibstat: ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    ]
    assert facts["hcas"][7]["ports"][0]["lid"] == 13305


def test_all_tools_merge_width_mtu_and_netdev(run_module, tmp_path, monkeypatch):
    faults = [{"type": "ib_port_state", "hca": "mlx5_3", "port": 1, "state": "Down"}]
    tools = FakeTools(
        {
            "ibstat": (0, _simulated(ibstat, [], tmp_path, monkeypatch, faults), ""),
            "ibv_devinfo": (0, _simulated(ibv_devinfo, ["-v"], tmp_path, monkeypatch, faults), ""),
            "ibdev2netdev": (0, _simulated(ibdev2netdev, [], tmp_path, monkeypatch, faults), ""),
        }
    )
    facts = run_module({}, tools)["ansible_facts"]["infiniband"]
    assert facts["active_ports"] == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1"]
    assert facts["inactive_ports"] == ["mlx5_3/1"]
    hca = facts["hcas"][0]
    assert (hca["ca_type"], hca["fw_ver"], hca["board_id"], hca["vendor_part_id"]) == (
        "MT4115",
        "12.23.1020",
        "MT_2180110032",
        4115,
    )
    port = hca["ports"][0]
    assert (port["rate_gbit_per_s"], port["width"], port["speed"], port["active_mtu"]) == (100, "4X", "EDR", 4096)
    assert (port["lid"], port["sm_lid"], port["netdev"], port["netdev_state"]) == (5, 1, "ib0", "Up")
    down = facts["hcas"][3]["ports"][0]
    assert (down["state"], down["phys_state"], down["netdev_state"]) == ("Down", "Polling", "Down")
    assert [call[0][1:] for call in tools.calls] == [[], ["-v"], []]


def test_ibv_devinfo_fallback(run_module, real_output):
    tools = FakeTools({"ibv_devinfo": (0, real_output(DEVINFO_CX7), "")})
    facts = run_module({}, tools)["ansible_facts"]["infiniband"]
    assert facts["source"] == "ibv_devinfo"
    hca = facts["hcas"][0]
    assert (hca["name"], hca["ca_type"], hca["fw_ver"], hca["node_guid"]) == (
        "mlx5_2",
        "MT4129",
        "28.42.1000",
        "0xa088c203007e1dba",
    )
    assert (hca["ports"][0]["active_mtu"], hca["ports"][0]["rate_gbit_per_s"]) == (4096, None)
    assert facts["active_ports"] == ["mlx5_2/1"]


def test_missing_tools_name_the_package(run_module):
    result = run_module({}, FakeTools({}), expect_failure=True)
    assert "infiniband-diags" in result["msg"]
    facts = run_module({"fail_on_missing": False}, FakeTools({}))["ansible_facts"]["infiniband"]
    assert (facts["available"], facts["hcas"], facts["active_ports"]) == (False, [], [])


def test_unreadable_ibstat_fails_and_broken_optional_tool_is_noted(run_module, real_output):
    result = run_module({}, FakeTools({"ibstat": (0, "Segmentation fault\n", "")}), expect_failure=True)
    assert result["msg"].startswith("could not read ibstat output")
    broken = (1, "", "no such file\n")
    tools = FakeTools({"ibstat": (0, real_output(IBSTAT_H100), ""), "ibdev2netdev": broken})
    facts = run_module({}, tools)["ansible_facts"]["infiniband"]
    assert facts["errors"] == ["ibdev2netdev failed (rc=1): no such file"]
    assert len(facts["hcas"]) == 12


def test_check_mode_gathers_the_same(run_module, real_output):
    tools = FakeTools({"ibstat": (0, real_output(IBSTAT_PANIC), "")})
    facts = run_module({}, FakeTools(tools.tools), check_mode=True)["ansible_facts"]["infiniband"]
    assert len(facts["hcas"]) == 8


def test_ofed_release_from_ofed_info_s_with_the_adapters(run_module, real_output):
    release = "OFED-internal-24.10-1.1.4.0.200:"  # DOCA-OFED's, vendor_facts/nvidia-doca/debian12.yml
    tools = FakeTools({"ibstat": (0, real_output(IBSTAT_H100), ""), "ofed_info": (0, f"{release}\n", "")})
    facts = run_module({}, tools)["ansible_facts"]["infiniband"]
    assert facts["ofed_release"] == release and facts["errors"] == []
    assert [call[0][1:] for call in tools.calls][-1] == ["-s"]


def test_ofed_release_absent_failed_or_unreadable(run_module, real_output):
    ibstat = (0, real_output(IBSTAT_H100), "")
    assert run_module({}, FakeTools({"ibstat": ibstat}))["ansible_facts"]["infiniband"]["ofed_release"] is None
    failed = run_module({}, FakeTools({"ibstat": ibstat, "ofed_info": (1, "", "broken\n")}))
    assert failed["ansible_facts"]["infiniband"]["ofed_release"] is None
    assert failed["ansible_facts"]["infiniband"]["errors"] == ["ofed_info -s failed (rc=1): broken"]
    garbled = run_module({}, FakeTools({"ibstat": ibstat, "ofed_info": (0, "Segmentation fault\n", "")}))
    assert "not a release" in garbled["ansible_facts"]["infiniband"]["errors"][0]
    # Without ibstat or ibv_devinfo (fail_on_missing false) the OFED release is still read.
    bare = run_module({"fail_on_missing": False}, FakeTools({"ofed_info": (0, "MLNX_OFED_LINUX-24.10-1.1.4.0:\n", "")}))
    assert bare["ansible_facts"]["infiniband"]["ofed_release"] == "MLNX_OFED_LINUX-24.10-1.1.4.0:"


def _vendor_ofed_info_s() -> list[str]:
    """Every `ofed_info -s` line the vendor facts registry records (with its sources), tarball and DOCA."""
    root = PROFILES.parents[1] / "vendor_facts"
    files = [root / "mlnx-ofed" / "tarball.yml", *sorted((root / "nvidia-doca").glob("*.yml"))]
    return [yaml.safe_load(path.read_text(encoding="utf-8"))["facts"]["ofed_info_s"]["value"] for path in files]


@pytest.mark.parametrize("line", _vendor_ofed_info_s())
def test_ofed_info_release_is_the_line_as_printed(line):
    assert parse_ofed_info_release(f"{line}\n") == line


# -- waiting for a subnet manager started on the same run -----------------------------------------------------


class SequencedTools(FakeTools):
    """FakeTools whose entry may be a list: each run of that tool answers with the next one, the last repeating."""

    def __call__(self, args, **kwargs):
        self.calls.append((args, kwargs))
        entry = self.tools[args[0].rsplit("/", 1)[-1]]
        if isinstance(entry, list):
            return entry.pop(0) if len(entry) > 1 else entry[0]
        return entry


class FakeClock:
    """time.monotonic and time.sleep for the module: sleeping moves the clock, nothing waits."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


# Every port of the DGX-1 profile Initializing: linked, no subnet manager has configured it yet (LID 0).
NO_SUBNET_MANAGER = [{"type": "ib_port_state", "hca": f"mlx5_{n}", "port": 1, "state": "Init"} for n in range(4)]


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(gpuforge_infiniband_reader, "time", fake)
    return fake


def test_waits_until_the_subnet_manager_brings_the_ports_up(run_module, tmp_path, monkeypatch, clock):
    initializing = (0, _simulated(ibstat, [], tmp_path, monkeypatch, NO_SUBNET_MANAGER), "")
    active = (0, _simulated(ibstat, [], tmp_path, monkeypatch), "")
    tools = SequencedTools({"ibstat": [initializing, initializing, active]})
    facts = run_module({"devinfo": False, "wait_for_active_ports": 4}, tools)["ansible_facts"]["infiniband"]
    assert initializing[1].count("State: Initializing") == 4 and "Base lid: 0" in initializing[1]
    assert facts["active_ports"] == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]
    assert (len(tools.calls), clock.sleeps, facts["waited_s"]) == (3, [2, 2], 4.0)


def test_gives_up_after_the_timeout_and_returns_the_last_read(run_module, tmp_path, monkeypatch, clock):
    initializing = (0, _simulated(ibstat, [], tmp_path, monkeypatch, NO_SUBNET_MANAGER), "")
    tools = SequencedTools({"ibstat": [initializing]})
    args = {"devinfo": False, "wait_for_active_ports": 1, "wait_timeout": 5}
    facts = run_module(args, tools)["ansible_facts"]["infiniband"]
    assert (facts["active_ports"], len(facts["inactive_ports"])) == ([], 4)
    assert (clock.sleeps, facts["waited_s"], len(tools.calls)) == ([2, 2, 1], 5.0, 4)


def test_no_wait_when_the_ports_are_up_or_none_is_asked(run_module, real_output, clock):
    tools = FakeTools({"ibstat": (0, real_output(IBSTAT_H100), "")})
    facts = run_module({"devinfo": False, "wait_for_active_ports": 2}, tools)["ansible_facts"]["infiniband"]
    assert (len(tools.calls), clock.sleeps, facts["waited_s"]) == (1, [], 0)
    facts = run_module({"devinfo": False}, FakeTools(tools.tools))["ansible_facts"]["infiniband"]
    assert (facts["waited_s"], clock.sleeps) == (0, [])
    assert facts["inactive_ports"]  # some ports of that machine are down, and nothing waited for them


def test_a_negative_wait_is_refused(run_module, real_output):
    tools = FakeTools({"ibstat": (0, real_output(IBSTAT_H100), "")})
    result = run_module({"wait_for_active_ports": -1}, tools, expect_failure=True)
    assert "must not be negative" in result["msg"]
