"""The lab's Python wheelhouse: the ResNet-50 benchmark's pinned, hashed wheels served by the lab mirror.

Lab nodes sit on an internal network (no PyPI), so the control machine downloads the wheels named in
benchmarks/resnet50/requirements-cpu.txt once (pip verifies every file against its sha256) and the
mirror serves them at http://mirror/python/ for `pip install --no-index --find-links`.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

from gpuforge.lab import mirror
from gpuforge.paths import PROJECT_ROOT

REQUIREMENTS = PROJECT_ROOT / "benchmarks" / "resnet50" / "requirements-cpu.txt"
WHEELHOUSE_PATH = "python"


class WheelhouseError(RuntimeError):
    """pip could not fetch or verify a pinned wheel; the message carries pip's own words."""


def ensure(log=print) -> str:
    """Download the pinned wheels into the mirror if the requirements changed; returns their URL."""
    target = mirror.MIRROR_ROOT / WHEELHOUSE_PATH
    stamp = target / ".inputs"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    url = f"{mirror.MIRROR_URL}/{WHEELHOUSE_PATH}/"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
        return url
    log(f"lab: downloading the benchmark wheels pinned in {REQUIREMENTS.relative_to(PROJECT_ROOT)}")
    staging = target.with_name(WHEELHOUSE_PATH + ".next")
    shutil.rmtree(staging, ignore_errors=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--require-hashes", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
               "--implementation", "cp", "-r", str(REQUIREMENTS), "-d", str(staging)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise WheelhouseError(
            f"pip download of the benchmark wheels failed (rc {done.returncode}): {done.stderr.strip()[-1500:]}\n"
            "fix: make PyPI (or a PyPI mirror in pip.conf) reachable from this machine, or update the pinned "
            f"versions and hashes in {REQUIREMENTS}"
        )
    (staging / ".inputs").write_text(wanted, encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return url
