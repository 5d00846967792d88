"""mlnx_ofed on a lab DGX-1: pinned DOCA-OFED from the signed mirror, openibd, OpenSM, active ports."""


def test_doca_ofed_installed_from_mirror_at_pinned_version(host):
    assert host.package("doca-ofed").version == "2.9.1-1"
    assert host.package("mlnx-ofed-kernel-dkms").version == "24.10.OFED.24.10.1.1.4.1-1"
    assert "http://mirror/doca/2.9.1/debian12/x86_64" in host.check_output("apt-cache policy doca-ofed")
    source = host.file("/etc/apt/sources.list.d/gpuforge-doca.sources")
    assert source.contains("Signed-By: /etc/apt/keyrings/gpuforge-doca.asc")


def test_ofed_info_reports_pinned_release(host):
    assert host.check_output("ofed_info -s") == "MLNX_OFED_LINUX-24.10-1.1.4.0:"


def test_openibd_active_and_stack_loaded(host):
    service = host.service("openibd")
    assert service.is_running and service.is_enabled
    loaded = [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]
    for module in ("mlx_compat", "ib_core", "mlx5_ib", "ib_ipoib", "rdma_ucm"):
        assert module in loaded


def test_opensm_master_and_subnet_up(host):
    assert host.service("opensmd").is_running
    assert "SUBNET UP" in host.file("/var/log/opensm.log").content_string
