#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: check that installed packages are not older than their version floors, in one task."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: package_version_floor
short_description: Check that installed packages are at or above their version floors
description:
  - Reads the installed version of every package in I(packages) with one query of the package database and
    compares each with its floor. Fails, naming each package, its installed version and its floor, when any
    is older than its floor; with I(missing=fail), also when one is not installed.
  - "dpkg: C(dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' NAME...); a package counts as
    installed only in dpkg's status C(installed) (C(ii), or C(hi) when it is on hold), not C(rc) (removed,
    configuration files left) or half-installed. Each version is compared with
    C(dpkg --compare-versions INSTALLED ge FLOOR), dpkg being the authority on Debian's version order (no call
    when the installed version is the floor itself)."
  - "rpm: C(rpm -q --qf '%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n' NAME...); versions are compared in the
    module with RPM's rpmvercmp rules (epoch, version, release; C(~) and C(^)). A package installed in several
    versions (an install-only package) is judged by its newest."
  - Made for a version-floor install (C(name>=version) to the apt module, which does not hold a fresh install
    to the floor); it replaces C(ansible.builtin.package_facts) and a command per package in the check after it.
  - Also the read before an install. A package given no I(version) is read, not judged. With I(missing=ignore) and
    I(below_floor=ignore) nothing fails, and the C(gpuforge_apt_unmet) filter tells from the result which apt
    package specifiers are not met, so that the apt module (which opens the whole package cache on every run)
    runs only then. For an
    install by package name, M(gpuforge.cluster.apt_pinned) does the read and the install in one task.
  - Changes nothing.
options:
  packages:
    description:
      - The packages and their floors.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - Package name (Debian may add an architecture, C(libc6:i386)). No spaces, glob characters or leading C(-).
        type: str
        required: true
      version:
        description:
          - The oldest acceptable version. Debian - C([epoch:]upstream[-revision]); RPM - C([epoch:]version[-release]),
            where a floor without a release accepts every release of that version.
          - A string - quote it in YAML (C(1.10) unquoted is the number 1.1).
          - Omitted - the installed version is read (RV(installed)) and not judged.
        type: raw
  manager:
    description:
      - The package database to read. C(auto) - dpkg when C(dpkg-query) is installed and C(/var/lib/dpkg/status)
        lists packages, else rpm.
    type: str
    choices: [auto, dpkg, rpm]
    default: auto
  missing:
    description:
      - What a package that is not installed does. C(fail) - the task fails, naming it. C(ignore) - it is
        listed in RV(missing) and not judged (check mode after an install that did not run).
    type: str
    choices: [fail, ignore]
    default: fail
  below_floor:
    description:
      - What a package older than its floor does. C(fail) - the task fails, naming it, its version and its floor.
        C(ignore) - it is listed in RV(below_floor) (the read before an install, which then installs the floor).
    type: str
    choices: [fail, ignore]
    default: fail
  fix:
    description:
      - What the failure message tells the operator to do about a package older than its floor.
    type: str
    default: "the package mirror lacks that build: refresh it, or lower the floor deliberately"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: The module only reads; it runs the same in check mode.
seealso:
  - module: ansible.builtin.package_facts
  - module: gpuforge.cluster.apt_pinned
"""

EXAMPLES = r"""
- name: Install the packages (version floors)
  ansible.builtin.apt:
    name: [prometheus>=2.42.0+ds-5+deb12u1, prometheus-node-exporter>=1.5.0-1+b6]

- name: No package is older than its floor
  gpuforge.cluster.package_version_floor:
    packages:
      - {name: prometheus, version: 2.42.0+ds-5+deb12u1}
      - {name: prometheus-node-exporter, version: 1.5.0-1+b6}
    manager: dpkg
    # In check mode the install above did not run: a package it would install is not there yet.
    missing: "{{ 'ignore' if ansible_check_mode else 'fail' }}"

- name: Read which packages are installed, at which versions (the read before the install; fails on nothing)
  gpuforge.cluster.package_version_floor:
    packages: "{{ wanted | gpuforge.cluster.gpuforge_apt_read_packages }}"
    manager: dpkg
    missing: ignore
    below_floor: ignore
  register: packages_read
  vars:
    wanted: [prometheus>=2.42.0+ds-5+deb12u1, nvidia-container-toolkit=1.17.8-1]

- name: Install the package files only when a package is missing or off its pin
  ansible.builtin.apt:
    deb: "/var/cache/site/{{ item }}"
  loop: [prometheus_2.42.0+ds-5+deb12u1_amd64.deb, nvidia-container-toolkit_1.17.8-1_amd64.deb]
  when: wanted | gpuforge.cluster.gpuforge_apt_unmet(packages_read) | length > 0
  vars:
    wanted: [prometheus>=2.42.0+ds-5+deb12u1, nvidia-container-toolkit=1.17.8-1]

- name: Slurm on EL is at or above the security build
  gpuforge.cluster.package_version_floor:
    packages:
      - {name: slurm, version: "22.05.9-1.el9"}
    manager: rpm
    fix: the repository lacks the security update; refresh it, or lower the floor deliberately
"""

RETURN = r"""
manager:
  description: The package database read (C(dpkg) or C(rpm)).
  returned: always
  type: str
  sample: dpkg
installed:
  description: Installed version of each package of I(packages) that is installed (rpm writes an epoch only when
    the package has one). Of a package installed in several versions - dpkg, the first below the floor, else the
    first listed; rpm, the newest.
  returned: always
  type: dict
  sample: {prometheus: 2.42.0+ds-5+deb12u1, prometheus-node-exporter: 1.5.0-1+b6}
below_floor:
  description: The packages older than their floors.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Package name as given.
      type: str
    installed:
      description: Installed version.
      type: str
    floor:
      description: The floor it is below.
      type: str
  sample: [{name: slurmd, installed: 22.05.8-4, floor: 22.05.8-4+deb12u3}]
missing:
  description: Packages of I(packages) that are not installed, in their order.
  returned: always
  type: list
  elements: str
  sample: [slurmd]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import (
    DPKG_QUERY_FORMAT,
    RPM_QUERY_FORMAT,
    ParseError,
    check_package_name,
    compare_evr,
    dpkg_state,
    floor_failure_message,
    parse_dpkg_query,
    parse_rpm_query,
    rpm_newest,
    split_evr,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, this_host

DPKG_STATUS = "/var/lib/dpkg/status"
DPKG_FIX = "install dpkg, or set manager: rpm on an RPM-based host"
RPM_FIX = "install rpm, or set manager: dpkg on a Debian-based host"
SBIN = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]


def _floor_text(path: str, value) -> str:
    """A floor as text: a string, or an int (lossless); a float is refused (YAML read an unquoted 1.10 as 1.1)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise OptionError(path, f"must be a version string (quote it in YAML), got {value!r}")
    if not value.strip() or any(char.isspace() for char in value):
        raise OptionError(path, f"must be a version without spaces, got {value!r}")
    return value


class PackageVersionFloor:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.result = {
            "changed": False,
            "manager": self.params["manager"],
            "installed": {},
            "below_floor": [],
            "missing": [],
        }
        self.dpkg = None  # the dpkg Tool, looked up at the first comparison

    def fail(self, msg: str, **extra) -> None:
        self.module.fail_json(msg=msg, **extra, **self.result)

    def floors(self) -> list:
        """[(name, floor)] from the options; a malformed one fails naming its option path."""
        floors, seen = [], {}
        try:
            for index, package in enumerate(self.params["packages"]):
                where = f"packages[{index}]"
                name = check_package_name(f"{where}.name", package["name"])
                floor = None if package["version"] is None else _floor_text(f"{where}.version", package["version"])
                key = name.split(":", 1)[0] if self.result["manager"] == "dpkg" else name
                if key in seen:
                    raise OptionError(f"{where}.name", f"names {name} a second time (packages[{seen[key]}])")
                seen[key] = index
                if self.result["manager"] == "rpm" and floor is not None:
                    try:
                        split_evr(floor)
                    except ParseError as exc:
                        raise OptionError(f"{where}.version", f"is not an RPM version: {exc}") from None
                floors.append((name, floor))
        except OptionError as exc:
            self.fail(str(exc))
        return floors

    def pick_manager(self) -> None:
        if self.result["manager"] != "auto":
            return
        dpkg_query = self.module.get_bin_path("dpkg-query", opt_dirs=SBIN)
        if dpkg_query and os.path.isfile(DPKG_STATUS) and os.path.getsize(DPKG_STATUS) > 0:
            self.result["manager"] = "dpkg"
        elif self.module.get_bin_path("rpm", opt_dirs=SBIN):
            self.result["manager"] = "rpm"
        else:
            self.fail(f"neither dpkg-query nor rpm found on {this_host()}: set manager, or install the package tools")

    def query_dpkg(self, names: list) -> dict:
        dpkg_query = Tool(self.module, "dpkg-query", DPKG_FIX, opt_dirs=SBIN, result=self.result)
        dpkg_query.require()
        rc, out, err = dpkg_query.run(["-W", f"-f={DPKG_QUERY_FORMAT}", *names])
        if rc not in (0, 1):  # 1: some name is unknown to dpkg (stderr says which)
            self.fail(f"dpkg-query -W failed (exit {rc}) on {this_host()}: {(err or out).strip()[:500]}", rc=rc)
        try:
            return parse_dpkg_query(out, err, names)
        except ParseError as exc:
            self.fail(
                f"could not read the installed versions from dpkg-query -W (exit {rc}): {exc}"
                + (f" (stderr: {err.strip()[:300]})" if (err or "").strip() else ""),
                rc=rc,
            )
        return {}

    def query_rpm(self, names: list) -> dict:
        rpm = Tool(self.module, "rpm", RPM_FIX, opt_dirs=SBIN, result=self.result)
        rpm.require()
        rc, out, err = rpm.run(["-q", "--qf", RPM_QUERY_FORMAT, *names])
        # rpm -q exits with the number of names that are not installed (each said on stdout).
        failed = rc != 0 and ("is not installed" not in (out or "") or "error:" in (err or ""))
        if failed:
            self.fail(f"rpm -q failed (exit {rc}) on {this_host()}: {(err or out).strip()[:500]}", rc=rc)
        try:
            return parse_rpm_query(out, names)
        except ParseError as exc:
            self.fail(f"could not read the installed versions from rpm -q (exit {rc}): {exc}", rc=rc)
        return {}

    def dpkg_at_least(self, name: str, installed: str, floor: str) -> bool:
        if installed == floor:
            return True
        if self.dpkg is None:
            self.dpkg = Tool(self.module, "dpkg", DPKG_FIX, opt_dirs=SBIN, result=self.result)
            self.dpkg.require()
        rc, out, err = self.dpkg.run(["--compare-versions", installed, "ge", floor])
        if rc not in (0, 1):
            self.fail(
                f"dpkg --compare-versions could not compare {name} {installed} with its floor {floor} "
                f"(exit {rc}): {(err or out).strip()[:300]}",
                rc=rc,
            )
        return rc == 0

    def judge(self, name: str, versions: list, floor) -> str:
        """The installed version that decides, appended to below_floor when it is older than floor (None: read,
        not judged)."""
        if floor is None:
            return rpm_newest(versions) if self.result["manager"] == "rpm" else versions[0]
        if self.result["manager"] == "rpm":
            # parse_rpm_query and floors() checked both sides with split_evr: compare_evr cannot raise here.
            newest = rpm_newest(versions)
            if compare_evr(newest, floor) < 0:
                self.result["below_floor"].append({"name": name, "installed": newest, "floor": floor})
            return newest
        # dpkg: every architecture of a Multi-Arch: same package has the same version; should they differ,
        # each must meet the floor.
        for version in versions:
            if not self.dpkg_at_least(name, version, floor):
                self.result["below_floor"].append({"name": name, "installed": version, "floor": floor})
                return version
        return versions[0]

    def why_missing(self, name: str, found: dict) -> str:
        if self.result["manager"] != "dpkg":
            return ""
        state = found["states"].get(name.split(":", 1)[0])
        return f"dpkg status {dpkg_state(state)}" if state else "unknown to dpkg"

    def apply(self) -> dict:
        if not self.params["packages"]:
            return self.result
        self.pick_manager()
        floors = self.floors()
        names = [name for name, _floor in floors]
        dpkg = self.result["manager"] == "dpkg"
        found = self.query_dpkg(names) if dpkg else self.query_rpm(names)
        for name, floor in floors:
            versions = found["installed"].get(name.split(":", 1)[0] if dpkg else name)
            if not versions:
                self.result["missing"].append(name)
                continue
            self.result["installed"][name] = self.judge(name, versions, floor)
        absent = self.result["missing"] if self.params["missing"] == "fail" else []
        below = self.result["below_floor"] if self.params["below_floor"] == "fail" else []
        if below or absent:
            reasons = [(name, self.why_missing(name, found)) for name in absent]
            self.fail(floor_failure_message(below, reasons, self.params["fix"]))
        return self.result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "packages": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {"name": {"type": "str", "required": True}, "version": {"type": "raw"}},
            },
            "manager": {"type": "str", "choices": ["auto", "dpkg", "rpm"], "default": "auto"},
            "missing": {"type": "str", "choices": ["fail", "ignore"], "default": "fail"},
            "below_floor": {"type": "str", "choices": ["fail", "ignore"], "default": "fail"},
            "fix": {
                "type": "str",
                "default": "the package mirror lacks that build: refresh it, or lower the floor deliberately",
            },
        },
        supports_check_mode=True,
    )
    module.exit_json(**PackageVersionFloor(module).apply())


if __name__ == "__main__":
    main()
