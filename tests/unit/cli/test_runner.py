"""run_playbook over real ansible-runner: tiny localhost playbooks, summary.json, exit code = runner rc."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuforge.runner import SCHEMA_VERSION, RunRequest, new_run_id, run_playbook, split_extra_vars

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cli"
SUMMARY_KEYS = {
    "schema_version", "run_id", "command", "playbook", "rc", "status", "started", "finished",
    "duration_s", "hosts", "failed_tasks", "artifacts",
}  # fmt: skip


def _request(playbook: str, artifacts: Path, **options) -> RunRequest:
    return RunRequest(
        command="test",
        playbook=playbook,
        inventory=FIXTURES / "hosts.yml",
        project_dir=FIXTURES,
        playbooks_dir=FIXTURES / "playbooks",
        artifacts_root=artifacts,
        **options,
    )


def test_successful_run_writes_summary(tmp_path):
    artifacts = tmp_path / "artifacts"
    run_dir = artifacts / new_run_id()
    summary = run_playbook(_request("debug_ok.yml", artifacts, extra_vars=["greeting=hi"]), run_dir)
    assert summary["rc"] == 0
    assert summary["status"] == "successful"
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk == summary
    assert set(on_disk) >= SUMMARY_KEYS
    assert on_disk["schema_version"] == SCHEMA_VERSION == 2
    assert on_disk["playbook"] == "playbooks/debug_ok.yml"
    assert on_disk["hosts"] == {"localhost": {"ok": 2, "changed": 1, "failed": 0, "unreachable": 0, "skipped": 1}}
    assert on_disk["failed_tasks"] == []
    assert Path(on_disk["artifacts"]["stdout"]).is_file()


def test_the_playbooks_write_into_the_run_directory(tmp_path):
    # The run directory is the playbooks' gpuforge_artifacts_dir: the report lands there, not in the shared
    # artifacts/ folder, and nothing is copied by timestamp.
    artifacts = tmp_path / "artifacts"
    run_dir = artifacts / new_run_id()
    summary = run_playbook(_request("write_validation.yml", artifacts), run_dir)
    assert summary["rc"] == 0
    assert (run_dir / "validation" / "localhost.json").is_file()
    assert not (artifacts / "validation").exists()
    assert summary["artifacts"]["validation"] == [str(run_dir / "validation" / "localhost.json")]
    # the node's verdict, by gpuforge_records.node_verdicts over the records the playbook wrote
    verdict = summary["validation"]["localhost"]
    assert (verdict["verdict"], verdict["healthy"], verdict["failed_checks"]) == ("FAIL", False, ["gpu_count"])


@pytest.mark.parametrize("how", ["pair", "file"])
def test_a_caller_s_own_artifacts_dir_is_refused(tmp_path, how):
    # The run directory is the only input of the summary and the report: nothing is copied in by timestamp.
    artifacts = tmp_path / "artifacts"
    elsewhere = tmp_path / "elsewhere"
    if how == "pair":
        extra = [f"gpuforge_artifacts_dir={elsewhere}"]
    else:
        var_file = tmp_path / "vars.yml"
        var_file.write_text(f"gpuforge_artifacts_dir: {elsewhere}\n")
        extra = [f"@{var_file}"]
    run_dir = artifacts / new_run_id()
    summary = run_playbook(_request("write_validation.yml", artifacts, extra_vars=extra), run_dir)
    assert (summary["rc"], summary["status"]) == (1, "bad-extra-vars")
    assert "gpuforge_artifacts_dir is this run's directory" in summary["error"]
    assert not elsewhere.exists() and not (run_dir / "validation").exists()


def test_runs_share_the_fact_cache_of_ansible_cfg(tmp_path):
    # ansible-runner would give each run its own cache; `k8s render` needs the facts validation gathered.
    config = tmp_path / "ansible.cfg"
    cache = tmp_path / "facts"
    config.write_text(f"[defaults]\nfact_caching = jsonfile\nfact_caching_connection = {cache}\n")
    artifacts = tmp_path / "artifacts"
    first = run_playbook(_request("fact_cache_write.yml", artifacts, ansible_config=config), artifacts / "one")
    second = run_playbook(_request("fact_cache_read.yml", artifacts, ansible_config=config), artifacts / "two")
    assert (first["rc"], second["rc"]) == (0, 0), second["failed_tasks"]
    assert list(cache.iterdir())


def test_failed_run_returns_rc_2_and_names_the_task(tmp_path):
    run_dir = tmp_path / "run"
    summary = run_playbook(_request("debug_fail.yml", tmp_path), run_dir)
    assert summary["rc"] == 2
    assert summary["status"] == "failed"
    assert summary["hosts"]["localhost"]["failed"] == 1
    assert summary["failed_tasks"] == [
        {
            "host": "localhost",
            "play": "Tiny playbook that fails",
            "task": "Fail on purpose",
            "status": "failed",
            "msg": "deliberate failure for the CLI test",
        }
    ]


def test_missing_playbook_is_rc_1_without_running(tmp_path):
    summary = run_playbook(_request("nope.yml", tmp_path), tmp_path / "run")
    assert (summary["rc"], summary["status"]) == (1, "missing-playbook")
    assert not (tmp_path / "run" / "runner").exists()


def test_cli_exit_code_is_runner_rc(tmp_path, monkeypatch, capsys):
    from gpuforge import cli, paths

    monkeypatch.setattr(paths, "ARTIFACTS_DIR", tmp_path)
    monkeypatch.setattr(cli, "PLAYBOOKS", {"provision": "debug_fail.yml", "validate": "x", "bench": "x"})
    # Point the request at the fixture project.
    original = cli._request

    def fixture_request(args, command, playbook):
        request = original(args, command, playbook)
        request.project_dir, request.playbooks_dir, request.artifacts_root = FIXTURES, FIXTURES / "playbooks", tmp_path
        return request

    monkeypatch.setattr(cli, "_request", fixture_request)
    rc = cli.main(["provision", "-i", str(FIXTURES / "hosts.yml"), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert rc == 2
    assert document["rc"] == 2 and document["command"] == "provision"
    assert Path(document["artifacts"]["run_dir"]).parent == tmp_path


def test_extra_vars_split(tmp_path):
    var_file = tmp_path / "vars.yml"
    var_file.write_text("a: 1\n")
    pairs, files = split_extra_vars(["x=1", "y=a=b", f"@{var_file}"])
    assert pairs == {"x": "1", "y": "a=b"}
    assert files == [str(var_file.resolve())]
    with pytest.raises(ValueError, match="key=value or @file"):
        split_extra_vars(["novalue"])
    with pytest.raises(FileNotFoundError):
        split_extra_vars([f"@{tmp_path / 'missing.yml'}"])


def test_run_id_shape():
    run_id = new_run_id()
    stamp, short = run_id.split("-")
    assert len(stamp) == 16 and stamp.endswith("Z") and len(short) == 6
    assert os.path.basename(run_id) == run_id
