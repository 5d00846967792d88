"""mlnx_ofed against the vendor facts registry: per OS and install source, the repository directory, the
profile package version, the release string the verify step accepts, the installer's options and the
OpenSM unit are the ones NVIDIA (or the distribution) actually publishes."""

from __future__ import annotations

import fnmatch
import re

import pytest
from gpu_stack_render import RoleRender

from gpuforge import vendor_facts

OSES = ["debian12", "ubuntu2204", "ubuntu2404", "rhel8", "rhel9"]


def _render(os_name: str, **extra) -> RoleRender:
    return RoleRender("mlnx_ofed", os_name, **extra)


@pytest.mark.parametrize("os_name", OSES)
def test_doca_repository_directory_is_nvidias(os_name):
    doca = vendor_facts.repository(f"nvidia-doca/{os_name}")
    render = _render(os_name)
    assert render.var("mlnx_ofed_distro") == doca.fact("distro_directory")
    assert render.var("mlnx_ofed_doca_repo_url") + "/" == doca.url


@pytest.mark.parametrize("os_name", OSES)
def test_doca_profile_package_matches_a_published_version(os_name):
    doca = vendor_facts.repository(f"nvidia-doca/{os_name}")
    (spec,) = _render(os_name).var("mlnx_ofed_doca_packages")
    name, version = re.match(r"^(doca-ofed)[=-](.+)$", spec).groups()
    assert any(fnmatch.fnmatchcase(v, version) for v in doca.versions(name)), (spec, doca.versions(name))


@pytest.mark.parametrize("os_name", OSES)
def test_verify_accepts_what_a_doca_install_prints_and_only_the_pinned_release(os_name):
    doca = vendor_facts.repository(f"nvidia-doca/{os_name}")
    pattern = _render(os_name).var("mlnx_ofed_release_patterns")["doca"]
    assert re.search(pattern, doca.fact("ofed_info_s"))
    # The other DOCA spelling (no trailing .0, as on Rocky 8.10) of the same release, and not another release.
    assert re.search(pattern, "OFED-internal-24.10-1.1.4:")
    assert not re.search(pattern, "OFED-internal-24.10-2.1.8:")
    assert not re.search(pattern, vendor_facts.repository("mlnx-ofed/tarball").fact("ofed_info_s"))


def test_verify_accepts_what_the_tarball_installer_prints():
    tarball = vendor_facts.repository("mlnx-ofed/tarball")
    pattern = _render("ubuntu2204").var("mlnx_ofed_release_patterns")["tarball"]
    assert re.search(pattern, tarball.fact("ofed_info_s"))
    assert not re.search(pattern, vendor_facts.repository("nvidia-doca/debian12").fact("ofed_info_s"))


@pytest.mark.parametrize("os_name", OSES)
def test_tarball_name_uses_nvidias_distro_label(os_name):
    labels = vendor_facts.repository("mlnx-ofed/tarball").fact("distro_labels")
    name = _render(os_name).var("mlnx_ofed_tarball_name")
    assert name == f"MLNX_OFED_LINUX-24.10-1.1.4.0-{labels[os_name]}-x86_64"


def test_installer_options_are_ones_mlnxofedinstall_accepts():
    tarball = vendor_facts.repository("mlnx-ofed/tarball")
    flags = _render("ubuntu2204").var("mlnx_ofed_install_flags")
    kernel_flags = [f for f in flags if "kernel-support" in f]
    assert kernel_flags and set(kernel_flags) <= set(tarball.fact("installer_kernel_support_options"))


@pytest.mark.parametrize("os_name", OSES)
@pytest.mark.parametrize("source", ["doca", "tarball"])
def test_opensm_unit_of_the_nvidia_stack(os_name, source):
    facts = vendor_facts.repository(f"nvidia-doca/{os_name}" if source == "doca" else "mlnx-ofed/tarball")
    assert _render(os_name, mlnx_ofed_source=source).var("mlnx_ofed_opensm_service") == facts.fact("opensm_service")


def test_opensm_unit_of_the_inbox_stack_is_the_distributions():
    bookworm = vendor_facts.repository("debian/bookworm")
    (opensm,) = {p.units for p in bookworm.packages if p.name == "opensm"}
    service = _render("debian12", mlnx_ofed_source="inbox").var("mlnx_ofed_opensm_service")
    assert f"{service}.service" in opensm


def test_lab_publishes_doca_where_the_role_looks():
    # The lab mirror publishes the registry repository at its lab_path; the role with the lab's base URL must
    # ask for exactly that path.
    doca = vendor_facts.repository("nvidia-doca/debian12")
    url = _render("debian12", gpuforge_doca_ofed_base_url="http://mirror/doca").var("mlnx_ofed_doca_repo_url")
    assert url == "http://mirror/" + doca.lab_path


# The shapes molecule/mlnx_ofed converges on (every OS meta/main.yml claims), each from its own DOCA repository.
LAB_SHAPES = ["debian12", "ubuntu2204", "ubuntu2404", "rhel9"]
# What the role and validation run on a DOCA host (tasks/verify.yml, infiniband_facts, subnet_manager_check, OpenSM).
DOCA_HOST_FILES = {
    "/usr/bin/ofed_info",
    "/etc/init.d/openibd",
    "/usr/sbin/ibdev2netdev",
    "/usr/bin/ibv_devinfo",
    "/usr/sbin/ibstat",
    "/usr/sbin/sminfo",
    "/usr/sbin/opensm",
}


@pytest.mark.parametrize("os_name", LAB_SHAPES)
def test_the_subnet_managers_doca_install_brings_every_tool_the_role_and_validation_run(os_name):
    """The role's package run on a subnet manager host (the profile package at its pin, and OpenSM) resolved in that
    OS's DOCA repository alone: the closure ships the tools, openibd's and OpenSM's units and the kernel modules, and
    the repository has the release strings ofed_info prints. Before the per-OS facts, Ubuntu's and RHEL's doca-ofed
    depended on nothing: the role installed an empty profile there."""
    doca = vendor_facts.repository(f"nvidia-doca/{os_name}")
    render = _render(os_name)
    (spec,) = render.var("mlnx_ofed_doca_packages")
    name, glob = re.match(r"^(doca-ofed)[=-](.+)$", spec).groups()
    closure = vendor_facts.resolve([doca], [f"{name}={glob}", "opensm"]).chosen.values()
    files = {path for package in closure for path in package.files}
    units = {unit for package in closure for unit in package.units}
    modules = {module for package in closure for module in package.kernel_modules}
    assert files >= DOCA_HOST_FILES, sorted(DOCA_HOST_FILES - files)
    assert {"openibd.service", doca.fact("opensm_service") + ".service"} <= units
    assert {"mlx5_ib", "ib_ipoib", "rdma_ucm"} <= modules
    for fact in ("ofed_info_s", "ofed_info_n", "ofed_version"):
        assert doca.fact(fact)


# The distribution repository the in-box stack (mlnx_ofed_source: inbox) comes from: Debian 12's archive, and RHEL 9's
# BaseOS, where molecule/mlnx_ofed converges it (platform mlnx-ofed-inbox-rhel9).
INBOX_REPOSITORIES = {"debian12": "debian/bookworm", "rhel9": "rhel-baseos/rhel9"}
# What the role and validation run on an in-box host: infiniband_facts' ibstat and ibv_devinfo, the subnet manager
# check's sminfo, OpenSM. No ofed_info, ibdev2netdev or openibd: those are MLNX_OFED's (tasks/verify.yml skips the
# release check for inbox, vars/main.yml starts no openibd).
INBOX_HOST_FILES = {"/usr/bin/ibv_devinfo", "/usr/sbin/ibstat", "/usr/sbin/sminfo", "/usr/sbin/opensm"}


@pytest.mark.parametrize("os_name", sorted(INBOX_REPOSITORIES))
def test_the_subnet_managers_inbox_install_resolves_in_the_distribution_and_brings_the_tools(os_name):
    """The role's in-box package run on a subnet manager host (inbox-<OS family>.yml: the vars file's packages and
    OpenSM's), resolved in the OS's own repository alone: every name is published there, the closure ships the tools
    the role and validation run and OpenSM's unit under the name the role starts, and nothing of MLNX_OFED's."""
    repo = vendor_facts.repository(INBOX_REPOSITORIES[os_name])
    render = _render(os_name, mlnx_ofed_source="inbox", group_names=["gpu_nodes", "ib_subnet_manager"])
    names = render.var("mlnx_ofed_inbox_packages") + render.var("mlnx_ofed_subnet_manager_packages")
    assert render.var("mlnx_ofed_opensm_package") in names
    closure = vendor_facts.resolve([repo], names).chosen.values()
    files = {path for package in closure for path in package.files}
    units = {unit for package in closure for unit in package.units}
    assert files >= INBOX_HOST_FILES, sorted(INBOX_HOST_FILES - files)
    assert not files & {"/usr/bin/ofed_info", "/usr/sbin/ibdev2netdev", "/etc/init.d/openibd"}
    assert render.var("mlnx_ofed_opensm_service") + ".service" in units
    assert [unit["name"] for unit in render.var("mlnx_ofed_units")] == [render.var("mlnx_ofed_opensm_service")]


def test_the_inbox_opensm_options_file_is_where_rhels_opensm_reads_it():
    # RHEL's opensm package is built --with-opensm-conf-sub-dir=rdma and ships /etc/rdma/opensm.conf (opensm.spec of
    # the Fedora/RHEL lineage, the registry's opensm files); DOCA's opensmd on the same OS reads upstream's default.
    (opensm,) = [p for p in vendor_facts.repository("rhel-baseos/rhel9").packages if p.name == "opensm"]
    path = _render("rhel9", mlnx_ofed_source="inbox").var("mlnx_ofed_opensm_config_file")
    assert path in opensm.files and path.startswith("/etc/rdma/")
    assert _render("rhel9", mlnx_ofed_source="doca").var("mlnx_ofed_opensm_config_file") == "/etc/opensm/opensm.conf"
