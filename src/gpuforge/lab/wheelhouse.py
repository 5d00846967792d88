"""The lab's Python wheelhouse: the ResNet-50 benchmark's pinned, hashed wheels served by the lab mirror.

Lab nodes sit on an internal network (no PyPI), so the control machine downloads the wheels named in
benchmarks/resnet50/requirements-cpu.txt once (pip verifies every file against its sha256) and the
mirror serves them at http://mirror/python/ for `pip install --no-index --find-links`.
"""

from __future__ import annotations

from gpuforge.lab import mirror, pinned_wheels
from gpuforge.paths import PROJECT_ROOT

REQUIREMENTS = PROJECT_ROOT / "benchmarks" / "resnet50" / "requirements-cpu.txt"
WHEELHOUSE_PATH = "python"
# The wheels are for the lab nodes' Python (Debian 12: CPython 3.11), not the control machine's.
NODE_PIP_ARGS = ("--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--implementation", "cp")


def ensure(log=print) -> str:
    """Download the pinned wheels into the mirror if the requirements changed; returns their URL."""
    target = mirror.MIRROR_ROOT / WHEELHOUSE_PATH
    pinned_wheels.download(REQUIREMENTS, target, "the benchmark wheels", NODE_PIP_ARGS, log=log)
    return f"{mirror.MIRROR_URL}/{WHEELHOUSE_PATH}/"
