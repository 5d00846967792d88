"""The Markdown summary beside the HTML report (for a ticket, a chat message or a terminal), from the same
records: the summary line, node verdicts that are not PASS, root-cause findings, attributions and failed gates."""

from __future__ import annotations

import json

from gpuforge.report.html import _explained_by, _problems
from gpuforge.report.model import RANK, ReportData

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
    failed_gates = [r for r in data.runs if r["verdict"] != "PASS"]
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
        failed_gates.sort(key=lambda r: (r["observed"]["value"] is not None, id(r) in explained, RANK[r["verdict"]]))
        rows = [
            [
                r["benchmark"],
                r["name"],
                "failed run" if r["observed"]["value"] is None else ("explained" if id(r) in explained else "slow"),
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
            else [f"All {len(data.runs)} gates passed."]
        )
    if data.stages:
        lines += ["", "## Stages", ""]
        lines += _table(
            ["stage", "status", "rc", "detail"], [[s["stage"], s["status"], s["rc"], s["detail"]] for s in data.stages]
        )
    return "\n".join(lines) + "\n"
