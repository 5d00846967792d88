"""Shared pytest fixtures: paths to the seeds and to public real-tool outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = PROJECT_ROOT.parent / "shared"
REAL_OUTPUTS = SHARED / "real-outputs"
SEEDS = SHARED / "seeds"
FIXTURES = PROJECT_ROOT / "tests" / "fixtures"


@pytest.fixture
def real_output():
    """Return a loader for ../shared/real-outputs/<name>; skips the test when the folder is absent."""

    def load(name: str) -> str:
        path = REAL_OUTPUTS / name
        if not path.is_file():
            pytest.skip(f"real output {name} not available (../shared/real-outputs absent)")
        return path.read_text(encoding="utf-8")

    return load


@pytest.fixture
def fixture_text():
    """Return a loader for tests/fixtures/<relative path> (fixtures owned by the project)."""

    def load(relative: str) -> str:
        return (FIXTURES / relative).read_text(encoding="utf-8")

    return load
