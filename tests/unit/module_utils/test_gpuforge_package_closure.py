"""The closure guard's parsers and verdict (module_utils/gpuforge_package_closure.py) on real apt-get --simulate and
dnf --assumeno outputs (tests/fixtures/package_closure/, SOURCES.md says how they were produced)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_package_closure import (
    ParseError,
    closure_problems,
    parse_apt_simulate,
    parse_dnf_transaction,
    resolver_refusal,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "package_closure"
DCGM_PIN = {"packages": ["datacenter-gpu-manager-4-*"], "version": "1:4.4.1-1"}
DRIVER_PIN = {"packages": ["nvidia-*", "libnvidia-*", "libgl1-nvidia-*"], "version": "550.90.07-*"}


def read(name: str) -> tuple[str, int]:
    return (FIXTURES / name).read_text(encoding="utf-8"), int((FIXTURES / f"{name}.rc").read_text())


def test_apt_pinned_install_is_two_installs_at_the_pin_and_passes():
    text, rc = read("apt-simulate-install-pinned.txt")
    actions = parse_apt_simulate(text)
    assert actions == [
        {"name": "datacenter-gpu-manager-4-core", "action": "install", "version": "1:4.4.1-1", "installed": None},
        {"name": "datacenter-gpu-manager-4-cuda12", "action": "install", "version": "1:4.4.1-1", "installed": None},
    ]
    assert resolver_refusal("apt", rc, text, "") == ""
    assert closure_problems(actions, [DCGM_PIN], "gpu01") == []


def test_apt_floating_dependency_is_refused_naming_the_package_and_both_versions():
    text, _rc = read("apt-simulate-floating-dependency.txt")
    actions = parse_apt_simulate(text)
    assert [(a["name"], a["version"]) for a in actions] == [
        ("libgl1-nvidia-glvnd-glx", "570.195.03-1"),
        ("nvidia-driver", "550.90.07-1"),
    ]
    assert closure_problems(actions, [DRIVER_PIN], "gpu01") == [
        "gpu01: libgl1-nvidia-glvnd-glx would be installed at 570.195.03-1, not at the pinned 550.90.07-*"
    ]
    # a package no pin names, or one a pin excludes, is none of the guard's business
    assert closure_problems(actions, [{**DRIVER_PIN, "exclude": ["libgl1-nvidia-*"]}], "gpu01") == []
    assert closure_problems(actions, [{"packages": ["nvidia-*"], "version": "550.90.07-*"}], "gpu01") == []


def test_apt_removal_and_upgrade_are_both_reported():
    text, _ = read("apt-simulate-remove-and-upgrade.txt")
    actions = parse_apt_simulate(text)
    assert actions[0] == {"name": "nvidia-kernel-dkms", "action": "remove", "version": None, "installed": "550.90.07-1"}
    assert actions[1] == {
        "name": "libgl1-nvidia-glvnd-glx",
        "action": "change",
        "version": "570.195.03-1",
        "installed": "550.90.07-1",
    }
    problems = closure_problems(actions, [DRIVER_PIN], "gpu01")
    assert problems == [
        "gpu01: the transaction would remove nvidia-kernel-dkms 550.90.07-1 (a package of the stack must not take "
        "another's place silently)",
        "gpu01: libgl1-nvidia-glvnd-glx would be installed at 570.195.03-1, replacing 550.90.07-1, not at the pinned "
        "550.90.07-*",
        "gpu01: nvidia-driver would be installed at 570.195.03-1, not at the pinned 550.90.07-*",
    ]


def test_apt_downgrade_to_the_pin_and_a_same_version_reinstall_pass():
    downgrade = parse_apt_simulate(read("apt-simulate-downgrade.txt")[0])
    assert downgrade[0] == {
        "name": "datacenter-gpu-manager-4-core",
        "action": "change",
        "version": "1:4.4.1-1",
        "installed": "1:4.7.0-1",
    }
    assert closure_problems(downgrade, [DCGM_PIN], "gpu01") == []
    same = parse_apt_simulate(read("apt-simulate-same-version.txt")[0])
    assert same == [{"name": "nvidia-driver", "action": "change", "version": "550.90.07-1", "installed": "550.90.07-1"}]
    assert closure_problems(same, [DRIVER_PIN], "gpu01") == []


def test_apt_unmet_exact_dependency_is_apts_own_refusal():
    text, rc = read("apt-simulate-unmet-exact.txt")
    assert rc == 100
    with pytest.raises(ParseError):  # no transaction: the refusal is read by resolver_refusal
        parse_apt_simulate(text)
    refusal = resolver_refusal("apt", rc, text, "")
    assert refusal.splitlines()[0] == "The following packages have unmet dependencies:"
    assert (
        "datacenter-gpu-manager-4-cuda12 : Depends: datacenter-gpu-manager-4-core (= 1:4.4.1-1) but 1:4.7.0-1 is to "
        "be installed" in refusal
    )
    assert refusal.splitlines()[-1] == "E: Unable to correct problems, you have held broken packages."


def test_dnf_pinned_install_passes_with_epochs_and_a_long_name():
    text, rc = read("dnf-assumeno-install-pinned.txt")
    assert rc == 1 and resolver_refusal("dnf", rc, text, "") == ""
    actions = parse_dnf_transaction(text)
    assert [(a["name"], a["action"], a["version"]) for a in actions] == [
        ("datacenter-gpu-manager-4-core", "install", "1:4.4.1-1"),
        ("datacenter-gpu-manager-4-cuda12", "install", "1:4.4.1-1"),
        ("datacenter-gpu-manager-4-proprietary-multinode-cuda12", "install", "1:4.4.1-1"),
    ]
    assert closure_problems(actions, [{"packages": ["datacenter-gpu-manager-4-*"], "version": "4.4.1-1"}], "n") == []


def test_dnf_floating_dependency_is_refused_and_the_epoch_is_optional_in_the_pin():
    actions = parse_dnf_transaction(read("dnf-assumeno-floating-dependency.txt")[0])
    assert [(a["name"], a["action"], a["version"]) for a in actions] == [
        ("nvidia-driver", "install", "3:535.183.01-1.el9"),
        ("nvidia-kmod-common", "install", "3:535.309.01-1.el9"),
    ]
    pin = {"packages": ["nvidia-driver", "nvidia-kmod-common"], "version": "535.183.01-*"}
    assert closure_problems(actions, [pin], "gpu01") == [
        "gpu01: nvidia-kmod-common would be installed at 3:535.309.01-1.el9, not at the pinned 535.183.01-*"
    ]


def test_dnf_exact_requires_resolve_to_the_older_core():
    # Unlike apt, dnf's solver picks the older core that -cuda12 requires exactly.
    actions = parse_dnf_transaction(read("dnf-assumeno-exact-requires.txt")[0])
    assert [(a["name"], a["version"]) for a in actions] == [
        ("datacenter-gpu-manager-4-cuda12", "1:4.4.1-1"),
        ("datacenter-gpu-manager-4-core", "1:4.4.1-1"),
    ]


def test_dnf_removal_upgrade_and_downgrade():
    actions = parse_dnf_transaction(read("dnf-assumeno-remove-and-upgrade.txt")[0])
    assert [(a["name"], a["action"], a["version"], a["installed"]) for a in actions] == [
        ("kmod-nvidia-open-dkms", "install", "3:535.183.01-1.el9", None),
        ("nvidia-driver", "install", "3:535.309.01-1.el9", None),
        ("nvidia-kmod-common", "upgrade", "3:535.309.01-1.el9", None),
        ("kmod-nvidia-latest-dkms", "remove", None, "3:535.183.01-1.el9"),
    ]
    problems = closure_problems(actions, [{"packages": ["*nvidia*"], "version": "535.183.01-*"}], "gpu01")
    assert problems == [
        "gpu01: nvidia-driver would be installed at 3:535.309.01-1.el9, not at the pinned 535.183.01-*",
        "gpu01: nvidia-kmod-common would be installed at 3:535.309.01-1.el9, not at the pinned 535.183.01-*",
        "gpu01: the transaction would remove kmod-nvidia-latest-dkms 3:535.183.01-1.el9 (a package of the stack must "
        "not take another's place silently)",
    ]
    downgrade = parse_dnf_transaction(read("dnf-assumeno-downgrade.txt")[0])
    assert [(a["name"], a["action"]) for a in downgrade] == [
        ("datacenter-gpu-manager-4-cuda12", "install"),
        ("datacenter-gpu-manager-4-core", "downgrade"),
    ]


def test_dnf_nothing_to_do_and_its_own_refusal():
    text, rc = read("dnf-assumeno-installed.txt")
    assert rc == 0 and parse_dnf_transaction(text) == [] and resolver_refusal("dnf", rc, text, "") == ""
    text, rc = read("dnf-assumeno-conflict-without-allowerasing.txt")
    refusal = resolver_refusal("dnf", rc, text, "")
    assert refusal.startswith("Error:")
    assert "kmod-nvidia-latest-dkms-3:535.183.01-1.el9.x86_64 conflicts with kmod-nvidia-open-dkms" in refusal
    with pytest.raises(ParseError):
        parse_dnf_transaction(text)


def test_a_dnf_row_split_over_two_lines_is_joined():
    text = (
        "Dependencies resolved.\n"
        "Installing:\n"
        " datacenter-gpu-manager-4-proprietary-multinode-cuda12\n"
        "                           x86_64   1:4.4.1-1     gpuforge-test   5.6 k\n"
        "\nTransaction Summary\n"
    )
    assert parse_dnf_transaction(text) == [
        {
            "name": "datacenter-gpu-manager-4-proprietary-multinode-cuda12",
            "action": "install",
            "version": "1:4.4.1-1",
            "installed": None,
        }
    ]


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parse_apt_simulate, "Inst broken-line-without-version\n0 upgraded, 1 newly installed, 0 to remove\n"),
        (parse_apt_simulate, "Reading package lists...\n"),
        (parse_dnf_transaction, "Installing:\n nvidia-driver x86_64\nTransaction Summary\n"),
        (parse_dnf_transaction, "Dependencies resolved.\n"),
        (parse_apt_simulate, b"Inst x (1 a [amd64])"),
        (parse_dnf_transaction, None),
    ],
)
def test_malformed_output_is_a_parse_error(parser, text):
    with pytest.raises(ParseError):
        parser(text)
