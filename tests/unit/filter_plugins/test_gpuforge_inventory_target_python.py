"""The inventory check refuses hosts ansible-core cannot run modules on (issue 46 item 6): RHEL 7 (its Pythons are 2.7
and 3.6, which ansible-core 2.17 removed as targets), RHEL 8 (dnf's Python bindings exist for its platform-python 3.6
only, so ansible.builtin.dnf cannot run even beside a newer Python) and an interpreter older than 3.8; each names
why, what to do and the supported releases."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_inventory import (
    check_inventory,
    gpuforge_inventory_report,
)

GPU = {
    "gpuforge_expected_system": "dgx1-v100-edr",
    "gpuforge_expected_gpu_count": 8,
    "ipoib_interfaces": [{"hca": "mlx5_1", "port": 1, "address": "198.51.100.11/24"}],
}


def problems(**host) -> list[dict]:
    hosts = {"gpu01": {**copy.deepcopy(GPU), **host}}
    return [p for p in check_inventory(hosts, {"all": ["gpu01"], "gpu_nodes": ["gpu01"]}) if p["severity"] == "error"]


@pytest.mark.parametrize(
    "facts",
    [
        {"ansible_facts": {"os_family": "RedHat", "distribution": "RedHat", "distribution_major_version": "7"}},
        {"ansible_facts": {"os_family": "RedHat", "distribution": "CentOS", "distribution_major_version": "7"}},
        {"ansible_os_family": "RedHat", "ansible_distribution_major_version": "7"},
    ],
)
def test_rhel7_is_refused_naming_the_python_floor_and_the_supported_releases(facts):
    (problem,) = problems(**facts)
    assert problem["host"] == "gpu01"
    assert problem["variable"] == "ansible_facts.distribution_major_version"
    assert "2.7 and 3.6" in problem["problem"] and "ansible-core 2.17" in problem["problem"]
    assert "Python 3.8 or newer" in problem["problem"]
    for release in ("Debian 12", "Ubuntu 22.04 and 24.04", "RHEL 9"):
        assert release in problem["fix"]
    assert "RHEL 8" not in problem["fix"]
    report = gpuforge_inventory_report([problem], "error")
    assert report[0].startswith("gpu01: ansible_facts.distribution_major_version is 7")


@pytest.mark.parametrize(
    ("interpreter", "facts"),
    [
        (None, {"ansible_facts": {"os_family": "RedHat", "distribution": "RedHat", "distribution_major_version": "8"}}),
        ("/usr/bin/python3.12", {"ansible_facts": {"os_family": "RedHat", "distribution_major_version": "8"}}),
        ("/usr/bin/python3", {"ansible_os_family": "RedHat", "ansible_distribution_major_version": "8"}),
    ],
)
def test_rhel8_is_refused_whatever_its_interpreter_naming_dnf_and_the_supported_releases(interpreter, facts):
    host = {**facts, **({"ansible_python_interpreter": interpreter} if interpreter else {})}
    (problem,) = problems(**host)
    assert problem["variable"] == "ansible_facts.distribution_major_version"
    assert "dnf Python bindings" in problem["problem"] and "platform-python 3.6" in problem["problem"]
    assert "ansible.builtin.dnf" in problem["problem"]
    assert "RHEL 9" in problem["fix"] and "Debian 12" in problem["fix"] and "RHEL 8" not in problem["fix"]


@pytest.mark.parametrize(
    ("interpreter", "facts"),
    [
        ("/usr/libexec/platform-python", {}),
        ("/usr/bin/python3.6", {}),
        ("/usr/bin/python2", {}),
        ("/usr/bin/python2.7", {}),
        ("/usr/bin/python3.7", {"ansible_facts": {"os_family": "Debian", "distribution_major_version": "12"}}),
    ],
)
def test_an_interpreter_older_than_38_is_refused_with_what_to_set(interpreter, facts):
    (problem,) = problems(ansible_python_interpreter=interpreter, **facts)
    assert problem["variable"] == "ansible_python_interpreter"
    assert interpreter in problem["problem"] and "older than 3.8" in problem["problem"]
    assert "Python 3.8 or newer" in problem["fix"] and "RHEL 9" in problem["fix"]


@pytest.mark.parametrize(
    ("interpreter", "facts"),
    [
        ("/usr/bin/python3", {"ansible_facts": {"os_family": "RedHat", "distribution_major_version": "9"}}),
        ("/usr/bin/python3.12", {"ansible_facts": {"os_family": "RedHat", "distribution_major_version": "9"}}),
        ("/usr/bin/python3", {"ansible_facts": {"os_family": "Debian", "distribution_major_version": "12"}}),
        ("/usr/bin/python3.11", {}),
        (None, {}),
    ],
)
def test_supported_hosts_and_newer_interpreters_pass(interpreter, facts):
    host = {**facts, **({"ansible_python_interpreter": interpreter} if interpreter else {})}
    assert problems(**host) == []
