"""Shared helpers for the IB simulator tests: a hardware document from a lab profile plus faults."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

PROFILES = Path(__file__).resolve().parents[3] / "lab" / "profiles"


def write_hardware(tmp_path: Path, monkeypatch, profile: str, faults: list[dict] | None = None) -> dict:
    """Write <profile> + faults as the node's hardware.json and point the simulators at it."""
    hw = yaml.safe_load((PROFILES / f"{profile}.yml").read_text(encoding="utf-8"))
    hw["faults"] = faults or []
    path = tmp_path / "hardware.json"
    path.write_text(json.dumps(hw), encoding="utf-8")
    monkeypatch.setenv("GPUFORGE_LAB_HARDWARE", str(path))
    return hw


def run_tool(tool, argv: list[str], capsys) -> tuple[int, str, str]:
    """Run a simulator's main(argv); returns (exit status, stdout, stderr)."""
    rc = tool.main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err
