"""The workload image (images/workload/, playbooks/workload_image.yml) built for real in the lab: podman build on the
control machine FROM the lab's debootstrap-built Debian 12 image, with the lab mirror's CUDA repository (NVIDIA's
compiler and NCCL, repackaged from NVIDIA's wheels) and its Debian and Python wheels; then a worker started from it
runs sshd and the launcher, from the same image, reaches it with the job's key and starts MPI ranks there, as the
MPI operator's launcher does. The image is not pushed (no registry in the lab). Run with make smoke (lab marker)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest
import yaml

from gpuforge.lab import cluster, mirror, wheelhouse
from gpuforge.paths import CONTAINERS_CONF, PROJECT_ROOT

pytestmark = pytest.mark.lab

IMAGE = "localhost/gpuforge/workload"
TAG = "lab-test"


def _run(*command: str, timeout: int = 1800, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT_ROOT / "ansible.cfg"), CONTAINERS_CONF=str(CONTAINERS_CONF))
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert done.returncode == 0, f"{' '.join(command[:4])}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def built_image(tmp_path_factory):
    base = cluster.prepare(log=lambda _: None)
    wheels_url = wheelhouse.ensure(log=lambda _: None)
    work = tmp_path_factory.mktemp("workload-image")
    key = work / "gpuforge-lab.asc"
    shutil.copyfile(mirror.MIRROR_ROOT / mirror.KEY_FILE_NAME, key)
    source = work / "cuda.sources"
    # As the nvidia_driver role writes it on a lab node (vendor_repository), pointing at the mirror by name: the build
    # containers resolve "mirror" through --add-host.
    source.write_text(
        "Types: deb\nURIs: http://mirror/cuda/repos/debian12/x86_64/\nSuites: /\n"
        "Signed-By: /etc/apt/keyrings/gpuforge-lab.asc\n",
        encoding="utf-8",
    )
    (work / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"children": {"workload_image_builder": {"hosts": {"localhost": {}}}}}}),
        encoding="utf-8",
    )
    lab_vars = yaml.safe_load((PROJECT_ROOT / "inventories/lab/group_vars/all/benchmark_tools.yml").read_text())
    extra = {
        **lab_vars,
        "ansible_connection": "local",
        "ansible_python_interpreter": shutil.which("python3"),
        # The controller reaches the mirror by its address (it is the lab network's gateway); the builds by name.
        "gpuforge_lab_mirror_url": f"http://{cluster.MIRROR_IP}",
        "benchmark_tools_image_base": base,
        "benchmark_tools_image_network": cluster.NETWORK,
        "benchmark_tools_image_add_hosts": [f"mirror:{cluster.MIRROR_IP}"],
        # make test runs this with its background work (after the Molecule lanes, beside the unit suites): the build's
        # containers take nice 10's CPU weight, as the rest of that background work does (scripts/background.sh).
        "benchmark_tools_image_cpu_shares": 110,
        "benchmark_tools_image_apt_source": str(source),
        "benchmark_tools_image_apt_key": str(key),
        "benchmark_tools_image_pip_find_links": wheels_url,
        # The lab mirror publishes the lab's simulated RDMA packages, not Debian's (docs/lab.md): none in the image.
        "benchmark_tools_image_rdma_packages": [],
        "benchmark_tools_image_push": False,
        "benchmark_tools_image_context": str(work / "context"),
        "gpuforge_workload_image_repository": IMAGE,
        "gpuforge_workload_image_tag": TAG,
    }
    (work / "vars.yml").write_text(yaml.safe_dump(extra), encoding="utf-8")
    command = ["ansible-playbook", "-i", str(work / "hosts.yml"), "-e", f"@{work / 'vars.yml'}"]
    first = _run(*command, "playbooks/workload_image.yml")
    again = _run(*command, "playbooks/workload_image.yml")
    yield {"work": work, "first": first.stdout, "again": again.stdout}
    _run("podman", "rmi", "-f", f"{IMAGE}:{TAG}", check=False)


def test_second_build_changes_nothing(built_image):
    assert "changed=0" in built_image["again"].split("PLAY RECAP")[-1]


def test_image_has_nccl_tests_linked_to_nccl_and_the_trainer(built_image):
    ldd = _run("podman", "run", "--rm", f"{IMAGE}:{TAG}", "ldd", "/usr/local/bin/all_reduce_perf").stdout
    # NVIDIA's libnccl2 package's file (the linker cache may name it through Debian's /lib alias of /usr/lib).
    assert re.search(r"libnccl\.so\.2 => (/usr)?/lib/x86_64-linux-gnu/libnccl\.so\.2 ", ldd), ldd
    assert "libmpi.so.40 =>" in ldd and "not found" not in ldd
    torch = _run("podman", "run", "--rm", f"{IMAGE}:{TAG}", "python3", "-c", "import torch; print(torch.__version__)")
    assert torch.stdout.strip().startswith("2.13.0")
    assert _run("podman", "run", "--rm", f"{IMAGE}:{TAG}", "ls", "/etc/ssh").stdout.count("ssh_host_") == 0


def test_worker_sshd_accepts_the_launchers_key_and_runs_mpi_ranks(built_image):
    work = built_image["work"]
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "job_key"))
    worker = "gpuforge-workload-test-worker"
    _run("podman", "rm", "-f", worker, check=False)
    try:
        _run(
            "podman", "run", "-d", "--name", worker, "--network", cluster.NETWORK,
            "-v", f"{work / 'job_key.pub'}:/root/.ssh/authorized_keys:ro,Z",
            f"{IMAGE}:{TAG}",
        )  # fmt: skip
        address = _run("podman", "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                       worker).stdout.strip()  # fmt: skip
        launcher = [
            "podman", "run", "--rm", "--network", cluster.NETWORK,
            "-v", f"{work / 'job_key'}:/root/.ssh/id_ed25519:ro,Z", f"{IMAGE}:{TAG}",
        ]  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            reached = _run(*launcher, "ssh", f"root@{address}", "hostname", check=False)
            if reached.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert reached.returncode == 0, reached.stderr
        ranks = _run(*launcher, "mpirun", "--allow-run-as-root", "-np", "2", "-H", f"{address}:2", "hostname")
        assert ranks.stdout.split() == [reached.stdout.strip()] * 2
        # Another key is refused.
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "other_key"))
        other = [*launcher[:-3], "-v", f"{work / 'other_key'}:/root/.ssh/id_ed25519:ro,Z", launcher[-1]]
        refused = _run(*other, "ssh", "-o", "BatchMode=yes", f"root@{address}", "hostname", check=False)
        assert refused.returncode == 255 and "Permission denied" in refused.stderr
    finally:
        _run("podman", "rm", "-f", worker, check=False)
