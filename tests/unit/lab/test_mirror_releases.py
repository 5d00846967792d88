"""Release-style publication in the lab mirror (packages.yml `publish_releases`): Apptainer's packages are built from
the registry at every listed version and laid out as GitHub's release downloads (<lab_path>/v<version>/<file>) with a
SHA256SUMS of the lab's own builds, the file the lab inventory verifies against."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time

import pytest

from gpuforge import vendor_facts
from gpuforge.lab import mirror


@pytest.fixture(scope="module")
def definitions():
    return mirror.load_definitions()


@pytest.fixture(scope="module")
def packages(definitions):
    return mirror.expand(definitions)


@pytest.mark.parametrize("key", ["apptainer/deb", "apptainer/rpm"])
def test_apptainer_is_published_as_release_files(definitions, packages, key):
    assert [repo.key for repo in mirror.release_repositories(definitions)] == ["apptainer/deb", "apptainer/rpm"]
    assert key not in definitions["publish"], "not an apt repository"
    # The .deb and .rpm files of a release share its download directory, as on GitHub's release page.
    assert mirror.repository_paths(definitions)[key] == "apptainer/releases/download"
    built = {(p["name"], p["version"]) for p in packages if p["repo"] == key}
    assert built == {(p.name, p.version) for p in vendor_facts.repository(key).packages}


@pytest.mark.skipif(shutil.which("rpmbuild") is None, reason="rpmbuild comes with scripts/setup.sh")
def test_the_release_rpm_has_the_file_name_the_role_downloads(packages, tmp_path):
    from gpuforge.lab import rpm_repo

    package = next(p for p in packages if p["repo"] == "apptainer/rpm" and p["name"] == "apptainer")
    built = rpm_repo.build_rpm(package, tmp_path / "work", tmp_path / "out")
    names = vendor_facts.repository("apptainer/rpm").fact("file_names")
    assert built.name == names["apptainer"].format(version=package["version"]) == "apptainer-1.5.3-1.x86_64.rpm"
    files = rpm_repo.rpm_query(built, "[%{FILENAMES}\n]").split()
    assert "/usr/bin/apptainer" in files and "/usr/lib/gpuforge-lab/apptainer.json" in files


def test_release_directory_is_the_tag(packages):
    package = next(p for p in packages if p["name"] == "apptainer" and p["version"] == "1.5.3")
    assert mirror.release_directory(package) == "v1.5.3"


def test_lab_package_carries_the_registry_relations_and_the_simulator(packages):
    package = next(p for p in packages if p["name"] == "apptainer" and p["version"] == "1.5.3")
    registry = vendor_facts.repository("apptainer/deb").package("apptainer", "1.5.3")
    assert package["depends"] == [*registry.depends, "gpuforge-lab-sim"]
    assert package["conflicts"] == list(registry.conflicts)
    assert package["commands"] == {"/usr/bin/apptainer": "gpuforge_sim.apptainer"}
    assert package["files"]["/usr/lib/gpuforge-lab/apptainer.json"] == '{"version": "1.5.3"}'


def test_lab_apptainer_conf_has_apptainers_defaults(packages):
    package = next(p for p in packages if p["name"] == "apptainer" and p["version"] == "1.5.3")
    repo = vendor_facts.repository("apptainer/deb")
    conf = package["files"][repo.fact("config_dir") + "/apptainer.conf"].splitlines()
    assert [line.split("=", 1)[1].strip() for line in conf if line.startswith("bind path =")] == repo.fact(
        "default_bind_paths"
    )
    assert f"{repo.fact('nvccli_directive')['name']} = {repo.fact('nvccli_directive')['default']}" in conf
    nvliblist = package["files"][repo.fact("nvliblist")].splitlines()
    assert "nvidia-smi" in nvliblist and "libnvidia-ml.so" in nvliblist


def test_built_release_directory_and_checksums(tmp_path, packages):
    package = next(p for p in packages if p["name"] == "apptainer" and p["version"] == "1.5.3")
    release = tmp_path / "apptainer" / mirror.release_directory(package)
    release.mkdir(parents=True)
    deb = mirror.build_deb(package, tmp_path / "stage", release)
    assert (
        deb.name
        == "apptainer_1.5.3_amd64.deb"
        == vendor_facts.repository("apptainer/deb").fact("file_names")["apptainer"].replace("{upstream}", "1.5.3")
    )
    mirror._index_release(tmp_path / "apptainer")
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    assert (release / "SHA256SUMS").read_text(encoding="utf-8") == f"{digest}  apptainer_1.5.3_amd64.deb\n"
    fields = subprocess.run(
        ["dpkg-deb", "--field", str(deb), "Package", "Version", "Depends"], capture_output=True, check=True
    ).stdout.decode()
    assert fields.splitlines() == [
        "Package: apptainer",
        "Version: 1.5.3",
        "Depends: uidmap, fakeroot, gpuforge-lab-sim",
    ]
    listing = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, check=True).stdout.decode()
    assert "./usr/bin/apptainer" in listing and "./etc/apptainer/apptainer.conf" in listing


def test_a_rebuild_gives_the_same_bytes(tmp_path, packages):
    """The SHA256SUMS a converged node verified stays true across `lab prepare` runs: the package rebuilt a
    second later (other file times) has the same sha256, so get_url on the node reports no change."""
    package = next(p for p in packages if p["name"] == "apptainer" and p["version"] == "1.5.3")
    digests = []
    for build in ("one", "two"):
        (tmp_path / build).mkdir()
        deb = mirror.build_deb(package, tmp_path / f"stage-{build}", tmp_path / build)
        digests.append(hashlib.sha256(deb.read_bytes()).hexdigest())
        time.sleep(1.1)  # dpkg-deb stamps the current second into the archive unless told otherwise
    assert digests[0] == digests[1]
