"""plugin_preload: the filter, test, lookup and action plugins loaded in the controller before the workers fork.

Checked in the controller (what preload() leaves loaded, through ansible-core's own loaders) and in a whole
ansible-playbook run with the checkout's ansible.cfg: a worker forked for a task finds the gpuforge.cluster
collection's filter files and ansible-core's test plugins already loaded when ansible.cfg enables the plugin, and
loads them itself when the plugin is not enabled."""

from __future__ import annotations

import sys
from pathlib import Path

from ansible.plugins.loader import callback_loader
from local_playbook import worker_lookup

NAME = "gpuforge.cluster.plugin_preload"
ROOT = Path(__file__).resolve().parents[3]
FILTER_FILES = sorted(path.stem for path in (ROOT / "filter_plugins").glob("*.py") if path.stem != "__init__")
LOOKUP_FILES = sorted(path.stem for path in (ROOT / "lookup_plugins").glob("*.py") if path.stem != "__init__")

# Which plugin modules the task's worker inherited from the controller.
INHERITED_LOOKUP = """
import sys
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        return [sorted(name for name in sys.modules if name.startswith(tuple(terms)))]
"""

# The plugin modules of these prefixes in the task's worker, read before its own templates use any filter.
INHERITED = "lookup('inherited', 'ansible_collections.gpuforge.cluster.plugins.', 'ansible.plugins.test.')"


def test_preload_leaves_the_collection_s_plugin_files_loaded():
    plugin = callback_loader.get(NAME)
    assert plugin is not None, f"{NAME} is not found through the collection"
    requested = sys.modules[type(plugin).__module__].preload()
    assert "ansible.builtin.match" in requested
    assert "ansible.builtin.first_found" in requested
    for stem in FILTER_FILES:
        assert f"ansible_collections.gpuforge.cluster.plugins.filter.{stem}" in sys.modules, stem
    for stem in LOOKUP_FILES:
        assert f"gpuforge.cluster.{stem}" in requested
        assert f"ansible_collections.gpuforge.cluster.plugins.lookup.{stem}" in sys.modules, stem
    assert "gpuforge.cluster.apt_pinned" in requested


def test_a_plugin_that_cannot_load_is_left_to_its_task():
    module = sys.modules[type(callback_loader.get(NAME)).__module__]

    class Broken:
        def get(self, name, **options):
            raise RuntimeError(f"cannot load {name}")

    assert module._load(Broken(), "gpuforge.cluster.nothing") == "gpuforge.cluster.nothing"


def _inherited(tmp_path: Path, **environment: str) -> list[str]:
    return worker_lookup(tmp_path, "inherited", INHERITED_LOOKUP, INHERITED, **environment)


def test_ansible_cfg_gives_every_worker_the_plugins_loaded(tmp_path):
    inherited = _inherited(tmp_path)
    for stem in FILTER_FILES:
        assert f"ansible_collections.gpuforge.cluster.plugins.filter.{stem}" in inherited, stem
    # ansible-core names a builtin plugin's module after its file and a hash of its path.
    assert any(name.startswith("ansible.plugins.test.core") for name in inherited)


def test_without_the_plugin_a_worker_inherits_none_of_them(tmp_path):
    inherited = _inherited(tmp_path, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.timer,gpuforge.cluster.gc_freeze")
    assert not [name for name in inherited if name.startswith("ansible_collections.gpuforge.cluster.plugins.filter.")]
    assert not any(name.startswith("ansible.plugins.test.core") for name in inherited)
