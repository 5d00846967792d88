"""nvidia_container_toolkit against the vendor facts registry (vendor_facts/nvidia-container-toolkit/*.yml): with
the role's own defaults (not the lab's mirror overrides), every package it pins is a version NVIDIA publishes, and
the repository and signing key it trusts (through vendor_repository) are NVIDIA's."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender

from gpuforge import vendor_facts

# OS key -> (registry file, the role's setup tasks).
PATHS = {
    "debian12": ("nvidia-container-toolkit/deb", "setup-Debian.yml"),
    "ubuntu2204": ("nvidia-container-toolkit/deb", "setup-Debian.yml"),
    "ubuntu2404": ("nvidia-container-toolkit/deb", "setup-Debian.yml"),
    "rhel8": ("nvidia-container-toolkit/rpm", "setup-RedHat.yml"),
    "rhel9": ("nvidia-container-toolkit/rpm", "setup-RedHat.yml"),
}


def installed_specs(render: RoleRender, tasks_file: str) -> list[tuple[str, str]]:
    """(name, version) of each package the role installs: apt 'name=version', dnf 'name-version-release'."""
    args = render.task_args(tasks_file, "Install the NVIDIA Container Toolkit")
    specs = []
    for spec in args["name"]:
        if tasks_file == "setup-Debian.yml":
            name, _, version = spec.partition("=")
        else:
            name, upstream, release = spec.rsplit("-", 2)
            version = f"{upstream}-{release}"
        specs.append((name, version))
    return specs


@pytest.mark.parametrize("os_name", sorted(PATHS))
def test_pinned_packages_are_published(os_name):
    key, tasks_file = PATHS[os_name]
    repo = vendor_facts.repository(key)
    specs = installed_specs(RoleRender("nvidia_container_toolkit", os_name), tasks_file)
    assert {name for name, _ in specs} == {package.name for package in repo.packages}, "the four packages together"
    for name, version in specs:
        assert version in repo.versions(name), f"{name}={version} is not published in {key} ({repo.versions(name)})"


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_apt_install_resolves_to_the_pinned_release(os_name):
    # apt would install exactly what the role pins: each package's exact-version dependencies are met.
    repo = vendor_facts.repository("nvidia-container-toolkit/deb")
    specs = installed_specs(RoleRender("nvidia_container_toolkit", os_name), "setup-Debian.yml")
    resolution = vendor_facts.resolve([repo], [f"{name}={version}" for name, version in specs])
    assert {name: resolution.version(name) for name in resolution.names()} == dict(specs)


@pytest.mark.parametrize("os_name", sorted(PATHS))
def test_repository_and_key_are_nvidias(os_name):
    key, tasks_file = PATHS[os_name]
    repo = vendor_facts.repository(key)
    role, included = RoleRender("nvidia_container_toolkit", os_name).included_role(
        tasks_file, "Trust the libnvidia-container repository"
    )
    assert role == "vendor_repository"
    assert included["vendor_repository_url"].rstrip("/") == repo.url.rstrip("/")
    assert included["vendor_repository_key_url"] == repo.signing_key["url"]
    assert included["vendor_repository_key_fingerprint"].upper() == repo.signing_key["fingerprint"].upper()
