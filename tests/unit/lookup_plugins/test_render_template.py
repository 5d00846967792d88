"""render_template: the same text as ansible.builtin.template's lookup, without its deep copy of the host's variables.

Both lookups render the same templates in one ansible-playbook run on this host (connection local): a role's
template with an include, blocks (trim_blocks), ansible_managed, template_vars over a host variable, backslashes and
trailing newlines; then a missing template, which must fail naming it. The roles' own templates are covered where
they are rendered: a re-run of site.yml on a lab converged with ansible.builtin.template's lookup changed nothing,
and the k8s and role render tests render the rest through this lookup."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ansible.errors import AnsibleError
from ansible.plugins.loader import lookup_loader
from local_playbook import run_local_playbook

TEMPLATE = """# {{ ansible_managed }}
{% for item in items %}
item {{ item }}
{% endfor %}
name={{ name }} path={{ template_path }}
[{% include 'part.j2' %}]
regex=^\\s+\\d+$ tab=\\t
{{ count }}


"""
PART = "part of {{ name }}\n"


def _playbook(tmp_path: Path) -> Path:
    role = tmp_path / "roles" / "render"
    (role / "templates").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "templates" / "main.j2").write_text(TEMPLATE, encoding="utf-8")
    (role / "templates" / "part.j2").write_text(PART, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    tasks = [
        {
            "name": f"render with {lookup}",
            "ansible.builtin.copy": {
                "content": "{{ lookup('" + lookup + "', 'main.j2', template_vars={'name': 'from-template-vars'}) }}",
                "dest": str(out / lookup),
            },
        }
        for lookup in ("ansible.builtin.template", "gpuforge.cluster.render_template")
    ]
    tasks.append(
        {
            "name": "a template that is not there",
            "ansible.builtin.debug": {"msg": "{{ lookup('gpuforge.cluster.render_template', 'absent.j2') }}"},
            "ignore_errors": True,
            "register": "absent",
        }
    )
    record = {"content": "{{ absent | to_json }}", "dest": str(out / "absent")}
    tasks.append({"name": "record", "ansible.builtin.copy": record})
    (role / "tasks" / "main.yml").write_text(json.dumps(tasks), encoding="utf-8")
    playbook = tmp_path / "play.yml"
    play = {
        "hosts": "localhost",
        "gather_facts": False,
        "vars": {"items": ["a", "b"], "name": "host-var", "count": 3},
        "roles": ["render"],
    }
    playbook.write_text(json.dumps([play]), encoding="utf-8")
    return playbook


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("render_template")
    playbook = _playbook(tmp_path)
    run_local_playbook(playbook, ANSIBLE_ROLES_PATH=str(tmp_path / "roles"))
    return tmp_path / "out"


def test_the_same_text_as_ansible_builtin_template(rendered):
    ours = (rendered / "gpuforge.cluster.render_template").read_text(encoding="utf-8")
    assert ours == (rendered / "ansible.builtin.template").read_text(encoding="utf-8")


def test_what_the_text_holds(rendered):
    text = (rendered / "gpuforge.cluster.render_template").read_text(encoding="utf-8")
    assert text.splitlines()[:3] == ["# Ansible managed", "item a", "item b"]  # trim_blocks: no empty lines
    assert "name=from-template-vars path=main.j2\n" in text  # template_vars over the host's variable
    assert "[part of from-template-vars]\n" in text  # include, with the template's variables
    assert "regex=^\\s+\\d+$ tab=\\t\n" in text  # backslashes as written
    assert text.endswith("3\n\n\n")  # trailing newlines kept


def test_a_missing_template_fails_naming_it(rendered):
    absent = json.loads((rendered / "absent").read_text(encoding="utf-8"))
    assert absent["failed"] is True
    assert re.search(r"render_template: the template 'absent.j2' is not in the templates/ folder of \S+", absent["msg"])
    assert "Traceback" not in absent["msg"]


def test_the_hosts_variables_are_not_copied(monkeypatch):
    """The point of the plugin: the host's variables reach the templar as they are (layered, never copied)."""
    import copy

    def no_copy(*args, **kwargs):
        raise AssertionError("the host's variables were copied")

    monkeypatch.setattr(copy, "deepcopy", no_copy)
    seen = {}

    class Templar:
        def copy_with_new_env(self, available_variables, searchpath):
            seen["variables"], seen["searchpath"] = available_variables, searchpath
            return self

        def template(self, text, escape_backslashes):
            return f"rendered {len(text)} characters"

    class Loader:
        def get_text_file_contents(self, path):
            return "x" * 7

    lookup = lookup_loader.get("gpuforge.cluster.render_template", loader=Loader(), templar=Templar())
    host_vars = {"ansible_search_path": ["/roles/r", "/play"], "role_path": "/roles/r", "big": list(range(10))}
    lookup.find_file_in_search_path = lambda variables, subdir, term, ignore_missing: f"/roles/r/templates/{term}"
    assert lookup.run(["main.j2"], host_vars, template_vars={"big": "mine"}) == ["rendered 7 characters"]
    layered = seen["variables"]
    assert layered.maps[1] is host_vars  # the host's own mapping, beneath the template's variables
    assert layered["big"] == "mine" and layered["template_fullpath"] == "/roles/r/templates/main.j2"
    assert seen["searchpath"] == ["/roles/r/templates", "/roles/r/templates", "/roles/r", "/play/templates", "/play"]


def test_a_missing_template_outside_a_role_names_the_play():
    lookup = lookup_loader.get("gpuforge.cluster.render_template", loader=None, templar=None)
    lookup.find_file_in_search_path = lambda *args, **kwargs: None
    with pytest.raises(AnsibleError, match=r"'gone.j2' is not in the templates/ folder of /plays or on"):
        lookup.run(["gone.j2"], {"playbook_dir": "/plays"})
