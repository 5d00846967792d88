"""benchmark_tools on a Debian 12, an Ubuntu 24.04 and a RHEL 9 lab node: the three tools compiled from the upstream
archives with NVIDIA's nvcc, linked to the NCCL of NVIDIA's package (the lab mirror's repackaging of NVIDIA's wheel, a
.deb on Debian and Ubuntu, an RPM on RHEL) and to the OS's Open MPI, each build stamped with what it depends on."""

import pytest

PREFIX = "/opt/gpuforge/benchmark-tools"
# Where NVIDIA's NCCL package installs the library: Debian's multiarch folder, RHEL's %{_libdir}
# (vendor_facts/nvidia-cuda/debian12.yml and rhel9.yml).
NCCL = {"debian": "/usr/lib/x86_64-linux-gnu/libnccl.so.2", "rhel": "/usr/lib64/libnccl.so.2"}


def _os(host) -> str:
    return "rhel" if host.file("/etc/redhat-release").exists else "debian"


BUILDS = {
    "all_reduce_perf": (
        "nccl-tests-2.19.6-cuda13.0",
        "a93c09241f55985677caa5151caaa8b1fc7cd6dfa40201e2ea1534d3326c983f",
    ),
    "nvbandwidth": ("nvbandwidth-0.8-cuda13.0", "4305e6ff93762c60000b7deb09ad428f272b9c43f1904ffd2eb499cf935c7d34"),
    "p2pBandwidthLatencyTest": (
        "cuda-samples-13.0-cuda13.0",
        "64cfb8587639d43cdf44996a5952033f8486c3f24e55a47fbe07a3b39b8a9d86",
    ),
}


@pytest.mark.parametrize("binary", sorted(BUILDS))
def test_binary_is_a_cuda_executable_of_its_versioned_build(host, binary):
    build, _ = BUILDS[binary]
    link = host.file(f"{PREFIX}/bin/{binary}")
    assert link.is_symlink and link.linked_to == f"{PREFIX}/{build}/bin/{binary}"
    target = host.file(f"{PREFIX}/{build}/bin/{binary}")
    assert target.is_file and target.mode & 0o111
    assert host.check_output(f"head -c 4 {target.path} | od -An -c").split() == ["177", "E", "L", "F"]
    # nvcc embeds the device code in a .nv_fatbin section: the binary was compiled for a GPU, not faked.
    assert ".nv_fatbin" in host.check_output(f"readelf -S -W {target.path}")


@pytest.mark.parametrize("binary", sorted(BUILDS))
def test_build_stamp_names_the_archive_and_the_compilers(host, binary):
    build, sha256 = BUILDS[binary]
    stamp = host.file(f"{PREFIX}/{build}/.gpuforge-build").content_string.splitlines()
    assert stamp[0] == f"archive_sha256={sha256}"
    assert stamp[1] == "nvcc=Build cuda_13.0.r13.0/compiler.36424714_0"
    # The host compiler beneath every OS shape is Debian 12's g++ (on RHEL the gcc-c++ RPM carries its files).
    assert stamp[2].startswith("host_compiler=g++ (Debian 12.")
    assert stamp[3].startswith("options=")
    if binary == "all_reduce_perf":
        rhel = " CPATH=/usr/include/openmpi-x86_64 LD_RUN_PATH=/usr/lib64/openmpi/lib"
        assert stamp[3].endswith(rhel) is (_os(host) == "rhel"), stamp[3]


def test_nccl_tests_links_the_packaged_nccl_and_mpi(host):
    os_name = _os(host)
    nccl_path = NCCL[os_name]
    ldd = host.check_output(f"ldd {PREFIX}/bin/all_reduce_perf")
    libraries = dict(line.split(" => ") for line in (raw.strip() for raw in ldd.splitlines()) if " => " in line)
    # The dynamic linker's cache may name the /lib alias of /usr/lib (Debian 12's merged /usr): the same file.
    nccl = libraries["libnccl.so.2"].split()[0]
    assert nccl in (nccl_path, nccl_path.removeprefix("/usr"))
    assert host.check_output(f"readlink -f {nccl}") == host.check_output(f"readlink -f {nccl_path}")
    mpi = libraries["libmpi.so.40"].split()[0]
    assert "not found" not in ldd
    # cudart linked statically: the binary does not depend on the toolkit's folder at run time.
    assert "libcudart" not in ldd
    if os_name == "debian":
        # Debian's libopenmpi3; on Ubuntu the lab's libopenmpi-dev carries those files (libopenmpi3t64 is not modelled).
        owner = "libopenmpi-dev:" if host.system_info.distribution == "ubuntu" else "libopenmpi3:"
        assert host.check_output(f"dpkg -S {host.check_output(f'readlink -f {mpi}')}").startswith(owner)
        assert host.check_output(f"dpkg -S {nccl_path}") == f"libnccl2: {nccl_path}"
        assert host.package("libnccl2").version == "2.27.7-1+cuda13.0"
        description = host.check_output("dpkg-query -W -f '${Description}' libnccl2")
    else:
        # RHEL's libmpi is off the linker's path: found through the run path the build recorded, in the folder of
        # the openmpi package (Fedora's layout), not through the linker's cache.
        assert mpi == "/usr/lib64/openmpi/lib/libmpi.so.40", ldd
        dynamic = host.check_output(f"readelf -d {PREFIX}/bin/all_reduce_perf")
        assert "[/usr/lib64/openmpi/lib]" in dynamic and ("(RUNPATH)" in dynamic or "(RPATH)" in dynamic)
        assert host.check_output(f"rpm -qf --qf '%{{NAME}}' {mpi}") == "openmpi"
        assert host.check_output(f"rpm -qf --qf '%{{NAME}}-%{{VERSION}}-%{{RELEASE}}' {nccl_path}") == (
            "libnccl-2.27.7-1+cuda13.0"
        )
        description = host.check_output("rpm -q --qf '%{DESCRIPTION}' libnccl")
    assert "gpuforge lab repackaging of PyPI wheel nvidia-nccl-cu13 2.27.7" in description


def test_nvbandwidth_needs_the_drivers_libraries(host):
    needed = [
        line.split("[")[1].rstrip("]")
        for line in host.check_output(f"readelf -d {PREFIX}/bin/nvbandwidth").splitlines()
        if "(NEEDED)" in line
    ]
    # Linked against the toolkit's stubs; at run time the driver's libraries of the same soname are loaded.
    assert "libcuda.so.1" in needed and "libnvidia-ml.so.1" in needed


def test_compiler_is_nvidias_nvcc_from_the_pinned_package(host):
    if _os(host) == "debian":
        assert host.package("cuda-nvcc-13-0").version == "13.0.88-1"
    else:
        # dnf installed NVIDIA's RPM name at the pinned build, signed by the key the repository's gpgcheck trusts.
        query = host.check_output("rpm -q --qf '%{VERSION}-%{RELEASE} %{RSAHEADER:pgpsig}' cuda-nvcc-13-0")
        assert query.startswith("13.0.88-1 ") and "Key ID" in query, query
        assert host.run("dpkg-query -W cuda-nvcc-13-0").rc != 0
    assert "release 13.0, V13.0.88" in host.check_output("/usr/local/cuda-13.0/bin/nvcc --version")
    # The build trees are removed once the binaries are installed.
    assert not host.file("/var/cache/gpuforge/benchmark-tools/build-nccl_tests").exists
