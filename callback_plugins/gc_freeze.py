# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
name: gc_freeze
type: aggregate
author:
  - gpuforge maintainers (@gpuforge)
version_added: "0.1.0"
short_description: Freeze the controller's Python objects before each task forks its workers
description:
  - ansible-core runs every task of every host in a worker forked from the controller process. A forked worker
    shares the controller's memory pages until it writes to them, and Python's cyclic garbage collector writes to
    every object it examines. A worker that collects while it templates a task's arguments therefore copies the
    pages of the controller's objects (the parsed playbooks, the inventory, every host's facts) that it never uses,
    and each full collection in the controller examines all of them again.
  - This plugin calls Python's C(gc.freeze) when a play, a task or a handler starts, in the controller process,
    just before the strategy forks the workers for it. Frozen objects are left out of every later collection, in
    the controller and in its workers (the Python documentation of the gc module recommends C(gc.freeze) right
    before C(fork) for this reason).
  - Nothing else changes; no option.
  - What is frozen is never collected. Objects that are already garbage when a task starts stay in memory.
requirements:
  - enabled in C(callbacks_enabled) (ansible.cfg enables it)
"""

import gc

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuforge.cluster.gc_freeze"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_play_start(self, play):
        gc.freeze()

    def v2_playbook_on_task_start(self, task, is_conditional):
        gc.freeze()

    def v2_playbook_on_handler_task_start(self, task):
        gc.freeze()
