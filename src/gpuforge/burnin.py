"""`gpuforge burnin --duration 2h`: repeat benchmark rounds for a while and judge each node's trend.

Each round runs playbooks/burnin.yml once (nccl-tests, ib_write_bw, the InfiniBand port error counters before and
after them, DCGM diagnostics level 3) through the same runner as `gpuforge bench`, into
``<run_dir>/burnin/round-<n>/`` (its summary.json, runner/ output, bench/<id>/summary.json, counters/, dcgm/).
Rounds start while the duration is not spent (the last round may end after it; at least one round runs) and
stop early at --rounds-max. Per round a line per round with every node's verdict; at the end the per-node
trend table (src/gpuforge/burnin_judge.py judges). Writes ``<run_dir>/burnin/summary.json`` (the
``burnin_round`` records, schemas/burnin-round.schema.json, and the trend) and ``<run_dir>/summary.json`` (the
versioned run summary, one stage per round). Exit code 1 when a node fails the burn-in, else 0. docs/burnin.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from gpuforge import paths

PLAYBOOK = "burnin.yml"
# benchmark.yml's tags for the round: the two benchmarks, the counter reads around them, and burnin.yml's play.
TAGS = "nccl,ib_write_bw,ib_counters,burnin"
# The round judges the counters and the failed runs itself: the benchmark play must not stop a node first.
ROUND_VARS = ["gpuforge_bench_report_only=true", "gpuforge_bench_fail_on_failed_runs=false"]
SCHEMA_VERSION = 1

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
DURATION_HELP = "a number with a unit: 90s, 30m, 2h, 1h30m, 1d (s, m, h, d)"


class DurationError(ValueError):
    """A --duration this command cannot read."""


def parse_duration(text: str) -> float:
    """Seconds of '2h', '30m', '90s', '1h30m', '1.5h', '1d'; DurationError (naming the accepted forms) else."""
    value = str(text or "").strip().lower().replace(" ", "")
    if not value:
        raise DurationError(f"empty duration: use {DURATION_HELP}")
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        raise DurationError(f"duration {text!r} has no unit: use {DURATION_HELP}")
    parts = _PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise DurationError(f"cannot read duration {text!r}: use {DURATION_HELP}")
    units = [u for _, u in parts]
    if len(set(units)) != len(units) or units != sorted(units, key=lambda u: -_UNITS[u]):
        raise DurationError(f"duration {text!r}: give each unit once, largest first (1h30m)")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise DurationError(f"duration {text!r} is zero: a burn-in needs time to run")
    return seconds


def _duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fraction_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be in (0, 1], e.g. 0.9")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 1 or more")
    return value


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def add_parser(commands, default_inventory) -> argparse.ArgumentParser:
    """The `burnin` subcommand (registered by gpuforge.cli.build_parser)."""
    default_fraction = _burnin_module().DEFAULT_SLOWDOWN_FRACTION
    parser = commands.add_parser(
        "burnin",
        help="repeat NCCL, ib_write_bw and DCGM level 3 for a duration; judge each node's trend (docs/burnin.md)",
    )
    parser.add_argument("--duration", required=True, type=_duration_arg, help=f"how long to run: {DURATION_HELP}")
    parser.add_argument("-i", "--inventory", default=str(default_inventory), help="inventory (default: the lab's)")
    parser.add_argument("--limit", help="host pattern, as ansible-playbook --limit")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE|@FILE")
    parser.add_argument("--rounds-max", type=_positive_int, help="stop after this many rounds even if time is left")
    parser.add_argument(
        "--slowdown-fraction",
        type=_fraction_arg,
        default=default_fraction,
        help="a node whose last rounds' median is below this fraction of its first rounds' median got slower "
        f"(default {default_fraction}; 0.5 in the lab, whose TCP rates vary more)",
    )
    parser.add_argument("--json", action="store_true", help="print only burnin/summary.json on stdout")
    parser.set_defaults(handler=main)
    return parser


def _burnin_module():
    from gpuforge import burnin_judge

    return burnin_judge


def _records_module():
    return paths.collection_import("plugins.module_utils.gpuforge_records")


# The command that writes a round's bench summary.json again.
BENCH_RERUN = "run `gpuforge burnin` again"


def _bench_records(bench, bench_path, run_id) -> list:
    """The benchmark_run and attribution records of the round's bench summary.json, as summary.yml wrote them
    (gpuforge_records.bench_summary_records: a file without them, or unreadable, is refused naming it); [] when the
    round wrote none."""
    if bench_path is None:
        return []
    return _records_module().bench_summary_records(bench, run_id, str(bench_path), BENCH_RERUN)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _per_node(folder: Path) -> dict:
    """{host: document} of folder/<host>.json."""
    found = {}
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            document = _read_json(path)
            if isinstance(document, dict):
                found[str(document.get("node") or document.get("host") or path.stem)] = document
    return found


def _bench_summary(round_dir: Path, bench_id: str):
    """The round's bench summary.json: bench/<bench_id>/ (the id the round passed), else the newest there."""
    exact = round_dir / "bench" / bench_id / "summary.json"
    if exact.is_file():
        return _read_json(exact), exact
    candidates = sorted((round_dir / "bench").glob("*/summary.json"), key=lambda p: p.stat().st_mtime)
    return (_read_json(candidates[-1]), candidates[-1]) if candidates else (None, None)


def _round_nodes(summary: dict, bench, counters: dict, dcgm: dict) -> set:
    nodes = set(counters) | set(dcgm)
    if isinstance(bench, dict):
        nodes |= {str(n) for n in bench.get("nodes") or []}
    for host, stats in (summary.get("hosts") or {}).items():
        if isinstance(stats, dict) and (stats.get("failed") or stats.get("unreachable")):
            nodes.add(str(host))
    for task in summary.get("failed_tasks") or []:
        if isinstance(task, dict) and task.get("host") and task.get("host") != "localhost":
            nodes.add(str(task["host"]))
    nodes.discard("localhost")
    return nodes


def _short(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _counter_total(record) -> int:
    return sum(g for port in record["counters"]["ports"].values() for g in port.values() if isinstance(g, int))


def round_line(number: int, started: float, ended: float, summary: dict, records: list) -> str:
    """One line: the round, its time and rc, and each node's verdict (with its first reason when not PASS)."""
    parts = []
    for record in records:
        text = f"{record['node']} {record['verdict']}"
        extra = [f"ctr+{_counter_total(record)}"] if record["counters"]["read"] else []
        if record["nccl"]["busbw_gbit_per_s"] is not None:
            extra.append(f"nccl {record['nccl']['busbw_gbit_per_s']:g}")
        extra.append(f"dcgm {record['dcgm']['status']}")
        text += f" [{' '.join(extra)}]"
        if record["verdict"] != "PASS" and record["reasons"]:
            text += f" ({_short(record['reasons'][0], 70)})"
        parts.append(text)
    head = f"round {number}: {format_duration(ended - started)} rc {summary.get('rc')}"
    return head + (": " + "; ".join(parts) if parts else ": no node results")


def trend_table(trend: dict) -> list:
    """The per-node trend table, as lines: fixed columns, then the counter deltas over all rounds and the reasons."""
    header = f"{'NODE':<12} {'VERDICT':<7} {'ROUNDS':>6} {'FAILED':<8} {'NCCL first->last':<18} {'DCGM':<14} "
    lines = [header + "COUNTER DELTAS (all rounds) | REASONS"]
    for node, entry in trend.items():
        nccl = entry["series"].get("nccl single-node busbw") or []
        nccl_text = f"{nccl[0]:g} -> {nccl[-1]:g}" if nccl else "-"
        grown = [
            f"{port} {name} +{total}"
            for port, counters in entry["counter_totals"].items()
            for name, total in counters.items()
            if total
        ]
        counters = ", ".join(grown) or ("0" if entry["counter_totals"] else "not read")
        failed = ",".join(str(n) for n in entry["failed_rounds"]) or "-"
        dcgm = "/".join(sorted(set(entry["dcgm"])))
        reasons = "; ".join(entry["reasons"]) or "-"
        lines.append(
            f"{node:<12} {entry['verdict']:<7} {entry['rounds']:>6} {failed:<8} {nccl_text:<18} {dcgm:<14} "
            f"{counters} | {reasons}"
        )
    return lines


def _default_runner(request, round_dir, view):
    from gpuforge.runner import run_playbook

    return run_playbook(request, round_dir, view)


def run(
    args: argparse.Namespace,
    runner=None,
    clock=time.time,
    view_factory=None,
    artifacts_root: Path | None = None,
    log=print,
) -> int:
    """The burn-in loop; returns the exit code. runner(request, round_dir, view) -> the round's run summary
    (gpuforge.runner.run_playbook by default; tests pass a fake that writes the round's files)."""
    from gpuforge.runner import RunRequest, new_run_id, stage_entry, write_summary

    burnin = _burnin_module()
    runner = runner or _default_runner
    view_factory = view_factory or (lambda title: None)
    run_dir = Path(artifacts_root or paths.ARTIFACTS_DIR) / new_run_id()
    burnin_dir = run_dir / "burnin"
    burnin_dir.mkdir(parents=True, exist_ok=True)
    run_id = run_dir.name
    out = (lambda line: print(line, file=sys.stderr)) if args.json else log
    start = clock()
    deadline = start + args.duration
    rounds, records, stages, nodes = [], [], [], set()
    failed_tasks, host_totals = [], {}
    stopped = "duration"
    out(
        f"burnin {run_id}: {format_duration(args.duration)}"
        + (f", at most {args.rounds_max} rounds" if args.rounds_max else "")
        + f"; rounds in {burnin_dir}"
    )
    while True:
        if rounds and clock() >= deadline:
            stopped = "duration"
            break
        if args.rounds_max and len(rounds) >= args.rounds_max:
            stopped = "rounds-max"
            break
        number = len(rounds) + 1
        round_dir = burnin_dir / f"round-{number}"
        bench_id = f"{run_id}-round-{number}"
        request = RunRequest(
            command=f"burnin round {number}",
            playbook=PLAYBOOK,
            inventory=Path(args.inventory).resolve(),
            limit=args.limit,
            tags=TAGS,
            extra_vars=[
                *args.extra_vars,
                *ROUND_VARS,
                f"gpuforge_burnin_round_dir={round_dir}",
                f"gpuforge_bench_run_id={bench_id}",
            ],
        )
        started = clock()
        interrupted = False
        try:
            summary = runner(request, round_dir, view_factory(f"burnin round {number}"))
        except KeyboardInterrupt:
            interrupted = True
            summary = {"rc": 130, "status": "interrupted", "hosts": {}, "failed_tasks": []}
        ended = clock()
        bench, bench_path = _bench_summary(round_dir, bench_id)
        counters = _per_node(round_dir / "counters")
        dcgm = _per_node(round_dir / "dcgm")
        nodes |= _round_nodes(summary, bench, counters, dcgm)
        bench_records = _bench_records(bench, bench_path, run_id)
        found = burnin.round_records(
            nodes, number, _iso(started), _iso(ended), bench_records, counters, dcgm, summary, run_id
        )
        records += found
        for task in summary.get("failed_tasks") or []:
            failed_tasks.append(dict(task, round=number))
        for host, stats in (summary.get("hosts") or {}).items():
            totals = host_totals.setdefault(host, {})
            for key, value in (stats or {}).items():
                if isinstance(value, int):
                    totals[key] = totals.get(key, 0) + value
        rounds.append(
            {
                "round": number,
                "started": _iso(started),
                "ended": _iso(ended),
                "rc": summary.get("rc"),
                "status": summary.get("status"),
                "dir": str(round_dir),
                "bench_summary": str(bench_path) if bench_path else None,
                "verdicts": {r["node"]: r["verdict"] for r in found},
            }
        )
        stages.append(
            stage_entry(
                run_dir.name,
                f"round {number}",
                "ok" if summary.get("rc") == 0 else "failed",
                summary.get("rc"),
                ", ".join(f"{r['node']} {r['verdict']}" for r in found),
            )
        )
        out(round_line(number, started, ended, summary, found))
        if interrupted:
            stopped = "interrupted"
            break
    finished = clock()
    trend = burnin.judge_trend(records, slowdown_fraction=args.slowdown_fraction, window=burnin.DEFAULT_WINDOW)
    failed_nodes = [node for node, entry in trend.items() if entry["verdict"] == "FAIL"]
    verdict = (
        "FAIL"
        if failed_nodes or not trend
        else "WARN"
        if any(e["verdict"] == "WARN" for e in trend.values())
        else "PASS"
    )
    rc = 130 if stopped == "interrupted" else (1 if verdict == "FAIL" else 0)
    document = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "started": _iso(start),
        "ended": _iso(finished),
        "duration_s": round(finished - start, 3),
        "requested_duration_s": args.duration,
        "rounds_max": args.rounds_max,
        "stopped": stopped,
        "parameters": {
            "slowdown_fraction": args.slowdown_fraction,
            "window": burnin.DEFAULT_WINDOW,
            "dcgm_level": burnin.DCGM_LEVEL,
            "tags": TAGS,
            "playbook": f"playbooks/{PLAYBOOK}",
        },
        "rounds": rounds,
        "verdict": verdict,
        "failed_nodes": failed_nodes,
        "trend": trend,
        "records": records,
    }
    (burnin_dir / "summary.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_summary(
        run_dir,
        {
            "schema_version": 1,
            "run_id": run_id,
            "command": "burnin",
            "playbook": f"playbooks/{PLAYBOOK}",
            "inventory": str(Path(args.inventory).resolve()),
            "limit": args.limit,
            "tags": TAGS,
            "check": False,
            "rc": rc,
            "status": {"PASS": "successful", "WARN": "successful", "FAIL": "failed"}[verdict]
            if stopped != "interrupted"
            else "interrupted",
            "started": _iso(start),
            "finished": _iso(finished),
            "duration_s": round(finished - start, 3),
            "hosts": host_totals,
            "failed_tasks": failed_tasks,
            "stages": stages,
            "artifacts": {
                "run_dir": str(run_dir),
                "burnin": str(burnin_dir / "summary.json"),
                "rounds": [r["dir"] for r in rounds],
            },
        },
    )
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        log(f"burnin: {len(rounds)} round(s) in {format_duration(finished - start)} (stopped: {stopped})")
        for line in trend_table(trend):
            log(line)
        if not trend:
            log("burnin: no node produced a result (see the rounds' runner output)")
        log(f"burnin: {verdict}" + (f" - failed: {', '.join(failed_nodes)}" if failed_nodes else ""))
        log(f"  artifacts: {run_dir}")
    return rc


def main(args: argparse.Namespace) -> int:
    """Handler of `gpuforge burnin`: check the inventory (nothing runs when it is wrong), then the loop."""
    from gpuforge.inventory_check import InventoryError, check_inventory
    from gpuforge.progress import make_view

    inventory = Path(args.inventory).resolve()
    try:
        check_inventory(inventory, args.limit, paths.PROJECT_ROOT / "ansible.cfg")
    except InventoryError as exc:
        print(f"gpuforge burnin: {exc}", file=sys.stderr)
        return 1
    try:
        return run(args, view_factory=lambda title: make_view(title, json_output=args.json))
    except _records_module().RecordError as exc:  # a round's file this gpuforge cannot read: stop, naming it
        print(f"gpuforge burnin: {exc}", file=sys.stderr)
        return 1
