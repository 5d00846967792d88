# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
name: render_template
author:
  - gpuforge maintainers (@gpuforge)
version_added: "0.1.0"
short_description: A role's template file rendered to text, without copying the host's variables
description:
  - Finds each template file as C(ansible.builtin.template) does (the role's C(templates/) folder first, then the
    play's search path) and renders it with the host's variables, so that a task can hand the text on, for
    example as one of the files of M(gpuforge.cluster.managed_files).
  - The host's variables are layered under the template's own (O(template_vars), then C(ansible_managed),
    C(template_path) and C(template_fullpath)), not copied, where the C(ansible.builtin.template) lookup
    deep-copies every variable of the host on each call.
  - C(ansible_managed) is the host's variable when set, else C(Ansible managed), the default of ansible-core's
    deprecated C(ansible_managed) setting ("Ansible Configuration Settings", DEFAULT_MANAGED_STR). The template
    lookup's other variables (C(template_host), C(template_uid), C(template_mtime), C(template_run_date)) are left
    out, because a rendered file must not change with the controller or the time it ran on.
options:
  _terms:
    description: Template files, as names under the role's C(templates/) folder or paths.
    required: true
    type: list
    elements: str
  template_vars:
    description: Variables for the template only; they take precedence over the host's variables.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Write slurm.conf from the role's template
  gpuforge.cluster.managed_files:
    files:
      - path: /etc/slurm/slurm.conf
        mode: "0644"
        content: "{{ lookup('gpuforge.cluster.render_template', 'slurm.conf.j2') }}"

- name: One template rendered twice with different variables
  ansible.builtin.set_fact:
    with_policy: "{{ lookup('gpuforge.cluster.render_template', 'policy.te.j2', template_vars={'policy': true}) }}"
"""

RETURN = r"""
_raw:
  description: The rendered text of each template, in the order given.
  type: list
  elements: str
"""

import os
from collections import ChainMap

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.template import trust_as_template

# ansible-core's default for ansible_managed (the DEFAULT_MANAGED_STR setting, deprecated in 2.19 for a variable).
ANSIBLE_MANAGED_DEFAULT = "Ansible managed"


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables if variables is not None else {}
        self.set_options(var_options=variables, direct=kwargs)
        template_vars = self.get_option("template_vars")
        # Jinja's include and import look in each search path's templates/ folder and the folder itself.
        search_path = []
        for folder in variables.get("ansible_search_path", []):
            search_path += [os.path.join(folder, "templates"), folder]
        rendered = []
        for term in terms:
            path = self.find_file_in_search_path(variables, "templates", term, ignore_missing=True)
            if not path:
                where = variables.get("role_path") or variables.get("playbook_dir") or "the play"
                raise AnsibleError(
                    f"render_template: the template {term!r} is not in the templates/ folder of {where} or on the "
                    "play's search path; check its name"
                )
            own = {
                "ansible_managed": variables.get("ansible_managed", ANSIBLE_MANAGED_DEFAULT),
                "template_path": term,
                "template_fullpath": path,
            }
            own.update(template_vars)
            templar = self._templar.copy_with_new_env(
                available_variables=ChainMap(own, variables), searchpath=[os.path.dirname(path), *search_path]
            )
            text = trust_as_template(self._loader.get_text_file_contents(path))
            rendered.append(templar.template(text, escape_backslashes=False))
        return rendered
