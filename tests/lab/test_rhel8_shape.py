"""The rhel8 lab shape (lab/image/shapes.yml, docs/lab.md "OS shapes"), which no Molecule scenario runs: Ansible's
facts on it are those recorded from RHEL 8 (molecule/os_shapes/tests/real_os_facts.yml, sources there), the dnf
command resolves the mirror's rhel8 CUDA repository with its module streams, and ansible.builtin.dnf fails as it does
on a real RHEL 8 host managed by ansible-core 2.17 or later: RHEL 8 builds dnf's Python bindings for platform-python
3.6 only, where ansible-core runs no module. So gpuforge refuses RHEL 8: a host role run on the shape stops in its
first check, before any change, naming the supported releases. Run with make smoke (lab marker)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from gpuforge.lab import cluster, os_shapes
from gpuforge.lab.podman import podman
from gpuforge.paths import CONTAINERS_CONF, PROJECT_ROOT

pytestmark = pytest.mark.lab

REAL_FACTS = PROJECT_ROOT / "molecule/os_shapes/tests/real_os_facts.yml"
NODE = "gpuforge-test-rhel8-shape"
# What ansible.builtin.dnf answers on RHEL 8 when the module's interpreter has no dnf bindings (ansible-core's
# modules/dnf.py; quoted from a real RHEL 8 host in nodejs/build pull request 4124).
DNF_REFUSAL = "Could not import the dnf python module using /usr/bin/python3"


@pytest.fixture(scope="module")
def node():
    cluster.prepare(log=lambda _: None)
    images = dict(line.split("=", 1) for line in os_shapes.ENV_FILE.read_text(encoding="utf-8").split())
    podman("rm", "-f", NODE, check=False)
    podman(
        "run", "-d", "--name", NODE, f"--network={cluster.NETWORK}", "--add-host", f"mirror:{cluster.MIRROR_IP}",
        "--systemd=always", images[os_shapes.env_name("rhel8")], "/sbin/init",
    )  # fmt: skip
    yield NODE
    podman("rm", "-f", NODE, check=False)


def _ansible(node: str, module: str, args: str) -> dict:
    """One ad hoc module run through the podman connection; the host's result as the json callback reports it."""
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(PROJECT_ROOT / "ansible.cfg"),
        CONTAINERS_CONF=str(CONTAINERS_CONF),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        # ansible.cfg's ansible.posix.timer would print after the JSON document; gc_freeze prints nothing.
        ANSIBLE_CALLBACKS_ENABLED="gpuforge.cluster.gc_freeze",
    )
    command = ["ansible", "all", "-i", f"{node},", "-c", "containers.podman.podman", "-m", module, "-a", args]
    command += ["-e", "ansible_python_interpreter=/usr/bin/python3"]
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.stdout, done.stderr[-3000:]
    report = json.loads(done.stdout)
    return report["plays"][0]["tasks"][0]["hosts"][node]


def test_facts_are_those_of_rhel_8(node):
    facts = _ansible(node, "ansible.builtin.setup", "")["ansible_facts"]
    expected = yaml.safe_load(REAL_FACTS.read_text(encoding="utf-8"))["rhel8"]["facts"]
    assert {name: facts[f"ansible_{name}"] for name in expected} == expected


def test_dnf_command_lists_the_cuda_repository_streams(node):
    out = podman(
        "exec", node, "dnf", "-q", f"--repofrompath=cuda,http://{cluster.MIRROR_IP}/cuda/repos/rhel8/x86_64/",
        "--setopt=cuda.gpgcheck=0", "--repo=cuda", "module", "list", "nvidia-driver",
    )  # fmt: skip
    assert "open-dkms [d]" in out, out
    assert "535-dkms" in out, out


def test_dnf_module_fails_as_on_rhel_8(node):
    result = _ansible(node, "ansible.builtin.dnf", "name=yum state=present")
    assert result.get("failed") is True, result
    assert DNF_REFUSAL in result["msg"], result["msg"]
    # The node's python3 cannot import dnf, and there is no platform-python to respawn the module on.
    probe = "import importlib.util as u, os; print(u.find_spec('dnf'), os.path.exists('/usr/libexec/platform-python'))"
    assert podman("exec", node, "python3", "-c", probe).split() == ["None", "False"]


def test_a_host_role_refuses_rhel_8_before_any_change_naming_the_supported_releases(node, tmp_path):
    playbook = tmp_path / "rhel8.yml"
    playbook.write_text("- hosts: all\n  roles:\n    - gpuforge.cluster.nvidia_driver\n", encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT_ROOT / "ansible.cfg"), CONTAINERS_CONF=str(CONTAINERS_CONF))
    command = ["ansible-playbook", "-i", f"{node},", "-c", "containers.podman.podman", str(playbook)]
    command += ["-e", "ansible_python_interpreter=/usr/bin/python3"]
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=env)
    output = " ".join(done.stdout.split())
    assert done.returncode == 2, output[-3000:]
    assert "runs RedHat 8.10: its dnf Python bindings exist only for platform-python 3.6" in output, output[-3000:]
    assert "support Debian 12, Ubuntu 22.04 and 24.04, and RHEL 9" in output, output[-3000:]
    assert "changed=0" in output and "failed=1" in output, output[-3000:]
