"""Simulated mlnx_qos: its output reads with the parser tested on real outputs (tests/fixtures/mlnx_qos), what is set
is read back in later runs (state in the simulated tree), the tool's errors, the RoCE QoS files of RoCE ports, and
the three RoCE QoS faults put back over a configured port."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_mlnx_qos as qos
from gpuforge_sim import mlnx_qos
from ib_sim_helpers import run_tool, write_hardware

PROFILE = "vsphere-t4-vgpu-roce"  # mlx5_0 port 1, Ethernet, netdev ens224
NETDEV = "ens224"


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFORGE_LAB_RUN", str(tmp_path / "run"))
    monkeypatch.setenv("GPUFORGE_LAB_SYSFS", str(tmp_path / "sys"))

    def write(faults=None):
        return write_hardware(tmp_path, monkeypatch, PROFILE, faults)

    write()
    return tmp_path / "sys", write


def show(capsys, *args):
    rc, out, err = run_tool(mlnx_qos, ["-i", NETDEV, *args], capsys)
    assert rc == 0, (out, err)
    return qos.parse_mlnx_qos(out), out


def test_driver_defaults_read_as_real_output(node, capsys):
    state, out = show(capsys)
    assert state["trust"] == "pcp" and state["pfc_priorities"] == [] and state["dscp2prio"] == {}
    assert state["prio_tc"] == {1: 0, 0: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7}
    assert state["receive_buffer_size_bytes"][0] > 0 and state["pfc_buffer"] == [0] * 8
    assert out.startswith("DCBX mode: OS controlled\nPriority trust state: pcp\ndefault priority:\n")
    assert "\tenabled     0   0   0   0   0   0   0   0   \n\tbuffer      0   0" in out


def test_set_then_read_back(node, capsys):
    state, _ = show(capsys, "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0")
    assert state["trust"] == "dscp" and state["pfc_priorities"] == [3] and state["dscp2prio"][26] == 3
    assert state["pfc_buffer"] == [0, 0, 0, 1, 0, 0, 0, 0]
    again, _ = show(capsys)  # a later run reads what was set
    assert again == state
    mapped, out = show(capsys, "--dscp2prio", "set,46,3")
    assert mapped["dscp2prio"][46] == 3 and "\tprio:3 dscp:46,31,30,29,28,27,26,25,\n\tprio:3 dscp:24,\n" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trust", "cos"], "Invalid trust state command"),
        (["--pfc", "0,0,0,1"], "pfc list must have 8 items"),
        (["--pfc", "0,0,0,2,0,0,0,0"], "Bad value for PFC"),
        (["--dscp2prio", "set,70,3"], "Invalid dscp2prio command"),
    ],
)
def test_bad_values_fail_as_the_tool_does(node, capsys, args, message):
    rc, out, _ = run_tool(mlnx_qos, ["-i", NETDEV, *args], capsys)
    assert rc == 1 and message in out


def test_unknown_interface_and_no_interface(node, capsys):
    rc, _, err = run_tool(mlnx_qos, ["-i", "ens999"], capsys)
    assert rc == 1 and "No such device" in err
    rc, out, _ = run_tool(mlnx_qos, [], capsys)
    assert rc == 1 and "Interface name is required" in out


def test_roce_port_files(node, capsys):
    root, _ = node
    show(capsys)
    assert (root / "class/net/ens224/ecn/roce_np/enable/3").read_text() == "1\n"
    assert (root / "class/net/ens224/ecn/roce_rp/enable/7").read_text() == "1\n"
    assert qos.read_traffic_class((root / "class/infiniband/mlx5_0/tc/1/traffic_class").read_text()) is None
    types = root / "class/infiniband/mlx5_0/ports/1/gid_attrs/types"
    assert [qos.read_gid_type((types / str(i)).read_text()) for i in range(4)] == [
        "IB/RoCE v1",
        "RoCE v2",
        "IB/RoCE v1",
        "RoCE v2",
    ]
    configfs = root / "kernel/config/rdma_cm/mlx5_0/ports/1"
    assert (configfs / "default_roce_tos").read_text() == "0\n"
    assert (configfs / "default_roce_mode").read_text() == "RoCE v2\n"


def test_written_files_keep_their_value_across_runs(node, capsys):
    root, _ = node
    show(capsys)
    tos = root / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"
    tos.write_text("106\n")
    show(capsys)
    assert tos.read_text() == "106\n"


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        ({"type": "roce_trust_pcp", "hca": "mlx5_0", "port": 1}, lambda s, root: s["trust"] == "pcp"),
        ({"type": "roce_pfc_off", "hca": "mlx5_0", "port": 1}, lambda s, root: s["pfc_priorities"] == []),
        (
            {"type": "roce_tos_wrong", "hca": "mlx5_0", "port": 1, "tos": 0},
            lambda s, root: (
                (root / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text() == "0\n"
                and (root / "class/infiniband/mlx5_0/tc/1/traffic_class").read_text() == "Global tclass=0\n"
            ),
        ),
    ],
)
def test_each_fault_wins_over_a_configured_port_and_only_its_part(node, capsys, fault, check):
    root, write = node
    show(capsys, "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0")
    (root / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").write_text("106\n")
    (root / "class/infiniband/mlx5_0/tc/1/traffic_class").write_text("Global tclass=106\n")
    write([fault])
    state, _ = show(capsys)
    assert check(state, root)
    port = {
        "netdev": NETDEV,
        "hca": "mlx5_0",
        "port": 1,
        "qos": state,
        "ecn_np": {3: 1},
        "ecn_rp": {3: 1},
        "roce_tos": qos.read_number(
            (root / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text(), "tos"
        ),
        "traffic_class": qos.read_traffic_class((root / "class/infiniband/mlx5_0/tc/1/traffic_class").read_text()),
        "gid_type": "RoCE v2",
    }
    problems = qos.judge_roce_port(
        port, {"roce_trust": "dscp", "roce_pfc_priority": 3, "roce_tos": 106, "roce_gid_index": 3}
    )
    expected_count = 2 if fault["type"] == "roce_tos_wrong" else 1  # the ToS fault: RDMA-CM ToS and traffic class
    assert len(problems) == expected_count, problems


def test_profile_faults_need_a_roce_port():
    from gpuforge.lab.profiles import hardware_document, load_profile

    profile = load_profile(PROFILE)
    document = hardware_document(profile, [{"type": "roce_tos_wrong", "hca": "mlx5_0", "port": 1, "tos": 0}])
    assert document["faults"][0]["tos"] == 0
    with pytest.raises(ValueError, match="roce_pfc_off needs a RoCE port"):
        hardware_document(load_profile("dgx1-v100-edr"), [{"type": "roce_pfc_off", "hca": "mlx5_0", "port": 1}])
    with pytest.raises(ValueError, match="must be an IP ToS byte"):
        hardware_document(profile, [{"type": "roce_tos_wrong", "hca": "mlx5_0", "port": 1, "tos": 300}])
