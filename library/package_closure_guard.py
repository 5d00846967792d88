#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: package_closure_guard
short_description: Refuse a vendor stack install that the node's package manager would resolve off its pins
description:
  - Before a vendor stack (NVIDIA driver, DCGM, container toolkit) is installed, asks the node's own package manager to
    resolve the whole transaction without changing anything - C(apt-get install --simulate) with the pinned
    specifiers, or dnf's resolver with C(dnf install --assumeno) - and reads what it would do.
  - Fails, naming the host, the package, the version it would get and the pinned one, when any package a pin in
    I(pins) names would land at a version the pin does not match (a dependency that floats to a newer release
    because a lock is missing or the registry is wrong), or when the transaction would remove a package.
  - Fails with the package manager's own words when it cannot resolve the request at all (apt's unmet dependencies,
    dnf's Error block), which name the packages and versions in conflict.
  - Changes nothing, in check mode too; the dry run holds no package manager lock (apt C(Debug::NoLocking)).
  - With apt, when every specifier is C(NAME=VERSION) and dpkg already has each package at a version its pattern
    matches, there is no transaction to judge (the install task will not call apt either) and the dry run is left
    out - one C(dpkg-query) instead of opening apt's whole package cache on a converged host.
  - The parsing and the verdict are the pure functions of module_utils/gpuforge_package_closure.py.
version_added: 0.1.0
options:
  manager:
    description:
      - The package manager to ask. C(auto) - apt-get on a host with it, else dnf.
    type: str
    choices: [auto, apt, dnf]
    default: auto
  name:
    description:
      - The specifiers exactly as the install task hands them to the package manager (apt C(NAME=VERSION), dnf
        C(NAME-VERSION) or C(@MODULE:STREAM)).
    type: list
    elements: str
    required: true
  pins:
    description:
      - What the stack must resolve to. Each C(packages) is a list of fnmatch patterns of package names, C(version) the
        fnmatch pattern the version of a package it names must match (an RPM version is compared with and without its
        epoch). The first pin naming a package decides; a package no pin names is not judged (only removed ones are).
    type: list
    elements: dict
    required: true
    suboptions:
      packages:
        description: Package name patterns.
        type: list
        elements: str
        required: true
      version:
        description: Version pattern, as in an apt preferences C(Pin - version) line.
        type: str
        required: true
      exclude:
        description:
          - Names the pin does not judge although I(packages) matches them (a distribution package of another
            product whose name the vendor's patterns also match, e.g. Debian's nvidia-installer-cleanup).
        type: list
        elements: str
        default: []
  allow_downgrade:
    description:
      - The install task downgrades to the pin (apt C(--allow-downgrades)); the dry run does the same.
    type: bool
    default: false
  install_recommends:
    description:
      - apt only. C(false) - C(--no-install-recommends), as the install task. Omitted - apt's configuration decides.
    type: bool
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: The dry run runs in check mode too; it changes nothing.
  platform:
    platforms: debian, rhel
seealso:
  - module: gpuforge.cluster.apt_pinned
"""

EXAMPLES = r"""
- name: Refuse a driver closure that would land off its release
  gpuforge.cluster.package_closure_guard:
    name: [nvidia-kernel-open-dkms=550.90.07-*, cuda-drivers-550=550.90.07-*, nvidia-driver=550.90.07-*]
    pins:
      - packages: ["nvidia-*", "libnvidia-*", "libgl1-nvidia-*", "cuda-drivers*"]
        version: 550.90.07-*
    allow_downgrade: true
    install_recommends: false

- name: The same on RHEL, through dnf's resolver
  gpuforge.cluster.package_closure_guard:
    manager: dnf
    name: ["@nvidia-driver:535-dkms", nvidia-driver-535.183.01]
    pins:
      - packages: [nvidia-driver, nvidia-driver-libs, nvidia-kmod-common, kmod-nvidia-latest-dkms]
        version: 535.183.01-*
"""

RETURN = r"""
manager:
  description: The package manager asked.
  returned: always
  type: str
  sample: apt
actions:
  description: What the dry run would do, one entry per package (name, action, version, installed).
  returned: when the dry run resolved
  type: list
  elements: dict
  sample: [{name: nvidia-driver, action: install, version: 550.90.07-1, installed: null}]
dry_run:
  description: Whether the dry run ran (false - apt, every package already at its pin).
  returned: success
  type: bool
  sample: true
problems:
  description: One sentence per package off its pin or removed (empty on success).
  returned: always
  type: list
  elements: str
  sample: []
"""

import fnmatch

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_package_closure import (
    ParseError,
    closure_problems,
    parse_apt_simulate,
    parse_dnf_transaction,
    resolver_refusal,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import (
    DPKG_QUERY_FORMAT,
    parse_dpkg_query,
    split_apt_spec,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, ToolNotRun, this_host

SBIN = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]


def dry_run_argv(manager: str, params: dict) -> list:
    """The dry run's arguments after the program name."""
    if manager == "apt":
        argv = ["install", "--simulate", "-y", "-o", "Debug::NoLocking=1"]
        if params["allow_downgrade"]:
            argv.append("--allow-downgrades")
        if params["install_recommends"] is False:
            argv.append("--no-install-recommends")
        return [*argv, *params["name"]]
    return ["install", "--assumeno", *params["name"]]


def installed_at_pins(module, specs: list) -> bool:
    """Whether dpkg has every package of specs (all NAME=VERSION) at a version matching its pattern."""
    parsed = [split_apt_spec(spec) for spec in specs]
    if not parsed or any(item is None or item[1] != "=" for item in parsed):
        return False
    names = [item[0] for item in parsed]
    dpkg_query = Tool(module, "dpkg-query", "install dpkg", opt_dirs=SBIN, on_error="raise")
    try:
        dpkg_query.require()
        ran = dpkg_query.run(["-W", f"-f={DPKG_QUERY_FORMAT}", *names])
        installed = parse_dpkg_query(ran.out, ran.err, names)["installed"]
    except (ToolNotRun, ParseError):  # gpuforge_packages' ParseError is the same shared class
        return False  # the dry run decides
    return all(any(fnmatch.fnmatchcase(version, item[2]) for version in installed.get(item[0], [])) for item in parsed)


def main():
    module = AnsibleModule(
        argument_spec={
            "manager": {"type": "str", "choices": ["auto", "apt", "dnf"], "default": "auto"},
            "name": {"type": "list", "elements": "str", "required": True},
            "pins": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "packages": {"type": "list", "elements": "str", "required": True},
                    "version": {"type": "str", "required": True},
                    "exclude": {"type": "list", "elements": "str", "default": []},
                },
            },
            "allow_downgrade": {"type": "bool", "default": False},
            "install_recommends": {"type": "bool"},
        },
        supports_check_mode=True,
    )
    params = module.params
    manager = params["manager"]
    if manager == "auto":
        manager = "apt" if module.get_bin_path("apt-get", opt_dirs=SBIN) else "dnf"
    result = {"changed": False, "manager": manager, "problems": []}
    if not params["name"]:
        module.exit_json(actions=[], **result)
    fix = "install apt" if manager == "apt" else "install dnf (RHEL 8/9 ship it)"
    if manager == "apt" and installed_at_pins(module, params["name"]):
        module.exit_json(actions=[], dry_run=False, **result)
    tool = Tool(module, "apt-get" if manager == "apt" else "dnf", fix, opt_dirs=SBIN, result=result)
    tool.require()
    environ = {"DEBIAN_FRONTEND": "noninteractive"} if manager == "apt" else {}
    ran = tool.run(dry_run_argv(manager, params), environ=environ)
    refusal = resolver_refusal(manager, ran.rc, ran.out, ran.err)
    if refusal:
        module.fail_json(
            msg=f"{this_host()}: {'apt-get' if manager == 'apt' else 'dnf'} cannot install "
            f"{' '.join(params['name'])} as pinned:\n{refusal}",
            rc=ran.rc,
            **result,
        )
    try:
        actions = parse_apt_simulate(ran.out) if manager == "apt" else parse_dnf_transaction(ran.out)
    except ParseError as exc:
        shown = "apt-get install --simulate" if manager == "apt" else "dnf install --assumeno"
        module.fail_json(msg=f"{this_host()}: could not read the output of {shown}: {exc}", rc=ran.rc, **result)
    result["problems"] = closure_problems(actions, params["pins"], this_host())
    if result["problems"]:
        module.fail_json(
            msg=" ".join(result["problems"])
            + " Refused before installing: the package manager would take these off the pinned release. Restore"
            " the lock (apt preferences / dnf versionlock) or correct the pinned versions.",
            actions=actions,
            **result,
        )
    module.exit_json(actions=actions, dry_run=True, **result)


if __name__ == "__main__":
    main()
