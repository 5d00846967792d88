"""Record every task result of a playbook run as one JSON line (the toolkit benchmark's evidence).

Enabled by benchmarks/toolkit/bench_toolkit.py only (ANSIBLE_CALLBACK_PLUGINS + ANSIBLE_CALLBACKS_ENABLED);
writes to the file named by GPUFORGE_TOOLKIT_TASKS. A line: host, task, action, status (ok, changed,
skipped, failed, unreachable), remote (whether the task ran a module on the node), items (module runs of a
loop), seconds, and started (seconds since the epoch: the gaps between tasks are the strategy's own time).
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: gpuforge_toolkit_tasks
type: aggregate
short_description: one JSON line per task result, for the gpuforge toolkit benchmark
description:
  - Writes host, task, action, status, whether the task ran on the node, and its duration to the file
    named by the GPUFORGE_TOOLKIT_TASKS environment variable.
requirements:
  - enabled in callbacks_enabled (the benchmark sets ANSIBLE_CALLBACKS_ENABLED)
"""

# Actions that run on the controller only: no module is sent to the node.
CONTROLLER_ACTIONS = frozenset(
    f"{prefix}{name}"
    for prefix in ("", "ansible.builtin.", "ansible.legacy.")
    for name in (
        "set_fact",
        "assert",
        "debug",
        "fail",
        "meta",
        "include_tasks",
        "import_tasks",
        "include_role",
        "import_role",
        "include_vars",
        "add_host",
        "group_by",
        "pause",
        "set_stats",
        "validate_argument_spec",
        "end_play",
    )
)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuforge_toolkit_tasks"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = os.environ.get("GPUFORGE_TOOLKIT_TASKS", "")
        # Per host: a host runs one task at a time (linear and free strategies alike), so its last start is the
        # start of the task whose result arrives next.
        self._started: dict[str, tuple[float, float]] = {}

    def v2_runner_on_start(self, host, task):
        self._started[host.get_name()] = (time.monotonic(), time.time())

    def _record(self, result, status: str) -> None:
        if not self._path:
            return
        # CallbackTaskResult's public task, host and result (ansible-core 2.19 and later).
        task = result.task
        host = result.host.get_name()
        started = self._started.pop(host, None)
        delegated = (result.result.get("_ansible_delegated_vars") or {}).get("ansible_host", "")
        local = task.action in CONTROLLER_ACTIONS or delegated in ("localhost", "127.0.0.1")
        items = result.result.get("results")
        line = {
            "host": host,
            "task": task.get_name(),
            "action": task.action,
            "status": status,
            "remote": not local and status != "skipped",
            "items": len(items) if isinstance(items, list) else 1,
            "seconds": round(time.monotonic() - started[0], 3) if started is not None else None,
            "started": round(started[1], 3) if started is not None else None,
        }
        with open(self._path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")

    def v2_runner_on_ok(self, result):
        self._record(result, "changed" if result.result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")
