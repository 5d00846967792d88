"""Shared fixtures for the gpu_monitoring role's tests: promtool (must be installed: `make setup` puts Debian's
prometheus package on the control machine) and the role's paths."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROLE = Path(__file__).resolve().parents[4] / "roles" / "gpu_monitoring"
# tests/unit/roles: gpu_stack_render (RoleRender) and role_yaml, shared with the other role tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@pytest.fixture(scope="session")
def promtool() -> str:
    """promtool's path. A missing promtool FAILS the tests (it does not skip them): make setup installs it."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: run `make setup` (installs Debian's prometheus package, which has promtool)")
    return path
