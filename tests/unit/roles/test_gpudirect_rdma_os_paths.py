"""gpudirect_rdma per OS: legacy nv_peer_mem build commands and package names, openibd drop-in."""

from __future__ import annotations

import pytest
from fabric_role_vars import render, render_file


@pytest.mark.parametrize(
    ("os_name", "orig", "cmd", "packages"),
    [
        ("Debian", "/tmp/nvidia-peer-memory_1.3.orig.tar.gz", ["dpkg-buildpackage", "-us", "-uc"],
         ["nvidia-peer-memory_1.3-0_all.deb", "nvidia-peer-memory-dkms_1.3-0_all.deb"]),
        ("RedHat", "/tmp/nvidia_peer_memory-1.3-0.src.rpm",
         ["rpmbuild", "--rebuild", "/tmp/nvidia_peer_memory-1.3-0.src.rpm"], ["nvidia_peer_memory-1.3-0.x86_64.rpm"]),
    ],
)  # fmt: skip
def test_legacy_build(os_name, orig, cmd, packages):
    assert render("gpudirect_rdma", os_name, "{{ gpudirect_rdma_legacy_orig }}") == orig
    assert render("gpudirect_rdma", os_name, "{{ gpudirect_rdma_legacy_build_cmd }}") == cmd
    assert render("gpudirect_rdma", os_name, "{{ gpudirect_rdma_legacy_packages }}") == packages


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
