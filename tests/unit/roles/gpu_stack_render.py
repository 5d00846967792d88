"""Render GPU-stack role variables and task arguments for a given OS without a host (unit tests)."""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from role_yaml import load_yaml, trusted

ROOT = Path(__file__).resolve().parents[3]
PINS = ROOT / "roles" / "gpuforge" / "defaults" / "main" / "gpu_stack.yml"

# ansible_facts of the systems the roles support (what setup reports there).
OS_FACTS = {
    "rhel9": {
        "os_family": "RedHat",
        "distribution": "RedHat",
        "distribution_major_version": "9",
        "distribution_version": "9.4",
        "kernel": "5.14.0-427.13.1.el9_4.x86_64",
        "architecture": "x86_64",
    },
    "rhel8": {
        "os_family": "RedHat",
        "distribution": "RedHat",
        "distribution_major_version": "8",
        "distribution_version": "8.10",
        "kernel": "4.18.0-553.el8_10.x86_64",
        "architecture": "x86_64",
    },
    "ubuntu2204": {
        "os_family": "Debian",
        "distribution": "Ubuntu",
        "distribution_major_version": "22",
        "distribution_version": "22.04",
        "kernel": "5.15.0-119-generic",
        "architecture": "x86_64",
    },
    "ubuntu2404": {
        "os_family": "Debian",
        "distribution": "Ubuntu",
        "distribution_major_version": "24",
        "distribution_version": "24.04",
        "kernel": "6.8.0-45-generic",
        "architecture": "x86_64",
    },
    # Red Hat Enterprise Linux CoreOS of OpenShift 4.19 and later: os-release says ID="rhel", VERSION_ID="9.6", so
    # Ansible reports RedHat 9.6; its package manager reads as atomic_container (/run/ostree-booted).
    "rhcos419": {
        "os_family": "RedHat",
        "distribution": "RedHat",
        "distribution_major_version": "9",
        "distribution_version": "9.6",
        "kernel": "5.14.0-570.19.1.el9_6.x86_64",
        "architecture": "x86_64",
        "pkg_mgr": "atomic_container",
    },
    "debian12": {
        "os_family": "Debian",
        "distribution": "Debian",
        "distribution_major_version": "12",
        "distribution_version": "12.7",
        "kernel": "6.1.0-25-amd64",
        "architecture": "x86_64",
    },
}


class RoleRender:
    """A role's variables for one OS, in Ansible's precedence order (pins < defaults < vars files < extra)."""

    def __init__(self, role: str, os_name: str, **extra):
        self.role_dir = ROOT / "roles" / role
        facts = OS_FACTS[os_name]
        # Every pin table of roles/gpuforge/defaults/main (gpu_stack.yml defines gpuforge_os_key, fabric_storage.yml
        # the OFED and Storage Scale pins), then the role's defaults.
        pins = {}
        for path in sorted(PINS.parent.glob("*.yml")):
            pins.update(load_yaml(path))
        variables = {**pins, **(load_yaml(self.role_dir / "defaults" / "main.yml") or {})}
        main_vars = self.role_dir / "vars" / "main.yml"
        if main_vars.is_file():
            variables.update(load_yaml(main_vars) or {})
        # first_found: distribution file, else the OS family file.
        for name in (facts["distribution"], facts["os_family"]):
            path = self.role_dir / "vars" / f"{name}.yml"
            if path.is_file():
                variables.update(load_yaml(path) or {})
                break
        variables.update(
            ansible_facts=facts,
            inventory_hostname="gpu01",
            ansible_managed="Ansible managed",
            role_path=str(self.role_dir),
            ansible_check_mode=False,
        )
        variables.update(trusted(extra))
        self.templar = Templar(loader=DataLoader(), variables=variables)

    def var(self, name: str):
        return self.templar.template(trust_as_template("{{ " + name + " }}"))

    def expr(self, expression: str):
        return self.templar.template(trust_as_template(expression))

    def task(self, tasks_file: str, name_start: str) -> dict:
        """The (rendered) module arguments of the first task in tasks/<file> whose name starts with name_start."""
        tasks = yaml.safe_load((self.role_dir / "tasks" / tasks_file).read_text(encoding="utf-8"))
        task = next(t for t in tasks if t["name"].startswith(name_start))
        module = next(
            key
            for key in task
            if key.startswith("ansible.builtin.")
            or key in ("gpuforge.cluster.kernel_module", "gpuforge.cluster.apt_pinned")
        )
        return self.templar.template(trusted(task[module]))

    def template(self, name: str, **variables) -> str:
        text = (self.role_dir / "templates" / name).read_text(encoding="utf-8")
        if variables:
            self.templar.available_variables = {**self.templar.available_variables, **trusted(variables)}
        return self.templar.template(trust_as_template(text))

    # --- Tasks inside blocks, with their vars, include_role and conditions (added for vendor_repository users) ---

    def find_task(self, tasks_file: str, name_start: str) -> dict:
        """The raw task of tasks/<file> (also inside block/rescue/always) whose name starts with name_start, with
        the vars and `when` of its enclosing blocks under 'block_vars' and 'block_when' (outermost first)."""

        def walk(tasks, block_vars, block_when):
            for task in tasks or []:
                if any(key in task for key in ("block", "rescue", "always")):
                    inner_vars = {**block_vars, **(task.get("vars") or {})}
                    inner_when = block_when + _as_list(task.get("when"))
                    if str(task.get("name", "")).startswith(name_start) and "block" in task:
                        yield {**task, "block_vars": block_vars, "block_when": block_when}
                    for section in ("block", "rescue", "always"):
                        yield from walk(task.get(section), inner_vars, inner_when)
                elif str(task.get("name", "")).startswith(name_start):
                    yield {**task, "block_vars": block_vars, "block_when": block_when}

        tasks = yaml.safe_load((self.role_dir / "tasks" / tasks_file).read_text(encoding="utf-8"))
        found = next(walk(tasks, {}, []), None)
        if found is None:
            raise LookupError(f"no task starting with {name_start!r} in {self.role_dir.name}/tasks/{tasks_file}")
        return found

    def task_templar(self, task: dict, **variables) -> Templar:
        """A templar with the task's block vars and own vars in scope (over the role's), then **variables
        (e.g. item=...) over those."""
        scope = {
            **self.templar.available_variables,
            **trusted(task.get("block_vars") or {}),
            **trusted(task.get("vars") or {}),
            **trusted(variables),
        }
        return Templar(loader=DataLoader(), variables=scope)

    def module_of(self, task: dict) -> str:
        return next(key for key in task if key.startswith(("ansible.builtin.", "community.", "gpuforge.cluster.")))

    def task_args(self, tasks_file: str, name_start: str, **variables) -> dict:
        """The rendered module arguments of a task found by find_task, its vars in scope; for an include_role
        task, the role name plus its rendered `vars` under 'vars'."""
        task = self.find_task(tasks_file, name_start)
        templar = self.task_templar(task, **variables)
        module = self.module_of(task)
        args = templar.template(trusted(task[module]))
        if module in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            args = {**args, "vars": templar.template(trusted(task.get("vars") or {}))}
        return args

    def included_role(self, tasks_file: str, name_start: str, **variables) -> tuple[str, dict]:
        """(role name, rendered vars) of an include_role task."""
        args = self.task_args(tasks_file, name_start, **variables)
        return args["name"], args["vars"]

    def conditions(self, tasks_file: str, name_start: str, key: str = "when", **variables) -> list[bool]:
        """The conditions of the task's `key` ('when', 'that', 'failed_when', ...) evaluated with its vars in
        scope, in order and up to the first false one (as Ansible evaluates a `when` list or an assert); for
        'when' the enclosing blocks' conditions come first. An assert's 'that' is read from its module arguments."""
        task = self.find_task(tasks_file, name_start)
        templar = self.task_templar(task, **variables)
        if key == "that":
            raw = _as_list(task[self.module_of(task)]["that"])
        elif key == "when":
            raw = task["block_when"] + _as_list(task.get("when"))
        else:
            raw = _as_list(task.get(key))
        results = []
        for condition in raw:
            results.append(
                templar.evaluate_conditional(trust_as_template(condition) if isinstance(condition, str) else condition)
            )
            if not results[-1]:
                break
        return results

    def message(self, tasks_file: str, name_start: str, **variables) -> str:
        """An assert or fail task's rendered message (fail_msg / msg)."""
        task = self.find_task(tasks_file, name_start)
        args = task[self.module_of(task)]
        text = args.get("fail_msg", args.get("msg", ""))
        return self.task_templar(task, **variables).template(trusted(text))

    def refused(self, tasks_file: str, name_start: str, **variables) -> bool:
        """Whether a refusal stops the play: a `fail` task whose `when` holds (its enclosing blocks' conditions
        included), or an assert one of whose `that` conditions does not."""
        task = self.find_task(tasks_file, name_start)
        if self.module_of(task) == "ansible.builtin.fail":
            return all(self.conditions(tasks_file, name_start, **variables))
        return not all(self.conditions(tasks_file, name_start, key="that", **variables))

    def assert_problems(self, tasks_file: str, name_start: str, problems: list[str], host: str = "gpu01") -> None:
        """For a check over a list of problems (a `fail` task with `when: <problems> | length > 0`, or an assert
        with `that: <problems> | length == 0`; the message `<problems> | join`): it stops exactly when `problems` is
        not empty, and its message names each expected problem, in that order, each problem behind the host's name."""
        assert self.refused(tasks_file, name_start) is bool(problems)
        message = " ".join(self.message(tasks_file, name_start).split())
        positions = [message.index(problem) for problem in problems]
        assert positions == sorted(positions)
        assert message.count(f"{host}: ") == len(problems)
        if problems:
            assert message.startswith(f"{host}: ")


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
