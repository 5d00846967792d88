"""Shared pytest fixtures: paths to the CI inputs beside the checkout (public real-tool outputs) and to the fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _install_collection_loader() -> None:
    """Import gpuforge.cluster through Ansible's own collection loader, as ansible-playbook does.

    Tests import the modules, module_utils and filters by their collection path. Some tests also drive Ansible's
    plugin loader in-process, which needs that loader; a package first imported without it lacks the collection
    metadata the loader then asks for. Installing it before any test imports keeps one view. init_plugin_loader is
    ansible-core's public entry point for it (the one its CLIs call), with collection/ ahead of ansible.cfg's
    collections_path. Without ansible-core (the module_utils tests under the older CPython,
    tests/unit/test_target_python.py) plain namespace packages from collection/ serve the same imports.
    """
    try:
        from ansible.plugins.loader import init_plugin_loader
        from ansible.utils.collection_loader import AnsibleCollectionConfig
    except ImportError:
        return
    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader([str(PROJECT_ROOT / "collection")])


_install_collection_loader()
SHARED = PROJECT_ROOT.parent / "shared"
REAL_OUTPUTS = SHARED / "real-outputs"
FIXTURES = PROJECT_ROOT / "tests" / "fixtures"


@pytest.fixture
def real_output():
    """Return a loader for REAL_OUTPUTS/<name> (a CI input beside the checkout); skips the test when it is absent."""

    def load(name: str) -> str:
        path = REAL_OUTPUTS / name
        if not path.is_file():
            pytest.skip(f"real output {name} not available ({REAL_OUTPUTS} absent)")
        return path.read_text(encoding="utf-8")

    return load


@pytest.fixture
def fixture_text():
    """Return a loader for tests/fixtures/<relative path> (fixtures owned by the project)."""

    def load(relative: str) -> str:
        return (FIXTURES / relative).read_text(encoding="utf-8")

    return load
