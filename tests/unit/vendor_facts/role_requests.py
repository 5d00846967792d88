"""What a role asks the package manager for, rendered without a host: package specs of a task, and the
apt pins it hands to roles/vendor_repository (rendered through that role's own preferences template)."""

from __future__ import annotations

import yaml
from ansible.template import trust_as_template
from gpu_stack_render import ROOT, RoleRender
from role_yaml import trusted

from gpuforge import vendor_facts


def task(render: RoleRender, tasks_file: str, name_start: str) -> dict:
    tasks = yaml.safe_load((render.role_dir / "tasks" / tasks_file).read_text(encoding="utf-8"))
    return next(t for t in tasks if t["name"].startswith(name_start))


def include_vars(render: RoleRender, tasks_file: str, name_start: str) -> dict:
    """The rendered `vars:` of an include_role task."""
    return render.templar.template(trusted(task(render, tasks_file, name_start)["vars"]))


def apt_pins(render: RoleRender, tasks_file: str, name_start: str) -> list[vendor_facts.Pin]:
    """The apt preferences file vendor_repository would write for that include, parsed as apt would."""
    values = include_vars(render, tasks_file, name_start)
    text = (ROOT / "roles/vendor_repository/templates/preferences.j2").read_text(encoding="utf-8")
    templar = render.templar.copy_with_new_env(available_variables={**render.templar.available_variables, **values})
    return vendor_facts.parse_preferences(templar.template(trust_as_template(text)))
