"""SELinux policy devel trees to compile gpu_selinux's modules against (test helper).

- Debian's refpolicy tree as installed by selinux-policy-dev (/usr/share/selinux/devel), used as is.
- A "RHEL-like" tree generated from the vendor facts registry: a copy of Debian's tree whose interfaces that
  gpuforge uses are made to match what RHEL ships (vendor_facts/selinux-policy/rhel9.yml and
  container-selinux.yml): definitions the registry records as absent are removed, recorded bodies replace or add
  definitions, and services/container.if becomes container-selinux's. The rest of the tree stays refpolicy's,
  which is enough to compile a module: a module only requires the types it uses, linking happens in semodule.

Both are compiled with the real toolchain: make -f <tree>/Makefile <name>.pp (m4, checkmodule, semodule_package).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpuforge.vendor_facts import REGISTRY_DIR, Repository, load

DEBIAN_DEVEL = Path("/usr/share/selinux/devel")
SELINUX_FACTS = REGISTRY_DIR / "selinux-policy"


def registry(name: str) -> Repository:
    """vendor_facts/selinux-policy/<name>.yml, validated by the registry loader."""
    return load(SELINUX_FACTS / f"{name}.yml")


def policy_facts(repo: Repository) -> dict[str, dict]:
    """The facts that describe a policy definition (interface, template, define), by name."""
    return {
        name: entry["value"]
        for name, entry in repo.facts.items()
        if isinstance(entry["value"], dict) and entry["value"].get("kind") in ("interface", "template", "define")
    }


def _pattern(kind: str, name: str) -> re.Pattern[str]:
    if kind == "define":
        return re.compile(rf"^define\(`{re.escape(name)}',\s*`(.*?)'\)\n", re.M)
    # refpolicy layout: "interface(`name',`" on its own line, the body, then "')" alone at column 0.
    return re.compile(rf"^(?:interface|template)\(`{re.escape(name)}',`\n(.*?)^'\)\n", re.M | re.S)


def _sources(include: Path, kind: str) -> list[Path]:
    return sorted(include.glob("support/*.spt") if kind == "define" else include.rglob("*.if"))


def find_definition(include: Path, kind: str, name: str) -> tuple[Path, str] | None:
    """(file, body) of a definition in a devel include tree, or None."""
    pattern = _pattern(kind, name)
    for path in _sources(include, kind):
        match = pattern.search(path.read_text(encoding="utf-8"))
        if match:
            return path, match.group(1)
    return None


def _render(kind: str, name: str, body: str) -> str:
    if kind == "define":
        return f"define(`{name}',`{body.strip()}')\n"
    return f"\n{kind}(`{name}',`\n{body}')\n"


def _remove_definition(include: Path, kind: str, name: str) -> None:
    pattern = _pattern(kind, name)
    for path in _sources(include, kind):
        text = path.read_text(encoding="utf-8")
        if pattern.search(text):
            path.write_text(pattern.sub("", text), encoding="utf-8")


def apply_policy_facts(include: Path, facts: dict[str, dict]) -> None:
    """Make the tree's definitions of these names what the registry records."""
    for name, value in facts.items():
        if value.get("defined") and not value.get("body"):
            continue  # known to exist, text not recorded: the tree's own definition stands in for it
        _remove_definition(include, value["kind"], name)
        if value.get("defined"):
            header = include / value["header"]
            with header.open("a", encoding="utf-8") as handle:
                handle.write(_render(value["kind"], name, value["body"]))


def build_rhel_like_tree(dest: Path) -> Path:
    """Copy Debian's devel tree to dest and give it RHEL's interfaces from the registry; returns the tree."""
    devel = dest / "devel"
    shutil.copytree(DEBIAN_DEVEL, devel, symlinks=True)
    include = devel / "include"
    apply_policy_facts(include, policy_facts(registry("rhel9")))
    # On RHEL services/container.if is container-selinux's file (its Makefile installs it there), so none of
    # refpolicy's container interfaces remain: the file holds only container-selinux's recorded templates.
    container = registry("container-selinux")
    header = include / container.fact("installed_header")
    header.write_text("## <summary>container-selinux (vendor_facts/selinux-policy/container-selinux.yml)</summary>\n")
    apply_policy_facts(include, policy_facts(container))
    return devel


@dataclass
class Compiled:
    """One module compiled in workdir: make's result and the m4-expanded policy checkmodule read."""

    result: subprocess.CompletedProcess[str]
    expanded: str

    @property
    def ok(self) -> bool:
        return self.result.returncode == 0

    def report(self) -> str:
        return f"make exited {self.result.returncode}\n{self.result.stdout}\n{self.result.stderr}"


def compile_module(devel: Path, workdir: Path, name: str, source: str) -> Compiled:
    """make -f <devel>/Makefile <name>.pp in workdir, as gpu_selinux's selinux_policy_module runs it."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / f"{name}.te").write_text(source, encoding="utf-8")
    # HEADERDIR: the Makefile sets it to /usr/share/selinux/devel/include; a copied tree must point at itself.
    result = subprocess.run(
        ["make", "-f", str(devel / "Makefile"), f"HEADERDIR={devel / 'include'}", f"{name}.pp"],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    expanded = workdir / "tmp" / f"{name}.tmp"
    return Compiled(result, expanded.read_text(encoding="utf-8") if expanded.is_file() else "")
