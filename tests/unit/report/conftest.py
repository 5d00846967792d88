"""Fixtures of the report tests: burn-in run folders written by the real `gpuforge burnin` loop (burnin_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from burnin_run import build_burnin_run


@pytest.fixture(scope="session")
def burnin_run_dir(tmp_path_factory) -> Path:
    """Six rounds, burnin_run.DEMO_FAULTS (gpu02 counters grow and DCGM fails, gpu03 gets slower); read-only."""
    return build_burnin_run(tmp_path_factory.mktemp("burnin-demo"))


@pytest.fixture(scope="session")
def healthy_burnin_run_dir(tmp_path_factory) -> Path:
    """Three rounds, no fault; read-only."""
    return build_burnin_run(tmp_path_factory.mktemp("burnin-healthy"), faults={}, rounds=3)
