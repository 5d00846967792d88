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


@pytest.fixture(autouse=True)
def no_opensm_of_the_machine(tmp_path_factory, monkeypatch):
    """The lab simulators read the process table for a running opensm (gpuforge_sim.sminfo, $GPUFORGE_LAB_PROC,
    default /proc). On the machine that runs the tests, /proc also shows the opensm of any lab node up at the same
    time (Molecule lanes beside the unit suite in `make test`, a demo): a simulated port would then report that SM's
    LID. Every unit test reads an empty process table unless it sets its own."""
    monkeypatch.setenv("GPUFORGE_LAB_PROC", str(tmp_path_factory.mktemp("no-proc")))
