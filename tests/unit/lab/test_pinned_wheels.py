"""gpuforge.lab.pinned_wheels: one download per set of pins, staged, with pip's words and the fix on failure."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuforge.lab import pinned_wheels


@pytest.fixture
def requirements(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("example==1.0 --hash=sha256:" + "0" * 64 + "\n", encoding="utf-8")
    return path


def _pip(calls, returncode=0, stderr=""):
    def run(command, **_):
        calls.append(command)
        if returncode == 0:
            staging = Path(command[command.index("-d") + 1])
            staging.mkdir(parents=True)  # pip creates its -d directory
            (staging / "example-1.0-py3-none-any.whl").write_text("wheel", encoding="utf-8")
        return subprocess.CompletedProcess(command, returncode, "", stderr)

    return run


def test_downloads_once_per_set_of_pins(tmp_path, requirements, monkeypatch):
    calls = []
    monkeypatch.setattr(pinned_wheels.subprocess, "run", _pip(calls))
    target = tmp_path / "wheels"
    assert pinned_wheels.download(requirements, target, "the wheels", ("--platform", "x"), log=lambda _: None)
    assert (target / "example-1.0-py3-none-any.whl").is_file()
    assert not (tmp_path / "wheels.next").exists()
    assert calls[0][calls[0].index("--platform") + 1] == "x" and "--require-hashes" in calls[0]
    assert not pinned_wheels.download(requirements, target, "the wheels", log=lambda _: None)
    assert len(calls) == 1
    requirements.write_text("example==1.1 --hash=sha256:" + "1" * 64 + "\n", encoding="utf-8")
    assert pinned_wheels.download(requirements, target, "the wheels", log=lambda _: None)
    assert len(calls) == 2


def test_failed_download_names_pips_error_and_the_fix_and_keeps_the_old_target(tmp_path, requirements, monkeypatch):
    target = tmp_path / "wheels"
    target.mkdir()
    (target / "old.whl").write_text("kept", encoding="utf-8")
    monkeypatch.setattr(pinned_wheels.subprocess, "run", _pip([], 1, "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES"))
    with pytest.raises(pinned_wheels.PinnedWheelsError, match=r"DO NOT MATCH.*\nfix: make PyPI"):
        pinned_wheels.download(requirements, target, "the wheels", log=lambda _: None)
    assert (target / "old.whl").is_file()
