"""roce_qos on the vSphere RoCE lab node: the state mlnx_qos and the sysfs/configfs tree read back (parsed with the
parser tested on real mlnx_qos outputs), and the boot unit that re-applies it. Expected values are NVIDIA's lossless
RoCE settings (vendor_facts/mlnx-tools/roce-qos.yml: trust dscp, PFC on priority 3, ToS 106 = DSCP 26)."""

from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_mlnx_qos as qos

SYS = "/run/gpuforge-lab/sys"


def test_mlnx_qos_reads_trust_dscp_and_pfc_on_priority_3_only(host):
    state = qos.parse_mlnx_qos(host.check_output("mlnx_qos -i ens224"))
    assert state["trust"] == "dscp"
    assert state["pfc_priorities"] == [3]
    assert state["dscp2prio"][26] == 3


def test_ecn_tos_and_traffic_class(host):
    for point in ("roce_np", "roce_rp"):
        assert host.file(f"{SYS}/class/net/ens224/ecn/{point}/enable/3").content_string.strip() == "1"
    tos = host.file(f"{SYS}/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").content_string
    assert qos.read_number(tos, "default_roce_tos") == 106
    traffic_class = host.file(f"{SYS}/class/infiniband/mlx5_0/tc/1/traffic_class").content_string
    assert qos.read_traffic_class(traffic_class) == 106


def test_gid_index_3_is_roce_v2(host):
    assert (
        qos.read_gid_type(host.file(f"{SYS}/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3").content_string)
        == "RoCE v2"
    )


def test_boot_unit_enabled_after_openibd(host):
    unit = host.file("/etc/systemd/system/gpuforge-roce-qos.service")
    assert unit.user == "root" and unit.mode == 0o644
    assert "After=openibd.service sys-subsystem-net-devices-ens224.device" in unit.content_string
    assert host.check_output("systemctl is-enabled gpuforge-roce-qos.service") == "enabled"
    script = host.file("/usr/local/sbin/gpuforge-roce-qos")
    assert script.mode == 0o755
    assert "mlnx_qos -i ens224 --pfc 0,0,0,1,0,0,0,0" in script.content_string
