"""benchmark_tools against the vendor facts registry (vendor_facts/nvidia-cuda/debian12.yml): for each CUDA release
the role knows, what it asks apt for is published and resolves as apt would, the paths it builds with are the ones
the packages install, and the default release is the one of the default driver branch."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender

from gpuforge import vendor_facts

REPO = "nvidia-cuda/debian12"


def releases() -> list[str]:
    return sorted(RoleRender("benchmark_tools", "debian12").var("benchmark_tools_cuda_releases"))


@pytest.mark.parametrize("release", releases())
def test_every_package_of_a_release_is_published_and_resolves(release):
    role = RoleRender("benchmark_tools", "debian12", benchmark_tools_cuda_version=release)
    requests = role.var("benchmark_tools_apt_packages")
    repo = vendor_facts.repository(REPO)
    resolution = vendor_facts.resolve([repo], requests)
    chosen = {package.name: package.version for package in resolution.chosen.values()}
    for request in requests:
        name, version = request.split("=")
        assert chosen[name] == version, request
    # NCCL built for this CUDA release, nvcc and the link stubs at the paths the build uses.
    assert chosen["libnccl2"].endswith(f"+cuda{release}")
    files = {path for package in resolution.chosen.values() for path in package.files}
    assert role.var("benchmark_tools_nvcc") in files
    stubs = role.var("benchmark_tools_cuda_stubs")
    assert {f"{stubs}/libcuda.so", f"{stubs}/libnvidia-ml.so"} <= files
    assert "/usr/lib/x86_64-linux-gnu/libnccl.so.2" in files and "/usr/include/nccl.h" in files


@pytest.mark.parametrize("release", releases())
def test_every_package_of_a_release_resolves_on_rhel9_under_nvidias_rpm_names(release):
    """The RHEL path asks dnf for name-version-release (vars/main.yml benchmark_tools_dnf_packages): each is a build
    of NVIDIA's rhel9 repository, and the paths the build uses are the ones the packages install."""
    role = RoleRender("benchmark_tools", "rhel9", benchmark_tools_cuda_version=release)
    requests = role.var("benchmark_tools_toolkit_packages")
    repo = vendor_facts.repository("nvidia-cuda/rhel9")
    published = {f"{package.name}-{package.version}": package for package in repo.packages}
    assert sorted(set(requests) - set(published)) == []
    files = {path for request in requests for path in published[request].files}
    assert role.var("benchmark_tools_nvcc") in files
    assert f"{role.var('benchmark_tools_cuda_stubs')}/libnvidia-ml.so" in files
    assert {"/usr/lib64/libnccl.so.2", "/usr/include/nccl.h", "/usr/lib64/libnccl.so"} <= files
    assert published[f"libnccl-{role.var('benchmark_tools_cuda_release')['nccl']}"].version.endswith(f"+cuda{release}")


@pytest.mark.parametrize(
    ("os_name", "repos"),
    [
        ("debian12", ["nvidia-cuda/debian12"]),
        ("ubuntu2204", ["nvidia-cuda/ubuntu2204", "ubuntu/jammy", "ubuntu-main/jammy"]),
        ("ubuntu2404", ["nvidia-cuda/ubuntu2404", "ubuntu/noble", "ubuntu-main/noble"]),
    ],
)
def test_each_oss_releases_resolve_with_apt_and_the_others_are_not_published(os_name, repos):
    """benchmark_tools_os_cuda_releases (vars/<OS>.yml) against the registry: each listed release's requests, the OS's
    build packages among them, resolve as apt resolves them; a known release left out has no nvcc there."""
    registries = [vendor_facts.repository(key) for key in repos]
    for release in releases():
        role = RoleRender("benchmark_tools", os_name, benchmark_tools_cuda_version=release)
        nvcc = f"cuda-nvcc-{release.replace('.', '-')}"
        if release in role.var("benchmark_tools_os_cuda_releases"):
            requests = role.var("benchmark_tools_toolkit_packages")
            if os_name.startswith("ubuntu"):
                requests = requests + role.var("benchmark_tools_os_packages")
            chosen = vendor_facts.resolve(registries, requests).chosen
            assert nvcc in chosen, (os_name, release)
        else:
            assert not registries[0].versions(nvcc), (os_name, release)


def test_rhel9_builds_against_the_open_mpi_layout_the_registry_records():
    role = RoleRender("benchmark_tools", "rhel9")
    appstream = vendor_facts.repository("rhel-appstream/rhel9")
    files = {path for package in appstream.packages for path in package.files}
    mpi_home = role.var("benchmark_tools_mpi_home")
    assert {f"{mpi_home}/lib/libmpi.so", f"{mpi_home}/bin/mpicc"} <= files
    assert f"{role.var('benchmark_tools_mpi_include')}/mpi.h" in files
    assert f"{role.var('benchmark_tools_mpi_run_path')}/libmpi.so.40" in files
    assert set(role.var("benchmark_tools_os_packages")) <= {package.name for package in appstream.packages} | {"make"}


def test_a_version_the_registry_does_not_publish_fails_as_apt_does():
    repo = vendor_facts.repository(REPO)
    with pytest.raises(vendor_facts.ResolveError, match=r"Version .2\.99\.0-1. for .libnccl2. was not found"):
        vendor_facts.resolve([repo], ["libnccl2=2.99.0-1"])


def test_default_release_is_the_toolkit_of_the_default_driver_branch():
    role = RoleRender("benchmark_tools", "debian12")
    branch = role.var("gpuforge_nvidia_driver_branch")
    cuda_by_branch = vendor_facts.repository(REPO).fact("cuda_version_by_branch")
    assert role.var("benchmark_tools_cuda_version") == cuda_by_branch[branch] == "12.4"
    # Every branch the role maps is mapped as NVIDIA's release notes map it (the registry's fact).
    for mapped_branch, cuda in role.var("benchmark_tools_cuda_by_driver_branch").items():
        assert cuda_by_branch[mapped_branch] == cuda


def test_another_driver_branch_has_no_default_release():
    # 570 is CUDA 12.8, whose packages the role does not pin: the role refuses, naming benchmark_tools_cuda_version.
    role = RoleRender("benchmark_tools", "debian12", gpuforge_nvidia_driver_version="570.195.03")
    assert role.var("benchmark_tools_cuda_version") == ""
    assert role.var("benchmark_tools_cuda_release") == {}
