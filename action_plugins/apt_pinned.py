# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpuforge.cluster.apt_pinned: read dpkg, and call the apt module only for what is not met.

The apt module opens apt's whole package cache on every run, a second or more on a host with full package lists
(benchmarks/toolkit/apt_cost.py); a dpkg read costs what a no-op module costs. Reading first in a task of its own
and gating apt on it saves that second per install on the node but costs the controller one more task per install.
This plugin does both in one task: one module call on a converged host, apt (and a second
read that judges what apt left) only when a package is missing or off its pin. The documentation is in
library/apt_pinned.py; the judging is in module_utils/gpuforge_packages.py.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import (
    apt_read_packages,
    apt_specs_unmet,
    describe_apt_unmet,
)

READ_MODULE = "gpuforge.cluster.package_version_floor"
APT_MODULE = "ansible.builtin.apt"

ARGUMENT_SPEC = {
    "name": {"type": "list", "elements": "str", "required": True},
    "cache_valid_time": {"type": "int"},
    "update_cache": {"type": "bool"},
    "install_recommends": {"type": "bool"},
    "allow_downgrade": {"type": "bool"},
    "policy_rc_d": {"type": "int"},
    "retry_with_fresh_index": {"type": "bool", "default": False},
    "fix": {
        "type": "str",
        "default": "the package mirror lacks that build: refresh it, or change the pin deliberately",
    },
}
# The apt module's options this plugin hands on as given (None: left to apt's default).
APT_OPTIONS = ("cache_valid_time", "update_cache", "install_recommends", "allow_downgrade", "policy_rc_d")


def _why(module_result) -> str:
    """A failed module call's message, with the last line of its stderr when the message alone does not say why (a
    module that could not start: "MODULE FAILURE", "Module result deserialization failed")."""
    msg = str(module_result.get("msg") or "no message")
    stderr = str(module_result.get("module_stderr") or "").strip()
    return f"{msg} ({stderr.splitlines()[-1]})" if stderr else msg


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        host = task_vars.get("inventory_hostname", "this host")
        specs = args["name"]
        try:
            read = self._read(specs, task_vars)
            if read.get("failed"):
                return self._failed(result, f"{host}: could not read the installed packages: {_why(read)}")
            unmet = apt_specs_unmet(specs, read)
            result.update(changed=False, installed=read.get("installed", {}), unmet=unmet, apt_ran=False)
            if not unmet:
                return result
            apt = self._apt(unmet, args, task_vars)
            result["apt_ran"] = True
            # What the apt module warns about (a held package, a deprecated option) reaches the operator.
            for key in ("warnings", "deprecations"):
                if apt.get(key):
                    result.setdefault(key, []).extend(apt[key])
            if apt.get("failed"):
                return self._failed(result, f"{host}: apt could not install {', '.join(unmet)}: {_why(apt)}")
            result["changed"] = bool(apt.get("changed"))
            if apt.get("diff"):
                result["diff"] = apt["diff"]
            # In check mode apt only planned the install: there is nothing new to judge.
            if self._task.check_mode:
                return result
            after = self._read(specs, task_vars)
            if after.get("failed"):
                return self._failed(result, f"{host}: could not read the packages apt installed: {_why(after)}")
            result["installed"] = after.get("installed", {})
            still = describe_apt_unmet(specs, after)
            if still:
                return self._failed(result, f"{host}: after apt: {'; '.join(still)}: {args['fix'].rstrip('.')}.")
            return result
        finally:
            # ActionBase.cleanup(): the remote temporary folder the module runs shared goes.
            self.cleanup()

    def _read(self, specs, task_vars):
        module_args = {
            "packages": apt_read_packages(specs),
            "manager": "dpkg",
            "missing": "ignore",
            "below_floor": "ignore",
        }
        return self._execute_module(module_name=READ_MODULE, module_args=module_args, task_vars=task_vars)

    def _apt(self, specs, args, task_vars):
        module_args = {"name": specs, "state": "present"}
        module_args.update({key: args[key] for key in APT_OPTIONS if args[key] is not None})
        apt = self._execute_module(module_name=APT_MODULE, module_args=module_args, task_vars=task_vars)
        if apt.get("failed") and args["retry_with_fresh_index"]:
            # An index younger than cache_valid_time is trusted; one that still lacks a pinned build (lists emptied
            # at image build time, a repository that gained it since) is refreshed once and the install tried again.
            fresh = {key: value for key, value in module_args.items() if key != "cache_valid_time"}
            fresh["update_cache"] = True
            apt = self._execute_module(module_name=APT_MODULE, module_args=fresh, task_vars=task_vars)
        return apt

    @staticmethod
    def _failed(result, msg):
        result.update(failed=True, msg=msg)
        return result
