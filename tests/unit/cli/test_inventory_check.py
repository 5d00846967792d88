"""Inventories that never pass silently: Ansible's own parser, before ansible-runner starts, and no-host runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuforge import cli, paths
from gpuforge.inventory_check import InventoryError, check_inventory

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cli"
GOOD = """\
all:
  hosts:
    gpu01:
    gpu02:
  children:
    gpu_nodes:
      hosts:
        gpu01:
"""
# An unclosed flow sequence: a YAML syntax error at line 5, column 11.
MALFORMED = """\
all:
  hosts:
    gpu01:
     ansible_host: [1
  children: {
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_good_inventory_returns_its_hosts(tmp_path):
    inventory = write(tmp_path, "hosts.yml", GOOD)
    assert check_inventory(inventory) == ["gpu01", "gpu02"]
    assert check_inventory(inventory, "gpu_nodes") == ["gpu01"]
    assert check_inventory(inventory, "gpu02") == ["gpu02"]


def test_missing_file_is_named(tmp_path):
    with pytest.raises(InventoryError, match=r"inventory .*nope\.yml does not exist: check -i"):
        check_inventory(tmp_path / "nope.yml")


def test_malformed_yaml_gives_the_parsers_message_and_position(tmp_path):
    inventory = write(tmp_path, "broken.yml", MALFORMED)
    with pytest.raises(InventoryError) as raised:
        check_inventory(inventory)
    message = str(raised.value)
    assert message.startswith(f"inventory {inventory} does not parse as an inventory:")
    assert "yaml plugin: YAML parsing failed" in message
    assert "did not find expected ',' or ']'" in message
    assert f"{inventory}:5:11" in message
    # The ini plugin's guess at a YAML file is noise, not the explanation.
    assert "ini plugin" not in message


def test_yaml_with_the_wrong_structure_gives_the_yaml_plugins_message(tmp_path):
    inventory = write(tmp_path, "hosts.yml", "all:\n  hosts: [gpu01, gpu02]\n")
    with pytest.raises(InventoryError, match=r'yaml plugin: Invalid "hosts" entry for "all" group'):
        check_inventory(inventory)


def test_malformed_ini(tmp_path):
    inventory = write(tmp_path, "hosts", "[gpu_nodes\ngpu01\n")
    with pytest.raises(InventoryError, match=r"(?s)does not parse as an inventory:.*ini plugin"):
        check_inventory(inventory)


def test_broken_file_in_an_inventory_directory_is_named(tmp_path):
    write(tmp_path / "site", "10-good.yml", GOOD)
    broken = write(tmp_path / "site", "20-broken.yml", MALFORMED)
    with pytest.raises(InventoryError, match=re.escape(f"{broken} does not parse")):
        check_inventory(tmp_path / "site")


@pytest.mark.parametrize("text", ["", "all:\n  children:\n    gpu_nodes: {}\n"])
def test_inventory_without_hosts(tmp_path, text):
    inventory = write(tmp_path, "hosts.yml", text)
    with pytest.raises(InventoryError, match=r"no host matched: .* check -i and --limit"):
        check_inventory(inventory)


def test_limit_that_matches_no_host(tmp_path):
    inventory = write(tmp_path, "hosts.yml", GOOD)
    with pytest.raises(InventoryError, match=r"no host matched: inventory .* with --limit 'gpu09'"):
        check_inventory(inventory, "gpu09")


# -- through the CLI: the check runs before ansible-runner, and a run that processed no host fails ---------------


@pytest.fixture
def no_runner(monkeypatch, tmp_path):
    """Fail the test if the CLI starts a playbook run."""
    from gpuforge import runner

    calls = []
    monkeypatch.setattr(paths, "ARTIFACTS_DIR", tmp_path / "artifacts")
    monkeypatch.setattr(runner, "run_playbook", lambda *args, **kwargs: calls.append(args) or pytest.fail("ran"))
    return calls


def test_cli_validate_malformed_inventory_fails_before_running(tmp_path, no_runner, capsys):
    inventory = write(tmp_path, "broken.yml", MALFORMED)
    assert cli.main(["validate", "-i", str(inventory)]) == 1
    captured = capsys.readouterr()
    assert f"gpuforge validate: inventory {inventory} does not parse as an inventory:" in captured.err
    assert "YAML parsing failed" in captured.err
    assert "successful" not in captured.out + captured.err
    assert not no_runner
    assert not (tmp_path / "artifacts").exists()


def test_cli_validate_missing_inventory_fails_before_running(tmp_path, no_runner, capsys):
    missing = tmp_path / "missing.yml"
    assert cli.main(["validate", "-i", str(missing), "--json"]) == 1
    captured = capsys.readouterr()
    assert f"gpuforge validate: inventory {missing} does not exist" in captured.err
    assert "none of the gpuforge groups" not in captured.err
    document = json.loads(captured.out)
    assert (document["rc"], document["status"]) == (1, "inventory-error")
    assert not no_runner


def test_cli_limit_matching_nothing_fails_before_running(tmp_path, no_runner, capsys):
    inventory = write(tmp_path, "hosts.yml", GOOD)
    assert cli.main(["runbook", "health_sweep", "-i", str(inventory), "--limit", "gpu09"]) == 1
    assert "no host matched" in capsys.readouterr().err
    assert not no_runner


def test_cli_run_that_processes_no_host_fails(tmp_path, monkeypatch, capsys):
    # A real ansible-runner run whose only play targets a group the inventory lacks: Ansible says "successful".
    project = tmp_path / "project"
    write(project / "playbooks", "nothing.yml", "---\n- name: Nothing\n  hosts: no_such_group\n  tasks: []\n")
    monkeypatch.setattr(paths, "ARTIFACTS_DIR", tmp_path / "artifacts")
    monkeypatch.setattr(cli, "PLAYBOOKS", {"provision": "x", "validate": "nothing.yml", "bench": "x"})
    original = cli._request

    def fixture_request(args, command, playbook):
        request = original(args, command, playbook)
        request.project_dir, request.playbooks_dir = project, project / "playbooks"
        request.artifacts_root = tmp_path / "artifacts"
        return request

    monkeypatch.setattr(cli, "_request", fixture_request)
    assert cli.main(["validate", "-i", str(FIXTURES / "hosts.yml")]) == 1
    out = capsys.readouterr().out
    assert "validate: no-hosts (rc 1)" in out
    assert "no host was processed" in out
    (summary_path,) = (tmp_path / "artifacts").glob("*/summary.json")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    assert (summary["rc"], summary["status"], summary["hosts"]) == (1, "no-hosts", {})
