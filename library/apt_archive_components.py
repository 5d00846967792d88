#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: enable components (contrib, non-free) on the distribution archive's apt entries."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_archive_components
short_description: Enable components of the distribution's own archive in the host's apt sources
description:
  - Finds the entries of the distribution's archive in the host's apt sources, in both formats of sources.list(5),
    the one-line format (C(/etc/apt/sources.list) and C(*.list) files) and deb822 (C(*.sources) files). An archive
    entry is one of the release's suites (I(release) itself or I(release)-<pocket>, such as C(bookworm-updates) and
    C(bookworm-security)) that lists component C(main). A vendor repository is flat (suite C(/)) or names its own
    components and is left alone, as is a deb822 stanza that is not enabled (C(Enabled) C(no)).
  - Appends each of I(components) that such an entry lacks, and leaves everything else of the file byte for byte
    (comments, other entries, line endings). A Debian 12 host installed from the installer has the one-line
    C(/etc/apt/sources.list); its container images and cloud images have the deb822 C(debian.sources).
  - Reads every source file on the host itself. It replaces C(ansible.builtin.find) and C(ansible.builtin.replace)
    tasks whose choice of file was made on the controller (a C(is file) test reads the controller's file system,
    not the host's).
  - Warns when no archive entry is found (a host whose mirror names its suites otherwise); nothing is changed then,
    and the packages of the missing components will not install.
options:
  release:
    description: The distribution release whose archive suites are matched (C(ansible_facts.distribution_release)).
    type: str
    required: true
  components:
    description: Components every archive entry must list, in the order they are appended.
    type: list
    elements: str
    required: true
  sources_list:
    description: The one-line sources file (read when it exists).
    type: path
    default: /etc/apt/sources.list
  sources_dir:
    description: The folder of C(*.list) (one-line) and C(*.sources) (deb822) files.
    type: path
    default: /etc/apt/sources.list.d
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details: Reports which files would change, and writes nothing.
  diff_mode:
    support: full
  platform:
    platforms: debian
notes:
  - Refresh the package index after a change (C(changed)), as the nvidia_driver role's handler does.
seealso:
  - name: sources.list(5)
    description: The one-line and deb822 formats of apt's sources.
    link: https://manpages.debian.org/bookworm/apt/sources.list.5.en.html
"""

EXAMPLES = r"""
- name: Enable contrib on Debian's archive (the NVIDIA driver's DKMS packages depend on it)
  gpuforge.cluster.apt_archive_components:
    release: "{{ ansible_facts.distribution_release }}"
    components: [contrib]
  notify: Refresh the apt package index
"""

RETURN = r"""
archive_entries:
  description: Archive entries found (lines of the one-line format, stanzas of deb822), changed or not.
  returned: always
  type: int
  sample: 2
files_changed:
  description: Source files that were (in check mode, would be) rewritten.
  returned: always
  type: list
  elements: str
  sample: [/etc/apt/sources.list.d/debian.sources]
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_apt_sources import (
    enable_components_deb822,
    enable_components_one_line,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_files import file_mode, write_atomic
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import this_host


class ArchiveComponents:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.result = {"changed": False, "archive_entries": 0, "files_changed": [], "diff": []}

    def files(self) -> list:
        """(path, deb822?) of every source file apt reads, the one-line file first."""
        found = []
        if os.path.isfile(self.params["sources_list"]):
            found.append((self.params["sources_list"], False))
        folder = self.params["sources_dir"]
        found += [(path, False) for path in sorted(glob.glob(os.path.join(folder, "*.list")))]
        found += [(path, True) for path in sorted(glob.glob(os.path.join(folder, "*.sources")))]
        return found

    def apply(self) -> dict:
        release = self.params["release"]
        components = [name for name in self.params["components"] if name]
        for path, deb822 in self.files():
            try:
                with open(path, encoding="utf-8") as handle:
                    before = handle.read()
            except (OSError, UnicodeDecodeError) as exc:
                self.module.fail_json(
                    msg=f"could not read the apt source file {path} on {this_host()} ({exc}): apt reads it too; "
                    "fix or remove it (sources.list(5): UTF-8 text)",
                    **self.result,
                )
            edit = enable_components_deb822 if deb822 else enable_components_one_line
            after, entries = edit(before, release, components)
            self.result["archive_entries"] += entries
            if after == before:
                continue
            self.result["changed"] = True
            self.result["files_changed"].append(path)
            self.result["diff"].append({"before_header": path, "after_header": path, "before": before, "after": after})
            if self.module.check_mode:
                continue
            try:
                write_atomic(self.module, path, after.encode("utf-8"), file_mode(path) or 0o644)
            except OSError as exc:
                self.module.fail_json(
                    msg=f"could not write the apt source file {path} on {this_host()}: {exc}", **self.result
                )
        if self.result["archive_entries"] == 0:
            self.module.warn(
                f"no entry of the {release} archive on {this_host()} (suite {release} or {release}-<pocket> with "
                f"component main) in {self.params['sources_list']} or {self.params['sources_dir']}: components "
                f"{', '.join(components)} were not enabled; enable them on the mirror this host uses"
            )
        return self.result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "release": {"type": "str", "required": True},
            "components": {"type": "list", "elements": "str", "required": True},
            "sources_list": {"type": "path", "default": "/etc/apt/sources.list"},
            "sources_dir": {"type": "path", "default": "/etc/apt/sources.list.d"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**ArchiveComponents(module).apply())


if __name__ == "__main__":
    main()
