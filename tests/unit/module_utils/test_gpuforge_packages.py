"""dpkg-query / rpm -q parsers, RPM's version order and package names (module_utils/gpuforge_packages.py)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_errors
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import (
    DPKG_QUERY_FORMAT,
    OptionError,
    ParseError,
    check_package_name,
    compare_evr,
    dpkg_state,
    floor_failure_message,
    parse_dpkg_query,
    parse_rpm_query,
    rpm_newest,
    rpmvercmp,
    split_evr,
)

# ---------------------------------------------------------------------------------------------------------
# RPM's version order. The pairs are rpm's own test suite (rpm-software-management/rpm, tests/rpmvercmp.at,
# RPMVERCMP(a, b, expected) as `rpm --eval '%{lua: print(rpm.vercmp(a, b))}'` prints it), including the
# caret cases of rpm >= 4.15 and the "oddities" the file keeps to document rpm's behaviour.
RPMVERCMP_AT = [
    ("1.0", "1.0", 0),
    ("1.0", "2.0", -1),
    ("2.0", "1.0", 1),
    ("2.0.1", "2.0.1", 0),
    ("2.0", "2.0.1", -1),
    ("2.0.1", "2.0", 1),
    ("2.0.1a", "2.0.1a", 0),
    ("2.0.1a", "2.0.1", 1),
    ("2.0.1", "2.0.1a", -1),
    ("5.5p1", "5.5p1", 0),
    ("5.5p1", "5.5p2", -1),
    ("5.5p2", "5.5p1", 1),
    ("5.5p10", "5.5p10", 0),
    ("5.5p1", "5.5p10", -1),
    ("5.5p10", "5.5p1", 1),
    ("10xyz", "10.1xyz", -1),
    ("10.1xyz", "10xyz", 1),
    ("xyz10", "xyz10", 0),
    ("xyz10", "xyz10.1", -1),
    ("xyz10.1", "xyz10", 1),
    ("xyz.4", "xyz.4", 0),
    ("xyz.4", "8", -1),
    ("8", "xyz.4", 1),
    ("xyz.4", "2", -1),
    ("2", "xyz.4", 1),
    ("5.5p2", "5.6p1", -1),
    ("5.6p1", "5.5p2", 1),
    ("5.6p1", "6.5p1", -1),
    ("6.5p1", "5.6p1", 1),
    ("6.0.rc1", "6.0", 1),
    ("6.0", "6.0.rc1", -1),
    ("10b2", "10a1", 1),
    ("10a2", "10b2", -1),
    ("1.0aa", "1.0aa", 0),
    ("1.0a", "1.0aa", -1),
    ("1.0aa", "1.0a", 1),
    ("10.0001", "10.0001", 0),
    ("10.0001", "10.1", 0),
    ("10.1", "10.0001", 0),
    ("10.0001", "10.0039", -1),
    ("10.0039", "10.0001", 1),
    ("4.999.9", "5.0", -1),
    ("5.0", "4.999.9", 1),
    ("20101121", "20101121", 0),
    ("20101121", "20101122", -1),
    ("20101122", "20101121", 1),
    ("2_0", "2_0", 0),
    ("2.0", "2_0", 0),
    ("2_0", "2.0", 0),
    # RhBug:178798
    ("a", "a", 0),
    ("a+", "a+", 0),
    ("a+", "a_", 0),
    ("a_", "a+", 0),
    ("+a", "+a", 0),
    ("+a", "_a", 0),
    ("_a", "+a", 0),
    ("+_", "+_", 0),
    ("_+", "+_", 0),
    ("_+", "_+", 0),
    ("+", "_", 0),
    ("_", "+", 0),
    # tilde
    ("1.0~rc1", "1.0~rc1", 0),
    ("1.0~rc1", "1.0", -1),
    ("1.0", "1.0~rc1", 1),
    ("1.0~rc1", "1.0~rc2", -1),
    ("1.0~rc2", "1.0~rc1", 1),
    ("1.0~rc1~git123", "1.0~rc1~git123", 0),
    ("1.0~rc1~git123", "1.0~rc1", -1),
    ("1.0~rc1", "1.0~rc1~git123", 1),
    # caret
    ("1.0^", "1.0^", 0),
    ("1.0^", "1.0", 1),
    ("1.0", "1.0^", -1),
    ("1.0^git1", "1.0^git1", 0),
    ("1.0^git1", "1.0", 1),
    ("1.0", "1.0^git1", -1),
    ("1.0^git1", "1.0^git2", -1),
    ("1.0^git2", "1.0^git1", 1),
    ("1.0^git1", "1.01", -1),
    ("1.01", "1.0^git1", 1),
    ("1.0^20160101", "1.0^20160101", 0),
    ("1.0^20160101", "1.0.1", -1),
    ("1.0.1", "1.0^20160101", 1),
    ("1.0^20160101^git1", "1.0^20160101^git1", 0),
    ("1.0^20160102", "1.0^20160101^git1", 1),
    ("1.0^20160101^git1", "1.0^20160102", -1),
    # tilde and caret
    ("1.0~rc1^git1", "1.0~rc1^git1", 0),
    ("1.0~rc1^git1", "1.0~rc1", 1),
    ("1.0~rc1", "1.0~rc1^git1", -1),
    ("1.0^git1~pre", "1.0^git1~pre", 0),
    ("1.0^git1", "1.0^git1~pre", 1),
    ("1.0^git1~pre", "1.0^git1", -1),
    # oddities rpm documents as its current behaviour (RhBug:811992; non-ASCII letters separate segments)
    ("1b.fc17", "1b.fc17", 0),
    ("1b.fc17", "1.fc17", -1),
    ("1.fc17", "1b.fc17", 1),
    ("1g.fc17", "1g.fc17", 0),
    ("1g.fc17", "1.fc17", 1),
    ("1.fc17", "1g.fc17", -1),
    ("1.1.\u03b1", "1.1.\u03b1", 0),
    ("1.1.\u03b1", "1.1.\u03b2", 0),
    ("1.1.\u03b2", "1.1.\u03b1", 0),
    ("1.1.\u03b1\u03b1", "1.1.\u03b1", 0),
    ("1.1.\u03b1", "1.1.\u03b2\u03b2", 0),
    ("1.1.\u03b2\u03b2", "1.1.\u03b1\u03b1", 0),
]


@pytest.mark.parametrize(("a", "b", "expected"), RPMVERCMP_AT, ids=[f"{a} vs {b}" for a, b, _ in RPMVERCMP_AT])
def test_rpmvercmp_agrees_with_rpms_test_suite(a, b, expected):
    assert rpmvercmp(a, b) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1:1.0-1", "2.0-1", 1),  # the epoch decides first
        ("0:2.0-1", "2.0-1", 0),  # epoch 0 is no epoch
        ("(none):2.0-1", "2.0-1", 0),  # rpm --qf %{EPOCH} of a package without one
        ("22.05.9-1.el9", "22.05.9", 0),  # a floor without a release is met by every release
        ("22.05.8-3.el9", "22.05.9", -1),
        ("22.05.9-1.el9", "22.05.9-2.el9", -1),
        ("22.05.9-10.el9", "22.05.9-9.el9", 1),
        ("2.42.0-1.el9~beta", "2.42.0-1.el9", -1),
        ("1.2-3.el9_4", "1.2-3.el9", 1),  # a z-stream build is newer than the GA one
    ],
)
def test_compare_evr(a, b, expected):
    assert compare_evr(a, b) == expected
    assert compare_evr(b, a) == -expected


def test_split_evr():
    assert split_evr("2.42.0+ds-5+deb12u1") == (0, "2.42.0+ds", "5+deb12u1")
    assert split_evr("1:2.3-4.el9") == (1, "2.3", "4.el9")
    assert split_evr("(none):2.3-4.el9") == (0, "2.3", "4.el9")
    assert split_evr("2.3") == (0, "2.3", None)
    for text in ("", " ", "1.0 1", "x:1.0-1", "1:-1", "1.0-", "-1", 12):
        with pytest.raises(ParseError):
            split_evr(text)


def test_rpm_newest():
    assert rpm_newest(["5.14.0-362.8.1.el9_3", "5.14.0-427.13.1.el9_4", "5.14.0-70.13.1.el9_0"]) == (
        "5.14.0-427.13.1.el9_4"
    )
    assert rpm_newest(["1:1.0-1", "2.0-1"]) == "1:1.0-1"


# ---------------------------------------------------------------------------------------------------------
# dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Abbrev}\n'

DPKG_QUERY = (
    "libmunge2\t0.5.15-2\tii \n"
    "munge\t0.5.15-2\thi \n"  # on hold: installed
    "slurmctld\t22.05.8-4+deb12u3\trc \n"  # removed, configuration left
    "slurmd\t22.05.8-4+deb12u3\tii \n"
    "libc6\t2.36-9+deb12u7\tii \n"  # Multi-Arch: same, one row per architecture
    "libc6\t2.36-9+deb12u7\tii \n"
    "sudo\t\tun \n"  # known to dpkg, never installed
)


def test_dpkg_query_rows_states_and_missing():
    names = ["munge", "libmunge2", "slurmd", "slurmctld", "libc6:i386", "sudo", "nosuch"]
    stderr = "dpkg-query: no packages found matching nosuch\n"
    parsed = parse_dpkg_query(DPKG_QUERY, stderr, names)
    assert parsed["installed"] == {
        "libmunge2": ["0.5.15-2"],
        "munge": ["0.5.15-2"],
        "slurmd": ["22.05.8-4+deb12u3"],
        "libc6": ["2.36-9+deb12u7"],
    }
    assert parsed["states"]["slurmctld"] == "rc"
    assert parsed["states"]["munge"] == "hi"
    assert parsed["states"]["sudo"] == "un"
    assert parsed["missing"] == ["slurmctld", "sudo", "nosuch"]


def test_dpkg_query_without_the_trailing_space_and_only_unknown_names():
    assert parse_dpkg_query("slurmd\t22.05.8-4\tii\n", "", ["slurmd"])["installed"] == {"slurmd": ["22.05.8-4"]}
    stderr = "dpkg-query: no packages found matching a\ndpkg-query: no packages found matching b\n"
    assert parse_dpkg_query("", stderr, ["a", "b"]) == {"installed": {}, "states": {}, "missing": ["a", "b"]}


@pytest.mark.parametrize(
    ("stdout", "stderr", "names", "message"),
    [
        ("", "", ["slurmd"], "printed nothing"),
        ("\n\n", "", [], "printed nothing"),
        ("slurmd 22.05.8-4 ii\n", "", ["slurmd"], "line 1 is not 'package<TAB>version<TAB>status'"),
        ("slurmd\t22.05.8-4\n", "", ["slurmd"], "line 1 is not"),
        ("slurmd\t22.05.8-4\tinstalled\n", "", ["slurmd"], "line 1 has no dpkg status"),
        ("slurmd\t22.05.8-4\txx \n", "", ["slurmd"], "line 1 has no dpkg status"),
        ("slurmd\t\tii \n", "", ["slurmd"], "installed package slurmd has no version"),
        ("\t1.0\tii \n", "", [], "line 1 has no package name"),
        ("munge\t0.5.15-2\tii \n", "", ["munge", "slurmd"], "neither a version of slurmd"),
        ("Desired=Unknown/Install/Remove/Purge/Hold\n", "", ["slurmd"], "line 1 is not"),
        (
            "munge\t0.5.15-2\tii \n",
            "dpkg-query: error: --show needs a valid package name\n",
            ["munge", "x"],
            "neither a version of x",
        ),
    ],
)
def test_dpkg_query_malformed(stdout, stderr, names, message):
    with pytest.raises(ParseError, match=message.replace("(", r"\(")):
        parse_dpkg_query(stdout, stderr, names)


def test_dpkg_query_garbage_is_a_parse_error_of_the_shared_base():
    garbage = bytes(range(256)).decode("latin-1") * 4
    with pytest.raises(gpuforge_errors.ParseError):
        parse_dpkg_query(garbage, "", ["slurmd"])
    with pytest.raises(ParseError, match="must be text"):
        parse_dpkg_query(None, "", ["slurmd"])


def test_dpkg_state():
    assert dpkg_state("rc ") == "rc: removed, its configuration files remain"
    assert dpkg_state("iU ") == "iU: unpacked, not configured"
    assert dpkg_state("un") == "un: not installed"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="no dpkg-query on this host")
def test_real_dpkg_query_output_parses():
    """The format the module hands dpkg-query, read back from this host's dpkg (dpkg itself is installed)."""
    run = subprocess.run(
        ["dpkg-query", "-W", f"-f={DPKG_QUERY_FORMAT}", "dpkg", "gpuforge-no-such-package"],
        capture_output=True,
        text=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert run.returncode == 1
    parsed = parse_dpkg_query(run.stdout, run.stderr, ["dpkg", "gpuforge-no-such-package"])
    assert list(parsed["installed"]) == ["dpkg"]
    assert parsed["installed"]["dpkg"][0][0].isdigit()
    assert parsed["missing"] == ["gpuforge-no-such-package"]


# ---------------------------------------------------------------------------------------------------------
# rpm -q --qf '%{NAME}\t%{EPOCH}:%{VERSION}-%{RELEASE}\n'

RPM_QUERY = (
    "slurm\t(none):22.05.9-1.el9\n"
    "munge\t(none):0.5.13-13.el9\n"
    "kernel\t(none):5.14.0-362.8.1.el9_3\n"
    "kernel\t(none):5.14.0-427.13.1.el9_4\n"
    "shadow-utils\t2:4.9-8.el9\n"
    "package slurm-slurmd is not installed\n"
)


def test_rpm_query_epochs_instances_and_missing():
    parsed = parse_rpm_query(RPM_QUERY, ["slurm", "munge", "kernel", "shadow-utils", "slurm-slurmd"])
    assert parsed["installed"] == {
        "slurm": ["22.05.9-1.el9"],
        "munge": ["0.5.13-13.el9"],
        "kernel": ["5.14.0-362.8.1.el9_3", "5.14.0-427.13.1.el9_4"],
        "shadow-utils": ["2:4.9-8.el9"],
    }
    assert parsed["missing"] == ["slurm-slurmd"]


@pytest.mark.parametrize(
    ("stdout", "names", "message"),
    [
        ("", ["slurm"], "printed nothing"),
        ("slurm 22.05.9-1.el9\n", ["slurm"], "line 1 is not 'name<TAB>epoch:version-release'"),
        ("slurm\t22.05.9-1.el9\n", ["slurm"], "line 1 is not"),  # no epoch field
        ("slurm\t(none):22.05.9\n", ["slurm"], "line 1 is not"),  # no release
        ("slurm\tx:22.05.9-1\n", ["slurm"], "line 1: 'x:22.05.9-1': the epoch"),
        ("slurm\t(none):22.05.9-1.el9\n", ["slurm", "munge"], "neither a version of munge"),
        ("error: rpmdb: BDB0113 Thread/process 1234 failed\n", ["slurm"], "line 1 is not"),
    ],
)
def test_rpm_query_malformed(stdout, names, message):
    with pytest.raises(ParseError, match=message.replace("(", r"\(")):
        parse_rpm_query(stdout, names)


# ---------------------------------------------------------------------------------------------------------
# Names and the failure message


def test_check_package_name():
    assert check_package_name("packages[0].name", "libc6:i386") == "libc6:i386"
    assert check_package_name("packages[0].name", "python3-notebook") == "python3-notebook"
    for bad in ("", " ", "slurm*", "-q", "a b", "lib[c]6", "../x", None, 5):
        with pytest.raises(OptionError) as info:
            check_package_name("packages[0].name", bad)
        assert str(info.value).startswith("packages[0].name ")


def test_floor_failure_message():
    below = [
        {"name": "prometheus", "installed": "2.42.0+ds-5", "floor": "2.42.0+ds-5+deb12u1"},
        {"name": "prometheus-node-exporter", "installed": "1.5.0-1", "floor": "1.5.0-1+b6"},
    ]
    fix = "the package mirror lacks that build: refresh it, or lower the floor deliberately"
    assert floor_failure_message(below, [], fix) == (
        "prometheus 2.42.0+ds-5 is older than its floor 2.42.0+ds-5+deb12u1; prometheus-node-exporter 1.5.0-1 is "
        "older than its floor 1.5.0-1+b6: the package mirror lacks that build: refresh it, or lower the floor "
        "deliberately."
    )
    assert floor_failure_message([], [("slurmd", "dpkg status rc: removed"), ("munge", "")], fix) == (
        "Not installed: slurmd (dpkg status rc: removed), munge."
    )
