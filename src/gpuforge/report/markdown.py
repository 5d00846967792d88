"""The Markdown summary beside the HTML report (for a ticket, a chat message or a terminal)."""

from __future__ import annotations

import json

from gpuforge.report.charts import ideal_scaling
from gpuforge.report.model import ReportData


def _cell(value) -> str:
    if value is None:
        return ""
    text = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return lines


def render(data: ReportData, html_name: str = "report.html") -> str:
    lines = [f"# {data.title}", ""]
    if data.meta.get("run_id"):
        lines += [f"Run `{data.meta['run_id']}` ({data.meta.get('command', '?')}); full report: `{html_name}`", ""]
    lines += ["## Node health", ""]
    if data.checks is None:
        lines.append("Validation: not run")
    else:
        worst = data.hosts_by_status()
        healthy = sum(1 for status in worst.values() if status != "fail")
        lines += [f"{healthy} of {len(worst)} nodes healthy.", ""]
        problems = [check for check in data.checks if check.status != "ok"]
        if problems:
            rows = [[c.host, c.name, c.status, c.observed, c.expected, c.remedy] for c in problems]
            lines += _table(["node", "check", "status", "observed", "expected", "remedy"], rows)
        else:
            lines.append("All checks ok.")
    lines += ["", "## NCCL bus bandwidth", ""]
    if not data.nccl:
        lines.append("NCCL: not run")
    else:
        rows = []
        for series in data.nccl:
            peak = max((busbw for _, busbw in series.points), default=None)
            largest = max(series.points, default=(None, None))
            rows.append([series.label, series.collective, len(series.points), peak, largest[0], largest[1]])
        lines += _table(["mode", "collective", "sizes", "peak busbw GB/s", "largest size B", "busbw there"], rows)
    lines += ["", "## ResNet-50", ""]
    if not data.resnet50:
        lines.append("ResNet-50: not run")
    else:
        measured = [(point.gpus, point.images_per_sec) for point in data.resnet50]
        ideal = dict(ideal_scaling(measured))
        rows = [[gpus, rate, ideal[gpus], f"{100 * rate / ideal[gpus]:.0f}%"] for gpus, rate in measured]
        lines += _table(["GPUs", "images/sec", "ideal", "efficiency"], rows)
    lines += ["", "## ib_write_bw", ""]
    if not data.ib_write_bw:
        lines.append("ib_write_bw: not run")
    else:
        rows = [
            [
                i.host,
                i.hca,
                i.bw_gbps,
                i.line_rate_gbps,
                f"{100 * i.bw_gbps / i.line_rate_gbps:.0f}%" if i.line_rate_gbps else "",
            ]
            for i in data.ib_write_bw
        ]
        lines += _table(["node", "HCA", "Gb/s", "line rate Gb/s", "of line rate"], rows)
    return "\n".join(lines) + "\n"
