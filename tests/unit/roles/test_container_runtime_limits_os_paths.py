"""container_runtime_limits: drop-in text, supported releases per OS family, active-runtime selection."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "rhel8", "rhel9"])
def test_dropin_text(os_name):
    render = RoleRender("container_runtime_limits", os_name)
    assert render.var("ansible_facts.distribution_major_version") in render.var(
        "container_runtime_limits_supported_versions"
    )
    lines = render.template("memlock.conf.j2").splitlines()
    assert lines[1:] == [
        '# RDMA needs unlimited locked memory in non-privileged containers (seed 001: "Couldn\'t allocate MR").',
        "[Service]",
        "LimitMEMLOCK=infinity",
    ]


def test_only_running_runtimes_are_restarted_and_checked():
    services = {
        "containerd.service": {"state": "running"},
        "crio.service": {"state": "stopped"},
    }
    facts = {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12", "services": services}
    render = RoleRender("container_runtime_limits", "debian12")
    render.templar.available_variables = {**render.templar.available_variables, "ansible_facts": facts}
    assert render.var("container_runtime_limits_active") == ["containerd"]
    assert render.var("container_runtime_limits_memlock_systemd") == "infinity"


def test_size_limits_compare_in_bytes():
    render = RoleRender("container_runtime_limits", "rhel9", container_runtime_limits_memlock="64G")
    assert render.var("container_runtime_limits_memlock_systemd") == 68719476736
