"""package_version_floor: one dpkg-query / rpm -q read, the floors judged, the failure message, check mode."""

from __future__ import annotations

import shutil
import subprocess
from functools import partial

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import (
    apt_read_packages,
    apt_specs_unmet,
)
from ansible_collections.gpuforge.cluster.plugins.modules import package_version_floor

FIX = "the package mirror lacks that build: refresh it, or lower the floor deliberately"
# The gpu_monitoring floors of Debian 12 (roles/gpu_monitoring/defaults/main.yml).
FLOORS = [
    {"name": "prometheus", "version": "2.42.0+ds-5+deb12u1"},
    {"name": "prometheus-node-exporter", "version": "1.5.0-1+b6"},
]
AT_FLOOR = "prometheus\t2.42.0+ds-5+deb12u1\tii \nprometheus-node-exporter\t1.5.0-1+b6\tii \n"


class FakeHost:
    """dpkg-query / rpm answer from canned text; dpkg --compare-versions from the set of (installed, floor)
    pairs that are below (the real order is dpkg's; these tests are about the module's handling)."""

    def __init__(self, query_out="", query_err="", query_rc=0, below=(), compare_rc=None, compare_err=""):
        self.query = (query_rc, query_out, query_err)
        self.below = set(below)
        self.compare_rc, self.compare_err = compare_rc, compare_err
        self.calls: list[tuple[list[str], dict]] = []

    def __call__(self, argv, **kwargs):
        self.calls.append((list(argv), kwargs))
        if argv[1:2] == ["--compare-versions"]:
            if self.compare_rc is not None:
                return self.compare_rc, "", self.compare_err
            return (1 if (argv[2], argv[4]) in self.below else 0), "", ""
        return self.query

    @property
    def argvs(self) -> list[list[str]]:
        return [argv for argv, _ in self.calls]


@pytest.fixture
def run_module(ansible_module):
    return partial(ansible_module, package_version_floor, bin_path="/usr/bin/{}".format)


def test_all_at_their_floors_is_one_query_and_no_comparison(run_module):
    host = FakeHost(AT_FLOOR)
    result = run_module({"packages": FLOORS, "manager": "dpkg"}, host)
    assert result["changed"] is False
    assert result["manager"] == "dpkg"
    assert result["installed"] == {"prometheus": "2.42.0+ds-5+deb12u1", "prometheus-node-exporter": "1.5.0-1+b6"}
    assert (result["below_floor"], result["missing"]) == ([], [])
    assert host.argvs == [
        [
            "/usr/bin/dpkg-query",
            "-W",
            "-f=${Package}\\t${Version}\\t${db:Status-Abbrev}\\n",
            "prometheus",
            "prometheus-node-exporter",
        ]
    ]
    assert all(kwargs["environ_update"] == {"LC_ALL": "C"} for _, kwargs in host.calls)


def test_newer_than_the_floor_is_compared_by_dpkg(run_module):
    host = FakeHost("prometheus\t2.42.0+ds-5+deb12u2\tii \nprometheus-node-exporter\t1.5.0-1+b6\tii \n")
    result = run_module({"packages": FLOORS, "manager": "dpkg"}, host)
    assert result["installed"]["prometheus"] == "2.42.0+ds-5+deb12u2"
    assert host.argvs[1:] == [
        ["/usr/bin/dpkg", "--compare-versions", "2.42.0+ds-5+deb12u2", "ge", "2.42.0+ds-5+deb12u1"]
    ]


def test_one_below_its_floor_fails_naming_package_versions_and_fix(run_module):
    host = FakeHost(
        "prometheus\t2.42.0+ds-5\tii \nprometheus-node-exporter\t1.5.0-1+b6\tii \n",
        below={("2.42.0+ds-5", "2.42.0+ds-5+deb12u1")},
    )
    result = run_module({"packages": FLOORS, "manager": "dpkg"}, host, expect_failure=True)
    assert result["msg"] == f"prometheus 2.42.0+ds-5 is older than its floor 2.42.0+ds-5+deb12u1: {FIX}."
    assert result["below_floor"] == [{"name": "prometheus", "installed": "2.42.0+ds-5", "floor": "2.42.0+ds-5+deb12u1"}]
    assert result["changed"] is False


def test_the_fix_is_the_roles_own(run_module):
    host = FakeHost("slurmd\t22.05.8-4\tii \n", below={("22.05.8-4", "22.05.8-4+deb12u3")})
    fix = "the package mirror lacks the security update (the security build gpuforge pins): refresh it"
    args = {"packages": [{"name": "slurmd", "version": "22.05.8-4+deb12u3"}], "manager": "dpkg", "fix": fix}
    result = run_module(args, host, expect_failure=True)
    assert result["msg"] == f"slurmd 22.05.8-4 is older than its floor 22.05.8-4+deb12u3: {fix}."


@pytest.mark.parametrize("check_mode", [False, True])
def test_missing_package_fails_or_is_ignored(run_module, check_mode):
    out = "prometheus\t2.42.0+ds-5+deb12u1\tii \nprometheus-node-exporter\t1.5.0-1+b6\trc \n"
    result = run_module({"packages": FLOORS, "manager": "dpkg"}, FakeHost(out, query_rc=0), expect_failure=True)
    assert result["msg"] == (
        "Not installed: prometheus-node-exporter (dpkg status rc: removed, its configuration files remain)."
    )
    assert result["missing"] == ["prometheus-node-exporter"]
    host = FakeHost("", "dpkg-query: no packages found matching prometheus\n", query_rc=1)
    args = {"packages": FLOORS[:1], "manager": "dpkg", "missing": "ignore"}
    result = run_module(args, host, check_mode=check_mode)
    assert (result["missing"], result["installed"], result["changed"]) == (["prometheus"], {}, False)


def test_unknown_package_fails_with_missing_fail(run_module):
    host = FakeHost("prometheus\t2.42.0+ds-5+deb12u1\tii \n", "dpkg-query: no packages found matching x\n", 1)
    args = {"packages": [FLOORS[0], {"name": "x", "version": "1"}], "manager": "dpkg"}
    result = run_module(args, host, expect_failure=True)
    assert result["msg"] == "Not installed: x (unknown to dpkg)."


def test_below_and_missing_together(run_module):
    host = FakeHost(
        "prometheus\t2.40.0+ds-1\tii \n", "dpkg-query: no packages found matching prometheus-node-exporter\n", 1
    )
    host.below = {("2.40.0+ds-1", "2.42.0+ds-5+deb12u1")}
    result = run_module({"packages": FLOORS, "manager": "dpkg"}, host, expect_failure=True)
    assert result["msg"] == (
        f"prometheus 2.40.0+ds-1 is older than its floor 2.42.0+ds-5+deb12u1: {FIX}. "
        "Not installed: prometheus-node-exporter (unknown to dpkg)."
    )


def test_check_mode_reads_and_judges_the_same(run_module):
    host = FakeHost("prometheus\t2.42.0+ds-5\tii \nprometheus-node-exporter\t1.5.0-1+b6\tii \n")
    host.below = {("2.42.0+ds-5", "2.42.0+ds-5+deb12u1")}
    result = run_module({"packages": FLOORS, "manager": "dpkg"}, host, expect_failure=True, check_mode=True)
    assert result["below_floor"][0]["name"] == "prometheus"
    assert [argv[0] for argv in host.argvs] == ["/usr/bin/dpkg-query", "/usr/bin/dpkg"]


def test_held_and_multiarch_packages(run_module):
    out = "libc6\t2.36-9+deb12u7\tii \nlibc6\t2.36-9+deb12u7\tii \nslurmd\t22.05.8-4+deb12u3\thi \n"
    floors = [{"name": "libc6:i386", "version": "2.36-9+deb12u7"}, {"name": "slurmd", "version": "22.05.8-4+deb12u3"}]
    result = run_module({"packages": floors, "manager": "dpkg"}, FakeHost(out))
    assert result["installed"] == {"libc6:i386": "2.36-9+deb12u7", "slurmd": "22.05.8-4+deb12u3"}


def test_dpkg_query_failure_names_the_tool_and_its_message(run_module):
    host = FakeHost("", "dpkg-query: error: parsing file '/var/lib/dpkg/status' near line 12: bad\n", query_rc=2)
    result = run_module({"packages": FLOORS, "manager": "dpkg"}, host, expect_failure=True)
    assert result["msg"].startswith("dpkg-query -W failed (exit 2) on ")
    assert "parsing file '/var/lib/dpkg/status' near line 12" in result["msg"]
    assert result["rc"] == 2


@pytest.mark.parametrize(
    ("out", "fragment"),
    [
        ("", "dpkg-query printed nothing"),
        ("Desired=Unknown/Install/Remove/Purge/Hold\n", "line 1 is not 'package<TAB>version<TAB>status'"),
        ("prometheus\t2.42.0+ds-5+deb12u1\tii \n", "neither a version of prometheus-node-exporter"),
    ],
)
def test_malformed_dpkg_query_output(run_module, out, fragment):
    result = run_module({"packages": FLOORS, "manager": "dpkg"}, FakeHost(out), expect_failure=True)
    assert result["msg"].startswith("could not read the installed versions from dpkg-query -W (exit 0): ")
    assert fragment in result["msg"]


def test_a_floor_dpkg_cannot_read(run_module):
    host = FakeHost(
        AT_FLOOR, compare_rc=2, compare_err="dpkg: error: version '1.0-' has bad syntax: revision number is empty"
    )
    args = {"packages": [{"name": "prometheus", "version": "1.0-"}], "manager": "dpkg"}
    result = run_module(args, host, expect_failure=True)
    assert result["msg"] == (
        "dpkg --compare-versions could not compare prometheus 2.42.0+ds-5+deb12u1 with its floor 1.0- (exit 2): "
        "dpkg: error: version '1.0-' has bad syntax: revision number is empty"
    )


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="no dpkg on this host")
def test_with_the_real_dpkg_order(run_module):
    """dpkg is the authority: the module's argv run by this host's dpkg."""

    def answer(argv, **kwargs):
        if argv[1:2] == ["--compare-versions"]:
            run = subprocess.run(["dpkg", *argv[1:]], capture_output=True, text=True, check=False)
            return run.returncode, run.stdout, run.stderr
        return 0, "slurmd\t22.05.8-4+deb12u3\tii \nmunge\t0.5.15-2\tii \nlibmunge2\t1:0.5.15-2~bpo1\tii \n", ""

    floors = [
        {"name": "slurmd", "version": "22.05.8-4+deb12u2"},  # newer security build: at least the floor
        {"name": "munge", "version": "0.5.15-2+deb12u1"},  # older than the security build
        {"name": "libmunge2", "version": "0.5.16"},  # the epoch wins
    ]
    result = run_module({"packages": floors, "manager": "dpkg"}, answer, expect_failure=True)
    assert result["below_floor"] == [{"name": "munge", "installed": "0.5.15-2", "floor": "0.5.15-2+deb12u1"}]


# ---------------------------------------------------------------------------------------------------------
# rpm

RPM_OUT = "slurm\t(none):22.05.9-1.el9\nmunge\t(none):0.5.13-13.el9\npackage slurm-slurmd is not installed\n"


def test_rpm_path(run_module):
    host = FakeHost(RPM_OUT, query_rc=1)
    floors = [
        {"name": "slurm", "version": "22.05.9"},
        {"name": "munge", "version": "0.5.13-14.el9"},
        {"name": "slurm-slurmd", "version": "22.05.9"},
    ]
    result = run_module({"packages": floors, "manager": "rpm", "missing": "ignore"}, host, expect_failure=True)
    assert host.argvs == [
        ["/usr/bin/rpm", "-q", "--qf", "%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n", "slurm", "munge", "slurm-slurmd"]
    ]
    assert result["msg"] == f"munge 0.5.13-13.el9 is older than its floor 0.5.13-14.el9: {FIX}."
    assert result["installed"] == {"slurm": "22.05.9-1.el9", "munge": "0.5.13-13.el9"}
    assert result["missing"] == ["slurm-slurmd"]


def test_rpm_epoch_and_install_only_packages(run_module):
    out = "kernel\t(none):5.14.0-362.8.1.el9_3\nkernel\t(none):5.14.0-427.13.1.el9_4\nshadow-utils\t2:4.9-8.el9\n"
    floors = [{"name": "kernel", "version": "5.14.0-427"}, {"name": "shadow-utils", "version": "4.10"}]
    result = run_module({"packages": floors, "manager": "rpm"}, FakeHost(out))
    assert result["installed"] == {"kernel": "5.14.0-427.13.1.el9_4", "shadow-utils": "2:4.9-8.el9"}


def test_rpm_query_failure(run_module):
    host = FakeHost("", "error: rpmdb: BDB0113 Thread/process 4242/0 failed: Thread died in Berkeley DB library\n", 1)
    result = run_module({"packages": [{"name": "slurm", "version": "1"}], "manager": "rpm"}, host, expect_failure=True)
    assert result["msg"].startswith("rpm -q failed (exit 1) on ")
    assert "BDB0113" in result["msg"]


def test_malformed_rpm_output(run_module):
    host = FakeHost("slurm 22.05.9-1.el9\n")
    result = run_module({"packages": [{"name": "slurm", "version": "1"}], "manager": "rpm"}, host, expect_failure=True)
    assert result["msg"].startswith("could not read the installed versions from rpm -q (exit 0): rpm line 1 is not")


# ---------------------------------------------------------------------------------------------------------
# Manager, tools, options


@pytest.mark.parametrize(("status", "expected"), [("Package: dpkg\n", "dpkg"), ("", "rpm"), (None, "rpm")])
def test_auto_manager(run_module, monkeypatch, tmp_path, status, expected):
    path = tmp_path / "status"
    if status is not None:
        path.write_text(status, encoding="ascii")
    monkeypatch.setattr(package_version_floor, "DPKG_STATUS", str(path))
    out = AT_FLOOR if expected == "dpkg" else "prometheus\t(none):2.42.0-1.el9\n"
    result = run_module({"packages": [{"name": "prometheus", "version": "2.42.0"}]}, FakeHost(out))
    assert result["manager"] == expected


def test_no_package_tool(ansible_module):
    result = ansible_module(
        package_version_floor, {"packages": FLOORS}, FakeHost(), expect_failure=True, bin_path=lambda name: None
    )
    assert result["msg"].startswith("neither dpkg-query nor rpm found on ")
    result = ansible_module(
        package_version_floor,
        {"packages": FLOORS, "manager": "dpkg"},
        FakeHost(),
        expect_failure=True,
        bin_path=lambda name: None,
    )
    assert result["msg"].startswith("dpkg-query not found in PATH, /usr/bin, /bin, /usr/sbin, /sbin on ")
    assert result["msg"].endswith(": install dpkg, or set manager: rpm on an RPM-based host")


def test_no_packages_runs_nothing(run_module):
    host = FakeHost()
    result = run_module({"packages": []}, host)
    assert (result["installed"], result["below_floor"], result["missing"], host.calls) == ({}, [], [], [])


@pytest.mark.parametrize(
    ("packages", "manager", "message"),
    [
        ([{"name": "prometheus", "version": 2.4}], "dpkg", "packages[0].version must be a version string (quote it"),
        ([{"name": "prometheus", "version": ""}], "dpkg", "packages[0].version must be a version without spaces"),
        ([{"name": "prometheus", "version": "1 2"}], "dpkg", "packages[0].version must be a version without spaces"),
        ([{"name": "prom*", "version": "1"}], "dpkg", "packages[0].name is not a package name"),
        ([FLOORS[0], {"name": "prometheus", "version": "3"}], "dpkg", "packages[1].name names prometheus a second"),
        ([{"name": "libc6:amd64", "version": "1"}, {"name": "libc6:i386", "version": "1"}], "dpkg", "packages[1].name"),
        ([{"name": "slurm", "version": "x:1.0"}], "rpm", "packages[0].version is not an RPM version"),
        ([{"name": "slurm", "version": "1.0-"}], "rpm", "packages[0].version is not an RPM version"),
    ],
)
def test_bad_floors_fail_before_any_query(run_module, packages, manager, message):
    host = FakeHost(AT_FLOOR)
    result = run_module({"packages": packages, "manager": manager}, host, expect_failure=True)
    assert result["msg"].startswith(message), result["msg"]
    assert host.calls == []


def test_an_integer_floor_is_its_text(run_module):
    host = FakeHost("munge\t(none):2-1.el9\n")
    result = run_module({"packages": [{"name": "munge", "version": 2}], "manager": "rpm"}, host)
    assert result["installed"] == {"munge": "2-1.el9"}


# ---------------------------------------------------------------------------------------------------------
# The read before an install: packages without a version are read, not judged; below_floor: ignore reports.


def test_a_package_without_a_version_is_read_not_judged(run_module):
    host = FakeHost("nvidia-container-toolkit\t1.17.8-1\tii \nprometheus\t2.40.0+ds-1\tii \n")
    host.below = {("2.40.0+ds-1", "2.42.0+ds-5+deb12u1")}
    args = {
        "packages": [{"name": "nvidia-container-toolkit"}, FLOORS[0]],
        "manager": "dpkg",
        "below_floor": "ignore",
    }
    result = run_module(args, host)
    assert result["installed"] == {"nvidia-container-toolkit": "1.17.8-1", "prometheus": "2.40.0+ds-1"}
    assert result["below_floor"] == [{"name": "prometheus", "installed": "2.40.0+ds-1", "floor": "2.42.0+ds-5+deb12u1"}]
    # One comparison: the package without a version is not compared with anything.
    assert [argv[0] for argv in host.argvs] == ["/usr/bin/dpkg-query", "/usr/bin/dpkg"]
    assert result["changed"] is False


def test_below_floor_fail_is_the_default(run_module):
    host = FakeHost("prometheus\t2.40.0+ds-1\tii \n", below={("2.40.0+ds-1", "2.42.0+ds-5+deb12u1")})
    result = run_module({"packages": FLOORS[:1], "manager": "dpkg"}, host, expect_failure=True)
    assert "is older than its floor" in result["msg"]
    # below_floor: ignore still fails on a missing package unless missing: ignore too.
    host = FakeHost("prometheus\t2.40.0+ds-1\tii \n", "dpkg-query: no packages found matching ipmitool\n", 1)
    host.below = {("2.40.0+ds-1", "2.42.0+ds-5+deb12u1")}
    args = {"packages": [FLOORS[0], {"name": "ipmitool"}], "manager": "dpkg", "below_floor": "ignore"}
    result = run_module(args, host, expect_failure=True)
    assert result["msg"] == "Not installed: ipmitool (unknown to dpkg)."


def test_rpm_without_a_version_reads_the_newest(run_module):
    host = FakeHost("kernel\t(none):5.14.0-1.el9\nkernel\t(none):5.14.0-3.el9\n")
    result = run_module({"packages": [{"name": "kernel"}], "manager": "rpm"}, host)
    assert result["installed"] == {"kernel": "5.14.0-3.el9"}


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg (the authority on Debian's version order)")
def test_the_read_before_apt_with_this_hosts_dpkg(run_module):
    """The read's packages from the specifiers, the module judging floors with the real dpkg, then the gate."""
    installed = (
        "slurmd\t22.05.8-4+deb12u3\tii \nmunge\t0.5.15-2\tii \nlibmunge2\t1:0.5.15-2~bpo1\tii \n"
        "nvidia-driver\t575.57.08-1\tii \nipmitool\t1.8.19-4\trc \n"
    )

    def host(argv, **kwargs):
        if argv[1:2] == ["--compare-versions"]:
            run = subprocess.run(["dpkg", *argv[1:]], capture_output=True, text=True, check=False)
            return run.returncode, run.stdout, run.stderr
        return 0, installed, ""

    specs = [
        "slurmd>=22.05.8-4+deb12u2",  # a newer security build than the floor: met
        "munge>=0.5.15-2+deb12u1",  # older than the floor: unmet
        "libmunge2>=0.5.16",  # the epoch makes it newer: met
        "nvidia-driver=575.57.08-*",
        "ipmitool",  # removed, its configuration files remain: unmet
    ]
    read = run_module(
        {"packages": apt_read_packages(specs), "manager": "dpkg", "missing": "ignore", "below_floor": "ignore"}, host
    )
    assert apt_specs_unmet(specs, read) == ["munge>=0.5.15-2+deb12u1", "ipmitool"]
