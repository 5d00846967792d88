#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the action plugin gpuforge.cluster.apt_pinned (action_plugins/apt_pinned.py); no module code."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_pinned
short_description: Install apt packages to their pins, calling apt only when one is missing or off its pin
description:
  - Reads the installed version of every package of I(name) with one dpkg query
    (M(gpuforge.cluster.package_version_floor)), and calls M(ansible.builtin.apt) with C(state=present) only for
    the specifiers that read does not find met. On a converged host the task is that one read.
  - Replaces an M(ansible.builtin.apt) task with C(state=present) for packages that are usually installed already;
    the apt module opens apt's whole package cache on every run, even when every package is installed.
  - "Met, as the apt module judges a present package (ansible-core's apt module, package_status()): C(NAME) when
    installed; C(NAME=VERSION) when the installed version matches VERSION (fnmatch wildcards, case-sensitive);
    C(NAME>=VERSION) when installed and not older than VERSION in Debian's order (C(dpkg --compare-versions)).
    Unlike the apt module, an installed version that matches a wildcard pin is kept even when a newer version
    matching it is available. Any other specifier (an architecture qualifier, a pattern in the name) is never
    counted as met and goes to apt."
  - After apt ran (not in check mode), the packages are read again, and the task fails when a specifier is still
    not met, naming each package and why - the apt module does not hold a fresh C(NAME>=VERSION) install to its
    floor, and installs the newest version it finds.
  - This is an action plugin; its module calls run on the target.
version_added: 0.1.0
options:
  name:
    description:
      - The apt package specifiers, C(NAME), C(NAME=VERSION) or C(NAME>=VERSION).
    type: list
    elements: str
    required: true
  cache_valid_time:
    description:
      - Handed to the apt module - refresh the package index when it is older than this, in seconds.
    type: int
  update_cache:
    description:
      - Handed to the apt module - refresh the package index before installing (with I(cache_valid_time), only
        when it is older than that).
    type: bool
  install_recommends:
    description:
      - Handed to the apt module. Omitted - apt's own configuration decides.
    type: bool
  allow_downgrade:
    description:
      - Handed to the apt module - install a pinned version older than the installed one.
    type: bool
  policy_rc_d:
    description:
      - Handed to the apt module - the exit code of the C(policy-rc.d) apt writes while installing (C(101) - the
        packages' maintainer scripts start no service).
    type: int
  retry_with_fresh_index:
    description:
      - When the install fails, refresh the package index (ignoring I(cache_valid_time)) and try once more - an
        index younger than I(cache_valid_time) may lack a pinned build (lists emptied at image build time, a
        repository that gained it since). The second failure fails the task with apt's message.
    type: bool
    default: false
  fix:
    description:
      - What the failure message tells the operator to do about a package apt left below its floor or off its pin.
    type: str
    default: "the package mirror lacks that build: refresh it, or change the pin deliberately"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: The read runs; apt runs in check mode and reports what it would install; the read after it does not run.
  diff_mode:
    support: full
    details: The apt module's diff, when apt runs.
  platform:
    platforms: debian
notes:
  - Reports a change only when apt does.
seealso:
  - module: ansible.builtin.apt
  - module: gpuforge.cluster.package_version_floor
"""

EXAMPLES = r"""
- name: Install Prometheus at or above the security build, and the container toolkit of the pinned release
  gpuforge.cluster.apt_pinned:
    name:
      - prometheus>=2.42.0+ds-5+deb12u1
      - nvidia-container-toolkit=1.17.8-1
    cache_valid_time: 3600

- name: Install Slurm's daemons without starting them, refreshing the index once if a build is missing
  gpuforge.cluster.apt_pinned:
    name: [slurmd>=22.05.8-4+deb12u3]
    cache_valid_time: 3600
    policy_rc_d: 101
    retry_with_fresh_index: true
    fix: the package mirror lacks the security update; refresh it, or lower the floor deliberately
"""

RETURN = r"""
installed:
  description: Installed version of each package of I(name) that is installed - after apt when it ran (not in
    check mode), else before.
  returned: success
  type: dict
  sample: {prometheus: 2.42.0+ds-5+deb12u1}
unmet:
  description: The specifiers the read before the install did not find met, which were handed to apt.
  returned: success
  type: list
  elements: str
  sample: [nvidia-container-toolkit=1.17.8-1]
apt_ran:
  description: Whether the apt module was called.
  returned: success
  type: bool
  sample: false
"""
