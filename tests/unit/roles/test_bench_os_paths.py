"""gpuforge_bench's OS paths rendered without a host (tasks/os.yml, vars/<OS>.yml): the systems it runs on, the
refusal of the others naming them, and what each OS gives the benchmarks: the venv's Python, the packages of the
venv, ssh and fio, the ssh unit, Open MPI's mpirun. The same paths run for real in molecule/bench_os (RHEL 9, Ubuntu
22.04 and 24.04) and molecule/nccl_bisect (Debian 12)."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender

REFUSAL = "Refuse unsupported systems"
SUPPORTED = "the gpuforge_bench role supports Debian 12, Ubuntu 22.04 and 24.04, and RHEL 9 on x86_64"


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404", "rhel9"])
def test_supported_systems_are_not_refused(os_name):
    assert not RoleRender("gpuforge_bench", os_name).refused("os.yml", REFUSAL, gpuforge_host_problems=[])


@pytest.mark.parametrize("os_name", ["rhel8"])
def test_other_systems_are_refused_naming_the_supported_ones(os_name):
    RoleRender("gpuforge_bench", os_name, gpuforge_host_problems=[]).assert_problems("os.yml", REFUSAL, [SUPPORTED])


def test_rhel9_makes_the_venv_with_python312_and_runs_rhel_open_mpi():
    role = RoleRender("gpuforge_bench", "rhel9")
    # RHEL 9's python3 is 3.9; torch 2.13.0 requires Python >= 3.10 (PyPI metadata).
    assert role.var("gpuforge_bench_os_python") == "/usr/bin/python3.12"
    assert role.var("gpuforge_bench_resnet50_os_packages") == ["python3.12"]
    assert role.var("gpuforge_bench_ssh_os_packages") == ["openssh-server", "openssh-clients"]
    assert role.var("gpuforge_bench_ssh_service") == "sshd"
    assert role.var("gpuforge_bench_os_mpirun") == "/usr/lib64/openmpi/bin/mpirun"
    assert role.var("gpuforge_bench_mpirun_command") == "/usr/lib64/openmpi/bin/mpirun"
    assert role.var("gpuforge_bench_resnet50_python_command") == "/usr/bin/python3.12"


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_debian_and_ubuntu_use_python3_and_mpirun_on_path(os_name):
    role = RoleRender("gpuforge_bench", os_name)
    assert role.var("gpuforge_bench_os_python") == "/usr/bin/python3"
    assert role.var("gpuforge_bench_resnet50_os_packages") == ["python3-venv"]
    assert role.var("gpuforge_bench_ssh_os_packages") == ["openssh-server", "openssh-client"]
    assert role.var("gpuforge_bench_ssh_service") == "ssh"
    assert role.var("gpuforge_bench_os_mpirun") == "mpirun"


def test_a_site_mpirun_and_python_override_the_os_ones():
    role = RoleRender(
        "gpuforge_bench",
        "rhel9",
        gpuforge_bench_mpirun="/opt/hpcx/ompi/bin/mpirun",
        gpuforge_bench_resnet50_python="/usr/bin/python3.11",
    )
    assert role.var("gpuforge_bench_mpirun_command") == "/opt/hpcx/ompi/bin/mpirun"
    assert role.var("gpuforge_bench_resnet50_python_command") == "/usr/bin/python3.11"
