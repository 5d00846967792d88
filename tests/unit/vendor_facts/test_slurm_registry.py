"""slurm against the vendor facts registry: the MUNGE, Slurm and PMIx versions the role asks apt (and dnf on EL 9)
for, per release of gpuforge_slurm_packages, must exist in that release's archive (vendor_facts/debian,
vendor_facts/ubuntu) and must not be older than the archive's security update. A pin older than the security
build is a downgrade on every host with unattended security updates, which the apt module refuses (M10)."""

from __future__ import annotations

import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from gpu_stack_render import ROOT
from role_yaml import load_yaml, trusted

from gpuforge import vendor_facts

ROLE = ROOT / "roles" / "slurm"
PINS = ROOT / "roles" / "gpuforge" / "defaults" / "main" / "slurm.yml"
# ansible_distribution_release -> the registry file of that release's archive.
ARCHIVES = {"bookworm": "debian/bookworm", "jammy": "ubuntu/jammy", "noble": "ubuntu/noble"}
SPEC = re.compile(r"^(?P<name>[^=<>]+)(?P<op>>=|=)(?P<version>[^=<>]+)$")


def _pins() -> dict:
    return load_yaml(PINS)["gpuforge_slurm_packages"]


def _apt_specs(release: str) -> list[tuple[str, str, str]]:
    """(name, relation, version) of every package spec setup-Debian.yml hands to apt on a host that is the
    controller and a compute node (so every package the role can install on that release)."""
    variables = {
        **load_yaml(ROLE / "defaults" / "main.yml"),
        **load_yaml(ROLE / "vars" / "Debian.yml"),
        "slurm_pins": trusted(_pins()[release]),
        "slurm_is_controller": True,
        "slurm_is_compute": True,
    }
    block = yaml.safe_load((ROLE / "tasks" / "setup-Debian.yml").read_text(encoding="utf-8"))[0]
    rendered = Templar(loader=DataLoader(), variables={**variables, **trusted(block["vars"])}).template(
        trusted(block["vars"]["slurm_apt_packages"])
    )
    specs = []
    for spec in rendered:
        match = SPEC.match(spec)
        assert match, f"{release}: {spec!r} is not <name>=<version> or <name>>=<version>"
        specs.append((match["name"], match["op"], match["version"]))
    return specs


def test_every_apt_release_of_the_pin_table_has_a_registry_file():
    apt_releases = {release for release in _pins() if not release.isdigit()}
    assert apt_releases == set(ARCHIVES)
    for key in ARCHIVES.values():
        vendor_facts.repository(key)


@pytest.mark.parametrize("release", sorted(ARCHIVES))
def test_every_pin_exists_and_is_not_older_than_the_security_update(release):
    archive = vendor_facts.repository(ARCHIVES[release])
    security = archive.fact("security_updates")
    specs = _apt_specs(release)
    assert {name for name, _, _ in specs} >= {"munge", "slurmd", "slurmctld", "slurm-client"}
    for name, _, version in specs:
        published = archive.versions(name)
        assert version in published, f"{release}: {name} {version} is not in {archive.key} ({published})"
        floor = security.get(name, published[-1])
        assert vendor_facts.compare_versions(version, floor) >= 0, (
            f"{release}: {name} is pinned to {version}, older than {floor} in {archive.key}"
        )


@pytest.mark.parametrize("release", sorted(ARCHIVES))
def test_a_host_with_the_security_updates_needs_no_downgrade(release):
    # Unattended upgrades leave the newest published build installed; the role's request must accept it as is
    # (the apt module refuses a downgrade, and munge's Depends: libmunge2 (= same) pins the pair together).
    archive = vendor_facts.repository(ARCHIVES[release])
    for name, op, version in _apt_specs(release):
        installed = archive.versions(name)[-1]
        assert vendor_facts.satisfies(installed, op, version), (
            f"{release}: {name} {installed} is installed, but the role asks for {name}{op}{version}"
        )


@pytest.mark.parametrize("release", sorted(ARCHIVES))
def test_a_fresh_host_installs_the_security_builds(release):
    # apt's candidate is the newest build; the closure must keep munge and libmunge2 on one (patched) version.
    archive = vendor_facts.repository(ARCHIVES[release])
    specs = _apt_specs(release)
    requests = [name if op == ">=" else f"{name}={version}" for name, op, version in specs]
    resolution = vendor_facts.resolve([archive], requests)
    for name, op, version in specs:
        assert vendor_facts.satisfies(resolution.version(name), op, version), (name, resolution.version(name))
    assert resolution.version("libmunge2") == resolution.version("munge")
    for name, floor in archive.fact("security_updates").items():
        if name in resolution.chosen:
            assert vendor_facts.compare_versions(resolution.version(name), floor) >= 0, (name, floor)


# EL major release -> the registry files of the repositories setup-RedHat.yml installs from (EPEL, which the role
# adds, and the RHEL repositories a registered host has).
EL_REPOSITORIES = {"9": ["epel/el9", "rhel-appstream/rhel9"]}


def _dnf_specs(release: str) -> list[str]:
    """The name-version-release specs setup-RedHat.yml hands to dnf on a host that is controller and compute node."""
    variables = {
        **load_yaml(ROLE / "defaults" / "main.yml"),
        **load_yaml(ROLE / "vars" / "RedHat.yml"),
        "slurm_pins": trusted(_pins()[release]),
        "slurm_is_controller": True,
        "slurm_is_compute": True,
    }
    (task,) = [
        task
        for task in yaml.safe_load((ROLE / "tasks" / "setup-RedHat.yml").read_text())
        if "ansible.builtin.dnf" in task
    ]
    templar = Templar(loader=DataLoader(), variables={**variables, **trusted(task["vars"])})
    return templar.template(trusted(task["ansible.builtin.dnf"]["name"]))


def test_every_el_release_is_pinned_from_the_registry_or_refused():
    for release, pins in _pins().items():
        if release.isdigit():
            assert release in EL_REPOSITORIES or not (pins["slurm"] or pins["munge"]), (
                f"EL {release} pins Slurm/MUNGE without registry files to check them against"
            )


@pytest.mark.parametrize("release", sorted(EL_REPOSITORIES))
def test_every_el_pin_is_a_build_of_the_repositories_the_role_installs_from(release):
    repositories = [vendor_facts.repository(key) for key in EL_REPOSITORIES[release]]
    specs = _dnf_specs(release)
    names = set()
    for spec in specs:
        name, version, build = spec.rsplit("-", 2)
        names.add(name)
        published = [found for repository in repositories for found in repository.versions(name)]
        assert f"{version}-{build}" in published, f"EL {release}: {spec} is not in {EL_REPOSITORIES[release]}"
    assert names == {"munge", "munge-libs", "slurm", "slurm-slurmctld", "slurm-slurmd"}
