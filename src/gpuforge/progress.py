"""What a running playbook is doing, from ansible-runner's events, and the views that show it.

The runner thread only puts events on a queue; `ProgressModel.handle()` (called by the consumer loop)
keeps per-host counts in the same sense as Ansible's PLAY RECAP (ok includes changed) and returns the
plain-text line for the event, which `PlainView` prints and `RichView` shows as the latest activity.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

COUNT_KEYS = ("ok", "changed", "failed", "unreachable", "skipped")
# playbook_on_stats names -> our names; stats are authoritative and replace the tallies.
_STATS_KEYS = {"ok": "ok", "changed": "changed", "failures": "failed", "dark": "unreachable", "skipped": "skipped"}


def _counts() -> dict[str, int]:
    return dict.fromkeys(COUNT_KEYS, 0)


def _message(result: dict) -> str:
    message = result.get("msg") or result.get("stderr") or result.get("reason") or ""
    if not isinstance(message, str):
        message = str(message)
    return " ".join(message.split())[:300]


@dataclass
class ProgressModel:
    play: str = ""
    task: str = ""
    hosts: dict[str, dict[str, int]] = field(default_factory=dict)
    failed_tasks: list[dict] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    finished: bool = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _host(self, name: str) -> dict[str, int]:
        return self.hosts.setdefault(name, _counts())

    def handle(self, event: dict) -> str | None:
        """Update from one runner event; return its plain-output line (None for events not shown)."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        host = data.get("host") or data.get("remote_addr") or ""
        result = data.get("res") or {}
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
            return f"PLAY [{self.play}]"
        if kind == "playbook_on_task_start":
            self.task = data.get("task", "")
            return f"TASK [{self.task}]"
        if kind == "runner_on_ok":
            counts = self._host(host)
            counts["ok"] += 1
            if result.get("changed"):
                counts["changed"] += 1
                return f"changed: [{host}]"
            return f"ok: [{host}]"
        if kind == "runner_on_skipped":
            self._host(host)["skipped"] += 1
            return f"skipping: [{host}]"
        if kind == "runner_on_failed":
            if data.get("ignore_errors"):
                # Counted by Ansible as 'ignored', not as a failure of the host.
                return f"failed (ignored): [{host}] {_message(result)}".rstrip()
            self._host(host)["failed"] += 1
            self._record_failure(host, data, result, "failed")
            return f"failed: [{host}] {data.get('task', self.task)}: {_message(result)}".rstrip()
        if kind == "runner_on_unreachable":
            self._host(host)["unreachable"] += 1
            self._record_failure(host, data, result, "unreachable")
            return f"unreachable: [{host}] {_message(result)}".rstrip()
        if kind == "playbook_on_stats":
            self._apply_stats(data)
            self.finished = True
            return "\n".join(self.recap_lines())
        return None

    def _record_failure(self, host: str, data: dict, result: dict, how: str) -> None:
        self.failed_tasks.append(
            {
                "host": host,
                "play": data.get("play", self.play),
                "task": data.get("task", self.task),
                "status": how,
                "msg": _message(result),
            }
        )

    def _apply_stats(self, data: dict) -> None:
        for stats_key, our_key in _STATS_KEYS.items():
            for host, value in (data.get(stats_key) or {}).items():
                self._host(host)[our_key] = int(value)

    def recap_lines(self) -> list[str]:
        lines = ["PLAY RECAP"]
        for host in sorted(self.hosts):
            counts = self.hosts[host]
            lines.append(f"{host:<20} " + " ".join(f"{key}={counts[key]}" for key in COUNT_KEYS))
        return lines


class NullView:
    """--json: nothing but the final document goes to stdout."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, model: ProgressModel, line: str | None) -> None:
        return None


class PlainView(NullView):
    """One line per event, for logs and pipes."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout

    def update(self, model: ProgressModel, line: str | None) -> None:
        if line:
            print(line, file=self.stream, flush=True)


class RichView(NullView):
    """A live table (play, task, per-host counts, elapsed) on a terminal."""

    _STYLES = {"ok": "green", "changed": "yellow", "failed": "red", "unreachable": "magenta", "skipped": "cyan"}

    def __init__(self, title: str):
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.console = Console()
        self.last_line = ""
        self.model: ProgressModel | None = None
        self.live = Live(console=self.console, refresh_per_second=4, get_renderable=self._render)

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)

    def update(self, model: ProgressModel, line: str | None) -> None:
        self.model = model
        if line and not line.startswith("PLAY RECAP"):
            self.last_line = line

    def _render(self):
        from rich.table import Table

        model = self.model or ProgressModel()
        table = Table(title=f"{self.title}  [{model.elapsed():.0f}s]", title_justify="left", expand=False)
        table.caption = f"PLAY {model.play}\nTASK {model.task}\n{self.last_line}"
        table.caption_justify = "left"
        table.add_column("host")
        for key in COUNT_KEYS:
            table.add_column(key, justify="right", style=self._STYLES[key])
        for host in sorted(model.hosts):
            table.add_row(host, *(str(model.hosts[host][key]) for key in COUNT_KEYS))
        return table


def make_view(title: str, json_output: bool, stream=None):
    stream = stream or sys.stdout
    if json_output:
        return NullView()
    if stream.isatty():
        return RichView(title)
    return PlainView(stream)
