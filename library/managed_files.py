#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: a list of directories and small files with their content, mode and owner, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: managed_files
short_description: Write a list of directories and small configuration files in one call
description:
  - "Makes each directory of I(directories), in order, then each file of I(files), in order, hold what is
    asked, in one module run: the directory or file is there, with the mode (and owner, group) given, and each
    file holds exactly I(content)."
  - A missing directory is created with its missing parents (the parents get the default mode, 0777 less the
    umask; list a parent too to set its mode), then its mode, owner and group are set.
  - A file is compared byte for byte with I(content) (UTF-8) and replaced only when it differs, atomically (a
    temporary file in the same directory, then a rename); then its mode, owner and group are set where they
    differ. The file's directory must exist or be listed under I(directories).
  - Replaces C(ansible.builtin.template), C(ansible.builtin.copy) and C(ansible.builtin.file) loops for the few
    small configuration files and directories a role writes to every host, with one task.
  - The content is given, not a template path; render it on the controller, for example with
    C(lookup('ansible.builtin.template', 'crio.conf.j2')).
  - Everything is checked before anything is written (the paths, the modes, that no path is listed twice,
    that every file's directory exists or will, that nothing of another kind is at a path), so bad options
    change nothing.
options:
  directories:
    description: Directories to create or keep, in this order, before the files.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description:
          - Absolute, normalised path of the directory (no C(..), C(.), C(//) or trailing C(/)).
          - Whatever is at the path must be a directory (not a symbolic link); the module fails otherwise.
        type: str
        required: true
      mode:
        description:
          - The directory's permissions, a quoted string of 3 or 4 octal digits (C("0755")).
          - An unquoted C(0755) is a number in YAML, and the module refuses it rather than guess what was meant.
        type: raw
        required: true
      owner:
        description:
          - User name or uid that should own the directory. Left as it is when not given (a directory the module
            creates belongs to the user it runs as, root with C(become)).
        type: str
      group:
        description: Group name or gid of the directory. Left as it is when not given.
        type: str
  files:
    description: Files to write or keep, in this order, after the directories.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description:
          - Absolute, normalised path of the file (no C(..), C(.), C(//) or trailing C(/)).
          - Whatever is at the path must be a regular file (not a directory nor a symbolic link); the module fails
            otherwise.
        type: str
        required: true
      content:
        description:
          - The whole text of the file, written as UTF-8 byte for byte (no newline added or removed). An empty
            string writes an empty file.
        type: str
        required: true
      mode:
        description:
          - The file's permissions, a quoted string of 3 or 4 octal digits (C("0644")).
          - An unquoted C(0644) is a number in YAML, and the module refuses it rather than guess what was meant.
        type: raw
        required: true
      owner:
        description:
          - User name or uid that should own the file. Left as it is when not given (a file the module creates
            belongs to the user it runs as, root with C(become)).
        type: str
      group:
        description: Group name or gid of the file. Left as it is when not given.
        type: str
      validate:
        description:
          - A command that checks the new content before it replaces the file, as C(ansible.builtin.copy)'s
            I(validate) does; C(%s) in it stands for the path of the temporary file that holds the new content
            (in the file's directory, so paths relative to the file resolve the same), for example
            C(promtool check config %s).
          - Runs only when the content changes, and not in check mode. The command is split into words like a
            shell would (no shell runs it) and must hold C(%s). When it exits non-zero, the module fails naming
            the file, the command and its output, and leaves that file, and the files after it, as they were
            (the files before it in I(files) are written).
        type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details:
      - Reads the paths, writes nothing and reports what would change (RV(changed_paths)).
      - An I(owner) or I(group) that does not exist yet (created by an earlier task that check mode did not run)
        gives a warning, and the path is reported as to be changed.
      - I(validate) commands are not run (there is no new file to check).
  diff_mode:
    support: full
    details:
      - One entry per file whose content changes (its text before and after; empty before when the file is
        new), one per new directory (state C(absent) before, C(directory) after, with its mode), and one per
        existing path whose mode, owner or group changes (as C(ansible.builtin.file) shows them).
notes:
  - The content of every file travels in the module's arguments, so it is shown by C(-vvv) and kept in logs
    like any other argument. Set C(no_log) on the task for content that holds a secret.
  - Meant for small configuration files; for large or binary files use C(ansible.builtin.copy).
  - Runs as root (C(become)) to write under C(/etc) or to set an I(owner).
  - No backup of a replaced file is kept, and SELinux contexts are those Ansible gives any file it writes (the
    replaced file's context, or the default one for a new path).
seealso:
  - module: ansible.builtin.template
  - module: ansible.builtin.copy
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: CRI-O drop-in and its directory in one call
  gpuforge.cluster.managed_files:
    directories:
      - path: /etc/systemd/system/crio.service.d
        mode: "0755"
    files:
      - path: /etc/systemd/system/crio.service.d/10-gpuforge.conf
        content: "{{ lookup('ansible.builtin.template', 'crio-dropin.conf.j2') }}"
        mode: "0644"
      - path: /etc/crio/crio.conf.d/99-nvidia.conf
        content: |
          [crio.runtime]
          default_runtime = "nvidia"
        mode: "0644"
        owner: root
        group: root
  register: crio_files
  become: true

- name: A file with a secret, kept out of the log
  gpuforge.cluster.managed_files:
    files:
      - path: /etc/gpuforge/registry-token
        content: "{{ registry_token }}"
        mode: "0600"
  no_log: true
  become: true
"""

RETURN = r"""
changed_paths:
  description:
    - The paths that changed (in check mode, that would change), in the order given, directories first.
    - A path is listed once, whether its content, mode, owner or group changed, or it was created.
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/crio.service.d, /etc/systemd/system/crio.service.d/10-gpuforge.conf]
"""

import functools
import grp
import os
import pwd
import re
import shlex
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_files import write_atomic
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_options import show
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, ToolNotRun, this_host

MODE = re.compile(r"^[0-7]{3,4}$")
# What is at a path (plan() records it for each entry).
ABSENT = "absent"
DIRECTORY = "directory"
FILE = "file"


def _path(where: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise OptionError(where, f"must be an absolute path, got {show(value)}")
    if "\x00" in value:
        raise OptionError(where, f"must not hold a NUL character, got {show(value)}")
    if not value.startswith("/"):
        raise OptionError(where, f"must be an absolute path (starting with /), got {show(value)}")
    # normpath keeps two leading slashes (POSIX leaves their meaning to the system); one is meant.
    normal = "/" + os.path.normpath(value).lstrip("/")
    if normal != value:
        raise OptionError(
            where, f"must be a normalised path (no '..', '.', '//' or trailing '/'), got {show(value)}: write {normal}"
        )
    return value


def _mode(where: str, path: str, value) -> int:
    if isinstance(value, str) and MODE.match(value.strip()):
        return int(value.strip(), 8)
    hint = ""
    if isinstance(value, int) and not isinstance(value, bool):
        hint = f' (YAML read an unquoted mode as the number {value}: quote it, mode: "0644")'
    raise OptionError(
        where, f'({path}) must be a quoted string of 3 or 4 octal digits such as "0644", got {show(value)}{hint}'
    )


def _name(where: str, path: str, value):
    if value is None:
        return None
    if not value.strip() or value != value.strip():
        raise OptionError(
            where, f"({path}) must be a user or group name or id, got {show(value)}: leave it out to keep it"
        )
    return value


def _validate(where: str, path: str, value):
    """The validate command as argv words with "%s" kept for the temporary file, or None when not given."""
    if value is None:
        return None
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise OptionError(where, f"({path}) cannot be split into words: {exc}") from None
    if not words or not any("%s" in word for word in words):
        raise OptionError(
            where, f"({path}) must be a command holding %s (the file to check), got {show(value)}: e.g. 'visudo -cf %s'"
        )
    return words


def check_entries(params: dict) -> tuple:
    """(directories, files): lists of {where, path, mode, owner, group[, text, data]} from the options, checked;
    raises OptionError naming the option path."""
    seen: dict = {}
    checked: dict = {"directories": [], "files": []}
    for option in ("directories", "files"):
        for index, entry in enumerate(params[option] or []):
            where = f"{option}[{index}]"
            path = _path(f"{where}.path", entry["path"])
            if path in seen:
                raise OptionError(
                    f"{where}.path", f"{path} is listed a second time ({seen[path]}): list each path once"
                )
            seen[path] = f"{where}.path"
            item = {
                "where": where,
                "path": path,
                "mode": _mode(f"{where}.mode", path, entry["mode"]),
                "owner": _name(f"{where}.owner", path, entry["owner"]),
                "group": _name(f"{where}.group", path, entry["group"]),
            }
            if option == "files":
                content = entry["content"]
                if not isinstance(content, str):
                    raise OptionError(
                        f"{where}.content",
                        f"({path}) must be a string (content: '' for an empty file), got {show(content)}",
                    )
                try:
                    item["data"] = content.encode("utf-8", "surrogateescape")
                except UnicodeEncodeError as exc:
                    raise OptionError(f"{where}.content", f"({path}) cannot be written as UTF-8: {exc}") from None
                item["text"] = content
                item["validate"] = _validate(f"{where}.validate", path, entry.get("validate"))
            checked[option].append(item)
    return checked["directories"], checked["files"]


class ManagedFiles:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.result = {"changed": False, "changed_paths": []}
        self.diffs: list = []
        try:
            self.directories, self.files = check_entries(module.params)
        except OptionError as exc:
            self.fail(str(exc))

    def fail(self, msg: str, **extra) -> None:
        self.module.fail_json(msg=msg, **extra, **self.result)

    # -- what is there now

    def kind(self, entry: dict):
        """ABSENT, DIRECTORY or FILE for what is at the entry's path (symbolic links not followed); fails on
        anything else."""
        path = entry["path"]
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            # NotADirectoryError: a parent is a file; plan() says so.
            return ABSENT
        except OSError as exc:
            self.fail(f"{entry['where']}.path: could not read {path} on {this_host()}: {exc}")
        if stat.S_ISLNK(mode):
            self.fail(
                f"{entry['where']}.path: {path} on {this_host()} is a symbolic link (to {os.readlink(path)}): "
                "list the path it points to instead, or remove the link"
            )
        if stat.S_ISDIR(mode):
            return DIRECTORY
        if stat.S_ISREG(mode):
            return FILE
        self.fail(
            f"{entry['where']}.path: {path} on {this_host()} is neither a directory nor a regular file: remove it by "
            "hand or list another path"
        )
        return None

    def plan(self) -> None:
        """Check, before anything is written, what is at every path and that every file's directory exists or
        will; records each entry's kind."""
        planned: set = set()  # directories this run creates, with their missing parents
        for entry in self.directories:
            entry["kind"] = self.kind(entry)
            if entry["kind"] == FILE:
                self.fail(
                    f"{entry['where']}.path: {entry['path']} on {this_host()} is a file, not a directory: remove it "
                    "by hand or list it under files"
                )
            if entry["kind"] == DIRECTORY:
                continue
            path = entry["path"]
            while path not in planned and not os.path.lexists(path):
                planned.add(path)
                path = os.path.dirname(path)
            if path not in planned and not os.path.isdir(path):
                self.fail(
                    f"{entry['where']}.path: cannot create {entry['path']} on {this_host()}: {path} is not a directory"
                )
        for entry in self.files:
            entry["kind"] = self.kind(entry)
            if entry["kind"] == DIRECTORY:
                self.fail(
                    f"{entry['where']}.path: {entry['path']} on {this_host()} is a directory, not a file: remove it "
                    "by hand or list it under directories"
                )
            parent = os.path.dirname(entry["path"])
            if parent not in planned and os.path.lexists(parent) and not os.path.isdir(parent):
                self.fail(
                    f"{entry['where']}.path: cannot write {entry['path']} on {this_host()}: {parent} is not a directory"
                )
            if parent not in planned and not os.path.isdir(parent):
                self.fail(
                    f"{entry['where']}.path: the directory of {entry['path']}, {parent}, does not exist on "
                    f"{this_host()}: list {parent} under directories (with its mode) so that it is created first"
                )
        for entry in self.directories + self.files:
            self.check_owner(entry)

    def check_owner(self, entry: dict) -> None:
        """An owner or group name must exist on the host. In check mode a missing one (its user or group task did
        not run) gives a warning, and the path counts as changed; the name is left out of what is compared."""
        entry["unknown"] = False
        for option, lookup, what in (("owner", pwd.getpwnam, "user"), ("group", grp.getgrnam, "group")):
            name = entry[option]
            if name is None or name.isdigit():
                continue
            try:
                lookup(name)
            except KeyError:
                message = f"{entry['where']}.{option} ({entry['path']}): there is no {what} {name} on {this_host()}"
                if not self.module.check_mode:
                    self.fail(f"{message}: create the {what} before this task, or fix the name")
                self.module.warn(f"{message} (yet): the path is reported as to be changed")
                entry[option] = None
                entry["unknown"] = True

    # -- changes

    def attributes(self, entry: dict, new: bool) -> bool:
        """Set mode, owner and group where they differ (check mode: only compare); whether they did (would).
        A path created by this run gets no diff entry of its own: its creation's entry says it all."""
        path = entry["path"]
        if new and self.module.check_mode:
            return True
        args = self.module.load_file_common_arguments(
            {"mode": entry["mode"], "owner": entry["owner"], "group": entry["group"]}, path=path
        )
        # load_file_common_arguments expands ~ and $VARS in the path; the path given is the path meant.
        args["path"] = path
        diff = {"before": {"path": path}, "after": {"path": path}}
        try:
            changed = self.module.set_fs_attributes_if_different(args, False, None if new else diff, expand=False)
        except OSError as exc:
            self.fail(f"{entry['where']}: could not set the mode, owner or group of {path} on {this_host()}: {exc}")
        if len(diff["before"]) > 1 or len(diff["after"]) > 1:
            self.diffs.append(diff)
        return bool(changed) or entry["unknown"]

    def directory(self, entry: dict) -> bool:
        path = entry["path"]
        if entry["kind"] == DIRECTORY:
            return self.attributes(entry, new=False)
        after = {"path": path, "state": DIRECTORY, "mode": f"0{entry['mode']:03o}"}
        after.update({key: entry[key] for key in ("owner", "group") if entry[key] is not None})
        self.diffs.append({"before": {"path": path, "state": ABSENT}, "after": after})
        # An earlier entry below this one created it as a parent: it is new all the same.
        if not self.module.check_mode and not os.path.isdir(path):
            try:
                os.makedirs(path, entry["mode"])
            except OSError as exc:
                self.fail(f"{entry['where']}: could not create {path} on {this_host()}: {exc}")
        self.attributes(entry, new=True)
        return True

    def read(self, entry: dict):
        """The bytes of the entry's file, or None where there is none."""
        if entry["kind"] == ABSENT:
            return None
        try:
            with open(entry["path"], "rb") as handle:
                return handle.read()
        except OSError as exc:
            self.fail(f"{entry['where']}: could not read {entry['path']} on {this_host()}: {exc}")
        return None

    def file(self, entry: dict) -> bool:
        path = entry["path"]
        current = self.read(entry)
        new = current is None
        # Mode and owner of a file that is there first: the replacement keeps them (atomic_move).
        changed = False if new else self.attributes(entry, new=False)
        if current != entry["data"]:
            changed = True
            before = "" if new else current.decode("utf-8", "replace")
            self.diffs.append({"before_header": path, "after_header": path, "before": before, "after": entry["text"]})
            if not self.module.check_mode:
                check = functools.partial(self.validate, entry) if entry["validate"] else None
                try:
                    write_atomic(self.module, path, entry["data"], entry["mode"], check=check)
                except OSError as exc:
                    self.fail(f"{entry['where']}: could not write {path} on {this_host()}: {exc}")
        if new:
            self.attributes(entry, new=True)
        return changed

    def validate(self, entry: dict, tmp: str) -> None:
        """Run the entry's validate command on the temporary file; fail (the temporary file is then removed by
        write_atomic and the file left as it was) when it exits non-zero."""
        argv = [word.replace("%s", tmp) for word in entry["validate"]]
        try:
            rc, out, err = Tool(self.module, argv[0], "install it or give its full path", on_error="raise").run(
                argv[1:]
            )
        except ToolNotRun as exc:  # the command is not there or cannot run
            rc, out, err = 127, "", str(exc)
        if rc != 0:
            shown = " ".join(shlex.quote(word) for word in entry["validate"])
            output = (err.strip() or out.strip() or "no output")[-2000:]
            self.fail(
                f"{entry['where']}: the new content of {entry['path']} on {this_host()} did not pass validate "
                f"({shown}, exit {rc}): {output}. The file was left as it was: fix the content (or the command)",
                validate_rc=rc,
            )

    def apply(self) -> dict:
        self.plan()
        for entry in self.directories:
            if self.directory(entry):
                self.result["changed_paths"].append(entry["path"])
        for entry in self.files:
            if self.file(entry):
                self.result["changed_paths"].append(entry["path"])
        self.result["changed"] = bool(self.result["changed_paths"])
        if self.module._diff:
            self.result["diff"] = self.diffs
        return self.result


def main() -> None:
    owner = {"owner": {"type": "str"}, "group": {"type": "str"}}
    module = AnsibleModule(
        argument_spec={
            "directories": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "str", "required": True},
                    "mode": {"type": "raw", "required": True},
                    **owner,
                },
            },
            "files": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "str", "required": True},
                    "content": {"type": "str", "required": True},
                    "mode": {"type": "raw", "required": True},
                    "validate": {"type": "str"},
                    **owner,
                },
            },
        },
        supports_check_mode=True,
    )
    module.exit_json(**ManagedFiles(module).apply())


if __name__ == "__main__":
    main()
