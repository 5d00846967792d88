# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
name: plugin_preload
type: aggregate
author:
  - gpuforge maintainers (@gpuforge)
version_added: "0.1.0"
short_description: Load the filter, test, lookup and action plugins in the controller before the workers fork
description:
  - ansible-core runs every task of every host in a worker process forked from the controller. A worker that
    evaluates a filter, a test or a lookup loads the plugin's file unless the controller process loaded it before
    the fork, and it compiles the file from source each time. Using one filter of a collection loads every filter
    file of that collection; the gpuforge.cluster collection's filter files import the module_utils they share
    with the modules.
  - When a playbook starts, this plugin loads, in the controller process, ansible-core's own filter and test
    plugins, ansible.builtin's lookups and its C(normal) action (the action of a task whose module has none of
    its own), and every filter, lookup and action plugin of the gpuforge.cluster collection, through
    ansible-core's plugin loaders, as a task would. Every worker forked after it inherits them.
  - Nothing else changes; no option. A plugin file that fails to load is left for the task that uses it, which
    reports the error as it would without this plugin.
requirements:
  - enabled in C(callbacks_enabled) (ansible.cfg enables it)
"""

import contextlib
import importlib
import pkgutil

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, filter_loader, lookup_loader, test_loader

COLLECTION = "gpuforge.cluster"


def _plugin_files(package_name: str) -> list[str]:
    """The plugin file names (without .py) of a plugin package: ansible-core's, or a collection's found on the
    collection loader's path; none when the package is missing."""
    try:
        package = importlib.import_module(package_name)
    except ImportError:
        return []
    return sorted(name for _finder, name, is_package in pkgutil.iter_modules(package.__path__) if not is_package)


def _collection_plugin_names(plugin_type: str) -> list[str]:
    """The file names of the collection's plugins of one type."""
    return _plugin_files(f"ansible_collections.{COLLECTION}.plugins.{plugin_type}")


def preload() -> list[str]:
    """Load the plugins through the loaders a task uses; returns what was asked for (for the tests)."""
    requested = []
    # ansible-core's filters and tests, and the filter and test files of the legacy plugin paths: the first request
    # to each Jinja loader loads all of them.
    for loader, name in ((filter_loader, "ansible.builtin.bool"), (test_loader, "ansible.builtin.match")):
        requested.append(_load(loader, name))
    # ansible.builtin's lookups (first_found, file, env, ...): one file each.
    requested += [_load(lookup_loader, f"ansible.builtin.{name}") for name in _plugin_files("ansible.plugins.lookup")]
    # A filter name of the collection makes the loader load every filter file of the collection (a file may hold
    # several filters), whichever file the name is looked up in.
    filter_files = _collection_plugin_names("filter")
    if filter_files:
        requested.append(_load(filter_loader, f"{COLLECTION}.{filter_files[0]}"))
    requested += [_load(lookup_loader, f"{COLLECTION}.{name}") for name in _collection_plugin_names("lookup")]
    # The action plugin of every task that runs a module without one of its own, and the collection's own.
    requested.append(_load(action_loader, "ansible.builtin.normal", class_only=True))
    requested += [
        _load(action_loader, f"{COLLECTION}.{name}", class_only=True) for name in _collection_plugin_names("action")
    ]
    return requested


def _load(loader, name: str, **options) -> str:
    # Not an error here: a plugin that cannot load fails the task that uses it, with the loader's own message, as it
    # would without this plugin; a plugin no task uses must not fail every playbook.
    with contextlib.suppress(Exception):
        loader.get(name, **options)
    return name


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuforge.cluster.plugin_preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        preload()
