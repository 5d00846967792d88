"""gpuforge uses ansible-core's public API only: no private ansible-core module or name, no pickle loading.

Private names (`ansible._internal`, a `_`-prefixed module or name of ansible-core) change without notice between
releases: code that imports them ties the collection to one ansible-core release. meta/runtime.yml declares a
range of releases, tested on its oldest and newest (docs/development.md, "ansible-core releases"), so every tracked
Python file is read here and each of these fails the test:

- an import of a module under `ansible` with a `_`-prefixed part (`ansible._internal...`,
  `ansible.utils.collection_loader._collection_finder`), or a call of importlib.import_module / __import__ on one;
- `from ansible... import _name`;
- `name._attr` where `name` was imported from ansible-core (`module_common._CachedModule`,
  `module_utils_loader._get_paths`);
- pickle loading (`import pickle`, `from pickle import ...`).

What a plugin inherits from its ansible-core base class (`self._templar`, `self._loader`, `self._execute_module`,
`self._task` in lookup and action plugins) is the plugin interface ansible-core documents for plugin authors
("Developing plugins", https://docs.ansible.com/ansible/latest/dev_guide/developing_plugins.html), not an import of
a private name, and is not flagged.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _private_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "ansible" and any(part.startswith("_") and not part.startswith("__") for part in parts[1:])


def _is_ansible_core(name: str) -> bool:
    return name == "ansible" or name.startswith("ansible.")


def private_uses(source: str, filename: str = "<source>") -> list[str]:
    """Each use of a private ansible-core name or of pickle in `source`, as "file:line: what"."""
    tree = ast.parse(source, filename)
    found: list[str] = []
    # Names bound to ansible-core modules or objects in this file (import ansible.x as y, from ansible.x import y).
    core_names: set[str] = set()

    def flag(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private_module(alias.name):
                    flag(node, f"import {alias.name}")
                if alias.name.split(".")[0] == "pickle":
                    flag(node, f"import {alias.name} (pickle loading)")
                if _is_ansible_core(alias.name):
                    core_names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _private_module(node.module):
                flag(node, f"from {node.module} import ...")
            if node.module.split(".")[0] == "pickle":
                flag(node, f"from {node.module} import ... (pickle loading)")
            if _is_ansible_core(node.module):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        flag(node, f"from {node.module} import {alias.name}")
                    core_names.add(alias.asname or alias.name)
        elif isinstance(node, ast.Call):
            callee = node.func
            callee_name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            if callee_name in ("import_module", "__import__") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str) and _private_module(first.value):
                    flag(node, f"{callee_name}({first.value!r})")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in core_names
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            flag(node, f"{node.value.id}.{node.attr}")
    return found


def tracked_python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.py"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def test_the_tracked_tree_uses_no_private_ansible_core_name_and_loads_no_pickle():
    files = tracked_python_files()
    assert len(files) > 100, "git ls-files found too few Python files: is this a checkout?"
    found = [
        use for path in files for use in private_uses(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == [], "private ansible-core names or pickle loading:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "from ansible._internal._json._profiles import _cache_persistence\n",
            "from ansible._internal._json._profiles",
        ),
        ("import ansible._internal._plugins._cache\n", "import ansible._internal._plugins._cache"),
        (
            "from ansible.utils.collection_loader._collection_finder import _get_collection_path\n",
            "from ansible.utils.collection_loader._collection_finder import",
        ),
        ("from ansible.module_utils.basic import _ANSIBLE_ARGS\n", "import _ANSIBLE_ARGS"),
        (
            "from ansible.executor import module_common\nmodule_common._CachedModule.load('x')\n",
            "module_common._Cached",
        ),
        ("from ansible.plugins.loader import module_utils_loader as m\nm._get_paths()\n", "m._get_paths"),
        ("import ansible.constants as C\nC._private\n", "C._private"),
        ("import importlib\nimportlib.import_module('ansible._internal._templating')\n", "import_module("),
        ("import pickle\npickle.load(open('x', 'rb'))\n", "pickle loading"),
        ("from pickle import loads\n", "pickle loading"),
    ],
)
def test_each_kind_of_private_use_is_found(source, expected):
    found = private_uses(source)
    assert len(found) >= 1 and any(expected in use for use in found), found


@pytest.mark.parametrize(
    "source",
    [
        "from ansible.plugins.loader import init_plugin_loader\ninit_plugin_loader(['collection'])\n",
        "from ansible.template import trust_as_template\n",
        # A collection's own private helper and plugin base-class members are not ansible-core imports.
        "from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import run_bounded as _run\n",
        "from ansible.plugins.action import ActionBase\nclass A(ActionBase):\n    def run(self):\n"
        "        return self._execute_module()\n",
        "x = {}\nx._private = 1\n",
    ],
)
def test_public_uses_are_not_flagged(source):
    assert private_uses(source) == []
