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


def plugin_failure(warning) -> PluginFailure | None:
    """A PluginFailure from one of Ansible's captured "Failed to parse inventory with 'x' plugin" warnings."""
    event = getattr(warning, "event", None)
    match = _PLUGIN_FAILURE.match(str(getattr(event, "msg", "") or ""))
    if not match:
        return None
    messages: list[str] = []
    context = ""
    link = getattr(event, "chain", None)
    while link is not None:
        cause = getattr(link, "event", None)
        message = str(getattr(cause, "msg", "") or "").strip()
        # The first specific message is Ansible's; deeper ones repeat it in the YAML library's words.
        if message and message not in _GENERIC and not messages:
            messages.append(message)
        source_context = str(getattr(cause, "formatted_source_context", "") or "")
        # "<inventory plugin 'yaml' with source ...>" carries no position; a file:line:col one does.
        if source_context and not context and "<inventory plugin" not in source_context:
            context = source_context
        link = getattr(cause, "chain", None)
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
    """Ansible's warnings during the parse, kept (not printed) so the error can quote the plugins' messages.

    DeferredWarningContext is ansible-core's own (2.19, pinned); without it the warnings print as usual."""
    try:
        from ansible._internal._display_utils import DeferredWarningContext
    except ImportError:
        yield list
        return
    with DeferredWarningContext(variables={}) as context:
        yield context.get_warnings
