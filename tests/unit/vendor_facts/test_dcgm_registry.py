"""nvidia_driver's opt-in DCGM install (tasks/dcgm.yml) against the vendor facts registry: the package and pinned
version the role asks for are published in NVIDIA's CUDA repository of the OS, and apt's resolution installs one
dcgmi, one nv-hostengine and the nvidia-dcgm unit the role starts."""

from __future__ import annotations

import re

import pytest
from gpu_stack_render import RoleRender
from role_requests import apt_pins

from gpuforge import vendor_facts

DCGM_OSES = ["debian12", "ubuntu2204", "ubuntu2404"]
# The newest DCGM 4 release the registry lists per repository: what apt takes for a package nothing pins.
NEWEST_DCGM = {"debian12": "1:4.7.0-1", "ubuntu2204": "1:4.7.0-1", "ubuntu2404": "1:4.6.0-1"}


def _render(os_name: str, **extra) -> RoleRender:
    return RoleRender(
        "nvidia_driver", os_name, gpuforge_gpu_architecture="Hopper", nvidia_driver_dcgm_enabled=True, **extra
    )


def _requests(render: RoleRender) -> list[str]:
    return render.task("dcgm.yml", "Install DCGM (pinned)")["name"]


def _repos(os_name: str) -> list[vendor_facts.Repository]:
    return [vendor_facts.repository(f"nvidia-cuda/{os_name}")]


@pytest.mark.parametrize("os_name", DCGM_OSES)
def test_the_pinned_dcgm_is_published_and_resolves_to_one_dcgmi_and_its_unit(os_name):
    render = _render(os_name)
    requests = _requests(render)
    assert requests == ["datacenter-gpu-manager-4-core=1:4.4.1-1", "datacenter-gpu-manager-4-cuda12=1:4.4.1-1"]
    resolution = vendor_facts.resolve(_repos(os_name), requests)
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


@pytest.mark.parametrize("os_name", DCGM_OSES)
def test_naming_only_the_cuda_plugin_package_fails_as_apt_does(os_name):
    # Why the core package is named (second vendor review, F2): -cuda12 depends on -core at exactly its own version
    # and the repository publishes newer DCGM releases, so apt takes the newest core and refuses the transaction.
    repos = _repos(os_name)
    assert len(repos[0].versions("datacenter-gpu-manager-4-core")) > 1
    newest = NEWEST_DCGM[os_name]
    with pytest.raises(
        vendor_facts.ResolveError, match=re.escape(f"datacenter-gpu-manager-4-core {newest} is to be installed")
    ):
        vendor_facts.resolve(repos, ["datacenter-gpu-manager-4-cuda12=1:4.4.1-1"])


@pytest.mark.parametrize("os_name", DCGM_OSES)
def test_the_pin_holds_every_dcgm_package_through_an_upgrade(os_name):
    # An upgrade of the installed names (apt's candidate for each, as unattended-upgrades takes them) stays on the pin.
    render = _render(os_name)
    pins = apt_pins(render, "setup-Debian.yml", "Trust the CUDA repository")
    installed = vendor_facts.resolve(_repos(os_name), _requests(render), pins)
    upgrade = vendor_facts.resolve(_repos(os_name), sorted(installed.names()), pins)
    assert {p.version for p in upgrade.chosen.values()} == {"1:4.4.1-1"}
    floated = vendor_facts.resolve(_repos(os_name), sorted(installed.names()), [])
    assert floated.version("datacenter-gpu-manager-4-core") == NEWEST_DCGM[os_name]


def test_dcgm_4_7_moves_the_host_engine_into_its_own_package():
    # Second vendor review, F12: from DCGM 4.7.0 the core package depends on nv-hostengine.
    resolution = vendor_facts.resolve(
        _repos("debian12"), ["datacenter-gpu-manager-4-core=1:4.7.0-1", "datacenter-gpu-manager-4-cuda12=1:4.7.0-1"]
    )
    owner = [p.name for p in resolution.chosen.values() if "/usr/bin/nv-hostengine" in p.files]
    assert owner == ["nv-hostengine"]


@pytest.mark.parametrize(
    ("os_name", "version"), [("debian12", "1:3.3.5"), ("ubuntu2204", "1:3.2.6"), ("ubuntu2404", "1:3.3.6")]
)
def test_dcgm3_can_be_chosen_instead(os_name, version):
    render = _render(os_name, nvidia_driver_dcgm_package="datacenter-gpu-manager", nvidia_driver_dcgm_version=version)
    resolution = vendor_facts.resolve(_repos(os_name), _requests(render))
    assert [(p.name, p.version) for p in resolution.chosen.values()] == [("datacenter-gpu-manager", version)]


def test_a_version_the_repository_does_not_publish_is_refused():
    render = _render("debian12", nvidia_driver_dcgm_version="1:4.9.9-1")
    with pytest.raises(vendor_facts.ResolveError, match="not found"):
        vendor_facts.resolve(_repos("debian12"), _requests(render))


def test_rhel_request_drops_the_deb_epoch():
    render = _render("rhel9")
    assert render.task("dcgm.yml", "Install DCGM (pinned, RHEL)")["name"] == [
        "datacenter-gpu-manager-4-core-4.4.1-1",
        "datacenter-gpu-manager-4-cuda12-4.4.1-1",
    ]


def test_the_rhel9_request_names_builds_of_nvidia_s_rhel9_repository_and_its_exact_core_relation():
    """What dnf installs on the rhel9 shape (molecule/node_health_os resolves it with the real dnf): each
    name-version-release the role asks for is a build of the registry's rhel9 repository, a newer release sits
    beside it (so -cuda12 alone would not pin -core), and -cuda12 requires -core at its own version."""
    (repo,) = _repos("rhel9")
    render = _render("rhel9")
    for request in render.task("dcgm.yml", "Install DCGM (pinned, RHEL)")["name"]:
        name, version, release = request.rsplit("-", 2)
        builds = [v.split(":", 1)[-1] for v in repo.versions(name)]
        assert f"{version}-{release}" in builds, request
        assert len(builds) > 1, f"{name}: no newer build beside the pin"
    cuda12 = [p for p in repo.packages if p.name == "datacenter-gpu-manager-4-cuda12" and p.version == "1:4.4.1-1"]
    assert list(cuda12[0].depends) == ["datacenter-gpu-manager-4-core (= 1:4.4.1-1)"]
