"""The lab's Debian subset: the apt configuration that isolates the download from the host's own apt
state, the list's coverage of what lab packages depend on, and the shadowing rule."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from gpuforge.lab import debian_subset, image, mirror
from gpuforge.paths import PROJECT_ROOT


def _options(work: Path, status: Path) -> dict[str, str]:
    pairs = debian_subset.apt_options(work, status)
    assert pairs[::2] == ["-o"] * (len(pairs) // 2)
    return dict(item.split("=", 1) for item in pairs[1::2])


def test_apt_uses_only_the_work_directory_and_the_image_status(tmp_path):
    options = _options(tmp_path, tmp_path / "status")
    assert options["Dir::State::status"] == str(tmp_path / "status")
    for key in ("Dir::State", "Dir::Cache", "Dir::Etc::SourceList", "Dir::Etc::SourceParts", "Dir::Etc::Preferences"):
        assert options[key].startswith(str(tmp_path)), key
    assert options["APT::Install-Recommends"] == "false"


def test_sources_are_signed_by_the_debian_archive_key():
    lines = debian_subset.sources_list().splitlines()
    assert len(lines) == 2
    assert all(line.startswith(f"deb [signed-by={debian_subset.DEBIAN_KEYRING}] ") for line in lines)
    # contrib: NVIDIA's debian12 driver depends on Debian contrib packages (vendor_facts/debian-contrib).
    assert lines[1].endswith(" bookworm-security main contrib")


def test_registry_archive_packages_are_downloaded():
    assert "nvidia-installer-cleanup" in debian_subset.package_list()


def test_every_debian_dependency_of_a_lab_package_is_listed():
    packages = mirror.expand(mirror.load_definitions())
    built = {package["name"] for package in packages}
    built |= {name.split()[0] for package in packages for name in package.get("provides") or []}
    depends = {
        alternative.split()[0]
        for package in packages
        for clause in package.get("depends") or []
        for alternative in clause.split("|")
    }
    listed = set(debian_subset.package_list())
    assert sorted(depends - built - listed - set(image.package_list())) == []


def test_packages_roles_install_in_the_lab_are_listed():
    # Distribution packages named in Debian role vars and scenario preparations must come from the subset.
    listed = set(debian_subset.package_list())
    selinux = yaml.safe_load((PROJECT_ROOT / "roles/gpu_selinux/vars/Debian.yml").read_text(encoding="utf-8"))
    slurm = yaml.safe_load((PROJECT_ROOT / "roles/slurm/vars/Debian.yml").read_text(encoding="utf-8"))
    wanted = set(selinux["gpu_selinux_packages"]) | set(slurm["slurm_munge_packages"])
    wanted |= {name for names in slurm["slurm_packages"].values() for name in names}
    assert sorted(wanted - listed) == []


def _deb(tmp_path: Path, name: str, version: str, section: str) -> Path:
    package = {"name": name, "version": version, "description": "test", "depends": []}
    deb = mirror.build_deb(package, tmp_path / "stage" / name, tmp_path / "pool")
    control = subprocess.run(["dpkg-deb", "-I", str(deb), "control"], capture_output=True, check=True).stdout
    assert b"Section: misc" in control
    # Rebuild with the archive section the real package has.
    stage = tmp_path / "stage" / name
    (stage / "DEBIAN" / "control").write_text(
        (stage / "DEBIAN" / "control").read_text(encoding="utf-8").replace("Section: misc", f"Section: {section}"),
        encoding="utf-8",
    )
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(stage), str(deb)], capture_output=True, check=True)
    return deb


def test_debian_packages_go_to_their_component_and_lab_built_ones_are_left_out(tmp_path):
    (tmp_path / "pool").mkdir()
    debs = [
        _deb(tmp_path, "rdma-core", "44.0-2", "net"),
        _deb(tmp_path, "containerd", "1.6.20~ds1-1+b1", "admin"),
        _deb(tmp_path, "nvidia-installer-cleanup", "20220217+3~deb12u1", "contrib/misc"),
    ]
    repo = tmp_path / "repo"
    repo.mkdir()
    logged = []
    mirror.publish_debian(debs, {"rdma-core"}, repo, log=logged.append)
    published = sorted(str(path.relative_to(repo)) for path in repo.rglob("*.deb"))
    assert published == [
        "pool/contrib/nvidia-installer-cleanup_20220217+3~deb12u1_amd64.deb",
        "pool/main/containerd_1.6.20~ds1-1+b1_amd64.deb",
    ]
    assert "rdma-core_44.0-2_amd64.deb" in logged[0]


def test_image_trusts_only_the_lab_mirror_for_debian():
    sources = image.debian_sources()
    assert "deb.debian.org" not in sources
    assert f"URIs: {mirror.MIRROR_URL}/{debian_subset.REPO_PATH}/" in sources
    assert f"Signed-By: {image.LAB_KEYRING}" in sources
    # As a stock Debian 12 host: main only, so a role that needs contrib has to enable it.
    assert "Suites: bookworm\nComponents: main\n" in sources


def test_image_tag_changes_with_the_trusted_key():
    assert image.image_tag(b"key one") != image.image_tag(b"key two")


def test_image_tag_ignores_bytecode_caches_in_the_overlay(tmp_path, monkeypatch):
    """A test that imports the overlay's simulator modules writes __pycache__ there; the image must not change with
    it (make test rebuilt the image, its OS-shape layers and the mirror in the smoke test an hour in). A real change
    to an overlay file still changes the tag."""
    overlay = tmp_path / "overlay/usr/local/lib/gpuforge-lab"
    overlay.mkdir(parents=True)
    (tmp_path / "packages.txt").write_text("systemd\n", encoding="utf-8")
    (overlay / "simkernel.py").write_text("VALUE = 1\n", encoding="utf-8")
    monkeypatch.setattr(image, "IMAGE_DIR", tmp_path)
    before = image.image_tag(b"key")
    (overlay / "__pycache__").mkdir()
    (overlay / "__pycache__/simkernel.cpython-313.pyc").write_bytes(b"\x00bytecode")
    (overlay / "stray.pyc").write_bytes(b"\x00bytecode")
    assert image.image_tag(b"key") == before
    assert [path.name for path in image.overlay_files()] == ["simkernel.py"]
    (overlay / "simkernel.py").write_text("VALUE = 2\n", encoding="utf-8")
    assert image.image_tag(b"key") != before


def test_image_lab_tools_source_is_the_mirror_lab_tools_repository():
    repos = mirror.repository_paths(mirror.load_definitions())
    assert repos[mirror.LAB_TOOLS] == image.LAB_TOOLS_PATH
    assert f"URIs: {mirror.MIRROR_URL}/{repos[mirror.LAB_TOOLS]}/" in image.lab_tools_sources()


def test_download_hash_follows_the_image_packages_not_its_tag():
    assert debian_subset.inputs_hash("Package: a\n") != debian_subset.inputs_hash("Package: b\n")
    assert debian_subset.inputs_hash("Package: a\n") == debian_subset.inputs_hash("Package: a\n")
