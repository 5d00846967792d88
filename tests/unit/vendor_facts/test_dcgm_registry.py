"""nvidia_driver's opt-in DCGM install (tasks/dcgm.yml) against the vendor facts registry: the package and pinned
version the role asks for are published in NVIDIA's CUDA repository of the OS, and apt's resolution installs one
dcgmi, one nv-hostengine and the nvidia-dcgm unit the role starts."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender

from gpuforge import vendor_facts

DCGM_OSES = ["debian12", "ubuntu2204"]


def _render(os_name: str, **extra) -> RoleRender:
    return RoleRender(
        "nvidia_driver", os_name, gpuforge_gpu_architecture="Hopper", nvidia_driver_dcgm_enabled=True, **extra
    )


def _request(render: RoleRender) -> str:
    (request,) = render.task("dcgm.yml", "Install DCGM (pinned)")["name"]
    return request


@pytest.mark.parametrize("os_name", DCGM_OSES)
def test_the_pinned_dcgm_is_published_and_resolves_to_one_dcgmi_and_its_unit(os_name):
    render = _render(os_name)
    request = _request(render)
    assert request == "datacenter-gpu-manager-4-cuda12=1:4.4.1-1"
    resolution = vendor_facts.resolve([vendor_facts.repository(f"nvidia-cuda/{os_name}")], [request])
    owners = {
        path: [p.name for p in resolution.chosen.values() if path in p.files]
        for path in ("/usr/bin/dcgmi", "/usr/bin/nv-hostengine")
    }
    assert owners == {
        "/usr/bin/dcgmi": ["datacenter-gpu-manager-4-core"],
        "/usr/bin/nv-hostengine": ["datacenter-gpu-manager-4-core"],
    }
    units = [u for p in resolution.chosen.values() for u in p.units]
    # the role starts the unit the package ships
    started = [unit["name"] + ".service" for unit in render.var("nvidia_driver_services")]
    assert units == [name for name in started if name.startswith("nvidia-dcgm")]
    assert units[0] in started
    assert {p.version for p in resolution.chosen.values()} == {"1:4.4.1-1"}


@pytest.mark.parametrize(("os_name", "version"), [("debian12", "1:3.3.5"), ("ubuntu2204", "1:3.2.6")])
def test_dcgm3_can_be_chosen_instead(os_name, version):
    render = _render(os_name, nvidia_driver_dcgm_package="datacenter-gpu-manager", nvidia_driver_dcgm_version=version)
    resolution = vendor_facts.resolve([vendor_facts.repository(f"nvidia-cuda/{os_name}")], [_request(render)])
    assert [(p.name, p.version) for p in resolution.chosen.values()] == [("datacenter-gpu-manager", version)]


def test_a_version_the_repository_does_not_publish_is_refused():
    render = _render("debian12", nvidia_driver_dcgm_version="1:4.9.9-1")
    with pytest.raises(vendor_facts.ResolveError, match="not found"):
        vendor_facts.resolve([vendor_facts.repository("nvidia-cuda/debian12")], [_request(render)])


def test_rhel_request_drops_the_deb_epoch():
    render = _render("rhel9")
    assert render.task("dcgm.yml", "Install DCGM (pinned, RHEL)")["name"] == "datacenter-gpu-manager-4-cuda12-4.4.1-1"
