"""gc_freeze: the controller's objects frozen before each task forks its workers.

Checked in the controller (each hook moves the objects made since into Python's permanent generation) and in a
whole ansible-playbook run with the checkout's ansible.cfg: a worker forked for a task finds the controller's
objects frozen, as ansible.cfg enables the plugin, and finds none frozen when the plugin is not enabled."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from ansible.plugins.loader import callback_loader
from local_playbook import worker_lookup

NAME = "gpuforge.cluster.gc_freeze"

# A lookup that runs where the task runs on the controller: in the worker forked for it.
FREEZE_COUNT_LOOKUP = """
import gc
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        return [gc.get_freeze_count()]
"""


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.parametrize(
    ("hook", "arguments"),
    [
        ("v2_playbook_on_play_start", (None,)),
        ("v2_playbook_on_task_start", (None, False)),
        ("v2_playbook_on_handler_task_start", (None,)),
    ],
)
def test_each_hook_freezes_what_the_controller_made_since(unfrozen, hook, arguments):
    plugin = callback_loader.get(NAME)
    assert plugin is not None, f"{NAME} is not found through the collection"
    getattr(plugin, hook)(*arguments)
    before = gc.get_freeze_count()
    made_since = [[index] for index in range(1000)]
    getattr(plugin, hook)(*arguments)
    assert gc.get_freeze_count() >= before + len(made_since)


def _worker_freeze_count(tmp_path: Path, **environment: str) -> int:
    return worker_lookup(tmp_path, "freeze_count", FREEZE_COUNT_LOOKUP, "lookup('freeze_count')", **environment)


def test_ansible_cfg_freezes_the_controller_objects_a_worker_inherits(tmp_path):
    # Tens of thousands: the parsed playbook, the inventory, the plugins loaded so far.
    assert _worker_freeze_count(tmp_path) > 10000


def test_without_the_plugin_a_worker_inherits_nothing_frozen(tmp_path):
    assert _worker_freeze_count(tmp_path, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.timer") == 0
