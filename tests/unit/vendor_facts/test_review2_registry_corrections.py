"""Registry facts the second vendor review found wrong (F9-F11), and what the roles rely on after their correction."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender

from gpuforge import vendor_facts


@pytest.mark.parametrize("os_name", ["ubuntu2204", "ubuntu2404"])
def test_ubuntu_cuda_driver_packages_carry_the_0ubuntu1_revision_and_the_role_matches_both(os_name):
    # F9: NVIDIA's Ubuntu repository ships nvidia-driver-535 & co. as 535.183.01-0ubuntu1, only cuda-drivers-535 as -1.
    repo = vendor_facts.repository(f"nvidia-cuda/{os_name}")
    assert "535.183.01-1" in repo.versions("cuda-drivers-535")
    for name in ("nvidia-driver-535", "nvidia-driver-535-open", "libnvidia-compute-535", "nvidia-utils-535"):
        assert "535.183.01-0ubuntu1" in repo.versions(name), name
        assert "535.183.01-1" not in repo.versions(name), name
    render = RoleRender("nvidia_driver", os_name, gpuforge_gpu_architecture="Hopper")
    requests = render.task("setup-Debian.yml", "Install the driver packages")["name"]
    assert "nvidia-driver-535-open=535.183.01-*" in requests and "cuda-drivers-535=535.183.01-*" in requests


def test_the_toolkit_accepts_any_newer_cli_tools_so_the_role_names_them():
    # F10: nvidia-container-toolkit depends on libnvidia-container-tools with ">=" and "<< 2.0.0", not "=": only the
    # role naming every package at the release keeps the tools on it.
    repo = vendor_facts.repository("nvidia-container-toolkit/deb")
    (toolkit,) = [p for p in repo.packages if p.name == "nvidia-container-toolkit"]
    tools = [vendor_facts.parse_relation(d)[0] for d in toolkit.depends if d.startswith("libnvidia-container-tools")]
    assert sorted(op for _, op, _ in tools) == ["<<", ">="]
    args = RoleRender("nvidia_container_toolkit", "debian12").task_args(
        "setup-Debian.yml", "Install the NVIDIA Container Toolkit"
    )
    assert any(spec.startswith("libnvidia-container-tools=") for spec in args["name"])


def test_the_open_alternative_of_cuda_drivers_535_is_labelled_inferred():
    # F11: the quoted stanza has no "| nvidia-driver-535-open" alternative, so the fact cannot be "quoted".
    repo = vendor_facts.repository("nvidia-cuda/ubuntu2204")
    (meta,) = {p.evidence for p in repo.packages if p.name == "cuda-drivers-535"}
    assert meta == "inferred"
    note = next(p.note for p in repo.packages if p.name == "cuda-drivers-535")
    assert "would confirm" in note
