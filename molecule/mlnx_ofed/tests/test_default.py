"""mlnx_ofed on a lab DGX-1: DOCA-OFED from the signed mirror as the registry describes it, openibd, OpenSM,
active ports. Expected values come from the vendor facts registry (vendor_facts/nvidia-doca/debian12.yml), not
from the role."""

import fnmatch

from gpuforge import vendor_facts

DOCA = vendor_facts.repository("nvidia-doca/debian12")


def test_doca_ofed_installed_from_mirror_at_a_published_version(host):
    installed = host.package("doca-ofed").version
    assert installed in DOCA.versions("doca-ofed")
    assert fnmatch.fnmatchcase(installed, "2.9.1-*")
    assert host.package("mlnx-ofed-kernel-dkms").version in DOCA.versions("mlnx-ofed-kernel-dkms")
    assert f"http://mirror/{DOCA.lab_path}" in host.check_output("apt-cache policy doca-ofed")
    source = host.file("/etc/apt/sources.list.d/doca.sources")
    assert source.contains("Signed-By: /etc/apt/keyrings/doca.asc")
    assert source.contains(f"URIs: http://mirror/{DOCA.lab_path}/")


def test_ofed_info_prints_the_doca_form_of_the_pinned_release(host):
    # DOCA-OFED prints OFED-internal-<version>: (the tarball installer's MLNX_OFED_LINUX- form would be wrong
    # here), and the role's verify accepted it.
    assert host.check_output("ofed_info -s") == DOCA.fact("ofed_info_s")
    assert host.check_output("ofed_info -s").startswith("OFED-internal-24.10-1.1.4")


def test_openibd_active_and_stack_loaded(host):
    service = host.service("openibd")
    assert service.is_running and service.is_enabled
    loaded = [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]
    for module in ("mlx_compat", "ib_core", "mlx5_ib", "ib_ipoib", "rdma_ucm"):
        assert module in loaded


def test_opensm_master_and_subnet_up(host):
    assert host.service(DOCA.fact("opensm_service")).is_running
    assert "SUBNET UP" in host.file("/var/log/opensm.log").content_string


def test_opensm_started_with_the_options_file(host):
    # tasks/opensm.yml: the lab's OpenSM is DOCA's opensmd, which reads upstream's default /etc/opensm/opensm.conf
    # (linux-rdma/opensm@3.3.23:include/opensm/osm_base.h); the lab host is the preferred SM of converge.yml:
    # priority 14, bound to mlx5_0 port 1, fat-tree routing with minhop behind it.
    conf = host.file("/etc/opensm/opensm.conf")
    assert conf.exists and conf.user == "root" and conf.mode == 0o644
    options = [line.split("#", 1)[0].split() for line in conf.content_string.splitlines()]
    assert [o for o in options if o] == [
        ["sm_priority", "14"],
        ["guid", "0x248a07030029e1fa"],
        ["routing_engine", "ftree,minhop"],
    ]
    # the bound GUID is a port of this node, as ibstat -p lists them
    assert "0x248a07030029e1fa" in host.check_output("ibstat -p").split()
    # OpenSM reads the file only at start: it must have (re)started after the file was last written.
    unit = DOCA.fact("opensm_service")
    started = host.check_output(f"systemctl show -P ActiveEnterTimestamp --timestamp=unix {unit}").lstrip("@")
    assert int(started) >= int(host.check_output("stat -c %Y /etc/opensm/opensm.conf"))
