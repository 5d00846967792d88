"""The closure guard (package_closure_guard) as the driver, DCGM and toolkit installs call it, against the vendor facts
registry: it runs before each install with the install's own specifiers, its verdict on the transaction apt would make
from the registry's repositories is clean while the pins hold, and a missing lock makes the transaction refused (by
apt itself or by the guard, naming the package and both versions)."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_package_closure import closure_problems
from gpu_stack_render import RoleRender
from test_nvidia_driver_cross_check import APT_PATHS, _host_repositories, _pins, _render, _requests
from test_nvidia_driver_cross_check import vendor_facts as registry


def _task_names(render: RoleRender, tasks_file: str) -> list[str]:
    return [t["name"] for t in yaml.safe_load((render.role_dir / "tasks" / tasks_file).read_text(encoding="utf-8"))]


def _actions(resolution: registry.Resolution) -> list[dict]:
    return [
        {"name": p.name, "action": "install", "version": p.version, "installed": None}
        for p in resolution.chosen.values()
    ]


@pytest.mark.parametrize(
    ("role", "tasks_file", "guard", "install"),
    [
        ("nvidia_driver", "setup-Debian.yml", "Refuse a driver transaction", "Install the driver packages"),
        ("nvidia_driver", "setup-RedHat.yml", "Refuse a driver transaction", "Install the driver from module stream"),
        ("nvidia_driver", "dcgm.yml", "Refuse a DCGM transaction", "Install DCGM (pinned)"),
        (
            "nvidia_container_toolkit",
            "setup-Debian.yml",
            "Refuse a toolkit transaction",
            "Install the NVIDIA Container",
        ),
        (
            "nvidia_container_toolkit",
            "setup-RedHat.yml",
            "Refuse a toolkit transaction",
            "Install the NVIDIA Container",
        ),
    ],
)
def test_the_guard_runs_right_before_the_install_it_guards(role, tasks_file, guard, install):
    names = _task_names(RoleRender(role, "debian12"), tasks_file)
    position = next(i for i, name in enumerate(names) if name.startswith(guard))
    assert names[position + 1].startswith(install), names


@pytest.mark.parametrize(("os_name", "source", "flavour"), APT_PATHS)
def test_the_driver_guard_asks_apt_for_the_install_and_passes_the_pinned_closure(os_name, source, flavour):
    render = _render(os_name, source, flavour)
    guard = render.task_args("setup-Debian.yml", "Refuse a driver transaction")
    install = render.task("setup-Debian.yml", "Install the driver packages")
    assert guard["name"][: len(install["name"])] == install["name"]
    assert guard["name"] == _requests(render)  # the driver and the fabric manager (an NVSwitch host)
    assert guard["allow_downgrade"] is True and guard["install_recommends"] is False
    resolution = registry.resolve(_host_repositories(os_name, source), _requests(render), _pins(render, source))
    assert closure_problems(_actions(resolution), guard["pins"], "gpu01") == []


def test_without_the_lock_the_debian_driver_transaction_is_refused():
    # Remove the lock (the CUDA pin file) and the registry's newer builds win: apt refuses the transaction itself, or
    # the guard names the package that floated.
    render = _render("debian12", "cuda", "proprietary")
    guard = render.task_args("setup-Debian.yml", "Refuse a driver transaction")
    try:
        resolution = registry.resolve(_host_repositories("debian12", "cuda"), _requests(render), [])
    except registry.ResolveError as exc:
        assert "570.195.03-1 is to be installed" in str(exc)
        return
    problems = closure_problems(_actions(resolution), guard["pins"], "gpu01")
    assert any("570." in problem and "550.90.07-*" in problem for problem in problems), problems


def test_a_floated_ubuntu_library_is_named_by_the_guard():
    # nvidia-driver-535 pins its libraries with "=", cuda-drivers-535 only with ">=": unpinned, an upgrade of the
    # installed names takes the newest builds, which the guard names with both versions.
    render = _render("ubuntu2204", "cuda", "proprietary")
    guard = render.task_args("setup-Debian.yml", "Refuse a driver transaction")
    repos = _host_repositories("ubuntu2204", "cuda")
    installed = registry.resolve(repos, _requests(render), _pins(render, "cuda"))
    floated = registry.resolve(repos, sorted(installed.names()), [])
    problems = closure_problems(_actions(floated), guard["pins"], "gpu01")
    # the Ubuntu archive's own 535.309.01 build wins on version once nothing holds the release
    assert (
        "gpu01: nvidia-driver-535 would be installed at 535.309.01-0ubuntu0.22.04.1, not at the pinned 535.183.01-*"
        in problems
    )
    assert (
        "gpu01: cuda-drivers-535 would be installed at 535.230.02-0ubuntu1, not at the pinned 535.183.01-*" in problems
    )


def test_the_debian_contrib_package_is_not_judged():
    contrib = registry.repository("debian-contrib/bookworm")
    render = _render("debian12", "cuda", "open")
    (pin,) = render.task_args("setup-Debian.yml", "Refuse a driver transaction")["pins"]
    for package in contrib.packages:
        assert package.name in pin["exclude"]


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204"])
def test_the_dcgm_guard_passes_the_pinned_pair_and_names_a_lone_newer_core(os_name):
    render = RoleRender("nvidia_driver", os_name, gpuforge_gpu_architecture="Hopper", nvidia_driver_dcgm_enabled=True)
    guard = render.task_args("dcgm.yml", "Refuse a DCGM transaction")
    assert guard["manager"] == "apt" and guard["name"] == render.task("dcgm.yml", "Install DCGM (pinned)")["name"]
    repos = [registry.repository(f"nvidia-cuda/{os_name}")]
    assert closure_problems(_actions(registry.resolve(repos, guard["name"])), guard["pins"], "gpu01") == []
    newest = registry.resolve(repos, ["datacenter-gpu-manager-4-core"])
    assert closure_problems(_actions(newest), guard["pins"], "gpu01") == [
        "gpu01: datacenter-gpu-manager-4-core would be installed at 1:4.7.0-1, not at the pinned 1:4.4.1-1",
        "gpu01: nv-hostengine would be installed at 1:4.7.0-1, not at the pinned 1:4.4.1-1",
    ]


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
def test_the_rhel_guard_pins_every_locked_name_at_the_release(os_name):
    render = _render(os_name, "cuda", "open")
    guard = render.task_args("setup-RedHat.yml", "Refuse a driver transaction")
    release = render.var("nvidia_driver_version")
    assert guard["manager"] == "dnf"
    assert guard["name"][: len(render.var("nvidia_driver_rhel_packages"))] == render.var("nvidia_driver_rhel_packages")
    (pin,) = guard["pins"]
    # every driver name of the lock; DCGM, locked beside it, has its own guard (dcgm.yml)
    driver_locks = [spec for spec in render.var("nvidia_driver_dnf_versionlock") if not spec.startswith("datacenter-")]
    assert [f"{name}-{release}" for name in pin["packages"]] == driver_locks
    off = {"name": "nvidia-kmod-common", "action": "install", "version": "3:535.309.01-1.el9", "installed": None}
    assert closure_problems([off], guard["pins"], "gpu01") == [
        "gpu01: nvidia-kmod-common would be installed at 3:535.309.01-1.el9, not at the pinned 535.183.01-*"
    ]
