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
