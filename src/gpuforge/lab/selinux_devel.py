"""A "RHEL-like" SELinux policy devel tree generated from the vendor facts registry.

RHEL's selinux-policy-devel installs the policy's interface headers under /usr/share/selinux/devel; gpu_selinux
compiles its modules against them. Debian has the same layout (selinux-policy-dev, refpolicy). The lab's RHEL-shaped
nodes get a copy of Debian's tree whose interfaces that gpuforge uses are made to match what RHEL ships
(vendor_facts/selinux-policy/rhel9.yml and container-selinux.yml): definitions the registry records as absent are
removed, recorded bodies replace or add definitions, and services/container.if becomes container-selinux's. The rest
of the tree stays refpolicy's, which is enough to compile a module: a module only requires the types it uses, linking
happens in semodule. The lab mirror ships it as RHEL's selinux-policy-devel (shape_repos); the unit tests compile the
role's modules against it (tests/unit/vendor_facts/test_selinux_policy_compile.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from gpuforge.vendor_facts import REGISTRY_DIR, Repository, load

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


def build_rhel_like_tree(debian_devel: Path, dest: Path, release: str = "rhel9") -> Path:
    """Copy Debian's devel tree (the directory holding Makefile and include/) to dest/devel and give it RHEL's
    interfaces from the registry; returns the new tree."""
    devel = dest / "devel"
    shutil.copytree(debian_devel, devel, symlinks=True)
    include = devel / "include"
    apply_policy_facts(include, policy_facts(registry(release)))
    # On RHEL services/container.if is container-selinux's file (its Makefile installs it there), so none of
    # refpolicy's container interfaces remain: the file holds only container-selinux's recorded templates.
    container = registry("container-selinux")
    header = include / container.fact("installed_header")
    header.write_text("## <summary>container-selinux (vendor_facts/selinux-policy/container-selinux.yml)</summary>\n")
    apply_policy_facts(include, policy_facts(container))
    return devel
