"""The benchmark role on RHEL 9 and Ubuntu 24.04 lab nodes: the OS's packages for the ResNet-50 venv, ssh and fio at
the registry's builds (vendor_facts/), the venv made with the OS's Python for torch (RHEL 9: python3.12), ResNet-50
run on every node and, on the RHEL pair, across both nodes through RHEL's Open MPI; the runs' records in summary.json
(run ids bench-os-rhel9 and bench-os-ubuntu2404 under Molecule's scenario directory)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
RHEL = ["benchos-rhel9-a", "benchos-rhel9-b"]
UBUNTU = {"ubuntu2404": ["benchos-ubuntu2404"], "ubuntu2204": ["benchos-ubuntu2204"]}
VENV = "/opt/gpuforge-bench/venv"
# The registry file of each OS's packages and their names (roles/gpuforge_bench/vars/<OS>.yml).
PACKAGES = {
    "rhel": {
        "rhel-appstream/rhel9.yml": ["python3.12", "python3.12-libs", "python3.12-pip-wheel", "fio"],
        "rhel-baseos/rhel9.yml": ["openssh-server", "openssh-clients"],
    },
    "ubuntu2404": {"ubuntu/noble.yml": ["python3-venv", "python3.12-venv", "fio"]},
    "ubuntu2204": {"ubuntu/jammy.yml": ["python3-venv", "python3.10-venv", "fio"]},
}


def _os(host) -> str:
    """rhel, ubuntu2204 or ubuntu2404."""
    if host.file("/etc/redhat-release").exists:
        return "rhel"
    return "ubuntu" + host.check_output(". /etc/os-release && echo $VERSION_ID").replace(".", "")


def _registry_version(path: str, name: str) -> str:
    registry = yaml.safe_load((PROJECT / "vendor_facts" / path).read_text(encoding="utf-8"))
    (package,) = [package for package in registry["packages"] if package["name"] == name]
    (version,) = package["versions"]
    return version


def _summary(os_name: str) -> dict:
    run = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "artifacts" / "bench" / f"bench-os-{os_name}"
    return json.loads((run / "summary.json").read_text(encoding="utf-8"))


def _records(os_name: str, benchmark: str) -> list[dict]:
    return [
        record
        for record in _summary(os_name)["records"]
        if record["kind"] == "benchmark_run" and record["benchmark"] == benchmark
    ]


def test_the_os_packages_are_installed_at_the_registry_builds(host):
    os_name = _os(host)
    for path, names in PACKAGES[os_name].items():
        for name in names:
            version = _registry_version(path, name)
            if os_name == "rhel":
                installed = host.check_output(f"rpm -q --qf '%{{EPOCH}}:%{{VERSION}}-%{{RELEASE}}' {name}")
                assert installed.removeprefix("(none):") == version, (name, installed)
            else:
                assert host.package(name).version == version, name


def test_the_venv_is_made_with_the_os_python(host):
    # Python 3.11 and later write the command that made the venv into pyvenv.cfg.
    config = host.file(f"{VENV}/pyvenv.cfg").content_string
    python = "/usr/bin/python3.12" if _os(host) == "rhel" else "/usr/bin/python3"
    assert f"command = {python} -m venv" in config, config
    # torch and numpy from the pinned wheels, none from the OS.
    assert "include-system-site-packages = false" in config
    imported = host.run(f"{VENV}/bin/python -c 'import numpy, torch; print(numpy.__version__, torch.__version__)'")
    assert imported.rc == 0 and imported.stdout.split() == ["2.4.6", "2.13.0+cpu"], imported.stderr
    assert "Failed to initialize NumPy" not in imported.stderr


def test_ssh_runs_as_the_os_names_it(host):
    service = "sshd" if _os(host) == "rhel" else "ssh"
    assert host.service(service).is_running


def test_resnet50_ran_on_every_node():
    for os_name, nodes in (("rhel9", RHEL), *UBUNTU.items()):
        # Each node alone with all its GPUs (group resnet50_node_<precision>); the sweep's one-GPU run is another group.
        alone = [record for record in _records(os_name, "resnet50") if record["group"].startswith("resnet50_node_")]
        assert sorted(node for record in alone for node in record["nodes"]) == nodes, alone
        for record in alone:
            assert record["verdict"] == "PASS" and record["run_failed"] is False, record


def test_the_rhel_sweep_ran_across_both_nodes_through_rhel_open_mpi():
    # The sweep adds whole nodes with the multi-node launcher, mpirun: /usr/lib64/openmpi/bin/mpirun on RHEL
    # (roles/gpuforge_bench/vars/RedHat.yml), which is not on PATH there.
    sweep = [record for record in _records("rhel9", "resnet50") if record["name"].startswith("resnet50-sweep-")]
    two_nodes = [record for record in sweep if record["observed"]["gpus"] == 2]
    assert two_nodes, sweep
    (record,) = two_nodes
    assert sorted(record["nodes"]) == RHEL
    assert record["verdict"] == "PASS" and record["run_failed"] is False, record


def test_fio_measured_local_scratch_on_every_node():
    for os_name, nodes in (("rhel9", RHEL), *UBUNTU.items()):
        measured = [record for record in _records(os_name, "fio") if record["observed"]["value"] is not None]
        assert sorted({node for record in measured for node in record["nodes"]}) == nodes, measured
        assert all(record["verdict"] == "PASS" for record in measured), measured
