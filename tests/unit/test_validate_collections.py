"""validate.yml needs ansible-core and the gpuforge.cluster collection alone: it is the playbook an operator runs on a
node or an acceptance host that may have no other collection (benchmarks/real_node/README.md brings ansible-core as
wheels to a machine that cannot reach a package index). A real H200 run on 2026-11-28 failed on one
community.general filter in it. This test walks every file validate.yml loads (imported playbooks and task files,
the roles and their files) and names any module, filter, test, lookup or callback of another collection."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"

# Collections validate.yml may use: ansible-core's own, and the project's (library/, filter_plugins/, ...).
ALLOWED_COLLECTIONS = {"ansible.builtin", "ansible.legacy", "gpuforge.cluster"}
# Namespaces of the collections gpuforge takes from the `ansible` package (requirements.yml), and any other
# namespace.collection.name reference a task could hold.
FQCN = re.compile(r"\b((?:ansible|community|containers|kubernetes|gpuforge|amazon|cisco)\.[a-z_0-9]+)\.[a-z_0-9]+\b")
INCLUDE_KEYS = ("import_playbook", "import_tasks", "include_tasks")


def _strings(node):
    """Every key and string value of a loaded YAML document (comments are gone by then)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def _includes(node):
    """(file named by an import/include, as written) for each import_playbook/import_tasks/include_tasks in node."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.rsplit(".", 1)[-1] in INCLUDE_KEYS:
                yield value["file"] if isinstance(value, dict) else value
            yield from _includes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _includes(item)


def _roles(node):
    """Role names of every play's roles: list and include_role/import_role task."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "roles":
                yield from (role["role"] if isinstance(role, dict) else role for role in value)
            elif key.rsplit(".", 1)[-1] in ("include_role", "import_role"):
                yield value["name"]
            else:
                yield from _roles(value)
    elif isinstance(node, list):
        for item in node:
            yield from _roles(item)


def _loaded_files() -> dict[Path, object]:
    """validate.yml and every YAML file it loads, followed through imports, includes and roles: path -> document."""
    pending = [PLAYBOOKS / "validate.yml"]
    seen: dict[Path, object] = {}
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        document = seen[path] = yaml.safe_load(path.read_text(encoding="utf-8"))
        for name in _includes(document):
            assert "{{" not in name, f"{path}: an include by a templated name cannot be followed: {name}"
            pending.append((path.parent / name).resolve())
        for role in _roles(document):
            role_dir = ROOT / "roles" / role.rsplit(".", 1)[-1]
            assert role_dir.is_dir(), f"{path}: role {role} not in roles/"
            pending.extend(sorted(role_dir.rglob("*.yml")))
    return seen


def test_the_walk_reaches_the_files_validate_loads():
    files = {str(path.relative_to(ROOT)) for path in _loaded_files()}
    # One of each kind of edge, so a walk that stops early cannot pass the test below.
    assert {
        "playbooks/validate_inventory.yml",  # import_playbook
        "playbooks/tasks/check_inventory.yml",  # include_tasks with file:
        "playbooks/tasks/validate_node.yml",  # import_tasks
        "roles/gpuforge/defaults/main/expected_hardware.yml",  # a play's role
    } <= files


def test_validate_uses_no_collection_but_ansible_core_and_gpuforge():
    foreign = sorted(
        {
            f"{path.relative_to(ROOT)}: {match.group(0)}"
            for path, document in _loaded_files().items()
            for text in _strings(document)
            for match in FQCN.finditer(text)
            if match.group(1) not in ALLOWED_COLLECTIONS
        }
    )
    assert not foreign, "validate.yml must run with ansible-core alone; found: " + "; ".join(foreign)


def test_the_pattern_finds_a_filter_of_another_collection():
    text = "{{ dirs | map('community.general.dict_kv', 'path') }}"
    assert [m.group(1) for m in FQCN.finditer(text)] == ["community.general"]
