"""`gpuforge burnin` (src/gpuforge/burnin.py): duration parsing and the round loop with a fake runner.

The fake runner stands in for run_playbook (no Ansible run): it writes what a round of playbooks/burnin.yml leaves
in the round folder - bench/<id>/summary.json (the real lab run's summary, tests/fixtures/records/demo-run/, with
the lab's faults taken out, and the records of its blocks as the role's summary.yml writes them), counters/<host>.json
(real perfquery counters) and dcgm/<host>.json - and advances a fake clock by the round's length.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import jsonschema
import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_perfquery as pq
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records_mod
from bench_summaries import written

from gpuforge import burnin, cli

ROOT = Path(__file__).resolve().parents[3]
BENCH = (
    ROOT / "tests" / "fixtures" / "records" / "demo-run" / "benchmark" / "bench" / "20261126T151133Z" / "summary.json"
)
PERFQUERY = ROOT / "tests" / "fixtures" / "perfquery" / "infiniband-diags_issue16_rhel75_perfquery_x.txt"
SCHEMA = json.loads((ROOT / "schemas" / "burnin-round.schema.json").read_text(encoding="utf-8"))
NODES = ["gpu01", "gpu02", "gpu03"]
PORTS = ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]
ROUND_S = 600.0


def single_nccl(node: str) -> float:
    """The node's single-node NCCL busbw in the lab run (nccl-single-<node>)."""
    bench = json.loads(BENCH.read_text(encoding="utf-8"))
    (value,) = [r["value"] for r in bench["nccl"]["results"] if r["name"] == f"nccl-single-{node}"]
    return value


def healthy_bench(bench_id: str) -> dict:
    bench = json.loads(BENCH.read_text(encoding="utf-8"))
    bench["run_id"] = bench_id
    bench["ib_write_bw"]["results"] = [r for r in bench["ib_write_bw"]["results"] if r["value"] is not None]
    for result in bench["ib_write_bw"]["results"]:
        if "gpu02" in result["nodes"]:
            result["value"] = 12.5
        result.update(verdict="PASS", run_failed=False, reason="healthy round")
    bench["ib_write_bw"]["slow_nodes"] = []
    return bench


def base_counters() -> dict:
    counters = pq.parse_perfquery(PERFQUERY.read_text(encoding="utf-8"))[0]["counters"]
    return {port: dict(counters) for port in PORTS}


class FakeRound:
    """run_playbook's stand-in. Faults: {round: {"slow": node, "grow": node, "unreachable": node, "dcgm": ...}}."""

    def __init__(self, clock, faults=None, dcgm_installed=True, records=True):
        self.records = records  # False: the bench summary as a gpuforge before its records wrote it
        self.clock = clock
        self.faults = faults or {}
        self.dcgm_installed = dcgm_installed
        self.requests = []
        self.counters = {n: base_counters() for n in NODES}

    def __call__(self, request, round_dir, view):
        self.requests.append((request, round_dir))
        number = len(self.requests)
        fault = self.faults.get(number, {})
        extra = dict(v.split("=", 1) for v in request.extra_vars if "=" in v)
        assert Path(extra["gpuforge_burnin_round_dir"]) == round_dir
        bench_id = extra["gpuforge_bench_run_id"]
        down = fault.get("unreachable")
        up = [n for n in NODES if n != down]
        bench = healthy_bench(bench_id)
        if fault.get("slow"):
            for result in bench["nccl"]["results"]:
                if result["nodes"] == [fault["slow"]]:
                    result["value"] = round(result["value"] * 0.6, 2)
        (round_dir / "bench" / bench_id).mkdir(parents=True)
        bench = written(bench) if self.records else {k: v for k, v in bench.items() if k != "records"}
        (round_dir / "bench" / bench_id / "summary.json").write_text(json.dumps(bench))
        (round_dir / "counters").mkdir()
        (round_dir / "dcgm").mkdir()
        for node in up:
            before = copy.deepcopy(self.counters[node])
            if fault.get("grow") == node:
                self.counters[node]["mlx5_0/1"]["SymbolErrorCounter"] += 12
                self.counters[node]["mlx5_0/1"]["LinkErrorRecoveryCounter"] += 1
            document = {"node": node, "before": before, "after": self.counters[node], "max_growth": {}, "errors": []}
            (round_dir / "counters" / f"{node}.json").write_text(json.dumps(document))
            if self.dcgm_installed:
                status = "FAIL" if fault.get("dcgm") == node else "PASS"
                fault_text = "DCGM diagnostic level 3 failed: memory on GPU 2" if status == "FAIL" else ""
                check = {"name": "dcgm_diag", "status": status, "fault": fault_text}
                dcgm = {"host": node, "level": 3, "ran": True, "healthy": status == "PASS", "check": check}
            else:
                detail = "skipped: not installed (playbooks/tasks/validate_dcgm.yml is not in this checkout)"
                dcgm = {"node": node, "level": 3, "status": "skipped", "detail": detail}
            (round_dir / "dcgm" / f"{node}.json").write_text(json.dumps(dcgm))
        hosts = {n: {"ok": 40, "changed": 12, "failed": 0, "unreachable": 0, "skipped": 3} for n in NODES}
        failed_tasks = []
        if down:
            hosts[down].update(unreachable=1)
            task = {"host": down, "task": "Gather InfiniBand facts for the counter read", "status": "unreachable"}
            failed_tasks.append(dict(task, msg="Failed to connect to the host via ssh"))
        self.clock.now += ROUND_S
        summary = {"rc": 4 if down else 0, "status": "failed" if down else "successful"}
        summary.update(hosts=hosts, failed_tasks=failed_tasks)
        (round_dir / "summary.json").write_text(json.dumps(summary))
        return summary


class Clock:
    def __init__(self):
        self.now = 1_795_000_000.0

    def __call__(self):
        return self.now


def args_for(duration="30m", rounds_max=None, fraction=0.9, as_json=False, inventory="hosts.yml"):
    return argparse.Namespace(
        duration=burnin.parse_duration(duration),
        inventory=inventory,
        limit=None,
        extra_vars=["gpuforge_bench_nccl_iters=5"],
        rounds_max=rounds_max,
        slowdown_fraction=fraction,
        json=as_json,
    )


def run_burnin(tmp_path, faults=None, dcgm_installed=True, **options):
    clock = Clock()
    fake = FakeRound(clock, faults, dcgm_installed)
    lines = []
    rc = burnin.run(args_for(**options), runner=fake, clock=clock, artifacts_root=tmp_path, log=lines.append)
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    document = json.loads((run_dir / "burnin" / "summary.json").read_text())
    return rc, document, lines, fake, run_dir


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2h", 7200), ("30m", 1800), ("90s", 90), ("1h30m", 5400), ("1.5h", 5400), ("1d", 86400), (" 45 m ", 2700)],
)
def test_durations(text, seconds):
    assert burnin.parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty duration"),
        ("45", "has no unit"),
        ("2x", "cannot read duration"),
        ("h", "cannot read duration"),
        ("30m1h", "largest first"),
        ("1h1h", "largest first"),
        ("0m", "is zero"),
        ("-5m", "cannot read duration"),
    ],
)
def test_bad_durations_say_what_is_accepted(text, message):
    with pytest.raises(burnin.DurationError, match=message):
        burnin.parse_duration(text)


def test_cli_refuses_a_bad_duration_before_anything_runs(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["burnin", "--duration", "2 hours"])
    assert stop.value.code == 2
    assert "argument --duration: cannot read duration '2 hours': use a number with a unit" in capsys.readouterr().err


def test_cli_registers_burnin_with_its_options():
    args = cli.build_parser().parse_args(["burnin", "--duration", "1h30m", "--rounds-max", "4", "--limit", "gpu0*"])
    assert (args.duration, args.rounds_max, args.limit, args.slowdown_fraction) == (5400, 4, "gpu0*", 0.9)
    assert args.handler is burnin.main
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["burnin", "--duration", "1h", "--slowdown-fraction", "1.5"])


def test_a_wrong_inventory_stops_before_any_round(tmp_path, capsys):
    rc = cli.main(["burnin", "--duration", "10m", "-i", str(tmp_path / "missing.yml")])
    assert rc == 1
    assert "gpuforge burnin:" in capsys.readouterr().err


def test_rounds_repeat_until_the_duration_is_spent(tmp_path):
    rc, document, lines, fake, run_dir = run_burnin(tmp_path, duration="30m")
    # 10-minute rounds: rounds start at 0, 10 and 20 minutes; at 30 the duration is spent
    assert len(fake.requests) == 3 and document["stopped"] == "duration"
    assert rc == 0 and document["verdict"] == "PASS"
    for number, (request, round_dir) in enumerate(fake.requests, start=1):
        assert round_dir == run_dir / "burnin" / f"round-{number}"
        assert request.playbook == "burnin.yml"
        assert request.tags == "nccl,ib_write_bw,ib_counters,burnin"
        assert "gpuforge_bench_report_only=true" in request.extra_vars
        assert request.extra_vars[0] == "gpuforge_bench_nccl_iters=5"  # the operator's -e is passed on
    assert [r["round"] for r in document["rounds"]] == [1, 2, 3]
    assert len(document["records"]) == 9
    assert {n: t["verdict"] for n, t in document["trend"].items()} == dict.fromkeys(NODES, "PASS")
    # one line per round, then the table
    round_lines = [line for line in lines if line.startswith("round ")]
    assert len(round_lines) == 3
    assert round_lines[0].startswith(
        f"round 1: 10m00s rc 0: gpu01 PASS [ctr+0 nccl {single_nccl('gpu01'):g} dcgm pass]"
    )
    assert single_nccl("gpu01") == 5.82
    assert any(line.startswith("NODE") and "COUNTER DELTAS" in line for line in lines)
    assert lines[-2] == "burnin: PASS"
    top = json.loads((run_dir / "summary.json").read_text())
    assert top["command"] == "burnin" and top["rc"] == 0 and top["schema_version"] == 1
    assert [s["stage"] for s in top["stages"]] == ["round 1", "round 2", "round 3"]
    assert records_mod.stage_result_records(top)[0]["verdict"] == "PASS"


def test_rounds_max_stops_early(tmp_path):
    rc, document, _lines, fake, _run_dir = run_burnin(tmp_path, duration="2h", rounds_max=2)
    assert rc == 0 and len(fake.requests) == 2 and document["stopped"] == "rounds-max"


def test_one_round_runs_even_when_it_outlasts_the_duration(tmp_path):
    rc, document, _lines, fake, _run_dir = run_burnin(tmp_path, duration="1m")
    assert len(fake.requests) == 1 and rc == 0
    assert document["duration_s"] == ROUND_S


def test_a_node_whose_counters_grew_fails(tmp_path):
    rc, document, lines, _fake, _run_dir = run_burnin(tmp_path, faults={2: {"grow": "gpu02"}}, duration="40m")
    assert rc == 1 and document["verdict"] == "FAIL" and document["failed_nodes"] == ["gpu02"]
    trend = document["trend"]["gpu02"]
    assert trend["errors_grew"] == [
        {"round": 2, "port": "mlx5_0/1", "counter": "LinkErrorRecoveryCounter", "growth": 1, "limit": 0},
        {"round": 2, "port": "mlx5_0/1", "counter": "SymbolErrorCounter", "growth": 12, "limit": 0},
    ]
    assert trend["counter_totals"]["mlx5_0/1"]["SymbolErrorCounter"] == 12
    round2 = next(line for line in lines if line.startswith("round 2"))
    assert "gpu02 FAIL [ctr+13" in round2 and "error counters grew on mlx5_0/1" in round2
    row = next(line for line in lines if line.startswith("gpu02 "))
    assert "mlx5_0/1 LinkErrorRecoveryCounter +1, mlx5_0/1 SymbolErrorCounter +12 | errors grew:" in row
    assert "round 2 mlx5_0/1 SymbolErrorCounter +12" in row
    assert next(line for line in lines if line.startswith("gpu01 ")).split()[-3:] == ["0", "|", "-"]
    assert lines[-2] == "burnin: FAIL - failed: gpu02"


def test_a_node_that_slowed_down_fails(tmp_path):
    faults = {n: {"slow": "gpu03"} for n in (4, 5, 6)}
    rc, document, lines, _fake, _run_dir = run_burnin(tmp_path, faults=faults, duration="1h")
    assert rc == 1 and document["failed_nodes"] == ["gpu03"]
    slowed = document["trend"]["gpu03"]["slowed"]
    assert [s["metric"] for s in slowed] == ["nccl single-node busbw"]
    assert slowed[0]["ratio"] == pytest.approx(0.6, abs=0.01)
    row = next(line for line in lines if line.startswith("gpu03 "))
    before = single_nccl("gpu03")
    assert f"{before:g} -> {round(before * 0.6, 2):g}" in row and "got slower" in row
    assert "5.09 -> 3.05" in row
    # the same rounds judged with the lab's fraction pass
    rc, document, *_ = run_burnin(tmp_path / "lab", faults=faults, duration="1h", fraction=0.5)
    assert rc == 0 and document["verdict"] == "PASS"


def test_a_failed_round_fails_the_node(tmp_path):
    rc, document, lines, _fake, run_dir = run_burnin(tmp_path, faults={2: {"unreachable": "gpu01"}}, duration="30m")
    assert rc == 1 and document["failed_nodes"] == ["gpu01"]
    assert document["trend"]["gpu01"]["failed_rounds"] == [2]
    assert document["rounds"][1]["rc"] == 4
    round2 = next(line for line in lines if line.startswith("round 2"))
    assert "rc 4" in round2 and "gpu01 FAIL" in round2 and "gpu02 PASS" in round2
    top = json.loads((run_dir / "summary.json").read_text())
    assert top["rc"] == 1 and top["failed_tasks"][0]["round"] == 2
    assert [s["status"] for s in top["stages"]] == ["ok", "failed", "ok"]


def test_a_dcgm_failure_fails_and_missing_dcgm_is_reported_skipped(tmp_path):
    rc, document, *_ = run_burnin(tmp_path, faults={1: {"dcgm": "gpu02"}}, duration="20m")
    assert rc == 1 and document["failed_nodes"] == ["gpu02"]
    assert document["trend"]["gpu02"]["dcgm"] == ["fail", "pass"]
    rc, document, lines, *_ = run_burnin(tmp_path / "no-dcgm", dcgm_installed=False, duration="20m")
    assert rc == 0
    assert all(r["dcgm"]["status"] == "skipped" for r in document["records"])
    assert all("not installed" in r["dcgm"]["detail"] for r in document["records"])
    assert "dcgm skipped" in next(line for line in lines if line.startswith("round 1"))


def test_json_output_and_every_record_matches_the_schema(tmp_path, capsys):
    faults = {2: {"grow": "gpu01", "unreachable": "gpu03"}, 3: {"slow": "gpu02"}, 4: {"slow": "gpu02"}}
    rc, document, *_ = run_burnin(tmp_path, faults=faults, duration="40m", as_json=True)
    printed = json.loads(capsys.readouterr().out)
    assert printed == document and rc == 1
    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    assert len(document["records"]) == 12
    for record in document["records"]:
        validator.validate(record)
    assert records_mod.burnin_round_records(document) == document["records"]


def test_the_cli_and_the_playbooks_agree_on_names():
    """The tags the CLI passes exist in the playbooks (benchmark.yml runs role gpuforge_bench, whose tasks/main.yml
    holds the tags), and burnin.yml with the role's tasks/burnin.yml sets the variables the tasks read."""
    tasks = ROOT / "roles" / "gpuforge_bench" / "tasks"
    benchmark = (tasks / "main.yml").read_text(encoding="utf-8")
    playbook = (ROOT / "playbooks" / "burnin.yml").read_text(encoding="utf-8") + (tasks / "burnin.yml").read_text(
        encoding="utf-8"
    )
    for tag in burnin.TAGS.split(","):
        assert f"tags: [{tag}]" in benchmark + playbook, tag
    assert "gpuforge_bench_report_only" in (tasks / "ib_counters_after.yml").read_text(encoding="utf-8")
    assert "gpuforge_bench_fail_on_failed_runs" in (tasks / "summary.yml").read_text(encoding="utf-8")
    dcgm = ROOT / "playbooks" / "tasks" / "validate_dcgm.yml"
    if dcgm.is_file():  # written by the DCGM work (issue 17 item 8): the level it reads, the result burn-in writes
        text = dcgm.read_text(encoding="utf-8")
        assert "gpuforge_dcgm_level" in text and "gpuforge_dcgm_level:" in playbook
        assert "gpuforge_dcgm_result:" in text and "gpuforge_dcgm_result | to_nice_json" in playbook


def test_exports_read_the_rounds_and_the_trend(tmp_path):
    # Every round of gpu03 passed; only the trend over the rounds fails it (it got slower): the verdict
    # document must drain it all the same, and JUnit gets one case per node per round.
    from gpuforge.report import export

    faults = {n: {"slow": "gpu03"} for n in (4, 5, 6)}
    rc, document, _lines, _fake, run_dir = run_burnin(tmp_path, faults=faults, duration="1h")
    assert rc == 1
    verdicts = json.loads(export.export(run_dir, "verdicts"))
    by_node = {node["node"]: node for node in verdicts["nodes"]}
    assert by_node["gpu03"]["verdict"] == "FAIL"
    assert by_node["gpu03"]["actions"]["slurm"]["state"] == "DRAIN"
    assert any(reason["what"].startswith("burn-in trend") for reason in by_node["gpu03"]["reasons"])
    assert by_node["gpu01"]["verdict"] == "PASS"
    junit = export.export(run_dir, "junit")
    rounds = len(document["rounds"])
    assert junit.count('classname="gpu03" name="round ') == rounds
    assert 'testsuite name="burn-in rounds"' in junit


def test_a_round_summary_without_records_stops_the_burn_in_naming_the_file(tmp_path, monkeypatch, capsys):
    """A bench summary the CLI cannot read as records (one a gpuforge before them wrote) is not judged from its
    results: gpuforge burnin stops with the file and the command that writes it again."""
    clock = Clock()
    fake = FakeRound(clock, records=False)
    monkeypatch.setattr(burnin, "_default_runner", fake)
    monkeypatch.setattr(burnin.paths, "ARTIFACTS_DIR", tmp_path)
    monkeypatch.setattr("gpuforge.inventory_check.check_inventory", lambda *a, **k: None)
    monkeypatch.setattr("gpuforge.progress.make_view", lambda title, json_output=False: None)
    assert burnin.main(args_for(rounds_max=1)) == 1
    error = capsys.readouterr().err
    (path,) = tmp_path.glob("*/burnin/round-1/bench/*/summary.json")
    assert f"gpuforge burnin: {path}: no 'records': this file was written by an older gpuforge" in error
    assert error.rstrip().endswith("run `gpuforge burnin` again")
