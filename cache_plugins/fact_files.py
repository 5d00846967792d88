# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
name: fact_files
author:
  - gpuforge maintainers (@gpuforge)
version_added: "0.1.0"
short_description: One JSON file per host, as ansible.builtin.jsonfile writes them, decoded once per run
description:
  - Keeps each host's facts in a file of the cache folder, with the file name and format that
    C(ansible.builtin.jsonfile) uses with ansible-core 2.19 (a schema-qualified name such as C(s1_gpu01); the facts
    encoded as a JSON string under the key C(__payload__)), so that a run with either plugin, and the gpuforge CLI,
    read what the other wrote.
  - ansible-core wraps every persistent cache plugin in a proxy that decodes the host's JSON again on each read, and
    the controller reads a host's facts for every task and host; on the 4-GPU-node lab a re-run of site.yml took
    4-7% less controller CPU with this plugin than with jsonfile (docs/performance.md). This plugin decodes a
    host's file once per run and then answers from memory, as C(ansible.builtin.memory) does, writing every update
    through to the file.
  - Like C(ansible.builtin.memory), it hands out the cached objects themselves; the controller's variable handling
    copies them before a task can change them.
options:
  _uri:
    required: true
    description: Folder in which the plugin keeps one file per host.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_CONNECTION
    ini:
      - key: fact_caching_connection
        section: defaults
    type: path
  _prefix:
    description: Prefix of the file names, before the schema-qualified host name.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_PREFIX
    ini:
      - key: fact_caching_prefix
        section: defaults
  _timeout:
    default: 86400
    description: Seconds after which a host's file is stale and its facts are gathered again (0 never).
    env:
      - name: ANSIBLE_CACHE_PLUGIN_TIMEOUT
    ini:
      - key: fact_caching_timeout
        section: defaults
    type: integer
"""

import json
import os
import pathlib

from ansible._internal._json._profiles import _cache_persistence
from ansible._internal._plugins._cache import PluginInterposer
from ansible.plugins.cache import BaseFileCacheModule

# The key under which ansible-core's proxy stores the encoded facts (PluginInterposer._PAYLOAD_KEY).
PAYLOAD_KEY = PluginInterposer._PAYLOAD_KEY


class CacheModule(BaseFileCacheModule):
    """Host facts in jsonfile's files, decoded once per run and answered from memory after that."""

    # False keeps the plugin loader from wrapping this plugin in its decode-on-every-read proxy; the file names
    # and the encoding that proxy applies are applied here instead, so the files stay jsonfile's.
    _persistent = False

    def _get_cache_file_name(self, key):
        # The proxy's schema-qualified key (s1_<host>) is the file name; in memory the host's name is the key.
        return super()._get_cache_file_name(PluginInterposer._get_key(key))

    def keys(self):
        prefix = self.get_option("_prefix") or ""
        keys = []
        for name in sorted(os.listdir(self._cache_dir)):
            if name.startswith(".") or not name.startswith(prefix):
                continue
            key = PluginInterposer._restore_key(name[len(prefix) :])
            if key is not None and not self.has_expired(key):
                keys.append(key)
        return keys

    def _load(self, filepath):
        stored = json.loads(pathlib.Path(filepath).read_text(encoding="utf-8"))
        if not isinstance(stored, dict) or not isinstance(stored.get(PAYLOAD_KEY), str):
            # A ValueError makes the base class erase the file and say so; the facts are gathered again.
            raise ValueError(f"no {PAYLOAD_KEY} string: not written by jsonfile or fact_files of ansible-core 2.19")
        return json.loads(stored[PAYLOAD_KEY], cls=_cache_persistence.Decoder)

    def _dump(self, value, filepath):
        payload = json.dumps(value, cls=_cache_persistence.Encoder)
        pathlib.Path(filepath).write_text(json.dumps({PAYLOAD_KEY: payload}), encoding="utf-8")
