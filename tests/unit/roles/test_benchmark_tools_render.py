"""benchmark_tools rendered without a host: the build commands each tool runs, the stamp a build leaves, the reads
that decide whether to build, and the workload image's podman build command."""

from __future__ import annotations

from gpu_stack_render import ROOT, RoleRender


def lab(**extra) -> RoleRender:
    return RoleRender(
        "benchmark_tools",
        "debian12",
        benchmark_tools_cuda_version="13.0",
        benchmark_tools_cuda_architectures=["80", "90"],
        benchmark_tools_build_jobs=2,
        benchmark_tools_nccl_tests_binaries=["all_reduce_perf"],
        benchmark_tools_p2p_version="13.0",
        **extra,
    )


def test_nccl_tests_is_built_with_mpi_against_the_packaged_nccl():
    role = lab()
    role = lab(benchmark_tools_tool={"key": "nccl_tests", "value": role.var("benchmark_tools_builds.nccl_tests")})
    [make] = role.var("benchmark_tools_commands.nccl_tests")
    argv = [word for part in make for word in (part if isinstance(part, list) else [part])]
    src = "/var/cache/gpuforge/benchmark-tools/build-nccl_tests/nccl-tests-2.17.6"
    assert argv[:4] == ["make", "-C", f"{src}/src", "-j2"]
    assert "MPI=1" in argv and "MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi" in argv
    assert "CUDA_HOME=/usr/local/cuda-13.0" in argv and "NCCL_HOME=/usr" in argv
    assert "NVCC_GENCODE=-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90" in argv
    assert argv[-1] == f"{src}/build/all_reduce_perf"


def test_p2p_builds_with_cmake_from_12_8_and_its_makefile_before():
    builds = lab().var("benchmark_tools_builds")
    cmake = lab(benchmark_tools_tool={"key": "p2p", "value": builds["p2p"]}).var("benchmark_tools_commands.p2p")
    assert [step[:2] for step in cmake] == [["cmake", "-S"], ["cmake", "--build"]]
    assert "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-13.0/bin/nvcc" in cmake[0]
    old_builds = RoleRender("benchmark_tools", "debian12", benchmark_tools_p2p_version="12.5").var(
        "benchmark_tools_builds"
    )
    old = RoleRender(
        "benchmark_tools",
        "debian12",
        benchmark_tools_cuda_version="13.0",
        benchmark_tools_cuda_architectures=["80", "90"],
        benchmark_tools_p2p_version="12.5",
        benchmark_tools_tool={"key": "p2p", "value": old_builds["p2p"]},
    )
    [make] = old.var("benchmark_tools_commands.p2p")
    assert make[0] == "make" and make[-1] == "SMS=80 90" and "CUDA_PATH=/usr/local/cuda-13.0" in make


def test_the_stamp_names_archive_compilers_and_options():
    role = lab(
        benchmark_tools_tool={"key": "nvbandwidth", "value": {"sha256": "ab" * 32, "options": " MULTINODE=0 "}},
        benchmark_tools_reads={
            "outputs": {
                "nvcc": {"stdout": "nvcc: NVIDIA (R) Cuda compiler driver\nBuild cuda_13.0.r13.0/compiler.1_0\n"},
                "cxx": {"stdout": "g++ (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright"},
            }
        },
    )
    assert role.var("benchmark_tools_stamp_lines") == [
        "archive_sha256=" + "ab" * 32,
        "nvcc=Build cuda_13.0.r13.0/compiler.1_0",
        "host_compiler=g++ (Debian 12.2.0-14+deb12u1) 12.2.0",
        "options=MULTINODE=0",
    ]


def test_each_tool_is_read_from_its_versioned_prefix():
    reads = lab().var("benchmark_tools_read_commands")
    argv = reads["nccl_tests"]["argv"]
    prefix = "/opt/gpuforge/benchmark-tools/nccl-tests-2.17.6-cuda13.0"
    assert argv[:3] == ["sh", "-c", 'cat -- "$1" && shift && ls -d -- "$@" > /dev/null']
    assert argv[4:] == [f"{prefix}/.gpuforge-build", f"{prefix}/bin/all_reduce_perf"]
    assert (
        reads["p2p"]["argv"][-1]
        == "/opt/gpuforge/benchmark-tools/cuda-samples-13.0-cuda13.0/bin/p2pBandwidthLatencyTest"
    )


def test_default_archives_are_githubs_with_the_recorded_checksums():
    role = RoleRender("benchmark_tools", "debian12")
    builds = role.var("benchmark_tools_builds")
    assert builds["nccl_tests"]["url"] == "https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.17.6.tar.gz"
    assert builds["nvbandwidth"]["url"] == "https://github.com/NVIDIA/nvbandwidth/archive/refs/tags/v0.8.tar.gz"
    assert builds["p2p"]["url"] == "https://github.com/NVIDIA/cuda-samples/archive/refs/tags/v12.5.tar.gz"
    # Spack's recipes (spack/spack-packages, nccl_tests, nvbandwidth and cuda_samples package.py).
    assert builds["nccl_tests"]["sha256"] == "38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0"
    assert builds["nvbandwidth"]["sha256"] == "b3622945eb7fce2b4e1aea7d13de04f415f4d998db602893201a904320cf2d39"
    assert builds["p2p"]["sha256"] == "5c40cc096706045b067ec5897f039403014aa7a39b970905698466a2d029b972"
    # A mirror keeps the layout: only the base URL changes.
    mirrored = RoleRender("benchmark_tools", "debian12", benchmark_tools_nvbandwidth_base_url="http://m/nvb/")
    assert mirrored.var("benchmark_tools_builds.nvbandwidth.url") == "http://m/nvb/v0.8.tar.gz"


def test_workload_image_build_command():
    role = lab(
        playbook_dir=str(ROOT / "playbooks"),
        gpuforge_workload_image_repository="registry.example/gpuforge/workload",
        gpuforge_workload_image_tag="1.0.0",
        benchmark_tools_image_network="gpuforge-lab",
        benchmark_tools_image_add_hosts=["mirror:10.242.0.2"],
        ansible_facts={"processor_nproc": 4},
    )
    argv = role.var("benchmark_tools_image_build_argv")
    assert argv[:2] == ["podman", "build"]
    assert argv[argv.index("-t") + 1] == "registry.example/gpuforge/workload:1.0.0"
    assert argv[argv.index("--network") + 1] == "gpuforge-lab" and "--add-host=mirror:10.242.0.2" in argv
    label = argv[argv.index("--label") + 1]
    assert label == "org.gpuforge.inputs=" + role.var("benchmark_tools_image_inputs") and len(label) == 20 + 64
    args = dict(a.removeprefix("--build-arg=").split("=", 1) for a in argv if a.startswith("--build-arg="))
    assert args["NCCL_VERSION"] == "2.27.7-1+cuda13.0" and args["CUDA_NVCC_VERSION"] == "13.0.88-1"
    assert args["RDMA_PACKAGES"] == "perftest ibverbs-utils infiniband-diags"
    assert argv[-1] == "/var/cache/gpuforge/workload-image"
    assert "--cpu-shares" not in argv
    background = lab(
        playbook_dir=str(ROOT / "playbooks"), benchmark_tools_image_cpu_shares=110, ansible_facts={"processor_nproc": 4}
    ).var("benchmark_tools_image_build_argv")
    assert background[background.index("--cpu-shares") + 1] == "110"


REFUSAL = "Refuse unsupported systems and settings"


def test_debian12_with_a_known_release_is_built():
    assert not lab().refused("main.yml", REFUSAL, gpuforge_host_problems=[])
    assert not RoleRender("benchmark_tools", "debian12").refused("main.yml", REFUSAL, gpuforge_host_problems=[])


def test_rhel8_is_refused_naming_the_supported_oses_and_the_others_are_built():
    role = RoleRender("benchmark_tools", "rhel8", benchmark_tools_cuda_version="12.4", gpuforge_host_problems=[])
    role.assert_problems(
        "main.yml",
        REFUSAL,
        ["the benchmark_tools role supports Debian 12, Ubuntu 22.04 and 24.04 and RHEL 9 on x86_64"],
    )
    # Only the supported-OS problem: not also that its repository lacks a release.
    assert "publishes no CUDA" not in role.message("main.yml", REFUSAL)
    rhel = RoleRender("benchmark_tools", "rhel9", benchmark_tools_cuda_version="12.4", gpuforge_host_problems=[])
    assert not rhel.refused("main.yml", REFUSAL)
    noble = RoleRender("benchmark_tools", "ubuntu2404", benchmark_tools_cuda_version="13.0", gpuforge_host_problems=[])
    assert not noble.refused("main.yml", REFUSAL)
    # Ubuntu 22.04 (DGX OS 6): NVIDIA's ubuntu2204 repository has both releases the role knows.
    for release in ("12.4", "13.0"):
        jammy = RoleRender(
            "benchmark_tools", "ubuntu2204", benchmark_tools_cuda_version=release, gpuforge_host_problems=[]
        )
        assert not jammy.refused("main.yml", REFUSAL), release


def test_a_release_the_oss_cuda_repository_lacks_is_refused_naming_those_it_has():
    # NVIDIA's ubuntu2404 repository starts at CUDA 12.5: driver branch 550's 12.4 is not there.
    role = RoleRender("benchmark_tools", "ubuntu2404", benchmark_tools_cuda_version="12.4", gpuforge_host_problems=[])
    role.assert_problems(
        "main.yml",
        REFUSAL,
        [
            "the NVIDIA CUDA repository for Ubuntu 24.04 publishes no CUDA 12.4: "
            "set benchmark_tools_cuda_version to one it does (13.0)"
        ],
    )


def test_ubuntu_2204_and_2404_build_as_debian_does():
    debian = lab()
    for os_name in ("ubuntu2204", "ubuntu2404"):
        role = RoleRender("benchmark_tools", os_name, benchmark_tools_cuda_version="13.0")
        for name in ("benchmark_tools_os_packages", "benchmark_tools_mpi_home", "benchmark_tools_toolkit_packages"):
            assert role.var(name) == debian.var(name), (os_name, name)
        assert role.var("benchmark_tools_mpi_build_environment") == {}


def test_rhel9_builds_nccl_tests_against_rhels_open_mpi_layout_and_installs_nvidias_rpm_names():
    """RHEL's Open MPI keeps its headers outside MPI_HOME and its libraries off the linker's path (Fedora's
    openmpi.spec; vendor_facts/rhel-appstream/rhel9.yml): nccl-tests' make gets CPATH and LD_RUN_PATH, and the
    stamp names them, so a change of either rebuilds."""
    base = dict(
        benchmark_tools_cuda_version="13.0",
        benchmark_tools_cuda_architectures=["80", "90"],
        benchmark_tools_build_jobs=2,
        benchmark_tools_nccl_tests_binaries=["all_reduce_perf"],
    )
    role = RoleRender("benchmark_tools", "rhel9", **base)
    role = RoleRender(
        "benchmark_tools",
        "rhel9",
        benchmark_tools_tool={"key": "nccl_tests", "value": role.var("benchmark_tools_builds.nccl_tests")},
        **base,
    )
    [make] = role.var("benchmark_tools_commands.nccl_tests")
    argv = [word for part in make for word in (part if isinstance(part, list) else [part])]
    assert "MPI_HOME=/usr/lib64/openmpi" in argv and "NCCL_HOME=/usr" in argv
    assert role.var("benchmark_tools_mpi_build_environment") == {
        "CPATH": "/usr/include/openmpi-x86_64",
        "LD_RUN_PATH": "/usr/lib64/openmpi/lib",
    }
    options = role.var("benchmark_tools_builds.nccl_tests.options")
    assert options.endswith(" CPATH=/usr/include/openmpi-x86_64 LD_RUN_PATH=/usr/lib64/openmpi/lib"), options
    assert role.var("benchmark_tools_os_packages") == ["gcc-c++", "make", "cmake", "boost-devel", "openmpi-devel"]
    assert role.var("benchmark_tools_toolkit_packages") == [
        "cuda-nvcc-13-0-13.0.88-1",
        "cuda-cudart-devel-13-0-13.0.96-1",
        "cuda-nvml-devel-13-0-13.0.87-1",
        "libnccl-2.27.7-1+cuda13.0",
        "libnccl-devel-2.27.7-1+cuda13.0",
    ]
    # Debian's Open MPI needs neither: its headers are under MPI_HOME and libmpi on the linker's path.
    debian = lab(benchmark_tools_tool={"key": "nccl_tests", "value": lab().var("benchmark_tools_builds.nccl_tests")})
    assert debian.var("benchmark_tools_mpi_build_environment") == {}
    assert "CPATH" not in debian.var("benchmark_tools_builds.nccl_tests.options")


def test_a_driver_branch_without_a_pinned_toolkit_is_refused_naming_the_variable():
    role = RoleRender(
        "benchmark_tools", "debian12", gpuforge_nvidia_driver_version="570.195.03", gpuforge_host_problems=[]
    )
    role.assert_problems("main.yml", REFUSAL, ["no CUDA toolkit release for driver branch 570"])
    assert "set benchmark_tools_cuda_version to one of 12.4, 13.0" in " ".join(
        role.message("main.yml", REFUSAL).split()
    )
