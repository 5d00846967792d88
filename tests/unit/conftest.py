"""Fixtures of the unit tests across folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from site_gates import build_site_gates_run


@pytest.fixture(scope="session")
def site_gates_run(tmp_path_factory) -> Path:
    """The run folder (``bench/<run>/`` below it); read-only for the tests, copy it to change it."""
    run_dir = tmp_path_factory.mktemp("site-gates") / "run"
    build_site_gates_run(run_dir)
    return run_dir
