"""The lab mirror's package table: every package is buildable from what the repository holds."""

from __future__ import annotations

import subprocess

import pytest

from gpuforge.lab import mirror


@pytest.fixture(scope="module")
def packages():
    return mirror.expand(mirror.load_definitions())


def test_every_simulated_command_has_its_simulator(packages):
    missing = {package["name"]: mirror.missing_simulators(package) for package in packages}
    assert {name: modules for name, modules in missing.items() if modules} == {}


def test_branches_expand_to_upstream_package_names(packages):
    names = {package["name"]: package for package in packages}
    assert names["cuda-drivers-535"]["version"] == "535.183.01-1"
    assert names["nvidia-driver-550"]["depends"][1] == "nvidia-smi-550 (= 550.127.08-1)"
    assert (
        '"driver_version": "535.183.01"'
        in names["nvidia-driver-535"]["files"]["/usr/lib/gpuforge-lab/nvidia-driver.json"]
    )
    assert {"gpfs.base", "gpfs.gpl", "gpfs.gskit", "gpfs.docs", "doca-ofed", "nvidia-container-toolkit"} <= set(names)


def test_every_package_names_a_known_repository(packages):
    repos = mirror.load_definitions()["repos"]
    assert [package["name"] for package in packages if package["repo"] not in repos] == []


def test_built_deb_has_control_wrapper_and_module_marker(tmp_path, packages):
    package = next(p for p in packages if p["name"] == "nvidia-kernel-dkms-535")
    deb = mirror.build_deb(package, tmp_path / "stage", tmp_path)
    info = subprocess.run(["dpkg-deb", "--field", str(deb), "Package", "Version", "Provides"], capture_output=True)
    assert info.stdout.decode().splitlines() == [
        "Package: nvidia-kernel-dkms-535",
        "Version: 535.183.01-1",
        "Provides: nvidia-kernel-535",
    ]
    listing = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True).stdout.decode()
    assert "./usr/lib/gpuforge-lab/modules/nvidia_peermem.ko" in listing


def test_wrapper_exports_program_name():
    text = mirror._wrapper("/usr/lpp/mmfs/bin/mmlsconfig", "gpuforge_sim.gpfs")
    assert "GPUFORGE_SIM_PROG=mmlsconfig\nexport GPUFORGE_SIM_PROG\n" in text
    assert "from gpuforge_sim.gpfs import main" in text
