"""apt_read_packages / apt_specs_unmet: the read before an apt install, and which specifiers it finds unmet.
(tests/unit/library/test_package_version_floor.py runs them with the module and this host's dpkg)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import (
    apt_read_packages,
    apt_specs_unmet,
    describe_apt_unmet,
    split_apt_spec,
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("ipmitool", ("ipmitool", None, None)),
        ("nvidia-container-toolkit=1.17.8-1", ("nvidia-container-toolkit", "=", "1.17.8-1")),
        ("nvidia-driver=575.57.08-*", ("nvidia-driver", "=", "575.57.08-*")),
        ("datacenter-gpu-manager=1:3.3.9", ("datacenter-gpu-manager", "=", "1:3.3.9")),
        ("prometheus>=2.42.0+ds-5+deb12u1", ("prometheus", ">=", "2.42.0+ds-5+deb12u1")),
        ("libstdc++6", ("libstdc++6", None, None)),
        ("x", None),  # Debian Policy 5.6.1: at least two characters
        # Not judged: an architecture qualifier, a name pattern, other operators, blanks, empty, not a string.
        ("libc6:i386", None),
        ("nvidia-*", None),
        ("slurmd<=23", None),
        ("slurmd==23", None),
        ("slurmd=", None),
        ("slurmd 23", None),
        ("", None),
        (None, None),
        (3, None),
    ],
)
def test_split_apt_spec(spec, expected):
    assert split_apt_spec(spec) == expected


def test_read_packages_floor_only_for_at_least():
    specs = ["ipmitool", "prometheus>=2.42.0+ds-5+deb12u1", "nvidia-driver=575.57.08-*", "libc6:i386", "ipmitool"]
    assert apt_read_packages(specs) == [
        {"name": "ipmitool"},
        {"name": "prometheus", "version": "2.42.0+ds-5+deb12u1"},
        {"name": "nvidia-driver"},
    ]
    assert apt_read_packages(None) == []


READ = {
    "installed": {
        "ipmitool": "1.8.19-4",
        "nvidia-driver": "575.57.08-1",
        "prometheus": "2.40.0+ds-1",
        "dcgm": "1:3.3.9",
    },
    "below_floor": [{"name": "prometheus", "installed": "2.40.0+ds-1", "floor": "2.42.0+ds-5+deb12u1"}],
    "missing": ["munge"],
    "changed": False,
}


@pytest.mark.parametrize(
    ("spec", "unmet"),
    [
        ("ipmitool", False),
        ("munge", True),
        ("nvidia-driver=575.57.08-*", False),
        ("nvidia-driver=575.57.08-1", False),
        ("nvidia-driver=575.57.08-2", True),  # another revision pinned
        ("nvidia-driver=580.*", True),  # another release
        ("nvidia-driver=575.57.08-1*", False),
        ("NVIDIA-driver", True),  # not a Debian package name: never judged met
        ("dcgm=1:3.3.9", False),
        ("dcgm=3.3.9", True),  # the epoch is part of the version apt matches
        ("prometheus>=2.42.0+ds-5+deb12u1", True),  # below its floor
        ("ipmitool>=1.8.19-4", False),  # installed, not below (the read judged no floor for it: see the pattern)
        ("munge>=0.5.15", True),
        ("libc6:i386", True),
    ],
)
def test_unmet_judges_as_apt_judges_a_present_package(spec, unmet):
    assert apt_specs_unmet([spec], READ) == ([spec] if unmet else [])


@pytest.mark.parametrize(
    "read",
    [
        None,
        {},
        "ok",
        {"skipped": True, "changed": False},
        {"failed": True, "installed": {}, "below_floor": []},
        {"installed": {"ipmitool": "1"}},
        {"installed": ["ipmitool"], "below_floor": []},
    ],
)
def test_a_read_that_did_not_run_leaves_everything_unmet(read):
    assert apt_specs_unmet(["ipmitool", "munge"], read) == ["ipmitool", "munge"]


def test_case_sensitive_wildcards():
    read = {"installed": {"xz-utils": "1.0-1ubuntu1"}, "below_floor": []}
    assert apt_specs_unmet(["xz-utils=1.0-1UBUNTU*"], read) == ["xz-utils=1.0-1UBUNTU*"]
    assert apt_specs_unmet(["xz-utils=1.0-1ubuntu?"], read) == []


def test_describe_says_why_each_specifier_is_unmet():
    read = {
        "installed": {"ipmitool": "1.8.19-4", "prometheus": "2.40.0+ds-1", "munge": "0.5.15-2"},
        "below_floor": [{"name": "prometheus", "installed": "2.40.0+ds-1", "floor": "2.42.0+ds-5+deb12u1"}],
    }
    specs = ["ipmitool", "munge=0.5.14-*", "prometheus>=2.42.0+ds-5+deb12u1", "slurmd", "libc6:i386"]
    assert describe_apt_unmet(specs, read) == [
        "munge 0.5.15-2 does not match its pin 0.5.14-*",
        "prometheus 2.40.0+ds-1 is older than its floor 2.42.0+ds-5+deb12u1",
        "slurmd is not installed",
        "libc6:i386: specifier not understood",
    ]
    assert describe_apt_unmet(["ipmitool"], read) == []
