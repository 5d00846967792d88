"""Every apt install of the roles runs apt only when dpkg shows a package missing or off its pin.

The apt module opens the whole package cache on every run (a second or more per task on a host with full package
lists, docs/performance.md). An install by package name goes through gpuforge.cluster.apt_pinned, which reads dpkg
and calls apt only for the unmet specifiers in the same task (action_plugins/apt_pinned.py, tested in
tests/unit/action_plugins/test_apt_pinned.py). An install of package files (apt's deb option) is gated by a
package_version_floor read and the gpuforge_apt_unmet filter, because the read also decides whether the files are
fetched and checked. These tests hold the roles to both patterns: a new ansible.builtin.apt install by name fails
here, and so does a file install without its read, or a pin apt_pinned cannot judge (apt would run on every
rerun)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import split_apt_spec
from gpu_stack_render import RoleRender

ROOT = Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"
APT = "ansible.builtin.apt"
PINNED = "gpuforge.cluster.apt_pinned"
READ = "gpuforge.cluster.package_version_floor"
# apt tasks decided by other evidence, with the reason.
EXEMPT = {
    # nv_peer_mem packages the role builds from source on the node (legacy GPUDirect path, no pinned version list).
    ("gpudirect_rdma", "legacy.yml", "Install the nv_peer_mem packages"),
}
GATE = re.compile(
    r"^(?P<specs>[a-z0-9_]+) \| gpuforge\.cluster\.gpuforge_apt_unmet"
    r"\((?P<read>[a-z0-9_]+) \| default\(none\)\) \| length > 0$"
)
READ_PACKAGES = re.compile(r"^\{\{ (?P<specs>[a-z0-9_]+) \| gpuforge\.cluster\.gpuforge_apt_read_packages \}\}$")


def _as_list(value) -> list:
    return [] if value is None else (value if isinstance(value, list) else [value])


def walk(tasks, when=(), section="block"):
    """(task, conditions of the task and its enclosing blocks, section) for every task, blocks opened."""
    for task in tasks or []:
        conditions = [*when, *_as_list(task.get("when"))]
        if any(key in task for key in ("block", "rescue", "always")):
            for name in ("block", "rescue", "always"):
                yield from walk(task.get(name), conditions, name if section == "block" else section)
        else:
            yield task, conditions, section


def role_tasks():
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        for task, conditions, section in walk(yaml.safe_load(path.read_text(encoding="utf-8"))):
            yield path.parts[-3], path.name, task, conditions, section


def _exempt(role, file, task) -> bool:
    return any((role, file) == (r, f) and task["name"].startswith(start) for r, f, start in EXEMPT)


APT_TASKS = [
    pytest.param(role, file, task, conditions, id=f"{role}/{file}:{task['name'][:40]}")
    for role, file, task, conditions, section in role_tasks()
    if APT in task and section != "rescue" and not _exempt(role, file, task)
]
PINNED_TASKS = [
    pytest.param(role, file, task, id=f"{role}/{file}:{task['name'][:40]}")
    for role, file, task, _conditions, _section in role_tasks()
    if PINNED in task
]
READS: dict = {}
for _role, _file, _task, _conditions, _section in role_tasks():
    if READ in _task and "register" in _task:
        READS.setdefault((_role, _task["register"]), []).append(_task)


def test_the_roles_install_through_apt_pinned():
    assert len(PINNED_TASKS) >= 15


@pytest.mark.parametrize(("role", "file", "task"), PINNED_TASKS)
def test_apt_pinned_installs_are_plain(role, file, task):
    args = task[PINNED]
    assert "name" in args, (role, file, task["name"])
    # state is always present (the plugin's own), and no rescue retries a second apt task: retry_with_fresh_index.
    assert "state" not in args, f"{role}/{file}: '{task['name']}': apt_pinned has no state option"


@pytest.mark.parametrize(("role", "file", "task", "conditions"), APT_TASKS)
def test_package_files_are_installed_only_when_their_read_finds_something_unmet(role, file, task, conditions):
    args = task[APT]
    assert "name" not in args, (
        f"{role}/{file}: '{task['name']}' installs by name with {APT}: use {PINNED} (one dpkg read, apt only "
        "for what is missing or off its pin)"
    )
    gates = [match for match in (GATE.match(str(condition)) for condition in conditions) if match]
    assert len(gates) == 1, f"{role}/{file}: '{task['name']}' has no gpuforge_apt_unmet condition: {conditions}"
    gate = gates[0]
    reads = READS.get((role, gate["read"]), [])
    assert reads, f"{role}: no {READ} task registers {gate['read']}"
    for read in reads:
        assert (read[READ].get("missing"), read[READ].get("below_floor"), read[READ].get("manager")) == (
            "ignore",
            "ignore",
            "dpkg",
        ), f"{role}: the read {gate['read']} must fail on nothing (missing/below_floor: ignore) and read dpkg"
        # Any tags of the read are the install's too (a --tags run that skips the read leaves it undefined: apt runs).
        assert set(_as_list(read.get("tags"))) <= set(_as_list(task.get("tags"))) | {"always"}
        match = READ_PACKAGES.match(read[READ]["packages"])
        assert match and match["specs"] == gate["specs"], (role, read[READ]["packages"], gate["specs"])


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_every_driver_pin_is_one_apt_pinned_judges(os_name):
    """An unknown specifier is never counted as met: apt would run on every rerun."""
    render = RoleRender(
        "nvidia_driver",
        os_name,
        nvidia_driver_gpu_architecture="Hopper",
        nvidia_driver_fabricmanager=True,
        nvidia_driver_dcgm_enabled=True,
        nvidia_driver_kernel_headers=True,
    )
    for variable in (
        "nvidia_driver_header_packages",
        "nvidia_driver_apt_driver_packages",
        "nvidia_driver_apt_fabricmanager_packages",
        "nvidia_driver_apt_dcgm_packages",
    ):
        specs = render.var(variable)
        assert specs, variable
        assert all(split_apt_spec(spec) for spec in specs), (variable, specs)


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2404"])
def test_every_storage_scale_pin_is_one_apt_pinned_judges(os_name):
    render = RoleRender("spectrum_scale_client", os_name)
    for variable in ("spectrum_scale_client_package_pins", "spectrum_scale_client_build_deps"):
        specs = render.var(variable)
        assert specs, variable
        assert all(split_apt_spec(spec) for spec in specs), (variable, specs)
