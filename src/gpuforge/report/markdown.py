"""The Markdown summary beside the HTML report (for a ticket, a chat message or a terminal), from the same
records: the summary line, node verdicts that are not PASS, root-cause findings, attributions, failed gates (the
count of those not judged), fio per file system and job, p2p per node, and the burn-in (trend verdict per node,
verdicts per round, the port error counters that grew, DCGM rounds that did not pass)."""

from __future__ import annotations

import json
import statistics

from gpuforge.report.charts import FIO_KINDS
from gpuforge.report.html import _explained_by, _problems
from gpuforge.report.model import DCGM_VERDICT, RANK, ReportData

MAX_ROWS = 50


def _cell(value) -> str:
    if value is None:
        return ""
    text = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        lines.append(f"\n({len(rows) - MAX_ROWS} more rows in the HTML report)")
    return lines


def render(data: ReportData, html_name: str = "report.html") -> str:
    counts = data.verdict_counts()
    failed_gates = [r for r in data.runs if r["verdict"] in ("FAIL", "WARN")]
    unjudged = sum(1 for r in data.runs if r["verdict"] == "UNKNOWN")
    lines = [f"# {data.title}", ""]
    meta = data.meta
    lines.append(
        f"{len(data.verdicts)} nodes: "
        + ", ".join(f"{counts[verdict]} {verdict}" for verdict in counts)
        + f"; benchmark gates failed: {sum(r['verdict'] == 'FAIL' for r in data.runs)} of {len(data.runs)}"
        + (f"; run `{meta['run_id']}` ({meta.get('command', '?')})" if meta.get("run_id") else "")
        + (f", {meta.get('started')} to {meta.get('finished')}" if meta.get("started") else "")
    )
    lines += ["", f"Full report: `{html_name}`", "", "## Nodes", ""]
    if not data.verdicts:
        lines.append("Validation and benchmarks: not run")
    else:
        bad = [node for node in data.node_order() if data.verdicts[node]["verdict"] != "PASS"]
        rows = [
            [node, data.verdicts[node]["verdict"], "; ".join(r["what"] for r in data.verdicts[node]["reasons"][:5])]
            for node in bad
        ]
        lines += _table(["node", "verdict", "why"], rows) if rows else ["Every node PASS."]
    lines += ["", "## Findings (root causes first)", ""]
    if "node_check" not in data.by_kind:
        lines.append("Validation: not run")
    else:
        roots, grouped = _problems(data)
        rows = [
            [
                r["node"],
                r["check"],
                r["verdict"],
                r["observed"],
                r["threshold"].get("expected"),
                ", ".join(c["check"] for c in grouped.get((r["node"], r["check"]), [])),
                r["remedy"],
            ]
            for r in roots
        ]
        header = ["node", "check", "verdict", "observed", "expected", "consequences", "remedy"]
        lines += _table(header, rows) if rows else ["All checks passed."]
    lines += ["", "## Benchmarks", ""]
    if not data.runs and not data.attributions:
        lines.append("Benchmarks: not run")
    else:
        rows = [
            [a["benchmark"], f"slow {a['subject']}", a["name"], "; ".join(a["observed"]["reasons"][:2])]
            for a in data.attributions
        ]
        lines += _table(["benchmark", "attribution", "name", "reasons"], rows) if rows else ["No slow node or link."]
        explained = {id(r) for a in data.attributions for r in failed_gates if _explained_by(a, r)}
        failed_gates.sort(key=lambda r: (not r["run_failed"], id(r) in explained, RANK[r["verdict"]]))
        rows = [
            [
                r["benchmark"],
                r["name"],
                "failed run" if r["run_failed"] else ("explained" if id(r) in explained else "slow"),
                r["observed"]["value"],
                r["threshold"]["value"],
                r["observed"]["unit"],
                r["reason"],
            ]
            for r in failed_gates
        ]
        lines += [""] + (
            _table(["benchmark", "gate", "kind", "observed", "threshold", "unit", "reason"], rows)
            if rows
            else [f"All {len(data.runs) - unjudged} judged gates passed."]
        )
        if unjudged:
            lines += ["", f"{unjudged} gate(s) not judged (no threshold set, or not run): listed in the HTML report."]
        lines += fio_lines(data.runs) + p2p_lines(data.runs)
    lines += burnin_lines(data)
    if data.stages:
        lines += ["", "## Stages", ""]
        lines += _table(
            ["stage", "status", "rc", "detail"], [[s["stage"], s["status"], s["rc"], s["detail"]] for s in data.stages]
        )
    return "\n".join(lines) + "\n"


def fio_lines(runs: list) -> list[str]:
    """fio per file system and job: nodes measured, lowest / median / highest value in the job's unit, the
    site's threshold and the nodes below it."""
    fio = [r for r in runs if r["benchmark"] == "fio"]
    if not fio:
        return []
    order = [job for _kind, _unit, jobs in FIO_KINDS for job in jobs]
    groups: dict = {}
    for record in fio:
        groups.setdefault((record.get("target") or record["group"], record.get("job") or ""), []).append(record)
    rows = []
    for (target, job), records in sorted(
        groups.items(), key=lambda g: (g[0][0], order.index(g[0][1]) if g[0][1] in order else 9)
    ):
        values = [r["observed"]["value"] for r in records if r["observed"]["value"] is not None]
        limits = sorted({r["threshold"]["value"] for r in records if r["threshold"]["value"] is not None})
        below = [r["nodes"][0] for r in records if r["verdict"] == "FAIL"]
        not_run = [r["nodes"][0] for r in records if r["observed"]["value"] is None and r["verdict"] != "FAIL"]
        rows.append(
            [
                target,
                job or "(none ran)",
                len(values),
                f"{min(values):g}" if values else "",
                f"{statistics.median(values):g}" if values else "",
                f"{max(values):g}" if values else "",
                records[0]["observed"]["unit"] if job else "",
                ", ".join(f"{limit:g}" for limit in limits) or "not set",
                "; ".join(
                    part for part in (", ".join(below), f"not run: {', '.join(not_run)}" if not_run else "") if part
                ),
            ]
        )
    header = ["file system", "job", "nodes", "lowest", "median", "highest", "unit", "threshold", "failing nodes"]
    return ["", "## fio", "", *_table(header, rows)]


def p2p_lines(runs: list) -> list[str]:
    """p2pBandwidthLatencyTest per node (a skipped node with its reason)."""
    p2p = sorted((r for r in runs if r["benchmark"] == "p2p"), key=lambda r: (RANK[r["verdict"]], r["nodes"][0]))
    if not p2p:
        return []
    rows = [
        [
            r["nodes"][0],
            r["verdict"],
            r["observed"].get("gpus"),
            r["observed"].get("sku"),
            r["observed"].get("uni_min_ratio"),
            r["observed"].get("bi_min_ratio"),
            r["observed"]["value"],
            r["threshold"]["value"],
            r["reason"],
        ]
        for r in p2p
    ]
    header = ["node", "verdict", "GPUs", "SKU", "uni ratio", "bi ratio", "bi P2P=Enabled GB/s", "floor GB/s", "reason"]
    return ["", "## GPU peer-to-peer (p2pBandwidthLatencyTest)", "", *_table(header, rows)]


def burnin_lines(data: ReportData) -> list[str]:
    """The burn-in: per node the trend verdict, a letter per round (P/W/F, - without a record) and the reasons;
    the counters that grew (growth, before -> after, limit); DCGM rounds that did not pass."""
    view = data.burnin
    if view is None:
        return []
    letter = {"PASS": "P", "WARN": "W", "FAIL": "F", "UNKNOWN": "?"}
    rounds = view.rounds
    rows = []
    for node in view.node_order():
        trend = view.trend.get(node) or {"verdict": "UNKNOWN", "reasons": []}
        cells = [view.cell(node, n) for n in rounds]
        marks = " ".join(letter[c["verdict"]] if c else "-" for c in cells)
        rows.append([node, trend["verdict"], marks, "; ".join(trend["reasons"])])
    lines = ["", "## Burn-in", ""]
    summary = view.summary
    lines.append(
        f"{summary.get('verdict', 'UNKNOWN')}: {len(rounds)} round(s) over {len(view.trend)} node(s)"
        + (f", {summary.get('started')} to {summary.get('ended')}" if summary.get("started") else "")
        + f"; slowdown fraction {view.parameters.get('slowdown_fraction')}, DCGM level "
        f"{view.parameters.get('dcgm_level')}"
    )
    lines += ["", *_table(["node", "trend", "rounds " + " ".join(str(n) for n in rounds), "reasons"], rows)]
    grew = []
    for record in sorted(view.records, key=lambda r: (r["node"], r["round"])):
        block = record["counters"]
        for port, counters in block["ports"].items():
            for name, growth in counters.items():
                if growth == "saturated" or growth > 0:
                    before, after = view.counter_values.get((record["node"], record["round"], port, name), ("", ""))
                    over = "over the limit" if name in block["over_limit"].get(port, {}) else ""
                    shown = "at maximum" if growth == "saturated" else f"+{growth}"
                    grew.append([record["node"], record["round"], port, name, shown, before, after,
                                 block["limits"].get(name, 0), over])  # fmt: skip
    lines += ["", "### Port error counters that grew", ""]
    header = ["node", "round", "port", "counter", "growth", "before", "after", "limit", "judged"]
    lines += _table(header, grew) if grew else ["No port error counter grew in any round."]
    dcgm = [
        [r["node"], r["round"], r["dcgm"]["level"], r["dcgm"]["status"], r["dcgm"]["detail"]]
        for r in sorted(view.records, key=lambda r: (r["node"], r["round"]))
        if DCGM_VERDICT[r["dcgm"]["status"]] != "PASS"
    ]
    lines += ["", "### DCGM rounds that did not pass", ""]
    lines += _table(["node", "round", "level", "status", "detail"], dcgm) if dcgm else ["DCGM passed in every round."]
    return lines
