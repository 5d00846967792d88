"""scripts/molecule_lanes.sh stops a scenario at its limit and runs it once more; a failure is not run again.

The script runs in a copy of its tree shape (molecule/<scenario>/molecule.yml, scenario-seconds.txt) with a
`molecule` on PATH that records each call and then hangs, fails or passes as its scenario's plan file says.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "molecule_lanes.sh"

# `molecule test -s NAME`: the n-th call of NAME does what line n of plans/NAME says (hang, fail or pass).
FAKE_MOLECULE = """#!/usr/bin/env bash
name=$3
echo "$name" >> "$CALLS"
n=$(grep -cx "$name" "$CALLS")
action=$(sed -n "${n}p" "plans/$name")
echo "try $n of $name: $action"
case $action in
  hang) exec sleep 600 ;;
  fail) exit 2 ;;
  *) exit 0 ;;
esac
"""


def _run(tmp_path, plans: dict) -> tuple[subprocess.CompletedProcess, list]:
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "molecule"
    fake.write_text(FAKE_MOLECULE, encoding="utf-8")
    fake.chmod(0o755)
    (tmp_path / "plans").mkdir()
    for name, plan in plans.items():
        (tmp_path / "molecule" / name).mkdir(parents=True)
        (tmp_path / "molecule" / name / "molecule.yml").write_text("platforms: []\n", encoding="utf-8")
        (tmp_path / "plans" / name).write_text("\n".join(plan) + "\n", encoding="utf-8")
    (tmp_path / "molecule" / "scenario-seconds.txt").write_text(
        "".join(f"{name} 1\n" for name in plans), encoding="utf-8"
    )
    (tmp_path / "molecule" / "ci-scenarios.txt").write_text("".join(f"{n}\n" for n in plans), encoding="utf-8")
    env = dict(
        os.environ,
        PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        CALLS=str(tmp_path / "calls"),
        MOLECULE_LANES="2",
        MOLECULE_TIMEOUT_FACTOR="1",
        MOLECULE_TIMEOUT_MIN_S="2",
    )
    done = subprocess.run(
        ["bash", str(SCRIPT), *plans], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    calls = (tmp_path / "calls").read_text(encoding="utf-8").split()
    return done, calls


def test_a_scenario_stopped_at_its_limit_runs_once_more_and_says_so(tmp_path):
    done, calls = _run(tmp_path, {"flaky": ["hang", "pass"]})
    assert calls == ["flaky", "flaky"]
    assert "== molecule flaky: stopped at its limit of 2s (hung?)" in done.stdout
    assert "try 1 of flaky: hang" in done.stdout  # the end of the stopped try's log
    assert "== molecule flaky: passed in" in done.stdout and "(second try, after a stop at the limit)" in done.stdout
    assert not (tmp_path / ".gpuforge/molecule/flaky.failed").exists()
    assert (tmp_path / ".gpuforge/molecule/flaky.timed-out.log").is_file()


def test_a_scenario_that_hangs_twice_fails_the_run(tmp_path):
    done, calls = _run(tmp_path, {"stuck": ["hang", "hang"]})
    assert calls == ["stuck", "stuck"]
    assert "== molecule stuck: FAILED after" in done.stdout and "(rc 124)" in done.stdout
    assert (tmp_path / ".gpuforge/molecule/stuck.failed").exists()
    assert done.returncode != 0


def test_a_failed_scenario_is_not_run_again(tmp_path):
    done, calls = _run(tmp_path, {"broken": ["fail", "pass"], "fine": ["pass"]})
    assert sorted(calls) == ["broken", "fine"]
    assert "== molecule broken: FAILED after" in done.stdout and "(rc 2)" in done.stdout
    assert "== molecule fine: passed in" in done.stdout
    assert done.returncode != 0
