"""The role's alert rules: promtool accepts them (check rules) and its unit tests pass (test rules), and the
unit tests cover every alert with at least one case where it fires and one where it stays silent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from conftest import ROLE

RULES = ROLE / "files" / "gpuforge-gpu.rules.yml"
TESTS = sorted((Path(__file__).parent / "promtool").glob("*.test.yml"))


def _alerts() -> set[str]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=False, cwd=cwd)


def test_promtool_check_rules(promtool):
    result = _run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in result.stdout


def test_promtool_test_rules(promtool):
    assert TESTS, "no promtool test files"
    for path in TESTS:
        result = _run(promtool, "test", "rules", path.name, cwd=path.parent)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS" in result.stdout


def test_promtool_test_rules_catches_a_broken_rule(promtool, tmp_path):
    """The unit tests can fail: with GpuMissing's comparison turned around they do."""
    broken = RULES.read_text(encoding="utf-8").replace(
        "gpuforge_gpus_listed < gpuforge_gpus_expected", "gpuforge_gpus_listed > gpuforge_gpus_expected"
    )
    assert broken != RULES.read_text(encoding="utf-8")
    rules_dir = tmp_path / "roles" / "gpu_monitoring" / "files"
    rules_dir.mkdir(parents=True)
    (rules_dir / RULES.name).write_text(broken, encoding="utf-8")
    tests_dir = tmp_path / "tests" / "unit" / "roles" / "gpu_monitoring" / "promtool"
    tests_dir.mkdir(parents=True)
    for path in TESTS:
        (tests_dir / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    result = _run(promtool, "test", "rules", *[path.name for path in TESTS], cwd=tests_dir)
    assert result.returncode != 0
    assert "alertname: GpuMissing" in result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_silent_case():
    fires: set[str] = set()
    silent: set[str] = set()
    for path in TESTS:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in document["tests"]:
            for check in case.get("alert_rule_test") or []:
                (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    assert fires == _alerts()
    assert silent == _alerts()


def test_alerts_for_each_validation_fault_exist():
    # issue 20: Xid, ECC double-bit errors, row remap pending, thermal slowdown, GPU missing, IB port down.
    assert {
        "GpuXidFatal",
        "GpuXid",
        "GpuEccDoubleBitErrors",
        "GpuRowRemapPending",
        "GpuThermalSlowdown",
        "GpuMissing",
        "IbPortDown",
    } <= _alerts()


HEALTH_GROUP = "gpuforge-node-health"
BASE = "https://git.example.com/hpc/gpuforge/-/blob/v1/docs/"


def _deployed_rules(**extra) -> str:
    """The rules file's content as the role's files task writes it on the monitoring server."""
    from test_gpu_monitoring_files import files_args
    from test_gpu_monitoring_templates import role

    files = files_args(role(host="head01", **extra))["files"]
    return next(f["content"] for f in files if f["path"].endswith("/gpuforge-gpu.rules.yml"))


def _annotations(text: str) -> dict:
    groups = yaml.safe_load(text)["groups"]
    return {
        rule["alert"]: rule.get("annotations") or {}
        for group in groups
        if group["name"] == HEALTH_GROUP
        for rule in group["rules"]
        if "alert" in rule
    }


def _slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub and GitLab make it: lower case, punctuation dropped, spaces to '-'."""
    return "".join(c for c in heading.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def test_health_alerts_link_to_their_runbook_section_when_the_site_publishes_the_docs(promtool, tmp_path):
    text = _deployed_rules(gpu_monitoring_runbook_base_url=BASE)
    links = {alert: notes.get("runbook_url") for alert, notes in _annotations(text).items()}
    assert links == {
        "GpuforgeHealthCheckFailed": BASE + "slurm.md#health-checks-prolog-and-epilog",
        "GpuforgeHealthStale": BASE + "monitoring.md#gpuforge-health",
    }
    # Each link's page and section exist in docs/ (the anchor of one of its headings).
    docs = ROLE.parents[1] / "docs"
    for url in links.values():
        page, section = url[len(BASE) :].split("#")
        headings = [line.lstrip("#").strip() for line in (docs / page).read_text(encoding="utf-8").splitlines()]
        assert section in {_slug(h) for h in headings if h}, url
    # Nothing else changed: Prometheus' own templates are intact, and promtool accepts what is deployed.
    static = RULES.read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if "runbook_url" not in line] == [
        line for line in static.splitlines() if "runbook_url" not in line
    ]
    assert "{{ $labels.instance }}" in text
    deployed = tmp_path / "gpuforge-gpu.rules.yml"
    deployed.write_text(text, encoding="utf-8")
    result = _run(promtool, "check", "rules", str(deployed))
    assert result.returncode == 0 and f"SUCCESS: {len(_alerts())} rules found" in result.stdout, result.stdout


def test_without_a_published_docs_url_the_rules_are_deployed_as_they_are():
    text = _deployed_rules()
    assert text == RULES.read_text(encoding="utf-8")
    annotations = _annotations(text)
    assert annotations and all("runbook_url" not in notes and notes.get("runbook") for notes in annotations.values())
    # A trailing slash or none gives the same links.
    assert _deployed_rules(gpu_monitoring_runbook_base_url=BASE.rstrip("/")) == _deployed_rules(
        gpu_monitoring_runbook_base_url=BASE
    )
