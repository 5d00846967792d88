"""Host roles refuse an RHCOS node (os-release ID=rhcos) and point to the OpenShift operator path."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RHCOS = 'NAME="Red Hat Enterprise Linux CoreOS"\nID="rhcos"\nID_LIKE="rhel fedora"\nVERSION_ID="4.17"\n'
RHEL = 'NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.4"\n'
PLAY = """- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gpuforge
"""


def run_check(tmp_path, os_release, *extra):
    (tmp_path / "os-release").write_text(os_release)
    (tmp_path / "play.yml").write_text(PLAY)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_ROLES_PATH": str(ROOT / "roles")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    command = [
        "ansible-playbook",
        "-i",
        "localhost,",
        str(tmp_path / "play.yml"),
        "-e",
        "gpuforge_rhcos_check=true",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-e",
        f"gpuforge_os_release_path={tmp_path / 'os-release'}",
        *extra,
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)


# The check is tagged always: re-running one component (--tags) on an RHCOS node is refused all the same.
@pytest.mark.parametrize("extra", [(), ("--tags", "nfs_client")])
def test_rhcos_is_refused_with_the_operator_path(tmp_path, extra):
    result = run_check(tmp_path, RHCOS, *extra)
    assert result.returncode != 0
    assert "Red Hat Enterprise Linux CoreOS" in result.stdout
    assert "gpuforge_k8s_gpu_stack: operators" in result.stdout and "openshift_gpu_operators" in result.stdout


@pytest.mark.parametrize("os_release", [RHEL, 'ID=debian\nVERSION_ID="12"\n'])
def test_rhel_and_debian_pass(tmp_path, os_release):
    result = run_check(tmp_path, os_release)
    assert result.returncode == 0, result.stdout[-2000:]
