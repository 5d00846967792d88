"""Pinned, hashed wheels downloaded once into a directory: the lab's wheelhouse and its CUDA toolchain both use it.

pip checks every file against the sha256 in the requirements file (--require-hashes); a stamp holding the
requirements' own hash makes a second call with unchanged pins a no-op. The download goes to a staging directory
renamed into place, so an interrupted run never leaves a half-filled target that looks complete.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from gpuforge.paths import PROJECT_ROOT


class PinnedWheelsError(RuntimeError):
    """pip could not fetch or verify a pinned wheel; the message carries pip's own words and the fix."""


def download(requirements: Path, target: Path, what: str, pip_args: tuple[str, ...] = (), log=print) -> bool:
    """Fill target with the wheels pinned in requirements unless it already holds them; True when it downloaded."""
    stamp = target / ".inputs"
    wanted = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
        return False
    shown = requirements.relative_to(PROJECT_ROOT) if requirements.is_relative_to(PROJECT_ROOT) else requirements
    log(f"lab: downloading {what} pinned in {shown}")
    staging = target.with_name(target.name + ".next")
    shutil.rmtree(staging, ignore_errors=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--require-hashes", *pip_args, "-r", str(requirements), "-d", str(staging)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PinnedWheelsError(
            f"pip download of {what} failed (rc {done.returncode}): {done.stderr.strip()[-1500:]}\n"
            "fix: make PyPI (or a PyPI mirror in pip.conf) reachable from this machine, or update the pinned "
            f"versions and hashes in {requirements}"
        )
    (staging / ".inputs").write_text(wanted, encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return True
