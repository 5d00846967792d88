"""Installed package versions: `dpkg-query -W` and `rpm -q --qf` output, RPM's version order, package names.

Pure functions over text, stdlib only (and gpuforge_errors, shipped with it); the shapes are in docs/parsers.md
(section package-versions). The module package_version_floor runs the tools and judges the versions: Debian
versions with `dpkg --compare-versions` (dpkg is the authority on its own order), RPM versions with rpmvercmp()
here. apt_read_packages() and apt_specs_unmet() judge the apt module's package specifiers against what the
module read, so that a role calls apt only when something is missing or off its pin (docs/performance.md).

The query formats the module asks for:

- dpkg: ``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' NAME...``, one row per package
  (per architecture of a Multi-Arch package) that dpkg knows, in dpkg's order, not the order asked;
  ``dpkg-query: no packages found matching NAME`` on stderr for a name dpkg does not know (exit 1).
- rpm: ``rpm -q --qf '%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n' NAME...``, one row per installed instance
  (an install-only package such as the kernel can have several); ``package NAME is not installed`` on stdout
  for a name that is not (the exit status counts them). ``%{EPOCH}`` is ``(none)`` for a package without one.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError, ParseError

__all__ = [
    "DPKG_QUERY_FORMAT",
    "DPKG_STATES",
    "RPM_QUERY_FORMAT",
    "ParseError",
    "apt_read_packages",
    "apt_specs_unmet",
    "check_package_name",
    "compare_evr",
    "describe_apt_unmet",
    "dpkg_state",
    "floor_failure_message",
    "parse_dpkg_query",
    "parse_rpm_query",
    "rpm_newest",
    "rpmvercmp",
    "split_apt_spec",
    "split_evr",
]

DPKG_QUERY_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"
RPM_QUERY_FORMAT = "%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n"

# dpkg-query(1), "db:Status-Abbrev": desired action, package status, error flag (' ' or 'R').
_DESIRED = "uihrp"
_ERROR_FLAGS = " R"
# The package status letter -> what it means (dpkg-query(1) and `dpkg -l`'s legend). Only "i" is installed.
DPKG_STATES = {
    "n": "not installed",
    "c": "removed, its configuration files remain",
    "H": "half-installed",
    "U": "unpacked, not configured",
    "F": "half-configured",
    "W": "awaiting triggers",
    "t": "triggers pending",
    "i": "installed",
}
_NOT_FOUND = re.compile(r"^dpkg-query: no packages found matching (?P<name>\S+)\s*$")
_RPM_NOT_INSTALLED = re.compile(r"^package (?P<name>\S+) is not installed\s*$")
# A name handed to dpkg-query (which reads it as a glob pattern) or rpm (which reads an option in a leading '-').
_BAD_NAME = re.compile(r"[\s*?\[\]\\/\x00-\x1f\x7f]")
_DIGITS = "0123456789"
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _show(line: str) -> str:
    return repr(line if len(line) <= 80 else line[:77] + "...")


def _lines(text: str, tool: str) -> list:
    if not isinstance(text, str):
        raise ParseError(f"{tool} output must be text, got {type(text).__name__}")
    return text.splitlines()


def check_package_name(path: str, name) -> str:
    """A package name as the query tools take it: a non-empty string without spaces, glob characters or a
    leading '-' (dpkg-query reads each name as a pattern, rpm a leading '-' as an option). Debian's
    architecture qualifier (``libc6:i386``) is kept. Raises OptionError naming path."""
    if not isinstance(name, str) or not name.strip():
        raise OptionError(path, f"must be a package name, got {name!r}")
    if name.startswith("-") or _BAD_NAME.search(name):
        raise OptionError(path, f"is not a package name (no spaces, '*?[]', '/' or a leading '-'): {name!r}")
    return name


def dpkg_state(abbrev: str) -> str:
    """'rc ' -> 'rc: removed, its configuration files remain' (the status letter explained)."""
    code = abbrev.rstrip()
    status = code[1:2]
    return f"{code}: {DPKG_STATES.get(status, 'unknown status')}"


def parse_dpkg_query(stdout: str, stderr: str = "", names=()) -> dict:
    """Rows of DPKG_QUERY_FORMAT -> {"installed": {name: [version, ...]}, "states": {name: abbrev},
    "missing": [name, ...]}.

    Installed means dpkg's package status "i" (``ii``, and ``hi`` for a package on hold); a row in any other
    status (``rc``: removed with its configuration files left, ``un``, a half-installed ``iU``) is not
    installed, and its abbreviation is kept in "states". A Multi-Arch package has one row per architecture,
    each version listed once. names: the names asked for (an architecture qualifier is matched without it);
    each must have a row or stderr's "no packages found matching" line, and "missing" lists, in their order,
    those not installed. Malformed rows, a name the output does not account for, or empty output with
    nothing on stderr to explain it raise ParseError.
    """
    rows = [line for line in _lines(stdout, "dpkg-query") if line.strip()]
    unknown = set()
    for line in _lines(stderr or "", "dpkg-query"):
        match = _NOT_FOUND.match(line.strip())
        if match:
            unknown.add(match["name"].split(":", 1)[0])
    if not rows and not unknown:
        raise ParseError("dpkg-query printed nothing (no package rows, no 'no packages found' line)")
    installed: dict = {}
    states: dict = {}
    for number, line in enumerate(rows, 1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise ParseError(f"dpkg-query line {number} is not 'package<TAB>version<TAB>status': {_show(line)}")
        name, version, abbrev = fields
        if not name or _BAD_NAME.search(name):
            raise ParseError(f"dpkg-query line {number} has no package name: {_show(line)}")
        status = abbrev.rstrip(" ")
        if not (
            2 <= len(abbrev) <= 3
            and abbrev[0] in _DESIRED
            and abbrev[1] in DPKG_STATES
            and abbrev[2:] in ("", *_ERROR_FLAGS)
        ):
            raise ParseError(f"dpkg-query line {number} has no dpkg status (such as 'ii '): {_show(line)}")
        if abbrev[1] != "i":
            if name not in installed:
                states[name] = status
            continue
        if not version or " " in version:
            raise ParseError(f"dpkg-query line {number}: installed package {name} has no version: {_show(line)}")
        states[name] = status
        versions = installed.setdefault(name, [])
        if version not in versions:
            versions.append(version)
    return {"installed": installed, "states": states, "missing": _missing(names, installed, states, unknown)}


def _missing(names, installed: dict, listed, unknown: set) -> list:
    missing = []
    for asked in names:
        name = asked.split(":", 1)[0]
        if name in installed:
            continue
        if name not in listed and name not in unknown:
            raise ParseError(f"the output names neither a version of {asked} nor that it is not installed")
        missing.append(asked)
    return missing


def split_evr(text: str) -> tuple:
    """'[epoch:]version[-release]' -> (epoch, version, release or None), as rpm reads an EVR: the epoch is
    the digits before the first ':' (0 when absent or rpm's '(none)'), the release what follows the last '-'.
    Raises ParseError for an empty version or release, or an epoch that is not a number."""
    if not isinstance(text, str) or not text.strip() or any(char.isspace() for char in text):
        raise ParseError(f"{text!r} is not a version ([epoch:]version[-release], no spaces)")
    epoch, colon, rest = text.partition(":")
    if not colon:
        epoch, rest = "", text
    elif epoch == "(none)":
        epoch = ""
    elif not epoch.isdigit() or not epoch.isascii():
        raise ParseError(f"{text!r}: the epoch before ':' must be a number")
    version, dash, release = rest.rpartition("-")
    if not dash:
        version, release = rest, None
    if not version or release == "":
        raise ParseError(f"{text!r}: {'the version' if not version else 'the release after -'} is empty")
    return int(epoch or 0), version, release


def rpmvercmp(a: str, b: str) -> int:
    """RPM's order of two version (or release) strings: 1 when a is newer, 0 when equal, -1 when b is newer.

    The rules are those of rpm's rpmvercmp (rpmio/rpmvercmp.c; rpm >= 4.15 for '^'): both strings are cut into
    segments of ASCII digits or ASCII letters; anything else separates segments and is otherwise ignored (so
    1.0 equals 1_0, and a non-ASCII letter is a separator). '~' sorts before everything, even the end of the
    string (1.0~rc1 < 1.0); '^' sorts after the end of the string but before any other segment
    (1.0 < 1.0^git1 < 1.0.1). Segments are compared pairwise: two numbers as integers (leading zeros ignored,
    10.0001 equals 10.1), two letter runs as strings (ASCII order), a number is newer than letters. When one
    string runs out, the one with segments left is newer.
    """
    if a == b:
        return 0
    i, j, len_a, len_b = 0, 0, len(a), len(b)
    while i < len_a or j < len_b:
        while i < len_a and a[i] not in _DIGITS and a[i] not in _LETTERS and a[i] not in "~^":
            i += 1
        while j < len_b and b[j] not in _DIGITS and b[j] not in _LETTERS and b[j] not in "~^":
            j += 1
        char_a = a[i] if i < len_a else ""
        char_b = b[j] if j < len_b else ""
        if "~" in (char_a, char_b):
            if char_a != "~":
                return 1
            if char_b != "~":
                return -1
            i, j = i + 1, j + 1
            continue
        if "^" in (char_a, char_b):
            if not char_a:
                return -1
            if not char_b:
                return 1
            if char_a != "^":
                return 1
            if char_b != "^":
                return -1
            i, j = i + 1, j + 1
            continue
        if not (char_a and char_b):
            break
        kind = _DIGITS if char_a in _DIGITS else _LETTERS
        start_a, start_b = i, j
        while i < len_a and a[i] in kind:
            i += 1
        while j < len_b and b[j] in kind:
            j += 1
        segment_a, segment_b = a[start_a:i], b[start_b:j]
        if not segment_b:  # one is a number, the other letters: the number is newer
            return 1 if kind is _DIGITS else -1
        if kind is _DIGITS:
            segment_a, segment_b = segment_a.lstrip("0"), segment_b.lstrip("0")
            if len(segment_a) != len(segment_b):
                return 1 if len(segment_a) > len(segment_b) else -1
        if segment_a != segment_b:
            return 1 if segment_a > segment_b else -1
    if i >= len_a and j >= len_b:
        return 0
    return 1 if i < len_a else -1


def compare_evr(a: str, b: str) -> int:
    """Two '[epoch:]version[-release]' strings in RPM's order (1, 0, -1): the epochs as numbers, then the
    versions with rpmvercmp(), then the releases, when both have one (a floor without a release, '2.3',
    is met by every release of 2.3). Raises ParseError for a string split_evr() refuses."""
    epoch_a, version_a, release_a = split_evr(a)
    epoch_b, version_b, release_b = split_evr(b)
    if epoch_a != epoch_b:
        return 1 if epoch_a > epoch_b else -1
    order = rpmvercmp(version_a, version_b)
    if order or release_a is None or release_b is None:
        return order
    return rpmvercmp(release_a, release_b)


def rpm_newest(versions: list) -> str:
    """The newest of several EVR strings in RPM's order (the first of equals)."""
    newest = versions[0]
    for version in versions[1:]:
        if compare_evr(version, newest) > 0:
            newest = version
    return newest


def parse_rpm_query(stdout: str, names=()) -> dict:
    """Rows of RPM_QUERY_FORMAT -> {"installed": {name: [evr, ...]}, "missing": [name, ...]}.

    Each EVR is written 'version-release', with 'epoch:' in front only when the package has an epoch (rpm
    prints '(none)' for none). An install-only package lists each installed instance once. names: the names
    asked for; each must have a row or a 'package NAME is not installed' line, and "missing" lists, in their
    order, those that are not installed. Malformed rows, or a name the output does not account for, raise
    ParseError.
    """
    installed: dict = {}
    absent = set()
    rows = [line for line in _lines(stdout, "rpm") if line.strip()]
    if not rows:
        raise ParseError("rpm printed nothing (no package rows, no 'is not installed' line)")
    for number, line in enumerate(rows, 1):
        match = _RPM_NOT_INSTALLED.match(line.strip())
        if match:
            absent.add(match["name"])
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0] or _BAD_NAME.search(fields[0]):
            raise ParseError(f"rpm line {number} is not 'name<TAB>epoch:version-release': {_show(line)}")
        name, evr = fields
        epoch, colon, rest = evr.partition(":")
        if not colon or "-" not in rest:
            raise ParseError(f"rpm line {number} is not 'name<TAB>epoch:version-release': {_show(line)}")
        try:
            split_evr(evr)
        except ParseError as exc:
            raise ParseError(f"rpm line {number}: {exc}") from None
        shown = rest if epoch == "(none)" else evr
        versions = installed.setdefault(name, [])
        if shown not in versions:
            versions.append(shown)
    return {"installed": installed, "missing": _missing(names, installed, absent, absent)}


def floor_failure_message(below: list, missing: list, fix: str) -> str:
    """The failure message of a floor check: 'NAME INSTALLED is older than its floor FLOOR; ...: FIX.' for
    below ([{name, installed, floor}]) and 'not installed: NAME (why), ...' for missing ([(name, why)])."""
    parts = []
    if below:
        older = "; ".join(
            f"{entry['name']} {entry['installed']} is older than its floor {entry['floor']}" for entry in below
        )
        parts.append(f"{older}: {fix.rstrip('.')}.")
    if missing:
        names = ", ".join(f"{name} ({why})" if why else name for name, why in missing)
        parts.append(f"Not installed: {names}.")
    return " ".join(parts)


# A package specifier of the apt module ("ansible.builtin.apt", option name): NAME, NAME=VERSION (VERSION may hold
# fnmatch wildcards, matched against the installed version) or NAME>=VERSION (Debian's version order). The name is
# a Debian package name (Debian Policy 5.6.1: lower case letters, digits, '+', '-', '.', starting alphanumeric);
# a specifier with an architecture qualifier, a wildcard in the name or anything else is not judged here.
_APT_SPEC = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]+)(?:(?P<op>>?=)(?P<version>[^\s=<>]+))?$")


def split_apt_spec(spec) -> tuple | None:
    """'name', 'name=1.2-*' or 'name>=1.2' -> (name, op, version) with op None, '=' or '>='; None for any other
    specifier (an architecture qualifier, a name pattern, a malformed one), which apt_specs_unmet never counts as
    met."""
    match = _APT_SPEC.match(spec) if isinstance(spec, str) else None
    if not match:
        return None
    return match.group("name"), match.group("op"), match.group("version")


def apt_read_packages(specs) -> list:
    """The apt specifiers -> package_version_floor's packages option for the read before the install: every
    package by name, with its floor as version for a NAME>=VERSION specifier (the module judges the floor with
    dpkg), no version otherwise (read, not judged). Specifiers split_apt_spec does not know are left out."""
    packages, seen = [], set()
    for spec in specs or []:
        parsed = split_apt_spec(spec)
        if parsed is None or parsed[0] in seen:
            continue
        name, op, version = parsed
        seen.add(name)
        packages.append({"name": name, "version": version} if op == ">=" else {"name": name})
    return packages


def apt_specs_unmet(specs, read) -> list:
    """The apt specifiers the installed packages do not meet, from package_version_floor's result for
    apt_read_packages(specs) (registered; skipped, failed or any other value: every specifier is unmet, so apt
    runs as it would without the read). Met, as the apt module judges a present package (ansible.builtin.apt,
    package_status()): NAME when installed; NAME=VERSION when the installed version matches VERSION
    (fnmatch, case-sensitive); NAME>=VERSION when installed and not below that floor. Unlike the apt module, an
    installed version that matches a wildcard is kept even when a newer version matching it is available."""
    specs = list(specs or [])
    if not isinstance(read, Mapping) or read.get("skipped") or read.get("failed"):
        return specs
    installed = read.get("installed")
    below = read.get("below_floor")
    if not isinstance(installed, Mapping) or not isinstance(below, list):
        return specs
    below_names = {entry.get("name") for entry in below if isinstance(entry, Mapping)}
    unmet = []
    for spec in specs:
        parsed = split_apt_spec(spec)
        version_installed = installed.get(parsed[0]) if parsed else None
        if not isinstance(version_installed, str):
            unmet.append(spec)
            continue
        name, op, version = parsed
        if (op == "=" and not fnmatch.fnmatchcase(version_installed, version)) or (op == ">=" and name in below_names):
            unmet.append(spec)
    return unmet


def describe_apt_unmet(specs, read) -> list:
    """One line per apt specifier that package_version_floor's result (for apt_read_packages(specs)) does not find
    met, saying why: 'NAME is not installed', 'NAME VERSION does not match its pin PATTERN', 'NAME VERSION is older
    than its floor FLOOR', or 'NAME: specifier not understood' for one split_apt_spec does not know."""
    installed = read.get("installed") if isinstance(read, Mapping) else None
    installed = installed if isinstance(installed, Mapping) else {}
    lines = []
    for spec in apt_specs_unmet(specs, read):
        parsed = split_apt_spec(spec)
        if parsed is None:
            lines.append(f"{spec}: specifier not understood")
            continue
        name, op, version = parsed
        version_installed = installed.get(name)
        if not isinstance(version_installed, str):
            lines.append(f"{name} is not installed")
        elif op == "=":
            lines.append(f"{name} {version_installed} does not match its pin {version}")
        else:
            lines.append(f"{name} {version_installed} is older than its floor {version}")
    return lines
