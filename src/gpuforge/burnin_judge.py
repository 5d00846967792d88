"""Burn-in (``gpuforge burnin``): one record per node per round, and the per-node trend over the rounds.

Pure functions: the CLI in src/gpuforge/burnin.py reads the files, this module judges. Only the CLI uses it, so it
lives in the CLI's package, not in the collection's module_utils (docs/architecture.md, "module_utils by concern").

A round is one run of playbooks/burnin.yml: nccl-tests and ib_write_bw (playbooks/benchmark.yml, tags nccl,
ib_write_bw, with the InfiniBand port error counters read before and after them) and DCGM diagnostics level 3
(playbooks/tasks/validate_dcgm.yml). What a round leaves in ``<run_dir>/burnin/round-<n>/``:

* ``bench/<bench run>/summary.json`` - the benchmark summary (roles/gpuforge_bench/tasks/summary.yml), whose
  ``records`` the CLI reads (gpuforge_records.bench_summary_records) and passes here: per result a ``benchmark_run``
  record (``name``, ``group``, ``nodes``, ``observed`` value in its unit, Gb/s for both, ``run_failed``, ``reason``,
  ``rail`` the HCA of an ib_write_bw pair) and per node the attribution names slow an ``attribution`` record;
* ``counters/<host>.json`` - ``{node, before, after, max_growth, errors}``: perfquery PortCounters per port
  (``<hca>/<port>``) before and after the benchmarks (library/ib_port_counters.py) and the growth limits;
* ``dcgm/<host>.json`` - ``{node, level, status, detail, check}``: status pass / warn / fail / skipped (DCGM not
  installed in this checkout: playbooks/tasks/validate_dcgm.yml absent) / unknown;
* ``summary.json`` - the CLI's run summary of that round (rc, status, per-host stats, failed tasks).

How a node is judged over the rounds (``judge_trend``):

* **errors that grew**: any port error counter whose growth in a round is over its limit
  (``gpuforge_expected_ib_counter_growth_max``, 0 when not set: ibqueryerrors(8) "The default threshold is zero
  (0)", https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/man/ibqueryerrors.8.in.rst). Taking
  counter snapshots before and after the load and flagging ports whose errors build up is the burn-in procedure
  Imbue publishes (imbue-ai/cluster-health ib_burn/ib_burn.py docstring; acceptance-anchors review section 2, row 9).
* **a node that got slower**: the median of its last ``window`` rounds is below ``slowdown_fraction`` times the
  median of its first ``window`` rounds (``window`` = min(3, rounds // 2)) for its single-node NCCL busbw, or for
  every one of its ib_write_bw pairs on a rail (the record keeps the best pair per rail as the rail's rate).
  The default fraction 0.9 (a drop of more than 10 %) is the margin the benchmarks already use: nccl-tests fails a
  run below 0.9 x the stated bandwidth (``NCCL_TESTS_MIN_BW``, nccl-tests v2.19, acceptance-anchors review
  "nccl-tests output changed") and the ib_write_bw gate is 0.9 of line rate (roles/gpuforge_bench/defaults/main.yml,
  gpuforge_bench_ib_min_fraction). On real hardware the run-to-run variation of a healthy node is small (the review
  sets a goal of a coefficient of variation <= 2 %), so 10 % is several times the noise; medians of several rounds
  keep one noisy round from deciding. In the lab the rates are TCP through one shared host and vary far more:
  pass ``--slowdown-fraction 0.5`` there (the lab benchmarks use 0.5 of the median for the same reason).
  A rail is judged over all of the node's pairs so that a slow partner does not make a healthy node look slower:
  if the node itself got slower all of its pairs did; if only the pairs with one partner did, that partner is
  the one that got slower. With two nodes there is one pair per rail, so a slower node cannot be told from its
  partner: both are named.
* **a failed run in any round**: the node failed or was unreachable in that round's playbook run, a benchmark run
  that names it produced no result (``run_failed``), the round produced nothing for it, or DCGM failed.

A round of a node is WARN when the benchmark attribution named it slow in that round, DCGM warned, or a counter
is saturated (it cannot show growth); a node is WARN over the burn-in when any of its rounds is.
"""

from __future__ import annotations

import re

from gpuforge.paths import collection_import

# The perfquery parser is the collection's (library/ib_port_counters.py runs it on the nodes); this judge is the CLI's.
_perfquery = collection_import("plugins.module_utils.gpuforge_perfquery")
ERROR_COUNTERS = _perfquery.ERROR_COUNTERS
counter_growth = _perfquery.counter_growth

__all__ = [
    "DCGM_LEVEL",
    "DEFAULT_SLOWDOWN_FRACTION",
    "DEFAULT_WINDOW",
    "KIND",
    "SCHEMA_VERSION",
    "dcgm_result",
    "judge_trend",
    "node_round_record",
    "round_records",
]

KIND = "burnin_round"
SCHEMA_VERSION = 1
DCGM_LEVEL = 3
DEFAULT_SLOWDOWN_FRACTION = 0.9
DEFAULT_WINDOW = 3
DCGM_STATUSES = ("pass", "warn", "fail", "skipped", "unknown")
_RANK = {"PASS": 0, "UNKNOWN": 1, "WARN": 2, "FAIL": 3}

REMEDY_COUNTERS = (
    "Error counters grew under load: reseat or replace the cable/transceiver of the named port, check the switch "
    "side (ibqueryerrors, ibdiagnet), reset the counters (perfquery -R -C <hca> -P <port>) and burn in again; "
    "drain the node if they grow again"
)
REMEDY_SLOWER = (
    "The node got slower during the burn-in: look for thermal or power throttling (nvidia-smi -q -d "
    "PERFORMANCE, clock event reasons), a link that retrained to a lower rate (ibstat Rate, PCIe width) and "
    "DCGM diagnostics; drain it and burn in again after the fix"
)
REMEDY_FAILED = (
    "A run failed during the burn-in: read the round's runner output (burnin/round-<n>/runner/) and the failed "
    "task; a node that fails intermittently under load is not accepted - drain it and burn in again after the fix"
)
REMEDY_DCGM = (
    "DCGM diagnostics level 3 failed: rerun 'dcgmi diag -r 3' on the named GPU to confirm; a failure of the "
    "same board again is a hardware fault (reseat or RMA with the dcgmi JSON and nvidia-bug-report.sh)"
)


def _median(values):
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2.0


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _runs(bench_records, benchmark):
    """The benchmark_run records of one benchmark, in the order the summary holds them."""
    return [r for r in bench_records if r["kind"] == "benchmark_run" and r["benchmark"] == benchmark]


def _gbit(record):
    """A run's observed ``value`` in Gb/s, from its ``unit``: Gb/s as it is, GB/s (``GB/s busbw``) x 8; None for
    another unit or no value (the round keeps Gb/s, whatever unit the summary names)."""
    value = _number(record["observed"].get("value"))
    unit = str(record["observed"].get("unit") or "")
    if value is None:
        return None
    if unit == "Gb/s":
        return value
    if unit.split(" ", 1)[0] == "GB/s":
        return round(value * 8, 4)
    return None


def _nccl(bench_records, node):
    """{busbw_gbit_per_s: the node's single-node run or None, runs: {name: Gb/s} of every nccl run naming it}."""
    runs, single = {}, None
    for record in _runs(bench_records, "nccl"):
        if node not in record["nodes"]:
            continue
        runs[record["name"]] = _gbit(record)
        if record["nodes"] == [node] and record["group"] == "nccl_single":
            single = _gbit(record)
    return {"busbw_gbit_per_s": single, "runs": runs}


def _ib_write_bw(bench_records, node):
    """{hca: {gbit_per_s: best of the node's pairs on that rail, pairs: {pair name: Gb/s}}}."""
    rails: dict = {}
    for record in _runs(bench_records, "ib_write_bw"):
        if node not in record["nodes"]:
            continue
        hca = str(record["rail"] or "?")
        rail = rails.setdefault(hca, {"gbit_per_s": None, "pairs": {}})
        value = _gbit(record)
        rail["pairs"][record["name"]] = value
        if value is not None and (rail["gbit_per_s"] is None or value > rail["gbit_per_s"]):
            rail["gbit_per_s"] = value
    return {hca: rails[hca] for hca in sorted(rails)}


def _failed_results(bench_records, node):
    """'<benchmark> <name>: <reason>' of the runs naming the node that produced no result. A run over several
    nodes whose reason names some of them (`port 1 is not Active on gpu03`) is blamed on those only."""
    found = []
    for benchmark in ("ib_write_bw", "nccl"):
        for record in _runs(bench_records, benchmark):
            nodes = record["nodes"]
            if not record["run_failed"] or node not in nodes:
                continue
            reason = record["reason"] or "no result"
            named = [n for n in nodes if re.search(r"(?<![\w.-])" + re.escape(n) + r"(?![\w-])", reason)]
            if named and node not in named:
                continue
            found.append(f"{benchmark} {record['name']}: {reason}")
    return found


def _slow(bench_records, node):
    """The attributions that name the node as the slow node of ib_write_bw or nccl, by their first reason."""
    reasons = []
    for benchmark in ("ib_write_bw", "nccl"):
        for record in bench_records:
            if record["kind"] != "attribution" or record["benchmark"] != benchmark:
                continue
            if record["subject"] == "node" and record["name"] == node:
                first = (record["observed"]["reasons"] or ["named slow"])[0]
                reasons.append(f"{benchmark}: named slow ({first})")
    return reasons


def _counters(counters):
    """The record's counters block from a counters/<host>.json document (None: not read this round)."""
    if not isinstance(counters, dict) or not isinstance(counters.get("before"), dict):
        return {"read": False, "ports": {}, "over_limit": {}, "saturated": {}, "limits": {}, "errors": []}
    limits = {str(k): int(v) for k, v in (counters.get("max_growth") or {}).items()}
    before, after = counters.get("before") or {}, counters.get("after") or {}
    ports, over, saturated = {}, {}, {}
    for port in sorted(set(before) | set(after)):
        if not isinstance(before.get(port), dict) or not isinstance(after.get(port), dict):
            continue
        growth = counter_growth(before[port], after[port], ERROR_COUNTERS)
        ports[port] = {name: growth[name] for name in sorted(growth)}
        big = {n: g for n, g in growth.items() if isinstance(g, int) and g > limits.get(n, 0)}
        if big:
            over[port] = dict(sorted(big.items()))
        full = sorted(n for n, g in growth.items() if g == "saturated")
        if full:
            saturated[port] = full
    unpaired = sorted(set(before) ^ set(after))
    errors = [str(e) for e in counters.get("errors") or []]
    errors += [f"{port}: read only {'before' if port in before else 'after'} the benchmarks" for port in unpaired]
    return {
        "read": bool(after) or bool(before),
        "ports": ports,
        "over_limit": over,
        "saturated": saturated,
        "limits": dict(sorted(limits.items())),
        "errors": errors,
    }


def dcgm_result(document):
    """{status, level, detail} of a round's dcgm/<host>.json, in either shape written there: the one
    playbooks/tasks/validate_dcgm.yml writes ({host, level, ran, healthy, check: the dcgm_diag check}) or the one
    playbooks/burnin.yml writes when DCGM was skipped or its tasks failed ({node, level, status, detail}).
    None for anything else."""
    if not isinstance(document, dict):
        return None
    level = document.get("level")
    level = level if isinstance(level, int) and not isinstance(level, bool) else DCGM_LEVEL
    if "status" in document:
        return {"status": str(document["status"]), "level": level, "detail": str(document.get("detail") or "")}
    if "ran" not in document:
        return None
    if not document.get("ran"):
        return {"status": "skipped", "level": level, "detail": "dcgmi diag did not run (check mode)"}
    check = document.get("check") if isinstance(document.get("check"), dict) else {}
    # The dcgm_diag check's verdict (gpuforge_checks.VERDICTS) in the words of DCGM's own results (DCGM_STATUSES).
    status = {"PASS": "pass", "WARN": "warn", "FAIL": "fail"}.get(str(check.get("status")))
    if status is None:
        status = "pass" if document.get("healthy") else "fail"
    return {"status": status, "level": level, "detail": str(check.get("fault") or "")}


def _dcgm(document, round_ran):
    dcgm = dcgm_result(document)
    if dcgm is None:
        detail = "no DCGM result for this node this round" if round_ran else "the round did not run"
        return {"status": "unknown", "level": DCGM_LEVEL, "detail": detail}
    if dcgm["status"] not in DCGM_STATUSES:
        dcgm["status"] = "unknown"
    return dcgm


def _run(runner_summary, node, failed_results, has_data):
    """{rc, status, failed, reasons}: the node's part of the round's playbook run."""
    summary = runner_summary or {}
    rc = summary.get("rc")
    rc = rc if isinstance(rc, int) and not isinstance(rc, bool) else None
    stats = (summary.get("hosts") or {}).get(node) or {}
    reasons = []
    for task in summary.get("failed_tasks") or []:
        if isinstance(task, dict) and task.get("host") == node:
            reasons.append(f"{task.get('status', 'failed')}: {task.get('task')}: {str(task.get('msg') or '')[:300]}")
    if (stats.get("failed") or stats.get("unreachable")) and not reasons:
        reasons.append(f"failed={stats.get('failed', 0)} unreachable={stats.get('unreachable', 0)} in the round")
    others_failed = any(
        isinstance(t, dict) and t.get("host") not in (None, node) for t in summary.get("failed_tasks") or []
    )
    if rc not in (0, None) and not reasons and not others_failed and not stats:
        reasons.append(f"the round's playbook run failed ({summary.get('status')}, rc {rc})")
    if not has_data and not reasons:
        reasons.append("the round wrote no benchmark, counter or DCGM result for this node")
    reasons += failed_results
    return {"rc": rc, "status": str(summary.get("status") or "unknown"), "failed": bool(reasons), "reasons": reasons}


def node_round_record(
    node, round_no, started, ended, bench_records, counters, dcgm, runner_summary, run_id=None
) -> dict:
    """The ``burnin_round`` record of one node in one round (schemas/burnin-round.schema.json).

    bench_records: the benchmark_run and attribution records of the round's bench summary.json, as
    gpuforge_records.bench_summary_records reads them ([] when the benchmarks wrote none); counters: the node's
    counters/<host>.json (None when not read); dcgm: its dcgm/<host>.json (None when absent); runner_summary:
    the round's CLI summary.json (rc, status, hosts, failed_tasks).
    """
    nccl = _nccl(bench_records, node)
    rails = _ib_write_bw(bench_records, node)
    block = _counters(counters)
    has_data = bool(nccl["runs"] or rails or block["read"] or isinstance(dcgm, dict))
    run = _run(runner_summary, node, _failed_results(bench_records, node), has_data)
    dcgm_block = _dcgm(dcgm, has_data)
    fails, warns = [], []
    if run["failed"]:
        fails += ["failed run: " + r for r in run["reasons"]]
    for port, grew in block["over_limit"].items():
        fails.append(
            f"error counters grew on {port}: "
            + ", ".join(f"{n} +{g} (limit {block['limits'].get(n, 0)})" for n, g in grew.items())
        )
    if dcgm_block["status"] == "fail":
        fails.append(f"DCGM level {dcgm_block['level']} failed: {dcgm_block['detail']}")
    elif dcgm_block["status"] == "warn":
        warns.append(f"DCGM level {dcgm_block['level']} warned: {dcgm_block['detail']}")
    warns += _slow(bench_records, node)
    for port, names in block["saturated"].items():
        warns.append(f"{port}: {', '.join(names)} at the maximum (cannot show growth; reset with perfquery -R)")
    verdict = "FAIL" if fails else "WARN" if warns else "PASS"
    remedies = []
    if run["failed"]:
        remedies.append(REMEDY_FAILED)
    if block["over_limit"]:
        remedies.append(REMEDY_COUNTERS)
    if dcgm_block["status"] == "fail":
        remedies.append(REMEDY_DCGM)
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "node": node,
        "round": int(round_no),
        "started": started,
        "ended": ended,
        "nccl": nccl,
        "ib_write_bw": rails,
        "counters": block,
        "dcgm": dcgm_block,
        "run": run,
        "verdict": verdict,
        "reasons": fails + warns,
        "remedy": "; ".join(remedies),
        "caused_by": [],
    }


def round_records(
    nodes, round_no, started, ended, bench_records, counters_by_node, dcgm_by_node, runner_summary, run_id=None
) -> list:
    """One record per node (sorted by name) for one round; ``bench_records``: see node_round_record."""
    return [
        node_round_record(
            node,
            round_no,
            started,
            ended,
            bench_records or [],
            (counters_by_node or {}).get(node),
            (dcgm_by_node or {}).get(node),
            runner_summary,
            run_id,
        )
        for node in sorted(nodes)
    ]


def _metrics(record):
    """{metric name: value} of the node's own measurements in one round (what the slowdown compares)."""
    found = {}
    if record["nccl"]["busbw_gbit_per_s"] is not None:
        found["nccl single-node busbw"] = record["nccl"]["busbw_gbit_per_s"]
    for hca, rail in record["ib_write_bw"].items():
        if rail["gbit_per_s"] is not None:
            found[f"ib_write_bw {hca}"] = rail["gbit_per_s"]
    return found


def _trend(values, fraction, window):
    """(first median, last median, window) when the last rounds' median is below fraction x the first rounds';
    None otherwise or with fewer than two rounds."""
    size = min(window, len(values) // 2)
    if size < 1:
        return None
    first, last = _median(values[:size]), _median(values[-size:])
    if first and first > 0 and last < fraction * first:
        return first, last, size
    return None


def _pair_series(records, hca):
    series: dict = {}
    for record in records:
        for pair, value in ((record["ib_write_bw"].get(hca) or {}).get("pairs") or {}).items():
            if value is not None:
                series.setdefault(pair, []).append(value)
    return series


def _slowdowns(records, fraction, window):
    """([{metric, first_median, last_median, ratio, window, pairs?}], {metric: [value per round]}) of one node.

    NCCL: the node's single-node busbw. ib_write_bw per rail: the node got slower on the rail when every one of
    its pairs on that rail did (one partner's slow pairs are the partner's); the medians shown are those of its
    best pair per round."""
    series: dict = {}
    for record in records:
        for metric, value in _metrics(record).items():
            series.setdefault(metric, []).append(value)
    slowed = []
    for metric, values in sorted(series.items()):
        found = _trend(values, fraction, window)
        entry = None
        if metric.startswith("ib_write_bw "):
            pairs = _pair_series(records, metric[len("ib_write_bw ") :])
            judged = {pair: _trend(v, fraction, window) for pair, v in pairs.items() if len(v) >= 2}
            if judged and all(judged.values()):
                first, last, size = found or (
                    _median(values[: min(window, len(values) // 2)]),
                    _median(values[-min(window, len(values) // 2) :]),
                    min(window, len(values) // 2),
                )
                entry = {"metric": metric, "first_median": first, "last_median": last, "window": size}
                entry["pairs"] = sorted(judged)
        elif found:
            entry = {"metric": metric, "first_median": found[0], "last_median": found[1], "window": found[2]}
        if entry:
            first, last = entry["first_median"], entry["last_median"]
            entry.update(first_median=round(first, 3), last_median=round(last, 3), ratio=round(last / first, 3))
            slowed.append(entry)
    return slowed, {metric: series[metric] for metric in sorted(series)}


def judge_trend(records, slowdown_fraction=DEFAULT_SLOWDOWN_FRACTION, window=DEFAULT_WINDOW) -> dict:
    """{node: trend} over every ``burnin_round`` record: verdict PASS / WARN / FAIL with its reasons.

    trend: {node, verdict, rounds, failed_rounds, errors_grew: [{round, port, counter, growth, limit}],
    counter_totals: {port: {counter: total growth}}, slowed: [...], series: {metric: [values]}, dcgm: [status per
    round], reasons, remedy}.
    """
    if not 0 < float(slowdown_fraction) <= 1:
        raise ValueError(f"slowdown_fraction must be in (0, 1], got {slowdown_fraction!r}")
    if int(window) < 1:
        raise ValueError(f"window must be >= 1, got {window!r}")
    by_node: dict = {}
    for record in records:
        if record.get("kind") == KIND:
            by_node.setdefault(record["node"], []).append(record)
    trends = {}
    for node in sorted(by_node):
        rounds = sorted(by_node[node], key=lambda r: r["round"])
        grew, totals = [], {}
        for record in rounds:
            block = record["counters"]
            for port, counters in block["ports"].items():
                for name, growth in counters.items():
                    if isinstance(growth, int):
                        port_totals = totals.setdefault(port, {})
                        port_totals[name] = port_totals.get(name, 0) + growth
            for port, over in block["over_limit"].items():
                for name, growth in over.items():
                    grew.append(
                        {
                            "round": record["round"],
                            "port": port,
                            "counter": name,
                            "growth": growth,
                            "limit": block["limits"].get(name, 0),
                        }
                    )
        failed_rounds = [r["round"] for r in rounds if r["run"]["failed"]]
        dcgm_failed = [r["round"] for r in rounds if r["dcgm"]["status"] == "fail"]
        slowed, series = _slowdowns(rounds, float(slowdown_fraction), int(window))
        reasons, remedies = [], []
        if grew:
            reasons.append(
                "errors grew: "
                + "; ".join(f"round {g['round']} {g['port']} {g['counter']} +{g['growth']}" for g in grew[:6])
                + (f" (+{len(grew) - 6} more)" if len(grew) > 6 else "")
            )
            remedies.append(REMEDY_COUNTERS)
        if slowed:
            reasons.append(
                "got slower: "
                + "; ".join(
                    f"{s['metric']} {s['first_median']} -> {s['last_median']} Gb/s ({s['ratio']:.0%} < "
                    f"{float(slowdown_fraction):.0%} of the first {s['window']} round(s))"
                    for s in slowed
                )
            )
            remedies.append(REMEDY_SLOWER)
        if failed_rounds:
            reasons.append(f"failed run in round(s) {', '.join(str(n) for n in failed_rounds)}")
            remedies.append(REMEDY_FAILED)
        if dcgm_failed:
            reasons.append(f"DCGM level {DCGM_LEVEL} failed in round(s) {', '.join(str(n) for n in dcgm_failed)}")
            remedies.append(REMEDY_DCGM)
        warned = [r["round"] for r in rounds if r["verdict"] == "WARN"]
        if reasons:
            verdict = "FAIL"
        elif warned:
            verdict = "WARN"
            reasons.append(f"warnings in round(s) {', '.join(str(n) for n in warned)} (see the round records)")
        else:
            verdict = "PASS"
        if len(rounds) < 2:
            reasons.append("one round only: the slowdown trend is not judged")
        trends[node] = {
            "node": node,
            "verdict": verdict,
            "rounds": len(rounds),
            "failed_rounds": failed_rounds,
            "errors_grew": grew,
            "counter_totals": {port: dict(sorted(c.items())) for port, c in sorted(totals.items())},
            "slowed": slowed,
            "series": series,
            "dcgm": [r["dcgm"]["status"] for r in rounds],
            "reasons": reasons,
            "remedy": "; ".join(remedies),
        }
    return trends
