"""inventories/sample/: every reference system's inventory loads in Ansible, passes the inventory check with no
problem at all, uses documentation names and addresses, and playbooks/validate_inventory.yml passes it without
contacting a host (and stops a broken copy, naming the host and the variable)."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_inventory import (
    gpuforge_inventory_problems,
    known_variables,
    role_prefixes,
)
from hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = ROOT / "inventories" / "sample"
SAMPLES = ["dgx1-edr-scale-openshift", "c4140-slurm-nfs-ipoib", "vsphere-t4-vgpu-roce", "dgx-h100-ndr"]
DOCUMENTATION_NETS = [ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")]
ENV = {
    **os.environ,
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    "ANSIBLE_NOCOLOR": "1",
}


def init_collection_loader() -> None:
    """Lookups such as ansible.builtin.env resolve as under ansible-playbook."""
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        from ansible.plugins.loader import init_plugin_loader

        init_plugin_loader()


def load(inventory: Path):
    init_collection_loader()
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(inventory)])
    variables = VariableManager(loader=loader, inventory=manager)
    return manager, variables, HostVars(manager, variables, loader)


def problems_of(inventory: Path) -> list[dict]:
    manager, _, hostvars = load(inventory)
    return gpuforge_inventory_problems(hostvars, manager.get_groups_dict(), [str(inventory)])


def test_every_sample_is_here_and_documented():
    assert sorted(p.name for p in SAMPLES_DIR.iterdir() if p.is_dir()) == sorted(SAMPLES)
    readme = (SAMPLES_DIR / "README.md").read_text(encoding="utf-8")
    for sample in SAMPLES:
        assert f"`{sample}/`" in readme
        assert list((SAMPLES_DIR / sample / "group_vars" / "all").glob("*.yml"))


@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_passes_the_inventory_check_with_no_problem(sample):
    assert problems_of(SAMPLES_DIR / sample / "hosts.yml") == []


@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_sets_only_variables_gpuforge_reads(sample):
    """A variable nothing reads has no effect; the typo warning only catches near misses, this catches all."""
    manager, variables, _ = load(SAMPLES_DIR / sample / "hosts.yml")
    known, prefixes = known_variables(), role_prefixes()
    for host in manager.get_hosts():
        names = variables.get_vars(host=host, include_hostvars=False)
        unknown = sorted(n for n in names if n.startswith(prefixes) and n not in known)
        assert unknown == [], f"{host.name}: {unknown}"


@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_uses_documentation_names_and_addresses(sample):
    manager, _, hostvars = load(SAMPLES_DIR / sample / "hosts.yml")
    for host in manager.get_hosts():
        assert host.name.endswith(".example.com"), host.name
        address = ipaddress.ip_address(hostvars[host.name]["ansible_host"])
        assert any(address in net for net in DOCUMENTATION_NETS), (host.name, address)
        for entry in hostvars[host.name].get("ipoib_interfaces") or []:
            ip = ipaddress.ip_interface(entry["address"]).ip
            assert any(ip in net for net in DOCUMENTATION_NETS), (host.name, ip)
    for path in (SAMPLES_DIR / sample).rglob("*.yml"):
        text = path.read_text(encoding="utf-8")
        assert text.startswith("---\n"), path
        for name in re.findall(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)+\.(?:com|org|net)\b", text):
            assert name.endswith("example.com") or name in (
                "developer.download.nvidia.com",
                "nvidia.github.io",
                "dl.fedoraproject.org",
                "linux.mellanox.com",
            ), (path, name)


@pytest.mark.parametrize("sample", SAMPLES)
def test_ansible_inventory_lists_the_sample(sample):
    result = subprocess.run(
        ["ansible-inventory", "-i", str(SAMPLES_DIR / sample / "hosts.yml"), "--list"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    listed = yaml.safe_load(result.stdout)
    assert listed["gpu_nodes"]["hosts"]
    assert "WARNING" not in result.stderr, result.stderr


def run_check(inventory: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), "playbooks/validate_inventory.yml", "--check"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
        timeout=HANG_GUARD_S,
    )


@pytest.mark.parametrize("sample", SAMPLES)
def test_validate_inventory_playbook_passes_the_sample_without_contacting_hosts(sample):
    # The hosts are example.com names on documentation addresses: any connection attempt would fail the run.
    result = run_check(SAMPLES_DIR / sample / "hosts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "unreachable=0" in result.stdout and "failed=0" in result.stdout


def test_validate_inventory_playbook_stops_a_broken_copy(tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(SAMPLES_DIR / "c4140-slurm-nfs-ipoib", broken)
    hosts = broken / "hosts.yml"
    text = hosts.read_text(encoding="utf-8")
    text = text.replace("gpuforge_expected_gpu_count: 4", "gpuforge_expected_gpu_count: eight")
    text = text.replace("    slurm_controller:\n      hosts:\n        head01.example.com:\n", "")
    hosts.write_text(text, encoding="utf-8")
    result = run_check(hosts)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "node001.example.com, node002.example.com, node003.example.com, node004.example.com: " in output
    assert 'gpuforge_expected_gpu_count is "eight", not a whole number of GPUs' in output
    assert "slurm_controller (group) has no hosts, but the host is in slurm_compute" in output
    assert "Fix: add the head node that runs slurmctld to slurm_controller" in output


def test_validate_inventory_playbook_stops_an_unreadable_inventory(tmp_path):
    broken = tmp_path / "hosts.yml"
    broken.write_text("all:\n  hosts: [gpu01\n", encoding="utf-8")
    result = run_check(broken)
    assert result.returncode != 0
    assert f"(inventory): {broken} has no hosts: it could not be read" in result.stdout


def lab_inventory(directory: Path, generated: bool) -> Path:
    """The inventory `gpuforge lab up` writes for the demo spec, with inventories/lab/group_vars."""
    from gpuforge.lab import inventory, spec

    lab_spec = spec.from_file(ROOT / "lab" / "specs" / "demo.yml")
    rendered = inventory.render(lab_spec, [f"10.242.0.{10 + i}" for i in range(len(lab_spec.nodes))])
    group_vars = directory / "group_vars" / "all"
    group_vars.mkdir(parents=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(rendered), encoding="utf-8")
    for path in (ROOT / "inventories" / "lab" / "group_vars" / "all").glob("*.yml"):
        if path.name != "lab_generated.yml":  # written by `gpuforge lab up`, absent in a fresh checkout
            shutil.copy(path, group_vars / path.name)
    if generated:
        values = {"gpuforge_lab_mirror_url": "http://mirror", "gpuforge_lab_mirror_key_sha256": "0" * 64}
        (group_vars / "lab_generated.yml").write_text(yaml.safe_dump(values), encoding="utf-8")
    return directory / "hosts.yml"


def test_the_lab_inventory_passes(tmp_path):
    assert problems_of(lab_inventory(tmp_path / "lab", generated=True)) == []
    # Without the generated file the check says how to make it.
    problems = problems_of(lab_inventory(tmp_path / "fresh", generated=False))
    errors = {(p["variable"], p["fix"]) for p in problems if p["severity"] == "error"}
    assert errors == {
        ("gpuforge_lab_mirror_url", "run 'gpuforge lab up' (or 'make demo') to create the lab and write it")
    }
