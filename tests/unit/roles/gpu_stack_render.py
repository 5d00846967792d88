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
    },
    "rhel8": {
        "os_family": "RedHat",
        "distribution": "RedHat",
        "distribution_major_version": "8",
        "distribution_version": "8.10",
        "kernel": "4.18.0-553.el8_10.x86_64",
    },
    "ubuntu2204": {
        "os_family": "Debian",
        "distribution": "Ubuntu",
        "distribution_major_version": "22",
        "distribution_version": "22.04",
        "kernel": "5.15.0-119-generic",
    },
    "ubuntu2404": {
        "os_family": "Debian",
        "distribution": "Ubuntu",
        "distribution_major_version": "24",
        "distribution_version": "24.04",
        "kernel": "6.8.0-45-generic",
    },
    "debian12": {
        "os_family": "Debian",
        "distribution": "Debian",
        "distribution_major_version": "12",
        "distribution_version": "12.7",
        "kernel": "6.1.0-25-amd64",
    },
}


class RoleRender:
    """A role's variables for one OS, in Ansible's precedence order (pins < defaults < vars files < extra)."""

    def __init__(self, role: str, os_name: str, **extra):
        self.role_dir = ROOT / "roles" / role
        facts = OS_FACTS[os_name]
        variables = {**load_yaml(PINS), **(load_yaml(self.role_dir / "defaults" / "main.yml") or {})}
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
        module = next(key for key in task if key.startswith("ansible.builtin.") or key in ("kernel_module",))
        return self.templar.template(trusted(task[module]))

    def template(self, name: str, **variables) -> str:
        text = (self.role_dir / "templates" / name).read_text(encoding="utf-8")
        if variables:
            self.templar.available_variables = {**self.templar.available_variables, **trusted(variables)}
        return self.templar.template(trust_as_template(text))
