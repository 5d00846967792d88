"""gpudirect_rdma per OS: legacy nv_peer_mem build commands and package names, openibd drop-in."""

from __future__ import annotations

import pytest
from fabric_role_vars import render, render_file

# What the build host's `dpkg-parsechangelog -S Version` printed: nv_peer_memory 1.3-0's debian/changelog still
# starts with nvidia-peer-memory (1.2-0), so dpkg-buildpackage writes 1.2-0 packages (Mellanox/nv_peer_memory #106).
CHANGELOG = {"gpu01": {"gpudirect_rdma_legacy_changelog": {"stdout": "1.2-0\n", "rc": 0}}}
TOPDIR = "/var/cache/gpuforge/nv_peer_memory/rpmbuild"
# What the mlnx_ofed and nvidia_driver roles registered earlier in the same run (site.yml), in their modules' shapes.
SAME_RUN_OFED = {"ansible_facts": {"infiniband": {"ofed_release": "OFED-internal-24.10-1.1.4.0.200:"}}}
SAME_RUN_SMI = {"ansible_facts": {"nvidia_smi": {"driver_version": "550.90.07"}}}
# With the same-run reads, read_versions.yml is not included: its results are not registered at all.
SAME_RUN_DRIVER = {"nvidia_driver_nvidia_smi": SAME_RUN_SMI}


@pytest.mark.parametrize(
    ("os_name", "orig", "cmd", "output_dir", "packages"),
    [
        ("Debian", "/tmp/nvidia-peer-memory_1.3.orig.tar.gz", ["dpkg-buildpackage", "-us", "-uc", "-b"],
         "/var/cache/gpuforge/nv_peer_memory",
         ["nvidia-peer-memory_1.2-0_all.deb", "nvidia-peer-memory-dkms_1.2-0_all.deb"]),
        ("Ubuntu", "/tmp/nvidia-peer-memory_1.3.orig.tar.gz", ["dpkg-buildpackage", "-us", "-uc", "-b"],
         "/var/cache/gpuforge/nv_peer_memory",
         ["nvidia-peer-memory_1.2-0_all.deb", "nvidia-peer-memory-dkms_1.2-0_all.deb"]),
        ("RedHat", "/tmp/nvidia_peer_memory-1.3-0.src.rpm",
         ["rpmbuild", "--rebuild", "--define", f"_topdir {TOPDIR}", "--define", "dist %{nil}",
          "/tmp/nvidia_peer_memory-1.3-0.src.rpm"],
         f"{TOPDIR}/RPMS/x86_64", ["nvidia_peer_memory-1.3-0.x86_64.rpm"]),
    ],
)  # fmt: skip
def test_legacy_build(os_name, orig, cmd, output_dir, packages):
    assert render("gpudirect_rdma", os_name, "{{ gpudirect_rdma_legacy_orig }}") == orig
    assert render("gpudirect_rdma", os_name, "{{ gpudirect_rdma_legacy_build_cmd }}") == cmd
    assert render("gpudirect_rdma", os_name, "{{ gpudirect_rdma_legacy_output_dir }}") == output_dir
    assert render("gpudirect_rdma", os_name, "{{ gpudirect_rdma_legacy_packages }}", hostvars=CHANGELOG) == packages


def test_deb_version_is_read_from_the_changelog_on_the_build_host():
    assert render("gpudirect_rdma", "Debian", "{{ gpudirect_rdma_legacy_version_cmd }}") == [
        "dpkg-parsechangelog", "-S", "Version",
    ]  # fmt: skip
    assert render("gpudirect_rdma", "RedHat", "{{ gpudirect_rdma_legacy_version_cmd }}") == []
    # Before the build host has read it (or when it did not build in this play), the version is empty and
    # legacy.yml stops with a message instead of copying files that do not exist.
    unread = render("gpudirect_rdma", "Debian", "{{ gpudirect_rdma_legacy_package_version }}", hostvars={"gpu01": {}})
    assert unread == ""


def test_rpmbuild_tree_is_created_under_the_build_directory():
    dirs = render("gpudirect_rdma", "RedHat", "{{ gpudirect_rdma_legacy_extra_dirs }}")
    assert dirs == [f"{TOPDIR}/{name}" for name in ("BUILD", "RPMS", "SOURCES", "SPECS", "SRPMS")]
    assert render("gpudirect_rdma", "Debian", "{{ gpudirect_rdma_legacy_extra_dirs }}") == []


def test_legacy_build_host_and_artifacts():
    assert render("gpudirect_rdma", "Debian", "{{ gpudirect_rdma_legacy_build_host }}") == "gpu01"
    assert render("gpudirect_rdma", "Debian", "{{ gpudirect_rdma_legacy_artifacts_dir }}") == (
        "/srv/gpuforge/playbooks/../artifacts/nv_peer_memory"
    )
    deps = render("gpudirect_rdma", "RedHat", "{{ gpudirect_rdma_legacy_build_deps }}")
    assert "kernel-devel-5.14.0-427.13.1.el9_4.x86_64" in deps


@pytest.mark.parametrize("module", ["nvidia_peermem", "nv_peer_mem"])
def test_openibd_dropin(module):
    text = render_file("gpudirect_rdma", "Debian", "openibd-peermem.conf.j2", gpudirect_rdma_module=module)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == ["[Service]", f"ExecStartPost=-/sbin/modprobe {module}"]


@pytest.mark.parametrize(
    ("reads", "problems"),
    [
        ({"gpudirect_rdma_ofed": {"rc": 0}, "gpudirect_rdma_smi": {"stdout_lines": ["550.90.07"]}}, []),
        ({"gpudirect_rdma_ofed": {"rc": 127}, "gpudirect_rdma_smi": {"stdout_lines": ["550.90.07"]}}, ["ofed_info"]),
        (
            {
                "gpudirect_rdma_ofed": {"rc": 0},
                "gpudirect_rdma_smi": {"stdout_lines": [], "stderr": "NVIDIA-SMI has failed"},
            },
            ["could not read the NVIDIA driver version (NVIDIA-SMI has failed)"],
        ),
        (
            {"gpudirect_rdma_ofed": {"rc": 127}, "gpudirect_rdma_smi": {"stdout_lines": []}},
            ["ofed_info", "nvidia-smi printed nothing"],
        ),
        # The mlnx_ofed role's read of this run (site.yml) stands for ofed_info: its release line, or null when
        # ofed_info was missing or failed.
        ({"mlnx_ofed_infiniband": SAME_RUN_OFED, **SAME_RUN_DRIVER}, []),
        (
            {
                "mlnx_ofed_infiniband": {"ansible_facts": {"infiniband": {"ofed_release": None}}},
                **SAME_RUN_DRIVER,
            },
            ["ofed_info"],
        ),
    ],
)
def test_missing_ofed_and_unknown_driver_are_refused_in_one_message(reads, problems):
    from gpu_stack_render import RoleRender

    role = RoleRender("gpudirect_rdma", "debian12", **reads)
    task = "Refuse the peer memory module without MLNX_OFED"
    role.assert_problems("main.yml", task, problems)


@pytest.mark.parametrize(
    ("same_run", "reads"),
    [
        ({}, True),
        # The roles before it did not read in this run (a tag or host limit skipped their reads).
        ({"mlnx_ofed_infiniband": {"skipped": True}, "nvidia_driver_nvidia_smi": {"skipped": True}}, True),
        ({"mlnx_ofed_infiniband": SAME_RUN_OFED, "nvidia_driver_nvidia_smi": SAME_RUN_SMI}, False),
    ],
)  # fmt: skip
def test_ofed_and_driver_are_read_only_when_no_role_read_them_in_this_run(same_run, reads):
    from gpu_stack_render import RoleRender

    role = RoleRender("gpudirect_rdma", "debian12", **same_run)
    assert all(role.conditions("main.yml", "Read the OFED release and the NVIDIA driver version")) is reads
    assert all(role.conditions("read_versions.yml", "Check that MLNX_OFED is installed")) is reads
    assert all(role.conditions("read_versions.yml", "Read the installed NVIDIA driver version")) is reads
    # A driver version set in the inventory needs no driver read.
    set_version = RoleRender("gpudirect_rdma", "debian12", gpudirect_rdma_driver_version="550.90.07")
    assert not all(set_version.conditions("read_versions.yml", "Read the installed NVIDIA driver version"))


@pytest.mark.parametrize(
    ("os_name", "extra", "refused"),
    [
        ("rhel9", {"nvidia_driver_rhel_install": "precompiled"}, True),
        ("rhel9", {"gpuforge_nvidia_driver_rhel_install": "precompiled"}, True),
        ("rhel9", {"nvidia_driver_rhel_install": "dkms"}, False),
        ("rhel9", {}, False),
        # the legacy nv_peer_mem path is built on the host by this role, not shipped in the kmod
        ("rhel9", {"nvidia_driver_rhel_install": "precompiled", "gpudirect_rdma_method": "nv_peer_mem"}, False),
    ],
)
def test_precompiled_rhel_driver_is_refused_for_nvidia_peermem(os_name, extra, refused):
    # Second vendor review, F7: a precompiled kmod's nvidia-peermem is built without MLNX_OFED's peer-memory symbols
    # (its init returns -EINVAL) and DKMS cannot rebuild it, so the load and its "dkms autoinstall" advice cannot work.
    from gpu_stack_render import RoleRender

    role = RoleRender("gpudirect_rdma", os_name, **SAME_RUN_DRIVER, mlnx_ofed_infiniband=SAME_RUN_OFED, **extra)
    task = "Refuse the peer memory module without MLNX_OFED"
    problems = ["the NVIDIA driver comes from RHEL's precompiled stream"] if refused else []
    role.assert_problems("main.yml", task, problems)
    if refused:
        assert "nvidia_driver_rhel_install: dkms" in " ".join(role.message("main.yml", task).split())
