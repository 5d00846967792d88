"""The report's charts, from benchmark_run records; every chart draws the gates' thresholds.

* NCCL: bus bandwidth per message size (``observed.series``) of the multi-node runs (and of the single-node
  runs while there are few), in Gb/s (busbw GB/s x 8, the unit of the gate), each run's threshold a dashed line;
* per-node gates (NCCL single node, ResNet-50 per node, ...): one dot per node, lowest first, threshold line;
* ResNet-50: images/s against GPU count of the sweep, the per-point threshold and ideal linear scaling;
* ib_write_bw per rail: a bar per pair with its threshold and line rate, or, beyond MAX_PAIR_BARS pairs, one dot
  per node (its slowest pair on that rail);
* fio per target (file system): the sequential jobs in MiB/s and the random jobs in IOPS (each job's gated
  unit, gpuforge_fio's floors), a bar per node and job with the site's threshold where set, or, beyond
  MAX_PAIR_BARS bars, one dot chart per job (a dot per node, the threshold a line).
"""

from __future__ import annotations

import re

from gpuforge.report import svg

NCCL_CHART_ID = "chart-nccl-busbw"
RESNET_CHART_ID = "chart-resnet50-scaling"
IB_CHART_ID = "chart-ib-write-bw"
MAX_CURVES = 8
MAX_PAIR_BARS = 48
GBIT_PER_GBYTE = 8  # the gates hold busbw in Gb/s (playbooks/tasks/bench_nccl.yml: busbw GB/s x 8)


# fio jobs by kind (module_utils/gpuforge_fio.py JOBS): the unit each is gated in.
FIO_KINDS = (("sequential", "MiB/s", ("seq_read", "seq_write")), ("random", "IOPS", ("rand_read", "rand_write")))


def chart_id(*parts: str) -> str:
    return "chart-" + "-".join(re.sub(r"[^A-Za-z0-9_]+", "_", part) for part in parts)


def _threshold(record) -> float | None:
    value = record["threshold"].get("value")
    return float(value) if isinstance(value, int | float) else None


def nccl_curves(runs: list) -> str:
    """Size -> busbw curves of the NCCL runs that carry a series; None-free."""
    with_series = [r for r in runs if r["observed"].get("series") and r["observed"]["series"]["points"]]
    multi = [r for r in with_series if len(r["nodes"]) > 1]
    single = [r for r in with_series if len(r["nodes"]) == 1]
    shown = multi + (single if len(single) <= MAX_CURVES else [])
    shown = shown[: MAX_CURVES * 2]
    series, thresholds = [], []
    for index, record in enumerate(shown):
        color = svg.PALETTE[index % len(svg.PALETTE)]
        points = [(x, round(y * GBIT_PER_GBYTE, 3)) for x, y in record["observed"]["series"]["points"] if x > 0]
        series.append(svg.Series(record["name"], points, color=color, css_class=f"series {record['group']}"))
        limit = _threshold(record)
        if limit is not None:
            thresholds.append(svg.Threshold(f"{record['name']}: gate on avg busbw >= {limit:g} Gb/s", limit, color))
    return svg.line_chart(
        NCCL_CHART_ID,
        "NCCL all_reduce bus bandwidth vs message size",
        series,
        svg.Axis("message size (bytes, log scale)", log=True, tick_format=svg.human_bytes),
        svg.Axis("bus bandwidth (Gb/s)"),
        thresholds,
    )


def gate_dots(benchmark: str, group: str, runs: list) -> str:
    """One dot per single-node run of a group (value vs its threshold)."""
    dots = [
        (r["nodes"][0], float(r["observed"]["value"]), r["verdict"]) for r in runs if r["observed"]["value"] is not None
    ]
    limits = sorted({limit for limit in map(_threshold, runs) if limit is not None})
    unit = runs[0]["observed"]["unit"] if runs else ""
    thresholds = [svg.Threshold(f"{group}: threshold {limit:g} {unit}", limit) for limit in limits[:3]]
    return svg.dot_chart(chart_id(benchmark, group), f"{benchmark} {group}: per node", dots, unit, thresholds)


def ideal_scaling(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Linear scaling from the smallest measured GPU count's per-GPU throughput."""
    if not points:
        return []
    base_gpus, base_rate = min(points)
    per_gpu = base_rate / base_gpus
    return [(gpus, round(per_gpu * gpus, 2)) for gpus, _ in sorted(points)]


def _sweep_precision(record) -> str:
    """``resnet50-sweep-<n>gpu-<precision>`` -> precision; "" for a one-precision sweep (``resnet50-sweep-<n>gpu``)."""
    last = str(record.get("name", "")).rpartition("-")[2]
    return "" if last.endswith("gpu") else last


def resnet_scaling(sweep: list) -> str:
    """Throughput against GPU count: one measured curve, its ideal scaling and its threshold per precision (the sweep
    runs each precision over the same GPU counts; one curve through both would zig-zag between them)."""
    series = []
    limits_all = []
    for precision in sorted({_sweep_precision(r) for r in sweep}):
        runs = [r for r in sweep if _sweep_precision(r) == precision]
        suffix = f" {precision}" if precision else ""
        measured = sorted((r["observed"]["gpus"], float(r["observed"]["value"])) for r in runs)
        limits = sorted((r["observed"]["gpus"], _threshold(r)) for r in runs if _threshold(r) is not None)
        limits_all += limits
        series += [
            svg.Series(f"measured{suffix}", measured, css_class="series measured"),
            svg.Series(
                f"ideal scaling{suffix}", ideal_scaling(measured), dashed=True, markers=False, css_class="series ideal"
            ),
            svg.Series(
                f"threshold{suffix}", limits, dashed=True, markers=False, color="#b00020", css_class="series threshold"
            ),
        ]
    limits = limits_all
    # A single threshold value is a line as well, so even a one-point sweep shows its gate.
    flat = [svg.Threshold(f"threshold {limits[0][1]:g} img/s", limits[0][1])] if len(limits) == 1 else []
    return svg.line_chart(
        RESNET_CHART_ID,
        "ResNet-50 training throughput vs GPU count",
        series,
        svg.Axis("GPUs", tick_format=lambda value: f"{value:g}"),
        svg.Axis("images/sec"),
        flat,
    )


def ib_rail(rail: str, pairs: list) -> str:
    """ib_write_bw of one rail: bars per pair, or per node (slowest pair) on large fabrics."""
    measured = [r for r in pairs if r["observed"]["value"] is not None]
    if len(measured) <= MAX_PAIR_BARS:
        bars = [(r["name"], float(r["observed"]["value"]), r["threshold"].get("line_rate")) for r in measured]
        return svg.bar_chart(
            chart_id("ib_write_bw", rail),
            f"ib_write_bw on {rail}: per pair",
            bars,
            "Gb/s",
            thresholds=[_threshold(r) for r in measured],
            verdicts=[r["verdict"] for r in measured],
        )
    slowest: dict[str, tuple[float, str]] = {}
    rank = {"FAIL": 0, "WARN": 1, "UNKNOWN": 2, "PASS": 3}
    for r in measured:
        for node in r["nodes"]:
            value = float(r["observed"]["value"])
            current = slowest.get(node)
            verdict = r["verdict"] if current is None or rank[r["verdict"]] < rank[current[1]] else current[1]
            slowest[node] = (min(value, current[0]) if current else value, verdict)
    dots = [(node, value, verdict) for node, (value, verdict) in slowest.items()]
    limits = sorted({limit for limit in map(_threshold, measured) if limit is not None})
    thresholds = [svg.Threshold(f"threshold {limit:g} Gb/s", limit) for limit in limits[:3]]
    return svg.dot_chart(
        chart_id("ib_write_bw", rail),
        f"ib_write_bw on {rail}: slowest pair of each node ({len(measured)} pairs)",
        dots,
        "Gb/s",
        thresholds,
    )


def fio_target(target: str, runs: list) -> list[tuple[str, str]]:
    """(title, chart) of one fio target: per kind of job, bars per node and job (thresholds as red ticks), or a
    dot chart per job on large clusters. Jobs that produced no value (failed, skipped) are not drawn."""
    charts = []
    for kind, unit, jobs in FIO_KINDS:
        measured = [r for r in runs if r.get("job") in jobs and r["observed"]["value"] is not None]
        measured.sort(key=lambda r: (jobs.index(r["job"]), r["nodes"][0]))
        if not measured:
            continue
        if len(measured) <= MAX_PAIR_BARS:
            bars = [(f"{r['nodes'][0]} {r['job']}", float(r["observed"]["value"]), None) for r in measured]
            charts.append(
                (
                    f"fio on {target}: {kind} jobs ({unit})",
                    svg.bar_chart(
                        chart_id("fio", target, kind),
                        f"fio on {target}: {kind} jobs, {unit} per node",
                        bars,
                        unit,
                        thresholds=[_threshold(r) for r in measured],
                        verdicts=[r["verdict"] for r in measured],
                        legend=f"{unit} (red dashed: the site's threshold; grey: not judged)",
                    ),
                )
            )
            continue
        for job in jobs:
            mine = [r for r in measured if r["job"] == job]
            if not mine:
                continue
            dots = [(r["nodes"][0], float(r["observed"]["value"]), r["verdict"]) for r in mine]
            limits = sorted({limit for limit in map(_threshold, mine) if limit is not None})
            thresholds = [svg.Threshold(f"{job}: threshold {limit:g} {unit}", limit) for limit in limits[:3]]
            charts.append(
                (
                    f"fio {job} on {target} ({unit})",
                    svg.dot_chart(
                        chart_id("fio", target, job), f"fio {job} on {target}: per node", dots, unit, thresholds
                    ),
                )
            )
    return charts


NCCL_METRIC = "nccl single-node busbw"  # burnin_judge's metric names: its single-node run, then "ib_write_bw <hca>"


def burnin_metrics(record) -> dict:
    """{metric: Gb/s} of one burnin_round record: the node's single-node NCCL busbw and its best pair per rail (what
    src/gpuforge/burnin_judge.py compares across the rounds, under the same names)."""
    found = {}
    if record["nccl"]["busbw_gbit_per_s"] is not None:
        found[NCCL_METRIC] = float(record["nccl"]["busbw_gbit_per_s"])
    for hca, rail in sorted(record["ib_write_bw"].items()):
        if rail["gbit_per_s"] is not None:
            found[f"ib_write_bw {hca}"] = float(rail["gbit_per_s"])
    return found


def burnin_trend(node: str, records: list, slowed: list, fraction: float | None) -> str:
    """One node's rates across the burn-in rounds: a line per metric (round -> Gb/s); a metric the trend judged
    slower is drawn dashed with its slowdown line (fraction x the median of the first rounds) as a threshold."""
    series: dict[str, list] = {}
    for record in sorted(records, key=lambda r: r["round"]):
        for metric, value in burnin_metrics(record).items():
            series.setdefault(metric, []).append((record["round"], value))
    slow = {entry["metric"]: entry for entry in slowed}
    drawn, thresholds = [], []
    for index, (metric, points) in enumerate(sorted(series.items(), key=lambda item: item[0] != NCCL_METRIC)):
        color = svg.PALETTE[index % len(svg.PALETTE)]
        short = "NCCL busbw" if metric == NCCL_METRIC else metric.replace("ib_write_bw ", "ib ")
        label = short + (" slower" if metric in slow else "")
        css = "series slowed" if metric in slow else "series"
        drawn.append(svg.Series(label, points, dashed=metric in slow, color=color, css_class=css))
        if metric in slow and fraction:
            line = round(float(fraction) * slow[metric]["first_median"], 3)
            thresholds.append(svg.Threshold(f"{metric}: slowdown line {line:g} Gb/s", line, color))
    return svg.line_chart(
        chart_id("burnin", node),
        f"{node}: rates per burn-in round",
        drawn,
        svg.Axis("burn-in round", tick_format=lambda value: f"{value:g}"),
        svg.Axis("Gb/s"),
        thresholds,
    )
