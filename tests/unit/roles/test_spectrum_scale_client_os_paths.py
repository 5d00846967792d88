"""spectrum_scale_client per OS: pinned package specs, build dependencies, portability-layer stamp, member."""

from __future__ import annotations

import pytest
from fabric_role_vars import render


@pytest.mark.parametrize(
    ("os_name", "pins"),
    [
        ("Debian", ["gpfs.base=5.1.9-3", "gpfs.gpl=5.1.9-3", "gpfs.gskit=8.0.55-19.1", "gpfs.docs=5.1.9-3"]),
        ("RedHat", ["gpfs.base-5.1.9-3", "gpfs.gpl-5.1.9-3", "gpfs.gskit-8.0.55-19.1", "gpfs.docs-5.1.9-3"]),
    ],
)
def test_package_pins(os_name, pins):
    assert render("spectrum_scale_client", os_name, "{{ spectrum_scale_client_package_pins }}") == pins


@pytest.mark.parametrize(
    ("os_name", "headers"),
    [("Debian", "linux-headers-6.1.0-26-amd64"), ("RedHat", "kernel-devel-5.14.0-427.13.1.el9_4.x86_64")],
)
def test_build_deps_follow_running_kernel(os_name, headers):
    assert headers in render("spectrum_scale_client", os_name, "{{ spectrum_scale_client_build_deps }}")


def test_gpl_stamp_names_kernel_and_release():
    stamp = render("spectrum_scale_client", "Debian", "{{ spectrum_scale_client_gpl_stamp }}")
    assert stamp == "/var/lib/gpuforge/gpfs-gpl-6.1.0-26-amd64-5.1.9-3"


def test_member_is_first_cluster_host():
    assert render("spectrum_scale_client", "Debian", "{{ spectrum_scale_client_member }}") == "storage01"
