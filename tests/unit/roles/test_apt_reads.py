"""Every apt install of the roles runs only when a dpkg read before it finds a package missing or off its pin.

The apt module opens the whole package cache on every run (a second or more per task on a host with full package
lists, docs/performance.md); package_version_floor reads the installed versions with one dpkg-query, and the
gpuforge_apt_unmet filter decides from that read (module_utils/gpuforge_packages.py, tested with the module and
this host's dpkg in tests/unit/library/test_package_version_floor.py). These tests hold the roles to the pattern:
a new apt task without its read fails here, and so does a gate whose read does not cover its packages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from gpu_stack_render import RoleRender

ROOT = Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"
APT = "ansible.builtin.apt"
READ = "gpuforge.cluster.package_version_floor"
# apt tasks decided by other evidence, with the reason.
EXEMPT = {
    # Installs gnupg until vendor_apt_repository reports gpg_found (its own read of the host, one per repository).
    ("vendor_repository", "setup-Debian.yml", "Install gnupg"),
    # nv_peer_mem packages the role builds from source on the node (legacy GPUDirect path, no pinned version list).
    ("gpudirect_rdma", "legacy.yml", "Install the nv_peer_mem packages"),
}
GATE = re.compile(
    r"^(?P<specs>[a-z0-9_]+) \| gpuforge\.cluster\.gpuforge_apt_unmet"
    r"\((?P<read>[a-z0-9_]+) \| default\(none\)\) \| length > 0$"
)
# Reads of several installs' packages; the render tests below check that they hold each install's specifiers.
COMPOSITE_READS = {"nvidia_driver_apt_packages", "spectrum_scale_client_apt_packages"}
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


APT_TASKS = [
    pytest.param(role, file, task, conditions, id=f"{role}/{file}:{task['name'][:40]}")
    for role, file, task, conditions, section in role_tasks()
    if APT in task and section != "rescue"
]
READS: dict = {}
for _role, _file, _task, _conditions, _section in role_tasks():
    if READ in _task and "register" in _task:
        READS.setdefault((_role, _task["register"]), []).append(_task)


def test_the_roles_have_apt_installs():
    assert len(APT_TASKS) >= 15


@pytest.mark.parametrize(("role", "file", "task", "conditions"), APT_TASKS)
def test_apt_runs_only_when_its_read_finds_something_unmet(role, file, task, conditions):
    if any((role, file) == (r, f) and task["name"].startswith(start) for r, f, start in EXEMPT):
        return
    gates = [match for match in (GATE.match(str(condition)) for condition in conditions) if match]
    assert len(gates) == 1, f"{role}/{file}: '{task['name']}' has no gpuforge_apt_unmet condition: {conditions}"
    gate = gates[0]
    args = task[APT]
    if "name" in args:
        # The gate judges exactly the packages apt installs.
        assert args["name"] == "{{ " + gate["specs"] + " }}", (role, file, task["name"])
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
    read_specs = [READ_PACKAGES.match(read[READ]["packages"]) for read in reads]
    assert all(read_specs), [read[READ]["packages"] for read in reads]
    assert any(match["specs"] in (gate["specs"], *COMPOSITE_READS) for match in read_specs), (role, gate["specs"])


def _specs_covered(render: RoleRender, read_specs: str, gate_specs: str, **extra):
    read = render.var(read_specs)
    wanted = render.var(gate_specs)
    assert wanted, gate_specs
    missing = [spec for spec in wanted if spec not in read]
    assert missing == [], f"{gate_specs} has specifiers the read ({read_specs}) does not: {missing}"


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404"])
def test_the_driver_read_covers_headers_driver_fabric_manager_and_dcgm(os_name):
    render = RoleRender(
        "nvidia_driver",
        os_name,
        nvidia_driver_gpu_architecture="Hopper",
        nvidia_driver_fabricmanager=True,
        nvidia_driver_dcgm_enabled=True,
        nvidia_driver_kernel_headers=True,
    )
    for subset in (
        "nvidia_driver_header_packages",
        "nvidia_driver_apt_driver_packages",
        "nvidia_driver_apt_fabricmanager_packages",
        "nvidia_driver_apt_dcgm_packages",
    ):
        _specs_covered(render, "nvidia_driver_apt_packages", subset)
    # Every specifier is one the filter judges (an unknown one would make apt run on every rerun).
    from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import split_apt_spec

    assert all(split_apt_spec(spec) for spec in render.var("nvidia_driver_apt_packages"))


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2404"])
def test_the_storage_scale_read_covers_pins_and_build_deps(os_name):
    render = RoleRender("spectrum_scale_client", os_name)
    _specs_covered(render, "spectrum_scale_client_apt_packages", "spectrum_scale_client_package_pins")
    _specs_covered(render, "spectrum_scale_client_apt_packages", "spectrum_scale_client_build_deps")
