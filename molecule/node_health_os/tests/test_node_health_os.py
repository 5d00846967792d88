"""gpuforge-health on the lab's RHEL 9, Ubuntu 22.04 and 24.04 shapes (molecule/node_health_os): the role installed the
collection's module_utils unchanged and a launcher on the OS's Python; the prolog judges the node's 8 simulated GPUs
and writes records that validate against schemas/node-check.schema.json; the epilog fails a node on which a process
outlived its job (lab fault gpu_process_left) and passes once it is gone."""

import json
import shlex

import jsonschema
import pytest
import yaml

from gpuforge.paths import PROJECT_ROOT

COMMAND = "/usr/local/sbin/gpuforge-health"
STATE = "/var/lib/gpuforge/health"
SCHEMA = json.loads((PROJECT_ROOT / "schemas" / "node-check.schema.json").read_text(encoding="utf-8"))
PACKAGE = "ansible_collections/gpuforge/cluster/plugins/module_utils"


def _node(host) -> str:
    return host.backend.get_hostname()


def _record(host, profile):
    return json.loads(host.file(f"{STATE}/last-{profile}.json").content_string)


# The release the role names (roles/node_health/vars/main.yml node_health_release): the SHA-256 of the module_utils
# files' contents in name order, joined by "\n---\n", first 16 hex digits; computed on the node in one run.
RELEASE = (
    "import glob, hashlib, os, sys; d = sys.argv[1]; "
    "texts = [open(p, encoding='utf-8').read() for p in sorted(glob.glob(os.path.join(d, '*.py'))) "
    "if not p.endswith('/__init__.py')]; "
    "print(hashlib.sha256('\\n---\\n'.join(texts).encode()).hexdigest()[:16])"
)


def test_the_installed_tree_is_the_release_the_launcher_names(host):
    """The launcher's release directory holds the module_utils whose contents make that release's name (a changed
    file installs a new release), with the files gpuforge-health runs on."""
    lib = next(
        line.split('"')[1] for line in host.file(COMMAND).content_string.splitlines() if "sys.path.insert" in line
    )
    release = lib.split("/")[-2]
    package = f"{lib}/{PACKAGE}"
    assert host.check_output(f"python3 -c {shlex.quote(RELEASE)} {package}") == release
    names = set(host.check_output(f"ls {package}").split())
    assert {"gpuforge_health.py", "gpuforge_health_checks.py", "gpuforge_registry.py", "__init__.py"} <= names
    assert len(names) > 30  # the whole collection's module_utils, not a subset


def test_the_launcher_runs_on_the_oss_python(host):
    interpreter = host.file(COMMAND).content_string.splitlines()[0].removeprefix("#!")
    version = host.check_output(f"{interpreter} -c 'import sys; print(sys.version_info[:2] >= (3, 8))'")
    assert version == "True"
    assert host.file(interpreter).exists and not interpreter.startswith("/opt")  # the OS's Python, not a venv


def test_the_prolog_passes_with_valid_records(host):
    node = _node(host)
    done = host.run(f"{COMMAND} --profile prolog --node {node}")
    assert (done.rc, done.stdout) == (0, ""), done.stderr
    record = _record(host, "prolog")
    assert (record["host"], record["profile"], record["verdict"], record["healthy"]) == (node, "prolog", "PASS", True)
    checks = {c["name"]: c for c in record["checks"]}
    assert checks["gpu_count"]["observed"] == 8 and checks["nvidia_smi_readable"]["status"] == "PASS"
    assert [r["check"] for r in record["records"]] == [c["name"] for c in record["checks"]]
    for item in record["records"]:
        jsonschema.validate(item, SCHEMA)


@pytest.fixture
def process_left(host):
    """A process left on GPU 2 (lab fault gpu_process_left), taken away afterwards."""
    hardware = json.loads(host.file("/etc/gpuforge-lab/hardware.json").content_string)
    fault = {"type": "gpu_process_left", "gpu": 2, "pid": 4711, "name": "/usr/bin/python3", "memory_mib": 2048}
    faulty = json.dumps({**hardware, "faults": [*hardware.get("faults", []), fault]})
    host.run_expect([0], "cp /etc/gpuforge-lab/hardware.json /root/hardware.json.clean")
    host.run_expect([0], f"printf '%s' {shlex.quote(faulty)} > /etc/gpuforge-lab/hardware.json")
    yield fault
    host.run_expect([0], "cp /root/hardware.json.clean /etc/gpuforge-lab/hardware.json")


def test_the_epilog_fails_a_node_with_a_process_left_and_passes_when_it_is_gone(host, process_left):
    node = _node(host)
    done = host.run(f"{COMMAND} --profile epilog --node {node}")
    assert done.rc == 1, done.stderr
    assert done.stdout.startswith(f"FAIL {node} gpu_processes_exited: process(es) left on the GPUs after the job: ")
    assert "00000000:0A:00.0: 4711 /usr/bin/python3" in done.stdout
    record = _record(host, "epilog")
    assert record["failed_checks"] == ["gpu_processes_exited"]
    for item in record["records"]:
        jsonschema.validate(item, SCHEMA)
    host.run_expect([0], "cp /root/hardware.json.clean /etc/gpuforge-lab/hardware.json")
    again = host.run(f"{COMMAND} --profile epilog --node {node}")
    assert (again.rc, again.stdout) == (0, ""), again.stdout + again.stderr


def test_dcgm_is_pinned_from_the_oss_cuda_repository_and_its_host_engine_runs(host):
    """prepare.yml's nvidia_driver installs DCGM from the lab's CUDA repository of the shape (apt on ubuntu2204 and
    ubuntu2404, dnf on rhel9), generated from the registry with a newer DCGM build beside the pinned one: both DCGM 4
    packages land on the pin and the host engine's unit runs."""
    defaults = yaml.safe_load((PROJECT_ROOT / "roles/nvidia_driver/defaults/main.yml").read_text(encoding="utf-8"))
    version = defaults["nvidia_driver_dcgm_version"]
    for name in ("datacenter-gpu-manager-4-core", defaults["nvidia_driver_dcgm_package"]):
        if host.system_info.distribution.lower() == "ubuntu":
            assert host.package(name).version == version, name
        else:  # rpm's epoch:version-release (the registry's form), and locked: a dnf update must not move it
            assert host.check_output(f"rpm -q --qf '%{{EPOCH}}:%{{VERSION}}-%{{RELEASE}}' {name}") == version, name
            assert f"{name}-{version}." in host.check_output("dnf -q versionlock list"), name
    service = host.service("nvidia-dcgm")
    assert service.is_enabled and service.is_running
