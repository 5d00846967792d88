"""fio and p2pBandwidthLatencyTest results -> the gates of ``bench/<run>/summary.json``.

The fio_benchmark and p2p_bandwidth modules judge their own runs (gpuforge_fio.judge_fio against the site's
thresholds, gpuforge_p2p.judge_p2p against the per-SKU references); what a node's tasks registered becomes
summary.json results here, in the vocabulary of the other benchmarks' results (gpuforge_bench_attribution), so
that summary.yml writes benchmark_run records of them (gpuforge_bench_records). Each result names its value's unit:

    {"name": "fio-gpu01-scratch:/var/tmp-seq_read", "group": "scratch:/var/tmp", "nodes": ["gpu01"],
     "target": "scratch:/var/tmp", "job": "seq_read", "value": 512.3, "unit": "MiB/s", "threshold": 400,
     "op": ">=", "threshold_source": "...", "mib_per_second": 512.3, "iops": 512.3, "clat_p99_us": 2.1,
     "module_verdict": "PASS", "verdict": "PASS", "run_failed": false, "reason": "...", "remedy": ""}

* fio: one result per node x target x job; the value is the job's gated measure, MiB/s for the sequential
  jobs and IOPS for the random ones (gpuforge_fio's floors), the threshold the site's floor for that target
  (``gpuforge_bench_fio_thresholds[<label>]``, else ``["default"]``) where set. A target that is not mounted
  on the node is one UNKNOWN result (not measured), a run that failed (missing directory, fio absent, timeout,
  unreadable output) one FAIL result with ``run_failed`` per target.
* p2p: one result per node; the value is the lowest bidirectional P2P=Enabled bandwidth over the peer pairs
  (GB/s), the threshold the site's ``min_bidirectional_gbyte_per_s`` where set; the verdict is the module's, whose
  checks also
  hold each pair's enabled/disabled ratio against the SKU reference. A node without the binary is UNKNOWN
  with the module's reason.

Verdicts (gpuforge_checks.VERDICTS, as gpuforge_bench_attribution judges the other benchmarks): ``PASS``; ``FAIL``
for a bandwidth, IOPS, latency or ratio gate missed, for p2p's fewer GPUs than expected or peer access off, and for
a run that produced no result for it (``run_failed`` true: the play fails at the end, roles/gpuforge_bench/tasks/
summary.yml); ``UNKNOWN`` for measured with no threshold set, or not run and not a failure (the reason says which).
Stdlib only, Python 3.8.
"""

from __future__ import annotations

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import (
    FAIL,
    PASS,
    STATUS_RANK,
    UNKNOWN,
    WARN,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_fio import JOBS, SITE_SOURCE, thresholds_for
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_number

__all__ = ["FIO_SOURCE", "P2P_SOURCE", "fio_results", "judged_block", "p2p_results"]

FIO_SOURCE = "site threshold gpuforge_bench_fio_thresholds"
P2P_SOURCE = (
    "per-SKU P2P=Enabled/P2P=Disabled reference ratio (module_utils/gpuforge_p2p.py REFERENCES) and the site's "
    "gpuforge_bench_p2p_expect"
)
# Verdicts worst first, as judged_block counts them; a failed run (run_failed) is the worst FAIL.
ORDER = (FAIL, WARN, UNKNOWN, PASS)


def _label_name(node, label, job=None):
    return f"fio-{node}-{label}" + (f"-{job}" if job else "")


def _thresholds_for(thresholds, label, kind=None):
    """The thresholds of one target, the site key they came from (its label, else ``default``; None when the site
    sets none) and each threshold's source: the site's over gpuforge's floors for the storage kind
    (gpuforge_fio.thresholds_for, as fio_benchmark judges with them)."""
    thresholds = thresholds if isinstance(thresholds, dict) else {}
    site, key = {}, None
    if isinstance(thresholds.get(label), dict):
        site, key = thresholds[label], label
    elif isinstance(thresholds.get("default"), dict):
        site, key = thresholds["default"], "default"
    expect, sources = thresholds_for(site, kind)
    return expect, key, sources


def _measure(job):
    """(result key of the gated value, unit, floor key, ceiling key) of a fio job (gpuforge_fio's EXPECT keys)."""
    kind = JOBS[job][1] if job in JOBS else "seq"
    if kind == "seq":
        return "mib_per_second", "MiB/s", f"{job}_mib_per_s", None
    return "iops", "IOPS", f"{job}_iops", f"{job}_p99_us"


def _fio_target(node, item, base):
    """The results of one target's skipped or failed run (no job ran)."""
    entry = dict(base, name=_label_name(node, base["target"]), value=None, unit="MiB/s", job=None)
    entry["threshold_source"] = f"{FIO_SOURCE}: not judged, no job ran"
    entry.update(mib_per_second=None, iops=None, clat_p99_us=None, module_verdict=None)
    if item.get("skipped"):
        path = base["directory"]
        reason = f"{path} is not mounted on {node}: not measured"
        return [dict(entry, verdict=UNKNOWN, run_failed=False, reason=reason, remedy="")]
    message = str(item.get("msg") or "fio produced no result")
    return [dict(entry, verdict=FAIL, run_failed=True, reason=message, remedy=message)]


def _fio_job(node, item, result, base, expect, source):
    job = str(result.get("job") or "")
    value_key, unit, floor_key, ceiling_key = _measure(job)
    floor = to_number(expect.get(floor_key))
    ceiling = to_number(expect.get(ceiling_key)) if ceiling_key else None
    value = result.get(value_key)
    parsed = {}
    for candidate in (item.get("fio") or {}).get("jobs") or []:
        if isinstance(candidate, dict) and candidate.get("name") == job:
            parsed = candidate
    measured = parsed.get("measured") or {}
    checks = [c for c in item.get("checks") or [] if c.get("name") in (f"fio_{job}", f"fio_{job}_p99")]
    bad = [c for c in checks if c.get("status") != PASS]
    entry = dict(
        base,
        name=str(result.get("name") or _label_name(node, base["target"], job)),
        job=job,
        value=value,
        unit=unit,
        threshold=floor,
        mib_per_second=result.get("mib_per_second"),
        iops=result.get("iops"),
        clat_p99_us=result.get("clat_p99_us"),
        module_verdict=result.get("verdict") if result.get("verdict") in STATUS_RANK else None,
    )
    if ceiling is not None:
        entry["clat_p99_us_max"] = ceiling
    if floor is not None or ceiling is not None:
        used = [key for key in (floor_key, ceiling_key) if key and expect.get(key) is not None]
        named = [
            f"{source}[{entry['threshold_key']!r}]"
            if base["threshold_sources"].get(key) == SITE_SOURCE
            else base["threshold_sources"].get(key, source)
            for key in used
        ]
        entry["threshold_source"] = "; ".join(dict.fromkeys(named))
    else:
        entry["threshold_source"] = f"{source}: none for {base['target']} (reported, not judged)"
    remedy = "; ".join(str(c.get("remedy") or "") for c in bad if c.get("remedy"))
    if parsed.get("error") or not measured.get("io_bytes") or value is None:
        reason = "; ".join(f"{c['name']}: {c.get('observed')} (expected {c.get('expected')})" for c in bad)
        # No result: the value is none (what fio printed for the job stays in mib_per_second and iops).
        reason = reason or f"{job} measured nothing"
        return dict(entry, value=None, verdict=FAIL, run_failed=True, reason=reason, remedy=remedy)
    failed_rc = [c for c in item.get("checks") or [] if c.get("name") == "fio_rc" and c.get("status") != PASS]
    rc_check = failed_rc[0] if failed_rc else None
    if rc_check is not None:
        reason = f"fio exited with rc {rc_check.get('observed')}: {rc_check.get('remedy') or 'see the notices'}"
        return dict(entry, verdict=FAIL, run_failed=True, reason=reason, remedy=str(rc_check.get("remedy") or ""))
    parts = []
    if floor is not None:
        parts.append(f"{value} {unit} {'reaches' if value >= floor else 'is below'} {floor:g} {unit}")
    if ceiling is not None:
        p99 = result.get("clat_p99_us")
        within = p99 is not None and p99 <= ceiling
        parts.append(f"p99 completion latency {p99} us {'within' if within else 'above'} {ceiling:g} us")
    if not checks:
        label = base["target"]
        return dict(
            entry,
            verdict=UNKNOWN,
            run_failed=False,
            reason=f"{value} {unit}; no threshold for {label} (gpuforge_bench_fio_thresholds): reported, not judged",
            remedy="",
        )
    where = f" ({entry['threshold_source']})"
    verdict = FAIL if bad else PASS
    return dict(entry, verdict=verdict, run_failed=False, reason="; ".join(parts) + where, remedy=remedy)


def fio_results(loop_results, node, thresholds=None) -> list:
    """One node's registered fio loop (``register`` of playbooks/tasks/bench_fio.yml's fio task, its
    ``results``: one item per target, ``item`` = {kind, label, path}) -> summary.json results."""
    found = []
    for item in loop_results or []:
        if not isinstance(item, dict) or not isinstance(item.get("item"), dict):
            continue
        target = item["item"]
        label = str(target.get("label") or target.get("path") or "")
        expect, key, sources = _thresholds_for(thresholds, label, target.get("kind"))
        if isinstance(item.get("thresholds"), dict):  # what the module judged the jobs against
            expect, sources = item["thresholds"], item.get("threshold_sources") or sources
        base = {
            "group": label,
            "nodes": [str(node)],
            "target": label,
            "directory": str(target.get("path") or ""),
            "threshold": None,
            "op": ">=",
            "threshold_key": key,
            "threshold_sources": sources,
        }
        if not isinstance(item.get("results"), list):
            if item.get("skipped") or item.get("msg") or item.get("failed"):
                found += _fio_target(str(node), item, base)
            continue  # check mode: nothing ran, nothing to report
        for result in item["results"]:
            if isinstance(result, dict):
                found.append(_fio_job(str(node), item, result, base, expect, FIO_SOURCE))
    for entry in found:
        entry.pop("threshold_key", None)
        entry.pop("threshold_sources", None)
    return found


def _observed_text(check):
    observed = check.get("observed")
    if isinstance(observed, dict) and isinstance(observed.get("worst"), dict):
        worst = observed["worst"]
        return (
            f"worst pair {worst.get('pair')} {worst.get('ratio')}x "
            f"({worst.get('enabled_gbyte_per_s')} / {worst.get('disabled_gbyte_per_s')} GB/s)"
        )
    if isinstance(observed, dict) and isinstance(observed.get("lowest"), dict):
        lowest = observed["lowest"]
        return f"lowest pair {lowest.get('pair')} {lowest.get('enabled_gbyte_per_s')} GB/s"
    return str(observed)


def p2p_results(registered, node, expect=None) -> list:
    """One node's registered p2p_bandwidth result (playbooks/tasks/bench_p2p.yml) -> its summary.json result."""
    registered = registered if isinstance(registered, dict) else {}
    expect = expect if isinstance(expect, dict) else {}
    summaries = [r for r in registered.get("results") or [] if isinstance(r, dict)]
    summary = summaries[0] if summaries else {}
    if not summary and not registered:
        return []
    floor = to_number(expect.get("min_bidirectional_gbyte_per_s"))
    entry = {
        "name": str(summary.get("name") or f"p2p-{node}"),
        "group": "p2p",
        "nodes": [str(node)],
        "value": summary.get("bi_min_enabled_gbyte_per_s"),
        "unit": "GB/s",
        "threshold": floor,
        "op": ">=",
        "threshold_source": P2P_SOURCE,
        "gpus": summary.get("gpus"),
        "sku": summary.get("sku"),
        "uni_min_ratio": summary.get("uni_min_ratio"),
        "bi_min_ratio": summary.get("bi_min_ratio"),
        "module_verdict": registered.get("verdict") if registered.get("verdict") in STATUS_RANK else None,
    }
    if (summary.get("verdict") == UNKNOWN and not summary.get("run_failed")) or (
        registered.get("skipped") and not registered.get("checks")
    ):
        reason = str(summary.get("reason") or registered.get("skip_reason") or registered.get("msg") or "not run")
        return [dict(entry, verdict=UNKNOWN, run_failed=False, reason=reason, remedy="")]
    checks = [c for c in registered.get("checks") or [] if isinstance(c, dict)]
    if summary.get("run_failed") or not summary:
        message = str(registered.get("msg") or "p2pBandwidthLatencyTest produced no result")
        return [dict(entry, verdict=FAIL, run_failed=True, reason=message, remedy=message)]
    bad = [c for c in checks if c.get("status") != PASS]
    reason = "; ".join(
        f"{c['name']} {c.get('status')}: {_observed_text(c)} (expected {c.get('expected')})" for c in (bad or checks)
    )
    remedy = "; ".join(sorted({str(c.get("remedy")) for c in bad if c.get("remedy")}))
    run_failed = any(c["name"] == "p2p_output" for c in bad)
    if not checks:
        verdict = UNKNOWN
        reason = "no peer pair to judge (no bandwidth matrices) and no site threshold"
    else:
        verdict = FAIL if bad else PASS
    return [dict(entry, verdict=verdict, run_failed=run_failed, reason=reason, remedy=remedy)]


def judged_block(results, baseline="site", what="results") -> dict:
    """summary.json's block of already judged results: {baseline, results, slow_nodes, slow_links, summary}.

    Nothing is attributed across nodes (each result is one node's own), so ``slow_nodes`` and ``slow_links``
    are empty; ``summary`` counts the verdicts (and the failed runs among the FAILs) and quotes the worst result."""
    results = [dict(r) for r in results or [] if isinstance(r, dict)]
    counts = {}
    for result in results:
        counts[result.get("verdict")] = counts.get(result.get("verdict"), 0) + 1
    parts = [f"{counts[verdict]} {verdict}" for verdict in ORDER if counts.get(verdict)]
    failed_runs = sum(1 for r in results if r.get("run_failed"))
    if failed_runs:
        parts[0] += f" ({failed_runs} run{'s' if failed_runs != 1 else ''} failed)"
    worst = sorted(
        (r for r in results if r.get("verdict") != PASS),
        key=lambda r: (ORDER.index(r["verdict"]) if r.get("verdict") in ORDER else 0, not r.get("run_failed")),
    )
    summary = f"{len(results)} {what}: " + ", ".join(parts) if results else f"no {what}"
    if worst:
        summary += f" (first: {worst[0].get('name')}: {worst[0].get('reason')})"
    return {"baseline": baseline, "results": results, "slow_nodes": [], "slow_links": [], "summary": summary}
