"""What a package manager would do to install a vendor stack, read from its own dry run, and the closure guard's
verdict on it.

Pure functions over text, stdlib only (and gpuforge_errors, shipped with it). The module package_closure_guard runs
the dry runs on the node and calls these; `gpuforge parse apt-simulate|dnf-transaction FILE` reaches the parsers.
The formats, as recorded from the real tools in tests/fixtures/package_closure/ (SOURCES.md says how):

- ``apt-get install --simulate`` (apt 2.6): one line per action after the summary, ``Inst NAME (VERSION ORIGIN
  [ARCH])`` for a package that is not installed, ``Inst NAME [INSTALLED] (VERSION ORIGIN [ARCH])`` for one that
  changes version (an upgrade, a downgrade, or a reinstall of the same version), ``Remv NAME [INSTALLED]`` (and
  ``Purg``) for a removal, ``Conf NAME (VERSION ...)`` for the configure step of an install. ORIGIN may list several
  archives separated by ", ". An impossible request exits 100 with "The following packages have unmet
  dependencies:" and apt's own reason per package (``NAME : Depends: OTHER (= V) but W is to be installed``).
- ``dnf install --assumeno`` (dnf 4.14): the transaction table, one section per kind of change ("Installing:",
  "Installing dependencies:", "Upgrading:", "Downgrading:", "Reinstalling:", "Removing:", "Removing dependent
  packages:", ...), each row ``NAME ARCH [EPOCH:]VERSION-RELEASE REPOSITORY SIZE`` (a name too long for its column
  is printed alone, the rest of the row on the next line), ended by "Transaction Summary"; "Nothing to do." when
  nothing changes. It exits 1 ("Operation aborted.") after printing a transaction, 0 when there is nothing to do, and
  1 with "Error:" and dnf's problem description when the request cannot be resolved.
"""

from __future__ import annotations

import fnmatch
import re

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import ParseError

__all__ = [
    "ParseError",
    "closure_problems",
    "parse_apt_simulate",
    "parse_dnf_transaction",
    "resolver_refusal",
]


# "Inst name [installed] (version origin [arch])", "Remv name [installed]", "Purg name [installed]".
_APT_INST = re.compile(r"^Inst (?P<name>\S+)(?: \[(?P<installed>[^\]]+)\])? \((?P<version>\S+)(?: [^)]*)?\)")
_APT_SUMMARY = re.compile(r"^\d+ upgraded, \d+ newly installed, ", re.MULTILINE)
_APT_REMOVE = re.compile(r"^(?:Remv|Purg) (?P<name>\S+)(?: \[(?P<installed>[^\]]+)\])?")

_DNF_SECTIONS = {
    "Installing:": "install",
    "Installing dependencies:": "install",
    "Installing weak dependencies:": "install",
    "Upgrading:": "upgrade",
    "Downgrading:": "downgrade",
    "Reinstalling:": "reinstall",
    "Removing:": "remove",
    "Removing dependent packages:": "remove",
    "Removing unused dependencies:": "remove",
    "Obsoleting:": "remove",
}
# A package row: name, arch, [epoch:]version-release, repository, size ("5.6 k", "0").
_DNF_ROW = re.compile(r"^\s+(?P<name>\S+)\s+(?P<arch>\S+)\s+(?P<version>\S+-\S+)\s+(?P<repo>\S+)\s+\S+(?: [kMG])?\s*$")


def parse_apt_simulate(text: str) -> list:
    """`apt-get install --simulate` output -> [{"name", "action", "version", "installed"}], in apt's order.

    action: "install" (not installed before), "change" (installed at `installed`, to `version`: an upgrade, a
    downgrade or a reinstall), "remove" (version null). The Conf lines repeat the installs and are skipped.
    """
    if not isinstance(text, str):
        raise ParseError(f"apt-get --simulate output must be text, got {type(text).__name__}")
    if not _APT_SUMMARY.search(text):
        raise ParseError("no 'N upgraded, N newly installed, ...' summary: not the output of apt-get --simulate")
    actions = []
    for line in text.splitlines():
        if line.startswith("Inst "):
            match = _APT_INST.match(line)
            if not match:
                raise ParseError(f"unrecognised apt-get --simulate line: {line!r}")
            installed = match["installed"]
            actions.append(
                {
                    "name": match["name"],
                    "action": "change" if installed else "install",
                    "version": match["version"],
                    "installed": installed,
                }
            )
        elif line.startswith(("Remv ", "Purg ")):
            match = _APT_REMOVE.match(line)
            if not match:
                raise ParseError(f"unrecognised apt-get --simulate line: {line!r}")
            actions.append(
                {"name": match["name"], "action": "remove", "version": None, "installed": match["installed"]}
            )
    return actions


def parse_dnf_transaction(text: str) -> list:
    """`dnf install --assumeno` output -> [{"name", "action", "version", "installed"}], in dnf's order.

    action: "install", "upgrade", "downgrade", "reinstall" or "remove" (the version shown is then the installed
    one); version as dnf prints it ([epoch:]version-release). Module and group sections are not package rows and
    are skipped; "installed" is null (dnf's table does not show the version being replaced).
    """
    if not isinstance(text, str):
        raise ParseError(f"dnf output must be text, got {type(text).__name__}")
    if "Transaction Summary" not in text and "Nothing to do." not in text:
        raise ParseError("neither a transaction table nor 'Nothing to do.': not the output of dnf install --assumeno")
    actions = []
    section = None
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "Transaction Summary":
            break
        if not line.startswith(" "):
            section = _DNF_SECTIONS.get(stripped, "other" if stripped.endswith(":") else section)
            pending = ""
            continue
        if section in (None, "other") or not stripped or stripped.startswith("replacing "):
            continue
        row = _DNF_ROW.match(" " + (pending + " " + stripped).strip() if pending else line)
        if row is None:
            if len(stripped.split()) == 1 and not pending:
                pending = stripped  # a long name alone; the rest of its row follows
                continue
            raise ParseError(f"unrecognised dnf transaction row in section {section}: {line!r}")
        pending = ""
        action = section
        actions.append(
            {
                "name": row["name"],
                "action": action,
                "version": None if action == "remove" else row["version"],
                "installed": row["version"] if action == "remove" else None,
            }
        )
    if pending:
        raise ParseError(f"dnf transaction row for {pending} has no version")
    return actions


def resolver_refusal(manager: str, rc: int, out: str, err: str) -> str:
    """The package manager's own refusal of the request (empty when its dry run resolved): apt's unmet dependency
    lines and E: lines, dnf's Error: block. Both name the packages and versions in conflict."""
    text = "\n".join(part for part in (out, err) if part)
    if manager == "apt":
        if rc == 0:
            return ""
        lines = text.splitlines()
        start = next((i for i, line in enumerate(lines) if "unmet dependencies" in line), None)
        keep = lines[start:] if start is not None else [line for line in lines if line.startswith(("E:", "W:"))]
        return "\n".join(line.rstrip() for line in keep if line.strip()) or text.strip()[-2000:]
    if "Error:" in text:
        return text[text.index("Error:") :].strip()
    if rc not in (0, 1):
        return text.strip()[-2000:]
    return ""


def _matches(version: str, glob: str) -> bool:
    """An RPM version is compared with and without its epoch, so "535.183.01-*" pins "3:535.183.01-1.el9"."""
    candidates = [version]
    if re.match(r"^\d+:", version):
        candidates.append(version.split(":", 1)[1])
    return any(fnmatch.fnmatchcase(candidate, glob) for candidate in candidates)


def _names(pin: dict, name: str) -> bool:
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in pin.get("exclude") or ()):
        return False
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in pin["packages"])


def closure_problems(actions: list, pins: list, host: str) -> list:
    """The guard's verdict on a dry run: one problem per package of the stack (a name some pin's package patterns
    match) that would land at a version its pin does not match, and one per package that would be removed.

    pins: [{"packages": [fnmatch patterns], "version": fnmatch pattern, "exclude": [fnmatch patterns]}], the first
    pin naming a package (and not excluding it: a distribution package whose name the vendor's patterns also match)
    decides.
    Each problem names the host, the package, the version it would get and the pinned one (and the installed
    version it replaces, when the dry run shows it).
    """
    problems = []
    for action in actions:
        name = action["name"]
        if action["action"] == "remove":
            installed = action.get("installed")
            problems.append(
                f"{host}: the transaction would remove {name}"
                + (f" {installed}" if installed else "")
                + " (a package of the stack must not take another's place silently)"
            )
            continue
        pin = next((pin for pin in pins if _names(pin, name)), None)
        if pin is None or _matches(action["version"], pin["version"]):
            continue
        replaces = f", replacing {action['installed']}" if action.get("installed") else ""
        problems.append(
            f"{host}: {name} would be installed at {action['version']}{replaces}, not at the pinned {pin['version']}"
        )
    return problems
