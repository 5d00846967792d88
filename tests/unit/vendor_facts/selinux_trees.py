"""SELinux policy devel trees to compile gpu_selinux's modules against (test helper).

- Debian's refpolicy tree as installed by selinux-policy-dev (/usr/share/selinux/devel), used as is.
- The "RHEL-like" tree the lab mirror ships as RHEL's selinux-policy-devel (gpuforge.lab.selinux_devel), generated
  from Debian's tree and the vendor facts registry.

Both are compiled with the real toolchain: make -f <tree>/Makefile <name>.pp (m4, checkmodule, semodule_package).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from hang_guard import HANG_GUARD_S

from gpuforge.lab import selinux_devel
from gpuforge.lab.selinux_devel import find_definition, policy_facts, registry

__all__ = [
    "DEBIAN_DEVEL",
    "Compiled",
    "build_rhel_like_tree",
    "compile_module",
    "find_definition",
    "policy_facts",
    "registry",
]

DEBIAN_DEVEL = Path("/usr/share/selinux/devel")


def build_rhel_like_tree(dest: Path) -> Path:
    """The lab's RHEL-like tree generated from the controller's Debian tree into dest."""
    return selinux_devel.build_rhel_like_tree(DEBIAN_DEVEL, dest)


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
        timeout=HANG_GUARD_S,
    )
    expanded = workdir / "tmp" / f"{name}.tmp"
    return Compiled(result, expanded.read_text(encoding="utf-8") if expanded.is_file() else "")
