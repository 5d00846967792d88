#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: build SELinux policy modules from their .te source and install them with semodule."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: selinux_policy_module
short_description: Build SELinux policy modules from source and install them, in one call for all of them
description:
  - For each module writes C(BUILD_DIR/NAME.te) when its content differs (mode 0600; I(build_dir) is created
    0700), compiles it with C(make -f MAKEFILE NAME.pp) in I(build_dir) when the source changed or the C(.pp)
    is missing, and runs C(semodule -i BUILD_DIR/NAME.pp) when C(semodule -l) does not list the module or the
    sha256 of the C(.pp) differs from the one recorded in C(BUILD_DIR/NAME.pp.installed-sha256) when it was
    installed last. After installing, records that checksum and requires C(semodule -l) to list every module.
  - Several modules in one call (I(modules)) read C(semodule -l) once, so a converged node runs that one
    command and nothing else; gpuforge's gpu_selinux role uses it that way.
  - The source text is given, not a template path; render it on the controller, for example with
    C(lookup('ansible.builtin.template', 'name.te.j2')).
options:
  name:
    description:
      - One module's name, as C(policy_module(NAME, VERSION)) in its source names it. Use I(modules) for several.
      - A letter, then letters, digits, C(_), C(-) and single dots (what libsemanage accepts).
    type: str
  source:
    description: The C(.te) text of the module I(name).
    type: str
  variants:
    description: Sources of the module I(name) chosen by the policy store, as in I(modules).
    type: list
    elements: dict
    suboptions:
      if_listed:
        description: A module name; the variant applies when C(semodule -l) lists that module.
        type: str
        required: true
      source:
        description: The C(.te) text used instead of I(source) then.
        type: str
        required: true
  modules:
    description: Modules to build and install, in this order. Mutually exclusive with I(name).
    type: list
    elements: dict
    suboptions:
      name:
        description: The module's name (see I(name)).
        type: str
        required: true
      source:
        description: The C(.te) text.
        type: str
        required: true
      variants:
        description:
          - Other sources of the same module, for a source that depends on which modules the policy store
            holds. The first variant whose I(if_listed) module C(semodule -l) lists (read once, before anything
            is installed) replaces I(source). The controller can render every source its template gives
            without asking the node first.
        type: list
        elements: dict
        default: []
        suboptions:
          if_listed:
            description: A module name; the variant applies when C(semodule -l) lists that module.
            type: str
            required: true
          source:
            description: The C(.te) text used instead of I(source) then.
            type: str
            required: true
  build_dir:
    description: Absolute path of the directory for the sources, the compiled C(.pp) files and their checksums.
    type: path
    default: /var/lib/gpuforge/selinux
  makefile:
    description:
      - The policy development Makefile (Debian/Ubuntu C(selinux-policy-dev), RHEL C(selinux-policy-devel)
        install it at the default path).
    type: path
    default: /usr/share/selinux/devel/Makefile
  state:
    description: Only C(present); the module never removes a policy module.
    type: str
    choices: [present]
    default: present
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details:
      - Reads C(semodule -l) and the files, writes nothing and runs neither make nor C(semodule -i); reports
        changed when a source would be written, a module compiled or installed.
      - A source that would change is reported as compiled and installed (its new C(.pp) cannot be built to
        compare its checksum).
  diff_mode:
    support: full
    details: The C(.te) sources before and after, one entry per module whose source changes.
requirements:
  - semodule (policycoreutils), make and the policy development files on the managed node
notes:
  - Runs as root (C(become)); C(semodule) needs the policy store.
seealso:
  - module: community.general.selinux_permissive
  - module: community.general.sefcontext
"""

EXAMPLES = r"""
- name: Build and install two modules in one call
  gpuforge.cluster.selinux_policy_module:
    modules:
      - name: infiniband
        source: "{{ lookup('ansible.builtin.template', 'infiniband.te.j2') }}"
      - name: nvidia_container
        source: "{{ lookup('ansible.builtin.template', 'plain_domain.te.j2') }}"
        variants:
          - if_listed: container
            source: "{{ lookup('ansible.builtin.template', 'container_domain.te.j2') }}"
  become: true

- name: One module
  gpuforge.cluster.selinux_policy_module:
    name: mymodule
    source: "{{ lookup('ansible.builtin.file', 'mymodule.te') }}"
    build_dir: /var/lib/selinux-build
"""

RETURN = r"""
build_dir:
  description: The build directory.
  returned: always
  type: str
  sample: /var/lib/gpuforge/selinux
modules:
  description: What happened to each module, in the order given (in check mode, what would happen).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Module name.
      type: str
      sample: nvidia_container
    variant:
      description: The I(if_listed) module of the variant used, or null for I(source).
      type: str
      sample: container
    listed_before:
      description: Whether C(semodule -l) listed the module before this run.
      type: bool
      sample: true
    source_changed:
      description: Whether the C(.te) was (or would be) written, or its mode set to 0600.
      type: bool
      sample: false
    compiled:
      description: Whether make built the C(.pp).
      type: bool
      sample: false
    installed:
      description: Whether C(semodule -i) installed the module.
      type: bool
      sample: false
    reason:
      description: Why the module was installed, or why not.
      type: str
      sample: listed by semodule -l and the .pp is the one installed last
    sha256:
      description: Checksum of the C(.pp) (null while there is none).
      type: str
      sample: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
commands:
  description: The commands run, in order (argv lists).
  returned: always
  type: list
  elements: list
  sample: [[/usr/sbin/semodule, -l]]
"""

import os
import shlex

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_files import file_mode, write_atomic
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import show
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, output_tail, this_host
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_selinux import (
    ParseError,
    parse_semodule_list,
    valid_module_name,
)

SEMODULE_FIX = (
    "install the SELinux policy tools (Debian/Ubuntu: policycoreutils and semodule-utils; RHEL: policycoreutils)"
)
MAKE_FIX = "install make and the policy headers (Debian/Ubuntu: selinux-policy-dev; RHEL: selinux-policy-devel)"
STORE_FIX = (
    "run as root (become: true) on a host with a policy store (Debian/Ubuntu: selinux-policy-default; "
    "RHEL: selinux-policy-targeted)"
)


def _read(path: str):
    """The text of path, or None where there is no file."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _name(path: str, value) -> str:
    if not valid_module_name(value):
        raise OptionError(
            path,
            f"must be a policy module name (a letter, then letters, digits, _, - and single dots), got {show(value)}",
        )
    return value


def _variants(path: str, variants) -> list:
    checked = []
    for index, variant in enumerate(variants or []):
        where = f"{path}[{index}]"
        _name(f"{where}.if_listed", variant["if_listed"])
        if not variant["source"].strip():
            raise OptionError(f"{where}.source", "must not be empty")
        checked.append({"if_listed": variant["if_listed"], "source": variant["source"]})
    return checked


def module_specs(params: dict) -> list:
    """[{name, source, variants}] from the options; raises OptionError naming the option path."""
    if params["modules"] is None:
        entries, prefix = [params], ""
    else:
        entries, prefix = params["modules"], "modules"
        if not entries:
            raise OptionError("modules", "must name at least one module")
    specs, seen = [], set()
    for index, entry in enumerate(entries):
        where = f"{prefix}[{index}]." if prefix else ""
        name = _name(f"{where}name", entry["name"])
        if name in seen:
            raise OptionError(f"{where}name", f"names {name} a second time")
        seen.add(name)
        if not (entry["source"] or "").strip():
            raise OptionError(f"{where}source", "must not be empty")
        variants = _variants(f"{where}variants", entry.get("variants"))
        specs.append({"name": name, "source": entry["source"], "variants": variants})
    return specs


class PolicyModules:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.params = module.params
        self.build_dir = self.params["build_dir"]
        self.makefile = self.params["makefile"]
        self.result = {"changed": False, "build_dir": self.build_dir, "modules": [], "commands": []}
        self.diffs: list = []
        if not os.path.isabs(self.build_dir):
            self.fail(f"build_dir must be an absolute path, got {show(self.build_dir)}")
        try:
            self.specs = module_specs(self.params)
        except OptionError as exc:
            self.fail(str(exc))

    def fail(self, msg: str, **extra) -> None:
        self.module.fail_json(msg=msg, **extra, **self.result)

    def run(self, argv: list, fix: str, cwd=None):
        """Run argv (gpuforge_run.Tool; cwd for make); records the command."""
        self.result["commands"].append(list(argv))
        return Tool(self.module, argv[0], fix, result=self.result).run(argv[1:], cwd=cwd)

    def command_failed(self, what: str, argv: list, rc: int, out: str, err: str, fix: str, cwd=None) -> None:
        place = f" in {cwd}" if cwd else ""
        self.fail(
            f"{what}: `{shlex.join(argv)}` failed{place} on {this_host()} (rc {rc}): "
            f"{output_tail(err or out)}\nFix: {fix}",
            rc=rc,
            stdout=out,
            stderr=err,
        )

    # -- the policy store

    def store(self, when: str) -> list:
        """The module names `semodule -l` lists."""
        if self.module.check_mode and not self.module.get_bin_path("semodule"):
            self.module.warn(
                "semodule is not installed yet (in check mode the toolchain install before this task changed "
                "nothing): every module is reported as to be installed"
            )
            return []
        semodule = Tool(self.module, "semodule", SEMODULE_FIX, result=self.result).require()
        argv = [semodule, "-l"]
        rc, out, err = self.run(argv, SEMODULE_FIX)
        if rc != 0:
            self.command_failed(f"reading the policy store {when}", argv, rc, out, err, STORE_FIX)
        try:
            return parse_semodule_list(out)["names"]
        except ParseError as exc:
            self.fail(f"could not read the policy store {when} from semodule -l on {this_host()}: {exc}")
        return []

    # -- files

    def write(self, path: str, content: str, mode: int) -> None:
        """Replace path with content atomically, then set mode (atomic_move keeps the old file's mode)."""
        try:
            write_atomic(self.module, path, content.encode("utf-8", "surrogateescape"), mode)
        except OSError as exc:
            self.fail(f"could not write {path} on {this_host()}: {exc}")

    def ensure_build_dir(self) -> None:
        mode = file_mode(self.build_dir)
        if mode == 0o700:
            return
        self.result["changed"] = True
        if self.module.check_mode:
            return
        try:
            if mode is None:
                os.makedirs(self.build_dir, mode=0o700)
            os.chmod(self.build_dir, 0o700)
        except OSError as exc:
            self.fail(f"could not create {self.build_dir} (mode 0700) on {this_host()}: {exc}")

    # -- one module

    def source_for(self, spec: dict, listed: list):
        for variant in spec["variants"]:
            if variant["if_listed"] in listed:
                return variant["source"], variant["if_listed"]
        return spec["source"], None

    def write_source(self, name: str, source: str) -> tuple:
        """(content changed, mode or content changed) for BUILD_DIR/NAME.te."""
        path = os.path.join(self.build_dir, f"{name}.te")
        current = _read(path)
        changed = current != source
        if changed:
            self.diffs.append({"before_header": path, "after_header": path, "before": current or "", "after": source})
        touched = changed or file_mode(path) != 0o600
        if touched and not self.module.check_mode:
            if changed:
                self.write(path, source, 0o600)
            else:
                try:
                    os.chmod(path, 0o600)
                except OSError as exc:
                    self.fail(f"could not set mode 0600 on {path} on {this_host()}: {exc}")
        return changed, touched

    def compile(self, name: str) -> None:
        make = Tool(self.module, "make", MAKE_FIX, result=self.result).require()
        if not os.path.isfile(self.makefile):
            self.fail(f"{name}: the policy Makefile {self.makefile} is not on {this_host()}: {MAKE_FIX}")
        argv = [make, "-f", self.makefile, f"{name}.pp"]
        rc, out, err = self.run(argv, MAKE_FIX, cwd=self.build_dir)
        if rc != 0:
            self.command_failed(
                f"compiling policy module {name}",
                argv,
                rc,
                out,
                err,
                f"the source must compile against the policy headers under {os.path.dirname(self.makefile)}; "
                f"run the same command in {self.build_dir} for the whole output",
                cwd=self.build_dir,
            )
        if not os.path.isfile(os.path.join(self.build_dir, f"{name}.pp")):
            self.fail(f"compiling policy module {name}: make succeeded but left no {name}.pp in {self.build_dir}")

    def install(self, name: str, package: str, sha256: str) -> None:
        semodule = Tool(self.module, "semodule", SEMODULE_FIX, result=self.result).require()
        argv = [semodule, "-i", package]
        rc, out, err = self.run(argv, SEMODULE_FIX)
        if rc != 0:
            self.command_failed(
                f"installing policy module {name}",
                argv,
                rc,
                out,
                err,
                "the module must link into the loaded policy (every type and interface it requires must exist "
                f"there) and semodule needs root; run `semodule -v -i {package}` as root for the whole output",
            )
        self.write(f"{package}.installed-sha256", f"{sha256}\n", 0o600)

    def apply_one(self, spec: dict, listed: list) -> dict:
        name = spec["name"]
        source, variant = self.source_for(spec, listed)
        package = os.path.join(self.build_dir, f"{name}.pp")
        content_changed, source_changed = self.write_source(name, source)
        needs_compile = content_changed or not os.path.isfile(package)
        entry = {
            "name": name,
            "variant": variant,
            "listed_before": name in listed,
            "source_changed": source_changed,
            "compiled": needs_compile,
            "installed": False,
            "reason": "",
            "sha256": None,
        }
        if needs_compile and not self.module.check_mode:
            self.compile(name)
        if needs_compile and self.module.check_mode:
            entry["installed"] = True
            entry["reason"] = "the source changed or the .pp is missing: it is rebuilt, then installed"
            return entry
        sha256 = self.module.sha256(package)
        entry["sha256"] = sha256
        recorded = (_read(f"{package}.installed-sha256") or "").strip()
        if name not in listed:
            entry["reason"] = "semodule -l does not list it"
        elif recorded != sha256:
            entry["reason"] = f"the .pp differs from the one installed last ({recorded or 'no checksum recorded'})"
        else:
            entry["reason"] = "listed by semodule -l and the .pp is the one installed last"
            return entry
        entry["installed"] = True
        if not self.module.check_mode:
            self.install(name, package, sha256)
        return entry

    def apply(self) -> dict:
        listed = self.store("before installing")
        self.ensure_build_dir()
        for spec in self.specs:
            entry = self.apply_one(spec, listed)
            self.result["modules"].append(entry)
            if entry["source_changed"] or entry["compiled"] or entry["installed"]:
                self.result["changed"] = True
        installed = [entry["name"] for entry in self.result["modules"] if entry["installed"]]
        if installed and not self.module.check_mode:
            after = self.store("after installing")
            missing = [spec["name"] for spec in self.specs if spec["name"] not in after]
            if missing:
                self.fail(
                    f"semodule -l does not list {', '.join(missing)} on {this_host()} after semodule -i installed "
                    f"{', '.join(installed)} without an error.\nFix: look for another policy store or a module of "
                    "the same name at a higher priority (semodule -lfull), then rerun"
                )
        if self.module._diff:
            self.result["diff"] = self.diffs
        return self.result


def main() -> None:
    variant = {"if_listed": {"type": "str", "required": True}, "source": {"type": "str", "required": True}}
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str"},
            "source": {"type": "str"},
            "variants": {"type": "list", "elements": "dict", "options": variant},
            "modules": {
                "type": "list",
                "elements": "dict",
                "options": {
                    "name": {"type": "str", "required": True},
                    "source": {"type": "str", "required": True},
                    "variants": {"type": "list", "elements": "dict", "default": [], "options": variant},
                },
            },
            "build_dir": {"type": "path", "default": "/var/lib/gpuforge/selinux"},
            "makefile": {"type": "path", "default": "/usr/share/selinux/devel/Makefile"},
            "state": {"type": "str", "choices": ["present"], "default": "present"},
        },
        mutually_exclusive=[["name", "modules"], ["source", "modules"], ["variants", "modules"]],
        required_one_of=[["name", "modules"]],
        required_together=[["name", "source"]],
        supports_check_mode=True,
    )
    module.exit_json(**PolicyModules(module).apply())


if __name__ == "__main__":
    main()
