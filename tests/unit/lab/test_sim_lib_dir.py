"""The simulated nvidia-container-cli lists the driver's libraries where the vendor's packages put them: its
directories must be the registry's cited file paths, not the simulator's own assumption."""

from __future__ import annotations

from pathlib import PurePosixPath

from gpuforge_sim import nvidia_container_cli

from gpuforge import vendor_facts


def _file_dirs(repository: str, package: str, name: str) -> set[str]:
    repo = vendor_facts.repository(repository)
    return {
        str(PurePosixPath(path).parent)
        for version in repo.versions(package)
        for path in repo.package(package, version).files
        if PurePosixPath(path).name.startswith(name)
    }


def test_the_rhel_lib_dir_is_where_nvidias_rhel9_cuda_libs_package_installs_libcuda():
    assert _file_dirs("nvidia-cuda/rhel9", "nvidia-driver-cuda-libs", "libcuda.so") == {
        nvidia_container_cli.LIB_DIR_RHEL
    }


def test_the_debian_lib_dir_is_where_nvidias_debian12_packages_install_their_libraries():
    assert _file_dirs("nvidia-cuda/debian12", "libnccl2", "libnccl.so") == {nvidia_container_cli.LIB_DIR_DEBIAN}
