"""package_closure_guard: the dry run it asks for, and its verdict on the real outputs recorded in
tests/fixtures/package_closure/ (the parsers' own tests are in tests/unit/module_utils/)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import package_closure_guard

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "package_closure"
DRIVER = {
    "name": ["nvidia-driver=550.90.07-1"],
    "pins": [{"packages": ["nvidia-*", "libgl1-nvidia-*"], "version": "550.90.07-*"}],
}


class Recorded:
    """run_command answering the dry run with one recorded output, and dpkg-query with `dpkg` (rows in its -W
    format; by default dpkg knows none of the packages)."""

    def __init__(self, fixture: str, dpkg: str = ""):
        self.out = (FIXTURES / fixture).read_text(encoding="utf-8")
        self.rc = int((FIXTURES / f"{fixture}.rc").read_text())
        self.dpkg = dpkg
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append((list(argv), kwargs))
        if argv[0].endswith("dpkg-query"):
            if self.dpkg:
                return 0, self.dpkg, ""
            names = argv[2:]
            return 1, "", "".join(f"dpkg-query: no packages found matching {name}\n" for name in names)
        return self.rc, self.out, ""

    @property
    def dry_runs(self) -> list:
        return [(argv, kwargs) for argv, kwargs in self.calls if not argv[0].endswith("dpkg-query")]


@pytest.fixture
def run_module(ansible_module):
    return partial(ansible_module, package_closure_guard, bin_path="/usr/bin/{}".format)


def test_apt_dry_run_arguments_and_a_closure_on_its_pins(run_module):
    host = Recorded("apt-simulate-install-pinned.txt")
    args = {
        "manager": "apt",
        "name": ["datacenter-gpu-manager-4-core=1:4.4.1-1", "datacenter-gpu-manager-4-cuda12=1:4.4.1-1"],
        "pins": [{"packages": ["datacenter-gpu-manager-4-*"], "version": "1:4.4.1-1"}],
        "allow_downgrade": True,
        "install_recommends": False,
    }
    result = run_module(args, host, check_mode=True)
    assert result["changed"] is False and result["problems"] == []
    assert [a["name"] for a in result["actions"]] == [
        "datacenter-gpu-manager-4-core",
        "datacenter-gpu-manager-4-cuda12",
    ]
    assert host.calls[0][0][:2] == ["/usr/bin/dpkg-query", "-W"]
    ((argv, kwargs),) = host.dry_runs
    assert argv == [
        "/usr/bin/apt-get",
        "install",
        "--simulate",
        "-y",
        "-o",
        "Debug::NoLocking=1",
        "--allow-downgrades",
        "--no-install-recommends",
        "datacenter-gpu-manager-4-core=1:4.4.1-1",
        "datacenter-gpu-manager-4-cuda12=1:4.4.1-1",
    ]
    assert kwargs["environ_update"]["LC_ALL"] == "C"


def test_a_floating_dependency_fails_naming_package_and_both_versions(run_module):
    result = run_module({"manager": "apt", **DRIVER}, Recorded("apt-simulate-floating-dependency.txt"), True)
    assert result["failed"] is True
    assert "libgl1-nvidia-glvnd-glx would be installed at 570.195.03-1, not at the pinned 550.90.07-*" in result["msg"]
    assert "Restore the lock" in result["msg"]


def test_a_removal_fails(run_module):
    result = run_module({"manager": "apt", **DRIVER}, Recorded("apt-simulate-remove-and-upgrade.txt"), True)
    assert "would remove nvidia-kernel-dkms 550.90.07-1" in result["msg"]


def test_apts_own_refusal_is_passed_on(run_module):
    args = {"manager": "apt", "name": ["datacenter-gpu-manager-4-cuda12=1:4.4.1-1"], "pins": []}
    result = run_module(args, Recorded("apt-simulate-unmet-exact.txt"), True)
    assert result["rc"] == 100
    assert "apt-get cannot install datacenter-gpu-manager-4-cuda12=1:4.4.1-1 as pinned" in result["msg"]
    assert "Depends: datacenter-gpu-manager-4-core (= 1:4.4.1-1) but 1:4.7.0-1 is to be installed" in result["msg"]


def test_dnf_assumeno_and_its_verdict(run_module):
    host = Recorded("dnf-assumeno-floating-dependency.txt")
    args = {
        "manager": "dnf",
        "name": ["nvidia-driver-535.183.01"],
        "pins": [{"packages": ["nvidia-driver", "nvidia-kmod-common"], "version": "535.183.01-*"}],
    }
    result = run_module(args, host, True)
    assert host.calls[0][0] == ["/usr/bin/dnf", "install", "--assumeno", "nvidia-driver-535.183.01"]
    assert len(host.calls) == 1  # no dpkg read on dnf
    assert (
        "nvidia-kmod-common would be installed at 3:535.309.01-1.el9, not at the pinned 535.183.01-*" in result["msg"]
    )
    passed = run_module({**args, "pins": [{"packages": ["nvidia-*"], "version": "*"}]}, host)
    assert passed["problems"] == [] and len(passed["actions"]) == 2


def test_dnf_nothing_to_do_passes_and_its_error_fails(run_module):
    args = {"manager": "dnf", "name": ["nvidia-kmod-common-535.183.01"], "pins": []}
    assert run_module(args, Recorded("dnf-assumeno-installed.txt"))["actions"] == []
    failed = run_module(args, Recorded("dnf-assumeno-conflict-without-allowerasing.txt"), True)
    assert "dnf cannot install" in failed["msg"] and "conflicts with kmod-nvidia-open-dkms" in failed["msg"]


def test_a_missing_package_manager_is_named(run_module):
    result = run_module(
        {"manager": "dnf", **DRIVER}, Recorded("dnf-assumeno-installed.txt"), True, bin_path=lambda n: None
    )
    assert "dnf" in result["msg"] and "install dnf" in result["msg"]


def test_a_converged_host_skips_the_dry_run(run_module):
    # Every package already at a version its pattern matches: no transaction, so no apt cache to open.
    dpkg = "nvidia-driver\t550.90.07-1\tii \n"
    host = Recorded("apt-simulate-floating-dependency.txt", dpkg)
    result = run_module({"manager": "apt", "name": ["nvidia-driver=550.90.07-*"], "pins": DRIVER["pins"]}, host)
    assert result["dry_run"] is False and result["actions"] == [] and host.dry_runs == []
    # One package off its pin (or a pattern the read cannot judge): the dry run decides.
    off = Recorded("apt-simulate-floating-dependency.txt", "nvidia-driver\t570.195.03-1\tii \n")
    failed = run_module({"manager": "apt", "name": ["nvidia-driver=550.90.07-*"], "pins": DRIVER["pins"]}, off, True)
    assert len(off.dry_runs) == 1 and "libgl1-nvidia-glvnd-glx would be installed at 570.195.03-1" in failed["msg"]
    floor = Recorded("apt-simulate-floating-dependency.txt", dpkg)
    run_module({"manager": "apt", "name": ["nvidia-driver>=550"], "pins": DRIVER["pins"]}, floor, True)
    assert len(floor.dry_runs) == 1 and not any(argv[0].endswith("dpkg-query") for argv, _ in floor.calls)
