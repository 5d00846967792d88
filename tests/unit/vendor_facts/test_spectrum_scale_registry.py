"""spectrum_scale_client against the vendor facts registry (vendor_facts/ibm-storage-scale/5.1.9.3.yml): every
package the role installs must be one IBM's 5.1.9.3 installer ships, at the pinned version, and the set must be
the one IBM's own installer role installs, license package included (M11). IBM's tooling refuses a node without
a gpfs.license.<edition> package; without gpfs.msg.en-us the mm* commands have no message catalog."""

from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleUndefinedVariable
from gpu_stack_render import RoleRender

from gpuforge import vendor_facts

DEB_OSES = ["debian12", "ubuntu2204", "ubuntu2404"]
RPM_OSES = ["rhel8", "rhel9"]


@pytest.fixture(scope="module")
def release() -> vendor_facts.Repository:
    return vendor_facts.repository("ibm-storage-scale/5.1.9.3")


def _var(render: RoleRender, name: str):
    try:
        return render.var(name)
    except AnsibleUndefinedVariable:
        return None


def _pins(render: RoleRender, separator: str) -> dict[str, str]:
    pins = {}
    for spec in render.var("spectrum_scale_client_package_pins"):
        # gpfs.gskit-8.0.55-19.1 on dnf: the version starts at the first "-<digit>".
        match = re.match(r"^(?P<name>.+?)" + re.escape(separator) + r"(?P<version>\d.*)$", spec)
        assert match, spec
        pins[match["name"]] = match["version"]
    return pins


def test_the_pin_table_names_an_edition_the_registry_knows(release):
    render = RoleRender("spectrum_scale_client", "debian12")
    assert render.var("gpuforge_spectrum_scale_version") == "5.1.9.3"
    assert render.var("gpuforge_spectrum_scale_edition") in release.fact("editions")


@pytest.mark.parametrize("os_name", DEB_OSES)
def test_every_deb_the_role_installs_is_in_the_release_at_the_pinned_version(os_name, release):
    pins = _pins(RoleRender("spectrum_scale_client", os_name), "=")
    for name, version in pins.items():
        assert version in release.versions(name), f"{name}={version}: not in {release.key} ({release.versions(name)})"


@pytest.mark.parametrize("os_name", DEB_OSES + RPM_OSES)
def test_the_package_set_is_ibms_with_the_editions_license(os_name, release):
    render = RoleRender("spectrum_scale_client", os_name)
    pins = _pins(render, "=" if os_name in DEB_OSES else "-")
    rpm_names = release.fact("rpm_names")
    # Compare in Debian names (the registry's); on RHEL map IBM's RPM names back.
    names = {next((deb for deb, rpm in rpm_names.items() if rpm == name), name) for name in pins}
    assert names >= set(release.fact("core_packages")), sorted(set(release.fact("core_packages")) - names)
    licenses = sorted(name for name in names if name.startswith("gpfs.license."))
    edition = release.fact("editions")[render.var("gpuforge_spectrum_scale_edition")]
    assert licenses == [edition["license"]], "exactly one license package, the edition's (IBM asserts it)"
    assert names >= set(edition["adds"])


@pytest.mark.parametrize("os_name", RPM_OSES)
def test_rpm_names_and_versions_are_ibms(os_name, release):
    pins = _pins(RoleRender("spectrum_scale_client", os_name), "-")
    rpm_names = release.fact("rpm_names")
    assert "gpfs.msg.en_US" in pins and "gpfs.msg.en-us" not in pins
    for deb_name in ("gpfs.base", "gpfs.gpl", "gpfs.gskit", "gpfs.docs", "gpfs.msg.en-us", "gpfs.compression"):
        versions = release.versions(deb_name)
        assert pins[rpm_names.get(deb_name, deb_name)] in versions, (deb_name, versions)


@pytest.mark.parametrize("edition", ["dm", "dev"])
def test_advanced_editions_add_what_ibms_installer_adds(edition, release):
    render = RoleRender("spectrum_scale_client", "ubuntu2204", gpuforge_spectrum_scale_edition=edition)
    names = set(_pins(render, "="))
    expected = release.fact("editions")[edition]
    assert {expected["license"], *expected["adds"]} <= names
    assert sorted(name for name in names if name.startswith("gpfs.license.")) == [expected["license"]]


@pytest.mark.parametrize("os_name", DEB_OSES)
def test_local_package_files_are_named_as_ibm_ships_them(os_name, release):
    # apt local_path installs <name>_<version>_<architecture>.deb from gpfs_debs/: the architecture must be the one
    # of IBM's package (all for gpfs.gpl, gpfs.docs, gpfs.msg.en-us), or the file is not found.
    render = RoleRender("spectrum_scale_client", os_name)
    files = _var(render, "spectrum_scale_client_deb_files")
    assert files is not None, "the role must name the .deb files of every package it installs"
    expected = [
        f"{name}_{version}_{release.package(name, version).architecture}.deb"
        for name, version in _pins(render, "=").items()
    ]
    assert files == expected
    assert "gpfs.msg.en-us_5.1.9-3_all.deb" in files and "gpfs.license.da_5.1.9-3_amd64.deb" in files
