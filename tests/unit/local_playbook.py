"""ansible-playbook on this host, the way the unit tests that need Ansible's own task execution run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_local_playbook(playbook: Path, *arguments: str, **environment: str) -> subprocess.CompletedProcess:
    """Run playbook against localhost (connection local, this interpreter) from the checkout, with its ansible.cfg
    (the gpuforge.cluster collection found as in a real run) plus the given ansible-playbook arguments and
    environment; fail the test, showing the output's end, when ansible-playbook fails."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), **environment}
    completed = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}",
            *arguments,
            str(playbook),
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed
