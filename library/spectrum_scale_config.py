#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: apply IBM Storage Scale (GPFS) settings with mmchconfig only where mmlsconfig differs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: spectrum_scale_config
short_description: Set IBM Storage Scale (GPFS) configuration attributes idempotently
description:
  - Reads the cluster configuration with C(mmlsconfig -Y) (falling back to plain C(mmlsconfig) output
    when the machine-readable format is unavailable), compares the value that applies to O(node_class)
    (its own stanza, else the cluster-wide C([common]) value) with O(settings), and runs
    C(mmchconfig attr=value,... -N <node_class>) for the attributes that differ, and only those.
  - O(scopes) does the same for several node classes (and the cluster-wide values) in one run, reading
    C(mmlsconfig) once. The scopes are handled in their order, each compared with the configuration as the
    scopes before it leave it (a cluster-wide value an earlier scope set is the value that applies to a later
    node class without its own), with one C(mmchconfig) per scope that differs. Every scope's settings are
    checked before anything runs. A converged cluster costs one C(mmlsconfig) and nothing else.
  - Must run on a node that belongs to the cluster (delegate to a member node when the target is
    not yet one).
  - Supports check mode and diff mode (the before/after lines of the changed attributes).
options:
  settings:
    description:
      - "Attributes to set, as C(name: value). Numbers are passed as written; booleans become C(yes)/C(no)."
      - List values (C(verbsPorts)) are one space-separated string.
      - C(DEFAULT) removes the scope's own value (mmchconfig's reset); it is met when the scope's stanza does
        not list the attribute, whatever value then applies from C([common]) or the built-in default.
      - One of O(settings) and O(scopes) is required; they are mutually exclusive.
    type: dict
  node_class:
    description:
      - Node class or comma-separated node list the settings apply to (C(mmchconfig -N)).
      - Empty or C(common) sets cluster-wide values.
      - Goes with O(settings) only; with O(scopes) each scope names its own (O(scopes[].node_class)).
    type: str
    default: ""
  scopes:
    description:
      - Several scopes in one run, in the order they are applied, instead of O(settings) and O(node_class).
      - Each scope is compared with the configuration as the scopes before it leave it, and gets one
        C(mmchconfig) when it differs. A scope (node class, or C(common)) may be listed once; merge the
        settings of a scope listed twice into one entry.
      - O(immediate) and O(mmfs_bin) apply to every scope.
    type: list
    elements: dict
    suboptions:
      node_class:
        description: As O(node_class); empty or C(common) is the cluster-wide scope.
        type: str
        default: ""
      settings:
        description: As O(settings), for this scope.
        type: dict
        required: true
  immediate:
    description: Pass C(-i) so the change takes effect immediately and persists (attributes that allow it).
    type: bool
    default: false
  mmfs_bin:
    description: Directory holding the mm* commands.
    type: path
    default: /usr/lpp/mmfs/bin
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details:
      - Reports the attributes it would change (C(mmchconfig) is not run; only C(mmlsconfig) is).
      - With O(scopes), a later scope is compared as if the scopes before it had been applied.
  diff_mode:
    support: full
    details: The before/after lines of the changed attributes; with O(scopes) one block, a C([scope]) line
      heading the attributes of each scope that changes.
"""

EXAMPLES = r"""
- name: IBM Redpaper REDP-5610's values for the DGX node class
  gpuforge.cluster.spectrum_scale_config:
    node_class: dgx
    settings:
      pagepool: 128G
      workerThreads: 1024
      verbsRdma: enable
      verbsPorts: "mlx5_0/1 mlx5_1/1 mlx5_2/1 mlx5_3/1"
  delegate_to: "{{ groups['spectrum_scale_cluster'][0] }}"

- name: Cluster-wide values
  gpuforge.cluster.spectrum_scale_config:
    settings:
      maxMBpS: 20000
      enforceFilesetQuotaOnRoot: true

- name: The node class, each node's verbsPorts and the cluster-wide values, in one run
  gpuforge.cluster.spectrum_scale_config:
    scopes:
      - node_class: dgx
        settings:
          pagepool: 128G
          workerThreads: 1024
          verbsRdma: enable
      - node_class: dgx01
        settings:
          verbsPorts: "mlx5_0/1 mlx5_1/1"
      - node_class: dgx02
        settings:
          verbsPorts: "mlx5_0/1 mlx5_2/1"
      - settings:
          maxMBpS: 20000
  delegate_to: "{{ groups['spectrum_scale_cluster'][0] }}"
  run_once: true
"""

RETURN = r"""
changes:
  description:
    - Attributes that differed, with the value before (null when unset) and the value set.
    - With O(scopes), a dict of scope name to those changes, for the scopes that changed (were applied, when
      a later C(mmchconfig) failed).
  returned: always
  type: dict
  sample: {"pagepool": {"before": "1G", "after": "128G"}}
command:
  description:
    - The mmchconfig command line that was run (or would run in check mode); empty when nothing changed.
    - With O(scopes), the list of the command lines run, one per changed scope, in order.
  returned: always
  type: list
  sample: ["/usr/lpp/mmfs/bin/mmchconfig", "pagepool=128G", "-N", "dgx"]
scope:
  description:
    - The mmlsconfig stanza compared against (C(common) or the node class).
    - With O(scopes), the list of the scope names, in order.
  returned: always
  type: raw
  sample: dgx
scopes:
  description:
    - With O(scopes), one entry per scope, in order. When an C(mmchconfig) fails, the scopes before it (the
      ones applied, and the ones that needed no change).
  returned: when O(scopes) is given
  type: list
  elements: dict
  contains:
    scope:
      description: The scope name (C(common) or the node class).
      type: str
    changes:
      description: As RV(changes) of the single-scope form; empty when the scope needed no change.
      type: dict
    command:
      description: The mmchconfig command line for this scope; empty when it needed no change.
      type: list
      elements: str
  sample:
    - {"scope": "dgx", "changes": {"pagepool": {"before": "1G", "after": "128G"}},
       "command": ["/usr/lpp/mmfs/bin/mmchconfig", "pagepool=128G", "-N", "dgx"]}
    - {"scope": "common", "changes": {}, "command": []}
failed_scope:
  description: With O(scopes), the scope whose C(mmchconfig) failed.
  returned: when an mmchconfig of O(scopes) fails
  type: str
failed_command:
  description: With O(scopes), the C(mmchconfig) command line that failed.
  returned: when an mmchconfig of O(scopes) fails
  type: list
  elements: str
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import mapping_of, scalar_text
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_spectrum_scale import (
    COMMON,
    MISSING_HINT,
    ParseError,
    apply_changes,
    config_changes,
    parse_mmlsconfig,
    parse_mmlsconfig_y,
)

_ATTRIBUTE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


def _attribute(path: str, name) -> str:
    if not isinstance(name, str) or not _ATTRIBUTE.fullmatch(name):
        raise OptionError(path, "is not a configuration attribute name (letters, digits, _ . -)")
    return name


def _setting(path: str, value) -> str:
    text = scalar_text(lists=True)(path, value)
    if not text.strip():
        raise OptionError(path, "must not be empty (DEFAULT resets an attribute)")
    if "," in text:
        raise OptionError(path, f"cannot hold ',' (mmchconfig separates attributes with it), got {text!r}")
    return text


# settings: name -> value as mmchconfig takes it (booleans yes/no, lists space-separated); None is refused.
SETTINGS = mapping_of(_setting, key=_attribute)


def _wanted(path: str, settings) -> dict:
    for name, value in settings.items():
        if value is None:
            raise OptionError(f"{path}.{name}", "has no value (null): give one, or DEFAULT to reset it")
    return SETTINGS(path, settings)


def module_scopes(params: dict) -> list:
    """[(scope, wanted settings)] in the order they apply; raises OptionError naming the option path."""
    if params["scopes"] is None:
        return [(params["node_class"] or COMMON, _wanted("settings", params["settings"]))]
    if params["node_class"]:
        raise OptionError(
            "node_class", "goes with settings only: with scopes, give each scope its own (scopes[].node_class)"
        )
    if not params["scopes"]:
        raise OptionError("scopes", "must list at least one scope (node_class and settings)")
    scopes, seen = [], {}
    for index, entry in enumerate(params["scopes"]):
        where = f"scopes[{index}]"
        scope = entry["node_class"] or COMMON
        if scope in seen:
            raise OptionError(
                f"{where}.node_class",
                f"names {scope} a second time (scopes[{seen[scope]}]): merge their settings into one scope",
            )
        seen[scope] = index
        scopes.append((scope, _wanted(f"{where}.settings", entry["settings"])))
    return scopes


def _diff_text(changes: dict, side: str) -> str:
    return "".join(f"{key} {value[side]}\n" for key, value in changes.items() if value[side] is not None)


class SpectrumScaleConfig:
    def __init__(self, module):
        self.module = module
        self.bin = module.params["mmfs_bin"]
        self.several = module.params["scopes"] is not None
        if self.several:
            names = [entry["node_class"] or COMMON for entry in module.params["scopes"]]
            self.result = {"changed": False, "changes": {}, "command": [], "scope": names, "scopes": []}
        else:
            self.result = {
                "changed": False,
                "changes": {},
                "command": [],
                "scope": module.params["node_class"] or COMMON,
            }
        if not self.several and module.params["settings"] is None:
            module.fail_json(msg="one of the following is required: settings, scopes", **self.result)
        try:
            self.scopes = module_scopes(module.params)
        except OptionError as exc:
            module.fail_json(msg=str(exc), **self.result)

    def run_mm(self, *args):
        command = [os.path.join(self.bin, args[0]), *args[1:]]
        rc, out, err = Tool(self.module, command[0], MISSING_HINT, result=self.result).run(command[1:])
        return command, rc, out, err

    def current(self) -> dict:
        _cmd, rc, out, err = self.run_mm("mmlsconfig", "-Y")
        try:
            if rc == 0:
                return parse_mmlsconfig_y(out)
            _cmd, rc, out, err = self.run_mm("mmlsconfig")
            if rc == 0:
                return parse_mmlsconfig(out)
        except ParseError as exc:
            self.module.fail_json(msg=f"could not read the cluster configuration from mmlsconfig: {exc}", **self.result)
        self.module.fail_json(
            msg=f"mmlsconfig failed (rc={rc}): {(err or out).strip()} - run this on a node of the cluster "
            "(delegate_to a member of spectrum_scale_cluster)",
            **self.result,
        )
        return {}

    def plan(self, config: dict) -> list:
        """[{scope, changes, command}] in order, each scope compared with config as the ones before it leave it."""
        entries = []
        for scope, wanted in self.scopes:
            changes = config_changes(config, scope, wanted)
            command = []
            if changes:
                command = [
                    os.path.join(self.bin, "mmchconfig"),
                    ",".join(f"{key}={wanted[key]}" for key in changes),
                ]
                if scope != COMMON:
                    command += ["-N", scope]
                if self.module.params["immediate"]:
                    command.append("-i")
            entries.append({"scope": scope, "changes": changes, "command": command})
            config = apply_changes(config, scope, changes)
        return entries

    def run(self):
        entries = self.plan(self.current())
        if self.several:
            return self.run_several(entries)
        entry = entries[0]
        changes, command = entry["changes"], entry["command"]
        self.result["changes"] = changes
        if not changes:
            self.module.exit_json(**self.result)
        self.result.update(changed=True, command=command)
        if self.module._diff:
            label = f"[{entry['scope']}]"
            self.result["diff"] = {
                "before": _diff_text(changes, "before"),
                "after": _diff_text(changes, "after"),
                "before_header": f"mmlsconfig {label}",
                "after_header": f"mmlsconfig {label}",
            }
        if not self.module.check_mode:
            rc, out, err = Tool(self.module, command[0], MISSING_HINT, result=self.result).run(command[1:])
            if rc != 0:
                self.module.fail_json(
                    msg=f"mmchconfig failed (rc={rc}): {(err or out).strip()}", stdout=out, stderr=err, **self.result
                )
        self.module.exit_json(**self.result)

    def report(self, done: list) -> None:
        """The result of the scopes in done (applied, or in check mode to be applied) and their diff."""
        changed = [entry for entry in done if entry["changes"]]
        self.result.update(
            changed=bool(changed),
            scopes=done,
            changes={entry["scope"]: entry["changes"] for entry in changed},
            command=[entry["command"] for entry in changed],
        )
        if self.module._diff and changed:
            self.result["diff"] = {
                "before": "".join(f"[{e['scope']}]\n" + _diff_text(e["changes"], "before") for e in changed),
                "after": "".join(f"[{e['scope']}]\n" + _diff_text(e["changes"], "after") for e in changed),
                "before_header": "mmlsconfig",
                "after_header": "mmlsconfig",
            }

    def run_several(self, entries: list) -> None:
        done = []
        for entry in entries:
            if entry["command"] and not self.module.check_mode:
                rc, out, err = Tool(self.module, entry["command"][0], MISSING_HINT, result=self.result).run(
                    entry["command"][1:]
                )
                if rc != 0:
                    self.report(done)
                    applied = ", ".join(e["scope"] for e in done if e["changes"]) or "none"
                    self.result["changed"] = True  # as the single form: an mmchconfig ran
                    self.module.fail_json(
                        msg=f"mmchconfig failed for scope {entry['scope']} (rc={rc}): {(err or out).strip()} "
                        f"- scopes applied before it: {applied}",
                        failed_scope=entry["scope"],
                        failed_command=entry["command"],
                        stdout=out,
                        stderr=err,
                        **self.result,
                    )
            done.append(entry)
        self.report(done)
        self.module.exit_json(**self.result)


def main():
    module = AnsibleModule(
        argument_spec={
            "settings": {"type": "dict"},
            "node_class": {"type": "str", "default": ""},
            "scopes": {
                "type": "list",
                "elements": "dict",
                "options": {
                    "node_class": {"type": "str", "default": ""},
                    "settings": {"type": "dict", "required": True},
                },
            },
            "immediate": {"type": "bool", "default": False},
            "mmfs_bin": {"type": "path", "default": "/usr/lpp/mmfs/bin"},
        },
        mutually_exclusive=[["settings", "scopes"]],
        required_one_of=[["settings", "scopes"]],
        supports_check_mode=True,
    )
    SpectrumScaleConfig(module).run()


if __name__ == "__main__":
    main()
