"""The self-contained HTML report: inline CSS, inline SVG, one tiny inline script and no network.

The script only marks the page (data-charts-ok, title suffix) when every chart the page promises is
present, which is what the headless-Chromium test looks for.
"""

from __future__ import annotations

import json
from html import escape

from gpuforge.report import charts
from gpuforge.report.model import ReportData

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#222;max-width:1100px}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.9rem;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}.status-ok{background:#d9f2d9}.status-warn{background:#fff1c2}
.status-fail{background:#f8d0d0;font-weight:bold}.not-run{color:#777;font-style:italic}
.chart .grid{stroke:#e5e5e5}.chart .axis{stroke:#444}.chart .tick{font-size:11px;fill:#444}
.chart .legend,.chart .axis-label{font-size:12px;fill:#222}.chart .plot-bg{fill:#fff}
code{background:#f3f3f3;padding:0 .2rem}
"""

_SCRIPT = """
(function () {
  var ids = JSON.parse(document.body.getAttribute("data-expected-charts"));
  var missing = ids.filter(function (id) { return !document.getElementById(id); });
  document.body.setAttribute("data-charts-ok", missing.length === 0 ? "true" : "false");
  document.body.setAttribute("data-charts-missing", missing.join(","));
  if (missing.length === 0) { document.title = document.title + " [charts ok]"; }
})();
"""


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return f"<code>{escape(json.dumps(value, sort_keys=True))}</code>"
    return escape(str(value))


def _not_run(what: str) -> str:
    return f'<p class="not-run">{escape(what)}: not run</p>'


def health_section(data: ReportData) -> str:
    if data.checks is None:
        return _not_run("Validation")
    worst = data.hosts_by_status()
    healthy = sorted(host for host, status in worst.items() if status != "fail")
    failing = sorted(host for host, status in worst.items() if status == "fail")
    parts = [
        f"<p>{len(healthy)} of {len(worst)} nodes healthy"
        + (f"; failing: <strong>{escape(', '.join(failing))}</strong>" if failing else "")
        + "</p>",
        '<table id="health"><tr><th>node</th><th>check</th><th>status</th><th>observed</th>'
        "<th>expected</th><th>fault / remedy</th></tr>",
    ]
    rank = {"fail": 0, "warn": 1, "ok": 2}
    for check in sorted(data.checks, key=lambda c: (c.host, rank.get(c.status, 0), c.name)):
        status = check.status if check.status in rank else "fail"
        detail = " — ".join(part for part in (check.fault, check.remedy) if part)
        parts.append(
            f'<tr class="status-{status}"><td>{escape(check.host)}</td><td>{escape(check.name)}</td>'
            f"<td>{escape(check.status)}</td><td>{_cell(check.observed)}</td><td>{_cell(check.expected)}</td>"
            f"<td>{escape(detail)}</td></tr>"
        )
    parts.append("</table>")
    return "".join(parts)


def _metadata_section(data: ReportData) -> str:
    meta = data.meta or {}
    rows = [
        (key, meta.get(key))
        for key in ("run_id", "command", "inventory", "started", "finished", "duration_s", "rc", "status")
        if meta.get(key) is not None
    ]
    rows += sorted((meta.get("versions") or {}).items())
    parts = ['<table id="metadata">'] + [f"<tr><th>{escape(str(k))}</th><td>{_cell(v)}</td></tr>" for k, v in rows]
    parts.append("</table>")
    if data.stages:
        parts.append(
            '<table id="stages"><tr><th>stage</th><th>playbook</th><th>status</th><th>rc</th><th>duration (s)</th></tr>'
        )
        for stage in sorted(data.stages, key=lambda s: s.get("started") or ""):
            parts.append(
                f'<tr class="status-{"ok" if stage.get("rc") == 0 else "fail"}"><td>{_cell(stage.get("command"))}'
                f"</td><td>{_cell(stage.get('playbook'))}</td><td>{_cell(stage.get('status'))}</td>"
                f"<td>{_cell(stage.get('rc'))}</td><td>{_cell(stage.get('duration_s'))}</td></tr>"
            )
        parts.append("</table>")
    return "".join(parts)


def render(data: ReportData) -> str:
    sections = []
    expected: list[str] = []
    for title, present, builder, chart_id, note in (
        ("NCCL bus bandwidth", data.nccl, charts.nccl_chart, charts.NCCL_CHART_ID, "all_reduce, per transport"),
        ("ResNet-50 scaling", data.resnet50, charts.resnet_chart, charts.RESNET_CHART_ID, "synthetic data"),
        ("ib_write_bw per HCA", data.ib_write_bw, charts.ib_chart, charts.IB_CHART_ID, "average Gb/s"),
    ):
        body = _not_run(title)
        if present:
            body = builder(data)
            if body.startswith("<svg"):
                expected.append(chart_id)
        sections.append(f"<h2>{escape(title)} <small>({escape(note)})</small></h2>{body}")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(data.title)}</title><style>{_CSS}</style></head>"
        f"<body data-expected-charts='{escape(json.dumps(expected))}' data-charts-ok=\"pending\">"
        f"<h1>{escape(data.title)}</h1>"
        f"<h2>Node health</h2>{health_section(data)}" + "".join(sections) + f"<h2>Run</h2>{_metadata_section(data)}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
