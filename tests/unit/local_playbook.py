"""ansible-playbook on this host, the way the unit tests that need Ansible's own task execution run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]


def run_local_playbook(playbook: Path, *arguments: str, **environment: str) -> subprocess.CompletedProcess:
    """Run playbook against localhost (connection local, this interpreter) from the checkout, with its ansible.cfg
    (the gpuforge.cluster collection found as in a real run) plus the given ansible-playbook arguments and
    environment; fail the test, showing the output's end, when ansible-playbook fails.

    Facts go to a fact cache of this call only (unless the environment names one): the checkout's .gpuforge/facts
    may hold a localhost entry from another userland (ansible.cfg gathers `smart`ly, so a cached entry is used, not
    gathered), which made a role see Debian 12 in the Debian 13 lane on one run and Debian 13 on another."""
    with tempfile.TemporaryDirectory(prefix="gpuforge-facts-") as facts:
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": facts,
            **environment,
        }
        return _run(playbook, arguments, env)


def _run(playbook: Path, arguments: tuple, env: dict) -> subprocess.CompletedProcess:
    completed = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}",
            *arguments,
            str(playbook),
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed


WORKER_PLAYBOOK = """
- name: Read a value in a task's worker
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write the value
      ansible.builtin.copy:
        content: "{{ %s | to_json }}"
        dest: "{{ value_file }}"
        mode: "0644"
"""


def worker_lookup(tmp_path: Path, lookup_name: str, lookup_source: str, expression: str, **environment: str):
    """Run a playbook whose one task writes `expression`, a call of the lookup plugin `lookup_name` (its Python
    source given), to a file, and return the value read back from JSON. A lookup runs where the task runs on the
    controller: in the worker forked for the task, so it sees what that worker inherited from the controller."""
    lookups = tmp_path / "lookup"
    lookups.mkdir()
    (lookups / f"{lookup_name}.py").write_text(lookup_source, encoding="utf-8")
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(WORKER_PLAYBOOK % expression, encoding="utf-8")
    value_file = tmp_path / "value.json"
    run_local_playbook(playbook, "-e", f"value_file={value_file}", ANSIBLE_LOOKUP_PLUGINS=str(lookups), **environment)
    return json.loads(value_file.read_text(encoding="utf-8"))
