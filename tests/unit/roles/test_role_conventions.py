"""One naming convention for per-OS task files across all roles: <step>-<os_family>.yml (setup-Debian.yml,
doca-RedHat.yml), chosen with ansible_facts.os_family; no role keys a task file on a package manager name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"
OS_FAMILIES = ("Debian", "RedHat")
ROOTS_PLAYBOOKS = ROLES.parent / "playbooks"


def _task_files():
    return sorted(ROLES.glob("*/tasks/*.yml"))


@pytest.mark.parametrize("path", _task_files(), ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_per_os_task_files_are_named_step_dash_os_family(path):
    name = path.stem
    per_os = re.search(r"(apt|dnf|yum|Debian|RedHat|Ubuntu)", name)
    if per_os:
        assert re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*-(Debian|RedHat)", name), (
            f"{path.parts[-3]}/tasks/{path.name}: per-OS task files are <step>-<os_family>.yml"
        )


def test_every_per_os_file_has_its_other_family_and_is_included_by_os_family():
    for role in sorted(p for p in ROLES.iterdir() if (p / "tasks").is_dir()):
        tasks = role / "tasks"
        steps = {p.stem.rsplit("-", 1)[0] for p in tasks.glob("*-*.yml") if p.stem.endswith(OS_FAMILIES)}
        for step in steps:
            for family in OS_FAMILIES:
                assert (tasks / f"{step}-{family}.yml").is_file(), f"{role.name}: {step}-{family}.yml missing"
        text = "\n".join(p.read_text(encoding="utf-8") for p in tasks.glob("*.yml"))
        assert "pkg_mgr" not in text, f"{role.name}: task files are chosen by os_family, not by a package manager"


def _os_vars_loads():
    """(role, the file names of its first_found include_vars of vars/<OS>.yml) for each of a role's task files
    (tasks/main.yml, or the file it imports first, such as gpuforge_bench's tasks/os.yml)."""
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            if not isinstance(task, dict) or "first_found" not in str(task.get("ansible.builtin.include_vars", "")):
                continue
            spec = next(value for value in (task.get("vars") or {}).values() if isinstance(value, dict))
            yield path.parts[-3], spec["files"]


def test_every_role_loads_its_os_vars_by_distribution_then_os_family():
    # One convention for vars/<OS>.yml: a distribution's own file (vars/Ubuntu.yml) where it differs from its
    # family's, else the family's (vars/Debian.yml on Ubuntu). Four roles tried os_family alone, so a vars/Ubuntu.yml
    # added there would never have been read.
    loads = dict(_os_vars_loads())
    assert {role for role in loads} >= {path.parts[-3] for path in ROLES.glob("*/vars/RedHat.yml")}
    for role, files in loads.items():
        normalised = [re.sub(r"\s|\[\'|\'\]|ansible_facts\.?", "", name) for name in files]
        assert normalised == ["{{distribution}}.yml", "{{os_family}}.yml"], f"{role}: {files}"


def test_site_installs_the_rdma_stack_before_the_gpu_driver():
    # NVIDIA GPUDirect RDMA documentation: install MLNX_OFED before the driver's peer memory module is built.
    import yaml

    site = yaml.safe_load((ROOTS_PLAYBOOKS / "site.yml").read_text(encoding="utf-8"))
    order = [play["ansible.builtin.import_playbook"] for play in site]
    assert order.index("rdma_stack.yml") < order.index("gpu_stack.yml") < order.index("fabric_gpu.yml")


def _tagged_includes(tasks, path):
    """(path, task name, its tags, the tags it applies to what it includes) of every include_tasks/include_role with
    tags, blocks descended."""
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        for key in ("block", "rescue", "always"):
            yield from _tagged_includes(task.get(key), path)
        for action in ("ansible.builtin.include_tasks", "ansible.builtin.include_role"):
            if action in task and task.get("tags"):
                args = task[action] if isinstance(task[action], dict) else {}
                applied = (args.get("apply") or {}).get("tags") or []
                yield path, task.get("name"), list(task["tags"]), list(applied)


def test_role_tags_reach_the_included_tasks():
    """Tags on include_tasks select only the include itself: the tasks it loads run under `--tags X` only through
    `apply` (or tags on the role in the playbook). Every tagged include in the roles applies its tags, so
    `gpuforge provision --tags nfs_client` runs the role however the playbook lists it (the playbooks' side:
    tests/unit/test_playbook_roles.py)."""
    found = [inc for path in _task_files() for inc in _tagged_includes(yaml.safe_load(path.read_text()), path)]
    assert len(found) > 25  # the collector still finds the tagged includes (32 on 2026-11-27)
    for path, name, tags, applied in found:
        assert set(tags) <= set(applied), f"{path.parts[-3]}/tasks/{path.name}: '{name}' applies {applied}, not {tags}"
