"""Check an inventory with Ansible's own parser before a playbook runs, so that bad input never passes silently.

ansible-playbook only warns about an inventory it cannot parse and then runs against no host at all, which
ends "successful". check_inventory() loads the inventory with Ansible's InventoryManager (the same plugins and
vars files ansible-runner will use) with every unparsed source an error, and returns the hosts it names after
--limit; a missing file, a file no plugin parses (with the plugin's own message and position) or a --limit
that leaves no host raises InventoryError.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuforge import paths

YAML_SUFFIXES = (".yml", ".yaml", ".json")
_PLUGIN_FAILURE = re.compile(r"Failed to parse inventory with '([^']+)' plugin")
_UNPARSED_SOURCE = re.compile(r"failed to parse inventory source (.+)$", re.IGNORECASE)
# Ansible's generic wrapper line: the real cause is the next message in the chain.
_GENERIC = {"Failed to parse inventory."}


class InventoryError(Exception):
    """The inventory cannot be used; the message names the file and what to fix."""


@dataclass(frozen=True)
class PluginFailure:
    plugin: str
    messages: tuple[str, ...]
    context: str = ""  # Ansible's "Origin: file:line:col" + excerpt, when it has one

    def lines(self) -> list[str]:
        head = f"{self.plugin} plugin: " if self.plugin else ""
        lines = [head + " ".join(self.messages)]
        lines += [f"  {line}".rstrip() for line in self.context.splitlines() if line.strip()]
        return lines


def check_inventory(source: Path, limit: str | None = None, ansible_config: Path | None = None) -> list[str]:
    """The names of the hosts `source` holds after `limit`; InventoryError when there is none to run on."""
    source = Path(source)
    if not source.exists():
        raise InventoryError(
            f"inventory {source} does not exist: check -i (the lab's inventory is written by 'gpuforge lab up')"
        )
    # The runner gives ansible-playbook this ansible.cfg; parse with the same settings (if ansible is not loaded yet).
    os.environ.setdefault("ANSIBLE_CONFIG", str(ansible_config or paths.PROJECT_ROOT / "ansible.cfg"))
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    _init_collection_loader()
    with _strict_inventory(), _captured_warnings() as warnings:
        try:
            manager = InventoryManager(loader=DataLoader(), sources=[str(source)])
        except AnsibleError as exc:
            raise InventoryError(parse_error_message(source, str(exc), warnings())) from None
        try:
            if limit:
                manager.subset(limit)
            hosts = [host.name for host in manager.get_hosts("all")]
        except AnsibleError as exc:
            raise InventoryError(f"--limit {limit!r} on inventory {source}: {_first_line(str(exc))}") from None
    if not hosts:
        where = f"inventory {source}" + (f" with --limit {limit!r}" if limit else "")
        raise InventoryError(f"no host matched: {where} names no host; check -i and --limit")
    return hosts


def parse_error_message(source: Path, error: str, warnings: list) -> str:
    """One message from Ansible's error and the per-plugin failures it warned about just before."""
    match = _UNPARSED_SOURCE.search(error.strip())
    failing = Path(match.group(1).strip()) if match else Path(source)
    failures = select_failures(failing, [failure for w in warnings if (failure := plugin_failure(w))])
    if not match:  # not a parse failure of the file itself: a vars file, an inventory script...
        lines = [f"inventory {source} cannot be loaded: {error.strip()}"]
    elif failing != Path(source):
        lines = [f"inventory {source}: {failing} does not parse as an inventory:"]
    else:
        lines = [f"inventory {source} does not parse as an inventory:"]
    for failure in failures:
        lines += [f"  {line}" for line in failure.lines()]
    if match and not failures:
        lines.append("  (Ansible's warnings above say why)")
    return "\n".join(lines)


def select_failures(path: Path, failures: list[PluginFailure]) -> list[PluginFailure]:
    """The failures that explain `path`: for a YAML file the yaml plugin's (with the position the auto plugin's
    copy of the same error carries); otherwise every plugin's."""
    if path.suffix.lower() not in YAML_SUFFIXES:
        return failures
    by_plugin = {failure.plugin: failure for failure in failures}
    yaml_failure, auto_failure = by_plugin.get("yaml"), by_plugin.get("auto")
    if yaml_failure is None:
        return [auto_failure] if auto_failure else failures
    if auto_failure and auto_failure.messages == yaml_failure.messages and not yaml_failure.context:
        return [PluginFailure("yaml", yaml_failure.messages, auto_failure.context)]
    return [yaml_failure]


def plugin_failure(warning: tuple[str, BaseException]) -> PluginFailure | None:
    """A PluginFailure from one "Failed to parse inventory with 'x' plugin" report: (message, exception)."""
    msg, exception = warning
    match = _PLUGIN_FAILURE.match(str(msg or ""))
    if not match:
        return None
    messages: list[str] = []
    context = ""
    error: BaseException | None = exception
    while error is not None:
        # AnsibleError.message: the first specific one is Ansible's; deeper causes repeat it in the YAML library's
        # words.
        message = str(getattr(error, "message", "") or "").strip()
        if message and message not in _GENERIC and not messages:
            messages.append(message)
        # AnsibleError.obj: where the error is (path, line, column); the plugin's own description carries no line.
        origin = getattr(error, "obj", None)
        path, line, column = (getattr(origin, name, None) for name in ("path", "line_num", "col_num"))
        if path and line and not context:
            context = f"Origin: {path}:{line}" + (f":{column}" if column else "")
        error = error.__cause__
    return PluginFailure(match.group(1), tuple(messages) or ("(no message)",), context)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _init_collection_loader() -> None:
    """Let FQCN inventory plugins (plugin: community.general.x) load, as under ansible-playbook."""
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        from ansible.plugins.loader import init_plugin_loader

        init_plugin_loader()


@contextlib.contextmanager
def _strict_inventory() -> Iterator[None]:
    """INVENTORY_ANY_UNPARSED_IS_FAILED for this parse: an unparsable source raises instead of warning."""
    from ansible import constants

    saved = constants.INVENTORY_ANY_UNPARSED_IS_FAILED
    constants.INVENTORY_ANY_UNPARSED_IS_FAILED = True
    try:
        yield
    finally:
        constants.INVENTORY_ANY_UNPARSED_IS_FAILED = saved


@contextlib.contextmanager
def _captured_warnings() -> Iterator:
    """Each inventory plugin's failure during the parse, kept (not printed) so the error can quote its message.

    InventoryManager reports a plugin that fails on a source through Display.error_as_warning(msg, exception)
    (ansible-core's public display API); for the parse, the one Display records (msg, exception) instead."""
    from ansible.utils.display import Display

    display = Display()
    captured: list[tuple[str, BaseException]] = []

    def record(msg, exception, **_options) -> None:
        captured.append((msg, exception))

    display.error_as_warning = record
    try:
        yield lambda: list(captured)
    finally:
        del display.error_as_warning
