"""Every host role refuses an image-based host (RHCOS) in its first check, before it changes anything, and points
to the OpenShift operator path. The check reads the facts (package manager atomic_container), not os-release:
RHCOS of OpenShift 4.19 and later says ID="rhel" there and reads as RedHat 9.6."""

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "roles"))

from gpu_stack_render import ROOT, RoleRender

# (role, tasks file, name of its first refusal): the first assert of the role, before any task that changes the host.
REFUSALS = [
    ("mlnx_ofed", "main.yml", "Refuse an unknown RDMA stack source"),
    ("nvidia_driver", "main.yml", "Refuse unsupported systems and inconsistent settings"),
    ("nvidia_container_toolkit", "main.yml", "Refuse unsupported systems and runtimes"),
    ("gpu_selinux", "main.yml", "Refuse anything but enforcing"),
    ("container_runtime_limits", "main.yml", "Refuse unsupported systems and unknown runtimes"),
    ("gpudirect_rdma", "main.yml", "Refuse the peer memory module without MLNX_OFED"),
    ("spectrum_scale_client", "main.yml", "Refuse an image-based host and an inventory without"),
    ("slurm", "main.yml", "Refuse an inventory without a Slurm controller"),
    ("apptainer", "main.yml", "Refuse unsupported systems and settings"),
    ("gpu_monitoring", "main.yml", "Refuse an image-based host and a package without a pinned version"),
    ("benchmark_tools", "main.yml", "Refuse unsupported systems and settings"),
    ("node_health", "main.yml", "Refuse an image-based host, a Python older than 3.8"),
]
# Enough of an inventory and earlier results for each check to evaluate on a supported host.
CONTEXT = {
    "groups": {"slurm_controller": ["head01"], "slurm_compute": ["gpu01"], "spectrum_scale_cluster": ["gpfs01"]},
    "group_names": ["gpu_nodes"],
    "gpudirect_rdma_ofed": {"rc": 0, "stdout": "OFED-internal-24.10-1.1.4"},
    "gpudirect_rdma_smi": {"rc": 0, "stdout": "550.90.07"},
}


def render(role, os_name):
    return RoleRender(role, os_name, **CONTEXT)


def test_every_host_role_that_loads_the_pins_is_listed():
    """A new host role (one that lists the gpuforge role as a dependency and installs packages) has a refusal here."""
    controller_side = {"gpuforge_bench", "k8s_addons_common"}
    dependents = {
        path.parents[1].name
        for path in (ROOT / "roles").glob("*/meta/main.yml")
        if any(
            (dep if isinstance(dep, str) else dep.get("role")) in ("gpuforge", "gpuforge.cluster.gpuforge")
            for dep in (yaml.safe_load(path.read_text()) or {}).get("dependencies") or []
        )
    }
    assert dependents - controller_side == {role for role, _, _ in REFUSALS}


@pytest.mark.parametrize(("role", "tasks_file", "name"), REFUSALS)
def test_an_image_based_host_is_refused_first_with_the_operator_path(role, tasks_file, name):
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / tasks_file).read_text())
    before = tasks[: next(i for i, task in enumerate(tasks) if task["name"].startswith(name))]
    # Only reads come before the refusal: variables, and commands that change nothing (an included file's too).
    for task in before:
        included = (task.get("ansible.builtin.include_tasks") or {}).get("file")
        steps = yaml.safe_load((ROOT / "roles" / role / "tasks" / included).read_text()) if included else [task]
        for step in steps:
            assert "ansible.builtin.include_vars" in step or step.get("changed_when") is False, (role, step["name"])
    rhcos = render(role, "rhcos419")
    assert rhcos.refused(tasks_file, name)
    message = rhcos.message(tasks_file, name)
    assert message.startswith("gpu01 is an image-based system (Ansible reports its package manager as atomic_container")
    assert "gpuforge_k8s_gpu_stack: operators" in message and "openshift_gpu_operators" in message
    # The image-based reason alone: the role's other checks do not apply to a host it cannot manage.
    assert "supports Debian 12" not in message


@pytest.mark.parametrize(("role", "tasks_file", "name"), REFUSALS)
@pytest.mark.parametrize("os_name", ["rhel9", "debian12"])
def test_rhel_and_debian_are_not_image_based(role, tasks_file, name, os_name):
    render_os = render(role, os_name)
    assert render_os.var("gpuforge_host_problems") == []
    # The refusal reads the list (in its condition, or in the problems it is gated by), which is empty here.
    task = render_os.find_task(tasks_file, name)
    assert render_os.module_of(task) == "ansible.builtin.fail"
    assert "gpuforge_host_problems" in str(task["when"]) + str(task.get("vars"))


@pytest.mark.parametrize(("role", "tasks_file", "name"), REFUSALS)
def test_rhel8_is_refused_first_naming_dnf_and_the_supported_releases(role, tasks_file, name):
    """RHEL 8's dnf bindings exist for platform-python 3.6 only, where ansible-core 2.17+ runs no module: every host
    role refuses it in the same first check (the lab's rhel8 shape shows ansible.builtin.dnf failing there)."""
    rhel8 = render(role, "rhel8")
    assert rhel8.refused(tasks_file, name)
    message = rhel8.message(tasks_file, name)
    assert message.startswith("gpu01 runs RedHat 8."), message
    assert "platform-python 3.6" in message and "ansible.builtin.dnf" in message
    assert "support Debian 12, Ubuntu 22.04 and 24.04, and RHEL 9" in message
