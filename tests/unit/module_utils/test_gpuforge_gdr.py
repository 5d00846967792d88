"""gpuforge_gdr: which ports and GPUs the GPUDirect RDMA loopback measures, the thresholds, how a run's output is
read, and the gdr_ib_write_bw verdict (fault, remedy, caused_by)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_gdr import (
    check_thresholds,
    classify,
    judge_gdr,
    listening_ports,
    plan_ports,
    port_result,
    threshold_for,
)


# The shapes of roles/gpuforge/defaults/main/expected_hardware.yml (written out: these tests also run on the node's
# oldest Python, without PyYAML; tests/unit/library/test_gdr_loopback_bw.py reads the real tables).
def _hcas(links):
    return [{"name": f"mlx5_{i}", "ports": [{"port": 1, "link": link}]} for i, link in enumerate(links)]


SPEEDS = {
    "EDR": {"rate_gbit_per_s": 100, "link_layer": "InfiniBand"},
    "HDR": {"rate_gbit_per_s": 200, "link_layer": "InfiniBand"},
    "NDR": {"rate_gbit_per_s": 400, "link_layer": "InfiniBand"},
    "25GbE": {"rate_gbit_per_s": 25, "link_layer": "Ethernet"},
    "100GbE": {"rate_gbit_per_s": 100, "link_layer": "Ethernet"},
    "400GbE": {"rate_gbit_per_s": 400, "link_layer": "Ethernet"},
}
SYSTEMS = {
    "dgx1-v100-edr": {
        "hcas": _hcas(["EDR"] * 4),
        "numa_affinity": [
            {"gpus": [0, 1, 2, 3], "hcas": ["mlx5_0", "mlx5_1"], "numa": 0},
            {"gpus": [4, 5, 6, 7], "hcas": ["mlx5_2", "mlx5_3"], "numa": 1},
        ],
    },
    "dgx-h100-ndr": {
        "hcas": _hcas(["NDR"] * 8 + ["400GbE"] * 2),
        "numa_affinity": [
            {"gpus": [0, 1, 2, 3], "hcas": ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], "numa": 0},
            {"gpus": [4, 5, 6, 7], "hcas": ["mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"], "numa": 1},
        ],
    },
    "poweredge-c4140-v100": {
        "hcas": _hcas(["EDR"]),
        "numa_affinity": [{"gpus": [0, 1, 2, 3], "hcas": ["mlx5_0"], "numa": 0}],
    },
    "supermicro-4029gp-v100": {
        "hcas": _hcas(["25GbE"] * 2),
        "numa_affinity": [{"gpus": [0, 1, 2, 3], "hcas": ["mlx5_0", "mlx5_1"], "numa": 0}],
    },
    "vsphere-t4-vgpu-roce": {
        "peermem": False,
        "hcas": _hcas(["100GbE"]),
        "numa_affinity": [{"gpus": [0], "hcas": ["mlx5_0"], "numa": 0}],
    },
}
# gpuforge_expected_ib_write_bw (acceptance_checks.yml): EDR from IBM REDP-5610, NDR from Azure's H100 configuration.
IB_WRITE_BW = {"EDR": {"min_mib_per_s": 11000}, "HDR": {"min_gbit_per_s": 180}, "NDR": {"min_gbit_per_s": 380}}
# perftest's output when ibv_reg_mr refuses GPU memory (linux-rdma/perftest issue #31, nv_peer_mem not loaded).
MR_FAILURE = (
    "initializing CUDA\n[pid = 4869, dev = 0] device name = [Tesla K80]\ncreating CUDA Ctx\n"
    "making it the current CUDA Ctx\ncuMemAlloc() of a 16777216 bytes GPU buffer\n"
    "allocated GPU buffer address at 0000002305040000 pointer=0x2305040000\n"
    "Couldn't allocate MR\nfailed to create mr\nFailed to create MR\n Couldn't create IB resources\n"
)


def h100_gpus():
    """nvidia_smi facts of a DGX H100 as topo -m sees it: GPU i is PIX to mlx5_i, NODE to the others."""
    buses = ["1B", "43", "52", "61", "9D", "C3", "D1", "DF"]
    gpus = []
    for i, bus in enumerate(buses):
        group = range(0, 4) if i < 4 else range(4, 8)
        nics = {f"mlx5_{h}": ("PIX" if h == i else "NODE") for h in group}
        gpus.append({"index": i, "bus_id": f"00000000:{bus}:00.0", "nics": nics})
    return gpus


def test_h100_measures_its_eight_ndr_ports_each_with_its_pix_gpu_and_skips_the_storage_ports():
    plan = plan_ports(SYSTEMS["dgx-h100-ndr"], SPEEDS, h100_gpus())
    assert plan["applicable"] is True and plan["unplanned"] == []
    assert [p["key"] for p in plan["ports"]] == [f"mlx5_{i}/1" for i in range(8)]
    assert [(p["gpu"], p["topo"], p["numa"]) for p in plan["ports"]] == [
        (i, "PIX", 0 if i < 4 else 1) for i in range(8)
    ]
    assert plan["ports"][5]["bus_id"] == "00000000:C3:00.0"
    assert {p["rate_gbit_per_s"] for p in plan["ports"]} == {400}


def test_a_listed_storage_port_is_measured_too_and_an_unknown_one_is_refused():
    system = {**SYSTEMS["dgx-h100-ndr"]}
    system["numa_affinity"] = [*system["numa_affinity"][:1], {**system["numa_affinity"][1], "hcas": ["mlx5_9"]}]
    plan = plan_ports(system, SPEEDS, h100_gpus(), extra_ports=["mlx5_9/1"])
    assert plan["ports"][-1]["key"] == "mlx5_9/1"
    assert plan["ports"][-1]["link_layer"] == "Ethernet" and plan["ports"][-1]["numa"] == 1
    # the default table puts the storage HCAs in no NUMA group: listed, they warn instead of running on any GPU
    unplaced = plan_ports(SYSTEMS["dgx-h100-ndr"], SPEEDS, h100_gpus(), extra_ports=["mlx5_9/1"])
    assert unplaced["unplanned"] == [
        {"key": "mlx5_9/1", "why": "no numa_affinity entry lists mlx5_9: its NUMA-local GPU is not known"}
    ]
    with pytest.raises(OptionError, match=r"^extra_ports\[0\] mlx5_12/1 is not a port"):
        plan_ports(SYSTEMS["dgx-h100-ndr"], SPEEDS, h100_gpus(), extra_ports=["mlx5_12/1"])
    with pytest.raises(OptionError, match=r"^extra_ports\[0\] must be '<hca>/<port>'"):
        plan_ports(SYSTEMS["dgx-h100-ndr"], SPEEDS, h100_gpus(), extra_ports=["mlx5_9/one"])


def test_without_topology_the_hcas_are_spread_over_their_numa_gpus():
    plan = plan_ports(SYSTEMS["dgx1-v100-edr"], SPEEDS)
    assert [(p["hca"], p["gpu"], p["bus_id"]) for p in plan["ports"]] == [
        ("mlx5_0", 0, None),
        ("mlx5_1", 1, None),
        ("mlx5_2", 4, None),
        ("mlx5_3", 5, None),
    ]


def test_a_gpu_nvidia_smi_does_not_list_is_not_used():
    gpus = [{"index": i, "bus_id": f"00000000:0{i}:00.0", "nics": {}} for i in (0, 1, 3)]  # GPU 2 fell off
    system = SYSTEMS["poweredge-c4140-v100"]
    assert plan_ports(system, SPEEDS, gpus)["ports"][0]["gpu"] == 0
    lost = plan_ports(system, SPEEDS, [{"index": 7, "bus_id": "x"}])
    assert lost["ports"] == [] and "none of the GPUs [0, 1, 2, 3]" in lost["unplanned"][0]["why"]
    check = judge_gdr({}, lost["unplanned"])
    assert check["status"] == "WARN" and "mlx5_0/1" in check["fault"]


@pytest.mark.parametrize(
    ("system", "words"),
    [
        ("vsphere-t4-vgpu-roce", "peermem: false"),  # a vGPU guest runs no GPUDirect RDMA
        ("supermicro-4029gp-v100", "no InfiniBand port"),  # 25 GbE RoCE only: measured when listed
    ],
)
def test_systems_without_gpudirect_rdma_or_infiniband_are_not_applicable(system, words):
    plan = plan_ports(SYSTEMS[system], SPEEDS)
    assert (plan["applicable"], plan["ports"]) == (False, [])
    assert words in plan["reason"]


def test_listing_a_roce_port_makes_the_supermicro_applicable():
    plan = plan_ports(SYSTEMS["supermicro-4029gp-v100"], SPEEDS, extra_ports=["mlx5_1"])
    assert plan["applicable"] is True and [p["key"] for p in plan["ports"]] == ["mlx5_1/1"]


def test_a_port_without_a_numa_group_cannot_be_planned():
    system = {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "link": "HDR"}]}], "numa_affinity": []}
    plan = plan_ports(system, SPEEDS)
    assert plan["unplanned"] == [
        {"key": "mlx5_0/1", "why": "no numa_affinity entry lists mlx5_0: its NUMA-local GPU is not known"}
    ]


def test_a_link_the_speed_table_lacks_names_the_key():
    system = {"hcas": [{"name": "mlx5_0", "ports": [{"port": 1, "link": "XDR"}]}]}
    with pytest.raises(OptionError, match=r"^system\.hcas\[0\]\.ports\[0\]\.link 'XDR' is not a key of link_speeds"):
        plan_ports(system, SPEEDS)


def test_thresholds_come_from_the_table_else_a_fraction_of_the_line_rate():
    table = check_thresholds(IB_WRITE_BW)
    assert threshold_for("EDR", 100, table, 0.9) == {"min": 11000.0, "unit": "MiB/s", "source": "thresholds.EDR"}
    assert threshold_for("NDR", 400, table, 0.9) == {"min": 380.0, "unit": "Gb/s", "source": "thresholds.NDR"}
    assert threshold_for("400GbE", 400, table, 0.85) == {
        "min": 340.0,
        "unit": "Gb/s",
        "source": "0.85 of the 400 Gb/s line rate",
    }
    assert check_thresholds({"HDR": {"min_gbit_per_s": "180"}}) == {"HDR": {"min_gbit_per_s": 180.0}}  # -e gives text


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"EDR": {"min_gbit_per_s": 90, "min_mib_per_s": 11000}}, "thresholds.EDR needs exactly one of"),
        ({"EDR": {}}, "thresholds.EDR needs exactly one of"),
        ({"EDR": {"min_gbit_per_s": "fast"}}, "thresholds.EDR.min_gbit_per_s must be a number"),
        ({"EDR": {"min_gbps": 90}}, "thresholds.EDR.min_gbps is not a key"),
        ({"EDR": {"min_gbit_per_s": 0}}, "thresholds.EDR.min_gbit_per_s must be"),
    ],
)
def test_malformed_thresholds_name_the_entry(table, message):
    with pytest.raises(OptionError) as info:
        check_thresholds(table)
    assert str(info.value).startswith(message), str(info.value)


PORT = {"key": "mlx5_1/1", "hca": "mlx5_1", "port": 1, "link": "EDR", "gpu": 2, "bus_id": "00000000:0A:00.0", "numa": 0}


@pytest.mark.parametrize(("minimum", "status"), [(11000, "ok"), (11300, "low")])
def test_the_client_average_is_judged_in_the_unit_of_the_threshold(fixture_text, minimum, status):
    client = {"rc": 0, "out": fixture_text("ib_write_bw/dgx1_edr_mlx5_1_client_redp5610.txt"), "err": ""}
    threshold = {"min": minimum, "unit": "MiB/s", "source": "thresholds.EDR"}
    record = port_result(PORT, threshold, client)
    assert (record["status"], record["mib_per_s"], record["gbit_per_s"]) == (status, 11264.11, 94.49)
    assert record["bus_id"] == "00000000:0A:00.0" and record["min"] == f">= {minimum} MiB/s (thresholds.EDR)"
    assert ("nvidia-peermem" in record["remedy"]) is (status == "low")


@pytest.mark.parametrize(
    ("client", "server", "kind", "words"),
    [
        ({"rc": None}, {"rc": 1, "out": MR_FAILURE}, "gpu_memory", ("Couldn't allocate MR", "modprobe nvidia-peermem")),
        (
            {"rc": 1, "err": " Port number 1 state is Down\n Couldn't get context for the device\n"},
            {},
            "port_down",
            ("Port number 1 state is Down", "subnet manager"),
        ),
        ({"rc": 1, "err": "IB device mlx5_1 not found\n"}, {}, "no_device", ("not found", "mlx5_core")),
        (
            {"rc": 1, "err": "ib_write_bw: unrecognized option '--use_cuda=2'\n"},
            {},
            "no_cuda_support",
            ("without CUDA", "CUDA_H_PATH"),
        ),
        ({"rc": 124, "out": "", "timed_out": True}, {}, "timeout", ("did not finish", "nvidia-smi")),
        ({"rc": 1, "out": "garbage\n"}, {}, "no_result", ("client rc=1", "garbage")),
    ],
)
def test_a_run_without_a_result_says_why(client, server, kind, words):
    threshold = {"min": 11000, "unit": "MiB/s", "source": "thresholds.EDR"}
    record = port_result(PORT, threshold, client, server)
    assert (record["status"], record["error_kind"], record["gbit_per_s"]) == ("error", kind, None)
    text = record["error"] + " " + record["remedy"]
    assert all(word in text for word in words), text


def test_classify_needs_a_known_message():
    assert classify("all fine\n") is None
    assert classify(MR_FAILURE)[0] == "gpu_memory"


def _low(key, hca, bus):
    return {
        "hca": hca,
        "port": 1,
        "gpu": 0,
        "bus_id": bus,
        "numa": 0,
        "status": "low",
        "gbit_per_s": 0.2,
        "mib_per_s": 23.84,
        "min": ">= 1 Gb/s (thresholds.EDR)",
        "error_kind": None,
        "error": None,
        "remedy": "check ACS",
    }


def test_a_low_port_fails_naming_hca_port_gpu_and_numa():
    records = {
        "mlx5_0/1": {**_low("mlx5_0/1", "mlx5_0", "00000000:06:00.0"), "status": "ok", "remedy": ""},
        "mlx5_2/1": _low("mlx5_2/1", "mlx5_2", "00000000:85:00.0"),
    }
    check = judge_gdr(records)
    assert (check["status"], check["caused_by"], check["observed"]["low"]) == ("FAIL", None, ["mlx5_2/1"])
    assert "mlx5_2/1 (GPU 00000000:85:00.0, NUMA 0): 0.20 Gb/s" in check["fault"]
    assert "mlx5_0/1" not in check["fault"]
    assert check["remedy"] == "mlx5_2/1 with GPU 00000000:85:00.0: check ACS"
    assert check["expected"]["mlx5_0/1"] == ">= 1 Gb/s (thresholds.EDR)"
    assert judge_gdr({"mlx5_0/1": records["mlx5_0/1"]})["status"] == "PASS"


def _failed(name, observed, caused_by=None):
    return {
        "check": name,
        "verdict": "FAIL",
        "observed": observed,
        "fault": "",
        "caused_by": [caused_by] if caused_by else [],
    }


def test_a_port_a_node_check_already_failed_is_its_consequence():
    down = {**_low("", "mlx5_1", "00000000:0A:00.0"), "status": "error", "error_kind": "port_down", "error": "x"}
    slow = _low("", "mlx5_2", "00000000:85:00.0")
    node_checks = [
        _failed("ib_port_state", {"mlx5_1/1": "Down/Polling"}),
        _failed("ib_port_rate", {"mlx5_2/1": "56 Gb/s InfiniBand"}),
        {"name": "peermem_loaded", "status": "PASS", "observed": ["nvidia_peermem"]},
    ]
    both = judge_gdr({"mlx5_1/1": down, "mlx5_2/1": slow}, node_checks=node_checks)
    assert both["caused_by"] == "ib_port_rate,ib_port_state"
    # a slow port no node check explains is a root cause, whatever else failed
    other = _low("", "mlx5_3", "00000000:89:00.0")
    assert judge_gdr({"mlx5_1/1": down, "mlx5_3/1": other}, node_checks=node_checks)["caused_by"] is None
    # mlx5_1 is not mlx5_10: names are matched whole
    ten = {**down, "hca": "mlx5_10"}
    assert judge_gdr({"mlx5_10/1": ten}, node_checks=node_checks)["caused_by"] is None


def test_consequences_of_a_missing_hca_and_of_nvidia_peermem():
    gone = {**_low("", "mlx5_3", "b"), "status": "error", "error_kind": "no_device", "error": "x"}
    absent = [
        _failed("hcas_present", ["mlx5_0"]),
        _failed("ib_port_state", {"mlx5_3/1": "HCA absent"}, caused_by="hcas_present"),
    ]
    assert judge_gdr({"mlx5_3/1": gone}, node_checks=absent)["caused_by"] == "hcas_present"
    mr = {**_low("", "mlx5_0", "a"), "status": "error", "error_kind": "gpu_memory", "error": "x"}
    assert judge_gdr({"mlx5_0/1": mr}, node_checks=[_failed("peermem_loaded", [])])["caused_by"] == "peermem_loaded"
    assert judge_gdr({"mlx5_0/1": mr}, node_checks=absent)["caused_by"] is None


def test_a_low_port_on_a_gpu_whose_pcie_link_failed_names_that_check():
    slow = _low("", "mlx5_2", "00000000:85:00.0")
    pcie = _failed("pcie_link", {"00000000:85:00.0": "x8 of x16"})
    assert judge_gdr({"mlx5_2/1": slow}, node_checks=[pcie])["caused_by"] == "pcie_link"


def test_listening_ports_reads_proc_net_tcp():
    text = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000:484E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n"
        "   1: 0100007F:484F 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n"
        "   2: broken\n"
    )
    assert listening_ports(text) == {0x484E}  # 18510 listens; 18511 is an established connection
    assert listening_ports("") == set()
