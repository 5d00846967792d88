"""Parsers for the SELinux tools gpu_selinux runs: `semodule -l`, `restorecon -v` and `nvidia-container-cli list`.

Pure functions over text, stdlib only (and gpuforge_errors, shipped with it). Malformed input raises ParseError.

Sources of the formats (policycoreutils, libselinux and libsemanage are SELinuxProject/selinux):

- `semodule -l` (policycoreutils/semodule/semodule.c, LIST_M): an empty store prints ``No modules.``;
  policycoreutils 2.4 and later print one module name per line (Debian 12's 3.4 does:
  tests/fixtures/semodule/SOURCES.md); older releases printed ``name<TAB>version``.
- Module names (libsemanage/src/modules.c, semanage_module_validate_name): ``^[a-zA-Z](\\.?[a-zA-Z0-9_-])*$``.
- `restorecon -v` (libselinux/src/selinux_restorecon.c, restorecon_sb): one line per file whose label differs,
  ``Relabeled <path> from <old context> to <new context>``, or ``Would relabel ...`` with ``-n``; a file
  without a label shows ``<no context>`` as its old context. policycoreutils/setfiles/setfiles.c prints these
  on stdout, errors on stderr, and exits 0 at once, printing nothing, where SELinux is disabled.
- `nvidia-container-cli list` (libnvidia-container): one absolute path per line (device nodes, binaries,
  libraries, firmware, IPC sockets).
"""

from __future__ import annotations

import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = [
    "ParseError",
    "parse_container_cli_list",
    "parse_restorecon_verbose",
    "parse_semodule_list",
    "valid_module_name",
]


_MODULE_NAME_RE = re.compile(r"^[a-zA-Z](?:\.?[a-zA-Z0-9_-])*$")
# Versions as policy_module(name, version) and the old `semodule -l` print them (1.0, 1.14.1, 2.201.0-1).
_VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z._+~-]*$")
_NO_MODULES = "No modules."


def valid_module_name(name) -> bool:
    """Whether libsemanage accepts name as a policy module name."""
    return isinstance(name, str) and bool(_MODULE_NAME_RE.match(name))


def _excerpt(line: str) -> str:
    return repr(line[:80] + ("..." if len(line) > 80 else ""))


def parse_semodule_list(text: str) -> dict:
    """Parse `semodule -l`: {names: [in output order], versions: {name: version or None}}.

    ``No modules.`` (an empty store) gives no names; empty output, a line whose first column is not a module
    name, or more than two columns raise ParseError.
    """
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        raise ParseError("semodule -l printed nothing (an empty policy store prints 'No modules.')")
    if lines == [_NO_MODULES]:
        return {"names": [], "versions": {}}
    versions: dict = {}
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if (
            len(fields) > 2
            or not valid_module_name(fields[0])
            or (len(fields) == 2 and not _VERSION_RE.match(fields[1]))
        ):
            raise ParseError(f"semodule -l: line {number} is not '<module>' or '<module> <version>': {_excerpt(line)}")
        versions.setdefault(fields[0], fields[1] if len(fields) == 2 else None)
    return {"names": list(versions), "versions": versions}


_RESTORECON_RE = re.compile(
    r"^(?P<action>Relabeled|Would relabel) (?P<path>/.*) from (?P<old><no context>|\S+) to (?P<new>\S+)$"
)


def parse_restorecon_verbose(text: str) -> dict:
    """Parse `restorecon -v` (or `-v -n`) stdout: {changes: [{path, from, to, applied}], other: [lines]}.

    applied is True for ``Relabeled`` and False for ``Would relabel`` (-n); ``from`` is None for a file that had
    no label (``<no context>``). Lines of another shape (``... not reset as customized by admin to ...``,
    ``Warning no default label for ...``) are kept in other, in order.
    """
    changes, other = [], []
    for line in (text or "").splitlines():
        line = line.rstrip()
        if not line.strip():
            continue
        match = _RESTORECON_RE.match(line)
        if not match:
            other.append(line)
            continue
        old = match["old"]
        changes.append(
            {
                "path": match["path"],
                "from": None if old == "<no context>" else old,
                "to": match["new"],
                "applied": match["action"] == "Relabeled",
            }
        )
    return {"changes": changes, "other": other}


def parse_container_cli_list(text: str) -> list:
    """Parse `nvidia-container-cli list`: the absolute paths, in order, without repeats.

    A line that is not an absolute path (or holds a NUL byte) raises ParseError: it is not that tool's output.
    """
    paths: list = []
    seen: set = set()
    for number, line in enumerate((text or "").splitlines(), start=1):
        path = line.strip()
        if not path:
            continue
        if not path.startswith("/") or "\0" in path:
            raise ParseError(f"nvidia-container-cli list: line {number} is not an absolute path: {_excerpt(path)}")
        if path not in seen:
            seen.add(path)
            paths.append(path)
    return paths
