"""Which OS-specific role files Molecule runs executed, per OS shape (docs/lab.md, "OS shapes").

Read from the Molecule logs scripts/molecule_lanes.sh keeps (.gpuforge/molecule/<scenario>.log): Ansible's default
output names every task file an `include_tasks` loads ("included: <path> for <hosts>"), which is how the roles load
their setup-<os_family>.yml files; the hosts are the scenario's platforms, whose images name their OS shape
(molecule/<scenario>/molecule.yml). A role's vars/<OS>.yml is loaded with include_vars from the first of
vars/<distribution>.yml and vars/<os_family>.yml (the roles' convention, roles/*/tasks/main.yml); which one a shape
loads follows from the shape's facts (molecule/os_shapes/tests/real_os_facts.yml) and is recorded as derived.

`python -m gpuforge.lab.os_coverage` prints the record as YAML and lists the OS files no run executed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from gpuforge.paths import PROJECT_ROOT, STATE_DIR

LOG_DIR = STATE_DIR / "molecule"
ROLES = PROJECT_ROOT / "roles"
MOLECULE = PROJECT_ROOT / "molecule"
FACTS = MOLECULE / "os_shapes" / "tests" / "real_os_facts.yml"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "included: <path> for <hosts>", after the wrapped pieces of one statement are joined with spaces: Molecule's box
# breaks a long path inside a word too ("runtime-configure.ym" / "l for ..."), so the path may hold spaces here.
_INCLUDED = re.compile(r"included:\s+(?P<path>\S.*?)\s+for\s+(?P<hosts>.+)$")
_ROLE_TASK = re.compile(r"/roles/([a-z0-9_]+)/tasks/([A-Za-z0-9_.-]+\.yml)$")
_OS_FILE = re.compile(r"-(Debian|RedHat)\.yml$")
SHAPE_FACTS_DEBIAN12 = {"distribution": "Debian", "os_family": "Debian"}


def os_task_files() -> list[str]:
    """Every roles/<role>/tasks/*-<OS family>.yml."""
    return sorted(
        str(path.relative_to(PROJECT_ROOT)) for path in ROLES.glob("*/tasks/*.yml") if _OS_FILE.search(path.name)
    )


def os_vars_files() -> list[str]:
    return sorted(str(path.relative_to(PROJECT_ROOT)) for path in ROLES.glob("*/vars/*.yml") if path.stem != "main")


def platform_shapes(scenario: str) -> dict[str, str]:
    """Platform name -> OS shape, from the image variable of each platform (the shared platform is debian12)."""
    config = yaml.safe_load((MOLECULE / scenario / "molecule.yml").read_text(encoding="utf-8"))
    shapes = {}
    for platform in config.get("platforms") or []:
        match = re.match(r"^\$\{GPUFORGE_LAB_IMAGE(?:_([A-Z0-9]+))?\}$", str(platform["image"]))
        shapes[platform["name"]] = (match.group(1) or "DEBIAN12").lower() if match else "?"
    return shapes or {"instance": "debian12"}


def _statements(log_text: str) -> list[str]:
    """The log's lines with Molecule's wrapping undone: inside its box ("\u2502 text"), a line whose text starts with
    two more spaces continues the line before it (the box wraps at its width, between words or, for a word longer
    than a line, inside it); outside the box, an "included: <path> for" line continues on the next one."""
    joined: list[str] = []
    for raw in log_text.splitlines():
        line = _ANSI.sub("", raw)
        boxed = "\u2502" in line
        text = line.split("\u2502", 1)[1][1:] if boxed else line
        continues = joined and (
            (boxed and text.startswith("  ") and text.strip()) or re.search(r"included:(?: \S+ for)?$", joined[-1])
        )
        if continues:
            joined[-1] += " " + text.strip()
        else:
            joined.append(text.strip())
    return joined


def executed_task_files(log_text: str, shapes: dict[str, str]) -> set[tuple[str, str]]:
    """(roles/<role>/tasks/<file>, shape) for each OS task file the log shows included."""
    found = set()
    for line in _statements(log_text):
        match = _INCLUDED.search(line)
        if not match:
            continue
        # A path holds no spaces: what the wrapping split inside it is joined again.
        role_task = _ROLE_TASK.search(match.group("path").replace(" ", ""))
        if not role_task or not _OS_FILE.search(role_task.group(2)):
            continue
        relative = f"roles/{role_task.group(1)}/tasks/{role_task.group(2)}"
        hosts = re.sub(r"\s*=>.*$", "", match.group("hosts"))  # "... => (item=containerd)" in a loop
        for host in re.split(r",\s*", hosts.strip()):
            if host:
                found.add((relative, shapes.get(host.strip(), "?")))
    return found


def vars_file_loaded(role: str, facts: dict) -> str | None:
    """The vars file a role's first_found include_vars picks for these facts (distribution, then os_family)."""
    for name in (facts["distribution"], facts["os_family"]):
        path = ROLES / role / "vars" / f"{name}.yml"
        if path.is_file():
            return str(path.relative_to(PROJECT_ROOT))
    return None


def record(log_dir: Path = LOG_DIR) -> dict:
    """The coverage record of the passed scenarios' logs (a failed scenario's log, *.failed beside it, is left out)."""
    shape_facts = {shape: entry["facts"] for shape, entry in yaml.safe_load(FACTS.read_text(encoding="utf-8")).items()}
    shape_facts["debian12"] = SHAPE_FACTS_DEBIAN12
    tasks: set[tuple[str, str]] = set()
    for log in sorted(log_dir.glob("*.log")):
        scenario = log.stem
        if not (MOLECULE / scenario / "molecule.yml").is_file() or (log_dir / f"{scenario}.failed").exists():
            continue
        tasks |= executed_task_files(log.read_text(encoding="utf-8", errors="replace"), platform_shapes(scenario))
    roles_on_shape = {(path.split("/")[1], shape) for path, shape in tasks}
    variables = {
        (loaded, shape)
        for role, shape in roles_on_shape
        if shape in shape_facts and (loaded := vars_file_loaded(role, shape_facts[shape]))
    }
    executed_tasks = {path for path, _ in tasks}
    executed_vars = {path for path, _ in variables}
    return {
        "task_files": {path: sorted(s for p, s in tasks if p == path) for path in sorted(executed_tasks)},
        "vars_files_derived": {path: sorted(s for p, s in variables if p == path) for path in sorted(executed_vars)},
        "task_files_never_executed": [path for path in os_task_files() if path not in executed_tasks],
        "vars_files_never_loaded": [path for path in os_vars_files() if path not in executed_vars],
    }


def main(argv: list[str] | None = None) -> int:
    log_dir = Path(argv[0]) if argv else LOG_DIR
    sys.stdout.write(yaml.safe_dump(record(log_dir), sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
