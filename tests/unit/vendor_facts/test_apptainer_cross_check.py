"""apptainer against the vendor facts registry (vendor_facts/apptainer/deb.yml, rpm.yml): with the role's own
defaults (not the lab's mirror overrides), the release it pins is published in both formats, the files it downloads
are named and located as Apptainer publishes them, every sha256 it pins is the registry's published one, and the
apptainer.conf directives and paths it writes are Apptainer's."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender

from gpuforge import vendor_facts

# OS key -> registry file.
PATHS = {"debian12": "apptainer/deb", "ubuntu2204": "apptainer/deb", "rhel8": "apptainer/rpm", "rhel9": "apptainer/rpm"}


def published_sha256(repo: vendor_facts.Repository) -> dict:
    """Every file -> sha256 of the registry's sha256_<release> facts."""
    table = {}
    for name, entry in repo.facts.items():
        if name.startswith("sha256_"):
            table.update(entry["value"])
    return table


def file_name(repo: vendor_facts.Repository, package: str, version: str) -> str:
    # {version}: the package version (RPM: with its release); {upstream}: the release (the .deb's version).
    pattern = repo.fact("file_names")[package]
    return pattern.replace("{version}", version).replace("{upstream}", version.split("-")[0])


@pytest.mark.parametrize("os_name", sorted(PATHS))
@pytest.mark.parametrize("suid", [False, True])
def test_pinned_release_is_published_and_named_as_apptainer_names_it(os_name, suid):
    repo = vendor_facts.repository(PATHS[os_name])
    role = RoleRender("apptainer", os_name, apptainer_suid=suid, group_names=["gpu_nodes"])
    version = role.var("apptainer_package_version")
    packages = role.var("apptainer_packages")
    assert packages == (["apptainer", "apptainer-suid"] if suid else ["apptainer"])
    for package in packages:
        assert version in repo.versions(package), f"{package} {version} is not published ({repo.versions(package)})"
    assert role.var("apptainer_files") == [file_name(repo, package, version) for package in packages]
    upstream = role.var("apptainer_version")
    for package, name in zip(packages, role.var("apptainer_files"), strict=True):
        url = role.var("apptainer_file_url") + "/" + name
        assert url == repo.fact("download_url").replace("{upstream}", upstream).replace("{file}", name), package


def test_every_pinned_sha256_is_the_published_one():
    pinned = RoleRender("apptainer", "debian12", group_names=[]).var("apptainer_sha256")
    published = published_sha256(vendor_facts.repository("apptainer/deb"))
    assert pinned == {name: digest for name, digest in published.items() if name in pinned}
    assert set(pinned) == set(published), "pin every published digest, and nothing else"


def test_the_default_release_has_a_published_checksum_for_each_deb_and_none_for_the_rpms():
    # What the registry says the role can and cannot verify out of the box (README: RHEL needs a pinned sha256).
    deb = RoleRender("apptainer", "debian12", apptainer_suid=True, group_names=[])
    assert set(deb.var("apptainer_files")) <= set(published_sha256(vendor_facts.repository("apptainer/deb")))
    assert published_sha256(vendor_facts.repository("apptainer/rpm")) == {}


def test_apptainer_conf_paths_and_directives_are_apptainers():
    repo = vendor_facts.repository("apptainer/deb")
    role = RoleRender("apptainer", "debian12", group_names=[])
    assert role.var("apptainer_conf") == repo.fact("config_dir") + "/apptainer.conf"
    assert role.var("apptainer_nvliblist") == repo.fact("nvliblist")
    assert role.var("apptainer_package_bind_paths") == repo.fact("default_bind_paths")
    assert repo.fact("nvccli_directive")["name"] in role.var("apptainer_directives")
    assert (
        role.var("apptainer_directives")[repo.fact("nvccli_directive")["name"]]
        == repo.fact("nvccli_directive")["default"]
    )
    marker = role.task_args("configure.yml", "Bind the shared file systems")
    assert repo.fact("bind_path_directive") + " = " in marker["insertafter"].replace("^", "")


def test_suid_is_optional_and_nvccli_is_refused_with_it():
    repo = vendor_facts.repository("apptainer/deb")
    assert repo.fact("suid_optional") and repo.fact("nvccli_not_in_setuid_mode")
    role = RoleRender("apptainer", "debian12", apptainer_nvccli=True, apptainer_suid=True, group_names=[])
    assert role.refused("main.yml", "Refuse unsupported systems")
