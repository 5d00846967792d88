"""Which OS-specific role files Molecule runs executed, per OS shape (docs/lab.md, "OS shapes").

Read from the Molecule logs scripts/molecule_lanes.sh keeps (.gpuforge/molecule/<scenario>.log), in two ways:

- Ansible's default output names every task file an `include_tasks` loads ("included: <path> for <hosts>"), which
  is how most roles load their setup-<os_family>.yml files.
- A file entered statically (`import_role` with `tasks_from`, as the roles enter vendor_repository's
  setup-<os_family>.yml, or `import_tasks`) prints no such line, only its tasks: "TASK [<role> : <task name>]"
  followed by a result line per host. Each header is matched with the names of the tasks in roles/<role>/tasks/*.yml
  (a Jinja expression in a name matches anything), and a task counts as run on a host whose result says it ran
  (ok, changed, failed, included; not skipping). The role's argument check ("Validating arguments against arg spec
  '<entry point>'"), which Ansible runs first when a role is entered at tasks/<entry point>.yml, names the file too.

The hosts are the scenario's platforms, whose images name their OS shape (molecule/<scenario>/molecule.yml). A
role's vars/<OS>.yml is loaded by its include_vars task (roles/*/tasks/main.yml) from the first existing file of a
first_found list, distribution before os_family where a role names both; when the log shows that task run on a host,
the file the host's shape loads follows from the shape's facts (molecule/os_shapes/tests/real_os_facts.yml) and is
recorded as derived.

`python -m gpuforge.lab.os_coverage` prints the record as YAML and lists the OS files no run executed.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
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
# A task of a role: "TASK [<role> : <name>] ****" (a play's own task has no "<role> : ").
_ROLE_TASK_HEADER = re.compile(r"^TASK \[(?P<role>[A-Za-z0-9_.-]+) : (?P<name>.*)\][\s*]*$")
# Any other header ends the task before it: a handler's results are not its task's (handlers are no tasks/ file).
_HEADER = re.compile(r"^(?:TASK|RUNNING HANDLER|PLAY)\b")
# "fatal: [host]: FAILED!" and a loop item's "failed: [host] (item=...)" ran the task too; "skipping:" did not, nor
# did "unreachable:". "[host -> delegate]" ran for host.
_RAN = re.compile(r"^(?:ok|changed|fatal|failed): \[(?P<host>[^\]]+)\]")
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}")
_WHITESPACE = re.compile(r"\s+")
_ARG_SPEC = re.compile(r"^Validatingargumentsagainstargspec'(?P<entry>[^']+)'")
# Static imports are resolved when the play is read: their own names are never printed as a task header.
_STATIC = {"import_tasks", "ansible.builtin.import_tasks", "import_role", "ansible.builtin.import_role"}
_INCLUDE_VARS = ("ansible.builtin.include_vars", "include_vars")
_FIRST_FOUND = re.compile(r"lookup\(\s*['\"](?:ansible\.builtin\.)?first_found['\"]\s*,\s*(?P<spec>\w+)\s*\)")
_ROLE_VARS_PATH = re.compile(r"^\{\{\s*role_path\s*\}\}/vars/?$")
_FACT = re.compile(r"\{\{\s*(?:ansible_facts(?:\.(\w+)|\[\s*['\"](\w+)['\"]\s*\])|ansible_(\w+))\s*\}\}")
SHAPE_FACTS_DEBIAN12 = {"distribution": "Debian", "os_family": "Debian"}


class _TasksLoader(yaml.SafeLoader):
    """Reads Ansible's own tags (!unsafe, !vault) as the plain values they tag."""


_TasksLoader.add_multi_constructor(
    "!", lambda loader, _suffix, node: loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None
)


@dataclass(frozen=True)
class RoleTask:
    """A named task of roles/<role>/tasks/<file>: its name as a pattern over the logged name (whitespace removed),
    whether the name holds Jinja, and, for the role's first_found include_vars task, the file names it tries."""

    file: str
    name: re.Pattern[str]
    templated: bool
    vars_files: tuple[str, ...] | None = None


def os_task_files() -> list[str]:
    """Every roles/<role>/tasks/*-<OS family>.yml."""
    return sorted(
        f"roles/{path.relative_to(ROLES)}" for path in ROLES.glob("*/tasks/*.yml") if _OS_FILE.search(path.name)
    )


def os_vars_files() -> list[str]:
    return sorted(f"roles/{path.relative_to(ROLES)}" for path in ROLES.glob("*/vars/*.yml") if path.stem != "main")


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


def _squeezed(text: str) -> str:
    # The box wraps inside a word as well as between words, and the pieces are joined with a space: names are
    # compared with all whitespace removed.
    return _WHITESPACE.sub("", text)


def _name_pattern(name: str) -> re.Pattern[str]:
    """The logged names a task name can print as: each Jinja expression matches anything (Ansible prints it
    rendered, or as written where it cannot render it yet)."""
    literals = _JINJA.split(_squeezed(name))
    return re.compile(".*".join(re.escape(literal) for literal in literals), re.DOTALL)


def _hosts(text: str) -> list[str]:
    """The host names of "h1, h2" or "h1 => (item=...)" (a loop's item follows the host)."""
    hosts = re.sub(r"\s*=>.*$", "", text)
    return [host.strip() for host in re.split(r",\s*", hosts.strip()) if host.strip()]


def _task_entries(tasks: object) -> Iterator[dict]:
    """The tasks of a task list, a block's tasks (block, rescue, always) in place of the block."""
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        if "block" in task:
            for section in ("block", "rescue", "always"):
                yield from _task_entries(task.get(section))
        else:
            yield task


def _first_found_files(task: dict) -> tuple[str, ...] | None:
    """The file names of an include_vars task that loads the first found of the role's vars/ files, as written."""
    argument = next((task[key] for key in _INCLUDE_VARS if key in task), None)
    lookup = _FIRST_FOUND.search(argument) if isinstance(argument, str) else None
    spec = (task.get("vars") or {}).get(lookup.group("spec")) if lookup else None
    if not isinstance(spec, dict) or not isinstance(spec.get("files"), list):
        return None
    if not all(_ROLE_VARS_PATH.match(str(path)) for path in spec.get("paths") or ["{{ role_path }}/vars"]):
        return None
    return tuple(str(name) for name in spec["files"])


@functools.cache
def _role_tasks(roles_dir: Path, role: str) -> tuple[RoleTask, ...]:
    """The named tasks in roles/<role>/tasks/*.yml that print a TASK header when they run."""
    found = []
    for path in sorted((roles_dir / role / "tasks").glob("*.yml")):
        tasks = yaml.load(path.read_text(encoding="utf-8"), Loader=_TasksLoader)
        for task in _task_entries(tasks):
            if isinstance(task.get("name"), str) and not _STATIC & task.keys():
                name = task["name"]
                found.append(
                    RoleTask(path.name, _name_pattern(name), bool(_JINJA.search(name)), _first_found_files(task))
                )
    return tuple(found)


def _role_task_runs(log_text: str) -> set[tuple[str, str, str]]:
    """(role, task name as logged with whitespace removed, host) for each task of a role the log shows run on a
    host: a "TASK [<role> : <name>]" header, then a result line that says the task ran there."""
    runs = set()
    current: tuple[str, str] | None = None
    for line in _statements(log_text):
        if _HEADER.match(line):
            header = _ROLE_TASK_HEADER.match(line)
            # A role run from the collection prints its full name (gpuforge.cluster.<role>).
            current = (header.group("role").rsplit(".", 1)[-1], _squeezed(header.group("name"))) if header else None
            continue
        if current is None:
            continue
        ran = _RAN.match(line)
        included = None if ran else _INCLUDED.match(line)
        if ran:
            hosts = [ran.group("host").split(" -> ", 1)[0].strip()]
        elif included:
            hosts = _hosts(included.group("hosts"))
        else:
            continue
        runs.update((*current, host) for host in hosts)
    return runs


def _tasks_named(role: str, logged_name: str) -> list[RoleTask]:
    """The role's tasks that print this name. A name written without Jinja that equals it wins over templates that
    match it too: "Load OS-specific variables" is main.yml's task, not load.yml's "Load {{ gpudirect_rdma_module }}",
    which Ansible prints rendered ("Load nvidia_peermem"). Only a template rendering to another task's whole name
    could fool this."""
    matching = [task for task in _role_tasks(ROLES, role) if task.name.fullmatch(logged_name)]
    return [task for task in matching if not task.templated] or matching


def _file_of(role: str, logged_name: str) -> str | None:
    """The task file of the role a logged task name comes from, when only one file has a task of that name."""
    arg_spec = _ARG_SPEC.match(logged_name)
    if arg_spec:
        entry_file = f"{arg_spec.group('entry')}.yml"
        return entry_file if (ROLES / role / "tasks" / entry_file).is_file() else None
    # A name that more than one file of the role could print (the same name in setup-Debian.yml and in main.yml, or
    # a name template matching another file's name) is counted for neither: which one ran cannot be told.
    files = {task.file for task in _tasks_named(role, logged_name)}
    return files.pop() if len(files) == 1 else None


def executed_task_files(log_text: str, shapes: dict[str, str]) -> set[tuple[str, str]]:
    """(roles/<role>/tasks/<file>, shape) for each OS task file the log shows included, or shows a task of run."""
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
        for host in _hosts(match.group("hosts")):
            found.add((relative, shapes.get(host, "?")))
    for role, logged_name, host in _role_task_runs(log_text):
        file = _file_of(role, logged_name)
        if file and _OS_FILE.search(file):
            found.add((f"roles/{role}/tasks/{file}", shapes.get(host, "?")))
    return found


def roles_loading_vars(log_text: str, shapes: dict[str, str]) -> set[tuple[str, str]]:
    """(role, shape) for each role whose include_vars task of its vars/<OS>.yml the log shows run on a host of the
    shape. Its when: may skip it (roce_qos loads nothing without ports), and a role entered at another file than
    main.yml (tasks_from) never runs it: a role having run some task is not enough."""
    found = set()
    for role, logged_name, host in _role_task_runs(log_text):
        tasks = _tasks_named(role, logged_name)
        if tasks and all(task.vars_files is not None for task in tasks):
            found.add((role, shapes.get(host, "?")))
    return found


def _resolved(template: str, facts: dict) -> str | None:
    """A file name template with the facts' values in place; None where it names a fact not given."""
    keys = [next(key for key in fact.groups() if key) for fact in _FACT.finditer(template)]
    if any(key not in facts for key in keys):
        return None
    name = _FACT.sub(lambda fact: str(facts[next(key for key in fact.groups() if key)]), template)
    return None if "{{" in name else name


def vars_file_loaded(role: str, facts: dict) -> str | None:
    """The vars file a role's first_found include_vars picks for these facts: the first of the names its task
    tries (distribution, then os_family, in the roles' convention; some roles name os_family only) that the role
    has. None for a role without such a task."""
    tried = next((task.vars_files for task in _role_tasks(ROLES, role) if task.vars_files is not None), ())
    for template in tried:
        name = _resolved(template, facts)
        if name is None:
            return None  # the facts do not tell which file this one is, so not which is the first found
        if (ROLES / role / "vars" / name).is_file():
            return f"roles/{role}/vars/{name}"
    return None


def record(log_dir: Path = LOG_DIR) -> dict:
    """The coverage record of the passed scenarios' logs (a failed scenario's log, *.failed beside it, is left out)."""
    shape_facts = {shape: entry["facts"] for shape, entry in yaml.safe_load(FACTS.read_text(encoding="utf-8")).items()}
    shape_facts["debian12"] = SHAPE_FACTS_DEBIAN12
    tasks: set[tuple[str, str]] = set()
    roles_on_shape: set[tuple[str, str]] = set()
    for log in sorted(log_dir.glob("*.log")):
        scenario = log.stem
        if not (MOLECULE / scenario / "molecule.yml").is_file() or (log_dir / f"{scenario}.failed").exists():
            continue
        log_text = log.read_text(encoding="utf-8", errors="replace")
        shapes = platform_shapes(scenario)
        tasks |= executed_task_files(log_text, shapes)
        roles_on_shape |= roles_loading_vars(log_text, shapes)
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


# OS files no CI scenario executes yet, one path per line: the list only shrinks (check_complete).
NOT_YET_EXECUTED = MOLECULE / "os-files-unexecuted.txt"


def not_yet_executed(path: Path = NOT_YET_EXECUTED) -> list[str]:
    """The paths of molecule/os-files-unexecuted.txt (comments and blank lines left out)."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def check_complete(found: dict, allowed: list[str]) -> list[str]:
    """Problems of a full CI run's record: an OS file no scenario executed that the list does not name (a new OS
    file needs a scenario that runs it), and a listed file that now ran (its line goes: the list only shrinks)."""
    never = set(found["task_files_never_executed"]) | set(found["vars_files_never_loaded"])
    problems = [
        f"{path}: no Molecule scenario executed it; run it on an OS shape whose facts load it "
        f"(or, until one does, list it in {NOT_YET_EXECUTED.relative_to(PROJECT_ROOT)})"
        for path in sorted(never - set(allowed))
    ]
    problems += [
        f"{path}: a scenario executed it now; remove its line from {NOT_YET_EXECUTED.relative_to(PROJECT_ROOT)}"
        for path in sorted(set(allowed) - never)
    ]
    return problems


def main(argv: list[str] | None = None) -> int:
    """Print the record of the logs in LOG_DIR (or the folder given). With --complete (a full CI run: every scenario
    of molecule/ci-scenarios.txt passed), exit 1 naming each problem check_complete finds."""
    args = list(argv or [])
    complete = "--complete" in args
    args = [arg for arg in args if arg != "--complete"]
    log_dir = Path(args[0]) if args else LOG_DIR
    found = record(log_dir)
    sys.stdout.write(yaml.safe_dump(found, sort_keys=False))
    problems = check_complete(found, not_yet_executed()) if complete else []
    for problem in problems:
        sys.stderr.write(f"os coverage: {problem}\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
