"""Render a role's variables for an OS (defaults + pin table + vars/<os>.yml) the way Ansible templates them."""

from __future__ import annotations

from pathlib import Path

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from role_yaml import load_yaml as _load
from role_yaml import trusted

ROOT = Path(__file__).resolve().parents[3]
FACTS = {
    "Debian": {"distribution": "Debian", "os_family": "Debian", "distribution_major_version": "12",
               "distribution_version": "12.7", "kernel": "6.1.0-26-amd64"},
    "Ubuntu": {"distribution": "Ubuntu", "os_family": "Debian", "distribution_major_version": "22",
               "distribution_version": "22.04", "kernel": "5.15.0-119-generic"},
    "RedHat": {"distribution": "RedHat", "os_family": "RedHat", "distribution_major_version": "9",
               "distribution_version": "9.4", "kernel": "5.14.0-427.13.1.el9_4.x86_64"},
}  # fmt: skip


def os_vars_file(role_dir: Path, facts: dict) -> Path:
    """The roles' include_vars rule: the first of vars/<distribution>.yml and vars/<os_family>.yml."""
    for name in (facts["distribution"], facts["os_family"]):
        path = role_dir / "vars" / f"{name}.yml"
        if path.is_file():
            return path
    raise FileNotFoundError(f"{role_dir}/vars has neither {facts['distribution']}.yml nor {facts['os_family']}.yml")


def templar(role: str, os_name: str, **extra) -> Templar:
    role_dir = ROOT / "roles" / role
    main_vars = role_dir / "vars" / "main.yml"
    variables = {
        **_load(ROOT / "roles" / "gpuforge" / "defaults" / "main" / "gpu_stack.yml"),
        **_load(ROOT / "roles" / "gpuforge" / "defaults" / "main" / "fabric_storage.yml"),
        **_load(role_dir / "defaults" / "main.yml"),
        **(_load(main_vars) if main_vars.is_file() else {}),
        **_load(os_vars_file(role_dir, FACTS[os_name])),
        "ansible_facts": FACTS[os_name],
        "ansible_play_hosts": ["gpu01", "gpu02"],
        "inventory_hostname": "gpu01",
        "inventory_hostname_short": "gpu01",
        "groups": {"spectrum_scale_cluster": ["storage01"]},
        "playbook_dir": "/srv/gpuforge/playbooks",
        "ansible_managed": "Ansible managed",
        **trusted(extra),
    }
    return Templar(loader=DataLoader(), variables=variables)


def render(role: str, os_name: str, expression: str, **extra):
    return templar(role, os_name, **extra).template(trust_as_template(expression))


def render_file(role: str, os_name: str, template: str, **extra) -> str:
    text = (ROOT / "roles" / role / "templates" / template).read_text(encoding="utf-8")
    return templar(role, os_name, **extra).template(trust_as_template(text))
