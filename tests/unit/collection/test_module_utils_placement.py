"""What lives in module_utils/ and what in src/gpuforge/ (docs/architecture.md, "module_utils by concern").

module_utils/ ships in the gpuforge.cluster collection: it holds what a module imports (it runs on the managed node),
what the node-side gpuforge-health command imports (module_utils/gpuforge_health.py), and what a collection plugin
imports (filter, lookup, action and callback plugins run on the controller but ship in the collection too). Code only
the CLI uses lives in src/gpuforge/, and nothing the collection ships imports the CLI's package.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MODULE_UTILS = ROOT / "module_utils"
PACKAGE = "ansible_collections.gpuforge.cluster.plugins.module_utils"
# What the collection runs: its modules, its plugins, and the node-side health command.
ENTRY_DIRS = ("library", "filter_plugins", "lookup_plugins", "action_plugins", "callback_plugins")
NODE_COMMAND = "gpuforge_health"
SHIPPED_DIRS = (*ENTRY_DIRS, "module_utils", "doc_fragments")


def _imports(path: Path) -> set[str]:
    """Module names imported by a file (absolute names; `from X import y` gives X and X.y)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _module_utils_imported_by(path: Path) -> set[str]:
    prefix = f"{PACKAGE}."
    return {name[len(prefix) :].split(".")[0] for name in _imports(path) if name.startswith(prefix)}


def _reached_from_the_collection() -> set[str]:
    pending = {NODE_COMMAND}
    for directory in ENTRY_DIRS:
        for path in (ROOT / directory).glob("*.py"):
            pending |= _module_utils_imported_by(path)
    reached = set()
    while pending:
        name = pending.pop()
        if name in reached or not (MODULE_UTILS / f"{name}.py").is_file():
            continue
        reached.add(name)
        pending |= _module_utils_imported_by(MODULE_UTILS / f"{name}.py")
    return reached


def test_every_module_utils_file_is_used_by_the_collection():
    present = {path.stem for path in MODULE_UTILS.glob("*.py")}
    cli_only = sorted(present - _reached_from_the_collection())
    assert not cli_only, f"used by no module, plugin or gpuforge-health: move to src/gpuforge/: {cli_only}"


def test_the_reach_follows_imports_between_module_utils():
    # gpuforge_health imports gpuforge_records, which imports gpuforge_checks: all three count as the collection's.
    assert {"gpuforge_health", "gpuforge_records", "gpuforge_checks"} <= _reached_from_the_collection()


def test_nothing_the_collection_ships_imports_the_cli():
    offenders = sorted(
        str(path.relative_to(ROOT))
        for directory in SHIPPED_DIRS
        for path in (ROOT / directory).glob("*.py")
        if any(name == "gpuforge" or name.startswith("gpuforge.") for name in _imports(path))
    )
    assert not offenders, f"the collection cannot import the CLI package (src/gpuforge): {offenders}"
