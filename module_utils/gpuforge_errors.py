"""The error classes every gpuforge parser and module shares (stdlib only).

Each parser module keeps its own ``ParseError`` (or ``NcclTestsParseError``, ``Resnet50ParseError``) as a
subclass of ``ParseError`` here, so ``except ParseError`` from this file catches any of them, and code
that imports a parser's own class keeps working.

Every module_utils file, module and filter imports it by its collection path,
``ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors`` (Ansible packs the module_utils files a
module imports, and the files those import); the CLI and the unit tests import the same path through the checkout's
collection tree (``collection/``, docs/development.md).
"""

from __future__ import annotations

__all__ = ["OptionError", "ParseError"]


class ParseError(ValueError):
    """Tool output a gpuforge parser cannot read (empty, truncated, another tool's); the message says why."""


class OptionError(ValueError):
    """A module option whose value has the wrong shape. ``path`` names it (``expect.min_busbw_gbyte_per_s``,
    ``expected.hcas[0].ports[1].port``) and the message starts with that path."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path} {problem}")
        self.path = path
        self.problem = problem
