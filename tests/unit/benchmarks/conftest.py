"""Markers of the benchmark tests (registered here: pyproject.toml is shared)."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts real benchmark processes (torch), about 10-30 s each")
