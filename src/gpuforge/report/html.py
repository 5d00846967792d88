"""The self-contained HTML report: inline CSS, inline SVG, one tiny inline script and no network.

Sections: a summary line; findings (root causes first, their consequences grouped under them); the node x check
matrix (a row per node, failing nodes and checks first, a <details> per cell that is not PASS); benchmark
attributions, failed gates (the gates not judged folded beside them) and charts (every chart draws its
thresholds; fio per file system, a p2p table per node); the burn-in (the trend verdict per node with its reasons,
a node x round verdict matrix, the port error counters that grew, DCGM level 3 per round and the rates per round
with a trend chart per node); the cross-node inventory (the
fleet_consistency record of each node, outliers marked); stages and provenance. Everything comes from records
(gpuforge.report.model.ReportData). The script only marks the page (data-charts-ok, title suffix) when every chart
the page promises is present, which the headless-Chromium test looks for.
"""

from __future__ import annotations

import json
from html import escape

from gpuforge.report import charts
from gpuforge.report.model import DCGM_VERDICT, INVENTORY_PROPERTIES, RANK, ReportData, sweep_runs

MAX_GATE_ROWS = 300
MAX_REASONS = 3
# Per-node burn-in trend charts drawn (nodes that got slower or failed first); the rest are in the rates table.
MAX_TREND_CHARTS = 24
# Benchmarks with their own charts or table below the generic per-node dots (fio per target, p2p per node).
OWN_SECTIONS = {"fio", "p2p"}

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
h3{font-size:1rem;margin-top:1.2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.2rem .4rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}.not-run{color:#777;font-style:italic}
.v-PASS{background:#d9f2d9}.v-WARN{background:#fff1c2}.v-FAIL{background:#f8d0d0}.v-UNKNOWN{background:#e6e6e6}
.v-NONE{background:#fff}
#summary{font-size:1.05rem;padding:.5rem .7rem;background:#f6f6f6;border-left:4px solid #888}
#summary .FAIL{color:#b00020;font-weight:bold}#summary .WARN{color:#8a5300;font-weight:bold}
.matrix-wrap{overflow:auto;max-height:80vh;border:1px solid #ddd}
#matrix{font-size:.75rem}#matrix th.check{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}
#matrix td.c{min-width:1.1rem;text-align:center;padding:0 .15rem}
#matrix th.node{position:sticky;left:0;background:#f3f3f3}
#matrix td.consequence{background-image:repeating-linear-gradient(45deg,transparent 0 3px,rgba(255,255,255,.6) 3px 6px)}
details>summary{cursor:pointer}details.cell[open]{position:relative}
details.cell .detail{position:absolute;z-index:2;left:0;min-width:22rem;max-width:40rem;background:#fff;
border:1px solid #888;padding:.4rem;text-align:left;box-shadow:0 2px 6px rgba(0,0,0,.3);white-space:normal}
.detail dt{font-weight:bold}.detail dd{margin:0 0 .3rem .5rem;word-break:break-word}
ul.findings>li{margin:.3rem 0}ul.consequences{margin:.2rem 0 .2rem 1rem;font-size:.9rem;color:#444}
td.outlier{background:#f8d0d0;font-weight:bold}
.chart .grid{stroke:#e5e5e5}.chart .axis{stroke:#444}.chart .tick{font-size:11px;fill:#444}
.chart .legend,.chart .axis-label{font-size:12px;fill:#222}.chart .plot-bg{fill:#fff}
code{background:#f3f3f3;padding:0 .2rem}
#burnin-matrix,#burnin-dcgm{font-size:.75rem}#burnin-matrix td.c,#burnin-dcgm td.c{min-width:1.6rem;text-align:center}
.burnin-trends{display:flex;flex-wrap:wrap;gap:.5rem}
.burnin-trends figure{margin:0;border:2px solid #ddd;padding:.2rem;max-width:424px}
.burnin-trends figure.slowed{border-color:#c62828;background:#fdf0f0}.burnin-trends svg{width:420px;height:210px}
.burnin-trends figcaption{font-size:.8rem}tr.slowed td.ratio{color:#b00020;font-weight:bold}
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

_MARK = {"PASS": "", "WARN": "!", "FAIL": "✗", "UNKNOWN": "?"}


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return f"<code>{escape(_json(value))}</code>"
    return escape(str(value))


def _not_run(what: str) -> str:
    return f'<p class="not-run">{escape(what)}: not run</p>'


def _detail(pairs) -> str:
    rows = "".join(
        f"<dt>{escape(key)}</dt><dd>{_cell(value)}</dd>" for key, value in pairs if value not in (None, "", [])
    )
    return f'<dl class="detail">{rows}</dl>'


def _matrix_cell(verdict: str, data: dict, title: str = "", detail: str = "", label=None, classes: str = "") -> str:
    """One cell of a node matrix (node x check, node x round, DCGM per round), coloured by ``verdict`` (``NONE``:
    nothing recorded). ``data``: its ``data-*`` attributes, in order. With a ``detail`` (what the cell folds: a
    ``_detail`` list) the cell is a ``<details>`` under the verdict's mark (or ``label``), ``title`` on its summary;
    without one it is plain, ``title`` on the cell and ``label`` its text."""
    attributes = f'class="c v-{verdict}{classes}"' + "".join(
        f' data-{key}="{escape(str(value))}"' for key, value in data.items()
    )
    tip = f' title="{escape(title)}"' if title else ""
    if not detail:
        return f"<td {attributes}{tip}>{'' if label is None else escape(str(label))}</td>"
    text = _MARK[verdict] if label is None else escape(str(label))
    return f'<td {attributes}><details class="cell"><summary{tip}>{text}</summary>{detail}</details></td>'


def _check_detail(record) -> str:
    return _detail(
        [
            ("verdict", record["verdict"]),
            ("observed", record["observed"]),
            ("threshold", record["threshold"].get("expected")),
            ("threshold source", record["threshold"].get("source")),
            ("fault", record.get("fault")),
            ("remedy", record.get("remedy")),
            ("caused by", ", ".join(record.get("caused_by") or [])),
        ]
    )


# -- summary ---------------------------------------------------------------------------------------------------
def summary_line(data: ReportData) -> str:
    counts = data.verdict_counts()
    gates = data.runs
    failed = sum(1 for r in gates if r["verdict"] == "FAIL")
    meta = data.meta
    nodes = " · ".join(f'<span class="{verdict}">{counts[verdict]} {verdict}</span>' for verdict in counts)
    run = escape(str(meta.get("run_id") or "(no run summary)"))
    when = " → ".join(escape(str(meta[key])) for key in ("started", "finished") if meta.get(key))
    return (
        f'<p id="summary" data-fail="{counts["FAIL"]}" data-gates-failed="{failed}">'
        f"<strong>{len(data.verdicts)} nodes</strong>: {nodes} — benchmark gates failed: "
        f'<span class="{"FAIL" if failed else ""}">{failed}</span> of {len(gates)} — run <code>{run}</code>'
        + (f" ({escape(str(meta.get('command')))})" if meta.get("command") else "")
        + (f", {when}" if when else "")
        + "</p>"
    )


# -- findings: root causes first ---------------------------------------------------------------------------------
def _problems(data: ReportData):
    """(root causes, {(node, check): [consequences]}) of the node checks that are not PASS."""
    problems = [r for r in data.by_kind.get("node_check", []) if r["verdict"] != "PASS"]
    present = {(r["node"], r["check"]) for r in problems}
    roots, grouped = [], {}
    for record in problems:
        causes = [
            (record["node"], cause) for cause in record.get("caused_by") or [] if (record["node"], cause) in present
        ]
        if causes:
            for cause in causes:
                grouped.setdefault(cause, []).append(record)
        else:
            roots.append(record)
    roots.sort(key=lambda r: (RANK[r["verdict"]], r["node"], r["check"]))
    return roots, grouped


def findings_section(data: ReportData) -> str:
    if "node_check" not in data.by_kind:
        return _not_run("Validation")
    roots, grouped = _problems(data)
    if not roots:
        return '<p id="findings">Every node check passed.</p>'
    items = []
    for record in roots:
        consequences = grouped.get((record["node"], record["check"]), [])
        nested = ""
        if consequences:
            nested = (
                '<ul class="consequences">'
                + "".join(
                    f'<li class="consequence" data-node="{escape(c["node"])}" data-check="{escape(c["check"])}">'
                    f"consequence: <code>{escape(c['check'])}</code> {escape(c['verdict'])}"
                    + (f" — {escape(c['fault'])}" if c.get("fault") else "")
                    + "</li>"
                    for c in consequences
                )
                + "</ul>"
            )
        unresolved = [cause for cause in record.get("caused_by") or [] if (record["node"], cause) not in grouped]
        items.append(
            f'<li class="root v-{record["verdict"]}" data-node="{escape(record["node"])}" '
            f'data-check="{escape(record["check"])}"><strong>{escape(record["node"])}</strong> '
            f"<code>{escape(record['check'])}</code> {escape(record['verdict'])}: "
            f"{escape(record.get('fault') or _json(record['observed']))}"
            + (f" (caused by {escape(', '.join(unresolved))}, not judged in this run)" if unresolved else "")
            + (f"<br><em>remedy:</em> {escape(record['remedy'])}" if record.get("remedy") else "")
            + nested
            + "</li>"
        )
    return f'<ul id="findings" class="findings">{"".join(items)}</ul>'


# -- node x check matrix -----------------------------------------------------------------------------------------
def _bench_cell(entry) -> tuple[str, list]:
    reasons = [reason for reason in entry["reasons"] if not reason["what"].startswith(("check ", "burn-in "))]
    if not reasons:
        return "PASS", []
    worst = min((reason["verdict"] for reason in reasons), key=RANK.__getitem__)
    return worst, reasons


def matrix_section(data: ReportData) -> str:
    checks = data.by_kind.get("node_check", [])
    if not data.verdicts:
        return _not_run("Validation and benchmarks")
    cells: dict[tuple[str, str], dict] = {(r["node"], r["check"]): r for r in checks}
    names: dict[str, list] = {}
    for record in checks:
        names.setdefault(record["check"], []).append(record)
    order = {name: index for index, name in enumerate(names)}
    columns = sorted(
        names,
        key=lambda name: (
            min(RANK[r["verdict"]] for r in names[name]),
            -sum(r["verdict"] != "PASS" for r in names[name]),
            order[name],
        ),
    )
    with_bench = bool(data.runs or data.attributions)
    header = (
        '<tr><th class="node">node</th><th>verdict</th>'
        + "".join(f'<th class="check" title="{escape(name)}">{escape(name)}</th>' for name in columns)
        + ('<th class="check">burn-in</th>' if data.burnin else "")
        + ('<th class="check">benchmarks</th>' if with_bench else "")
        + "</tr>"
    )
    rows = [header]
    for node in data.node_order():
        entry = data.verdicts[node]
        parts = [
            f'<tr data-node="{escape(node)}" data-verdict="{entry["verdict"]}"><th class="node">{escape(node)}</th>'
            f'<td class="v-{entry["verdict"]}">{entry["verdict"]}</td>'
        ]
        for name in columns:
            record = cells.get((node, name))
            if record is None:
                parts.append(_matrix_cell("NONE", {"check": name}, f"{node} {name}: not run"))
                continue
            verdict = record["verdict"]
            parts.append(
                _matrix_cell(
                    verdict,
                    {"check": name, "verdict": verdict},
                    f"{node} {name}: {verdict}",
                    _check_detail(record) if verdict != "PASS" else "",
                    classes=" consequence" if record.get("caused_by") else "",
                )
            )
        if data.burnin:
            parts.append(_burnin_cell(data, node))
        if with_bench:
            verdict, reasons = _bench_cell(entry)
            detail = (
                _detail(
                    [(reason["verdict"], f"{reason['what']}. {reason.get('remedy') or ''}") for reason in reasons[:10]]
                )
                if verdict != "PASS"
                else ""
            )
            parts.append(_matrix_cell(verdict, {"check": "benchmarks", "verdict": verdict}, detail=detail))
        parts.append("</tr>")
        rows.append("".join(parts))
    return f'<div class="matrix-wrap"><table id="matrix">{"".join(rows)}</table></div>'


def _burnin_cell(data: ReportData, node: str) -> str:
    """The node's burn-in column in the node x check matrix: the trend verdict over all rounds."""
    trend = data.burnin.trend.get(node)
    if trend is None:
        return _matrix_cell("NONE", {"check": "burn-in"}, "not in the burn-in")
    verdict = trend["verdict"]
    detail = (
        _detail(
            [("trend", verdict), *(("reason", reason) for reason in trend["reasons"]), ("remedy", trend.get("remedy"))]
        )
        if verdict != "PASS"
        else ""
    )
    return _matrix_cell(verdict, {"check": "burn-in", "verdict": verdict}, detail=detail)


# -- benchmarks -------------------------------------------------------------------------------------------------
def _explained_by(attribution, run) -> bool:
    """The attribution accounts for the run: it names it, or (older summaries name no results) the run is on
    the slow node or is the slow link."""
    if run["benchmark"] != attribution["benchmark"]:
        return False
    if "results" in attribution["observed"]:
        return run["name"] in attribution["observed"]["results"]
    if attribution["subject"] == "node":
        return attribution["name"] in run["nodes"]
    return run["link"] == attribution["name"] or run["name"] == attribution["name"]


def attributions_section(data: ReportData) -> str:
    failed = [r for r in data.runs if r["verdict"] != "PASS"]
    rows = []
    for record in data.attributions:
        explained = [r for r in failed if _explained_by(record, r)]
        reasons = record["observed"]["reasons"]
        more = (
            f"<details><summary>{len(reasons) - MAX_REASONS} more</summary>"
            + "<br>".join(escape(reason) for reason in reasons[MAX_REASONS:])
            + "</details>"
            if len(reasons) > MAX_REASONS
            else ""
        )
        gates = (
            f"<details><summary>{len(explained)} failed gate(s) explained</summary>"
            + "<br>".join(f"{escape(r['name'])}: {escape(r['reason'])}" for r in explained[:50])
            + "</details>"
            if explained
            else ""
        )
        what = "slow node" if record["subject"] == "node" else "slow link"
        rows.append(
            f'<tr class="v-{record["verdict"]}" data-subject="{record["subject"]}" '
            f'data-name="{escape(record["name"])}">'
            f"<td>{escape(record['benchmark'])}</td><td>{what}</td><td><strong>{escape(record['name'])}</strong></td>"
            f"<td>{escape(', '.join(record['rails']))}</td><td>"
            + "<br>".join(escape(reason) for reason in reasons[:MAX_REASONS])
            + more
            + f"</td><td>{gates}</td><td>{escape(record['remedy'])}</td></tr>"
        )
    if not rows:
        return '<p id="attributions">No slow node or link named.</p>'
    return (
        '<table id="attributions"><tr><th>benchmark</th><th>attribution</th><th>name</th><th>rails</th>'
        "<th>reasons</th><th>consequences</th><th>remedy</th></tr>" + "".join(rows) + "</table>"
    )


def gates_section(data: ReportData) -> str:
    """Gates not passed: failed runs (no result) and failures no attribution explains; those an attribution
    explains are listed under it (Attributions) and only counted here."""
    failed = [r for r in data.runs if r["verdict"] in ("FAIL", "WARN")]
    unjudged = unjudged_section(data)
    if not failed:
        judged = sum(1 for r in data.runs if r["verdict"] != "UNKNOWN")
        if judged == len(data.runs):
            return f'<p id="gates-failed">All {len(data.runs)} benchmark gates passed.</p>'
        return f'<p id="gates-failed">All {judged} judged benchmark gates passed.</p>' + unjudged
    explained = {id(r) for a in data.attributions for r in failed if _explained_by(a, r)}
    shown = [r for r in failed if r["run_failed"] or id(r) not in explained]
    shown.sort(key=lambda r: (not r["run_failed"], RANK[r["verdict"]], r["name"]))
    rows = []
    for record in shown[:MAX_GATE_ROWS]:
        value = record["observed"]["value"]
        kind = "failed run" if record["run_failed"] else "below threshold"
        rows.append(
            f'<tr class="v-{record["verdict"]}" data-name="{escape(record["name"])}" data-kind="{kind}">'
            f"<td>{escape(record['benchmark'])}</td><td>{escape(record['name'])}</td><td>{kind}</td>"
            f"<td>{'—' if value is None else f'{value:g}'} {escape(record['observed']['unit'])}</td>"
            f"<td>{record['threshold']['op']} {_cell(record['threshold']['value'])}</td>"
            f"<td>{escape(record['reason'])}</td><td>{escape(record['remedy'][:300])}</td></tr>"
        )
    notes = []
    if len(shown) > MAX_GATE_ROWS:
        notes.append(f"{len(shown) - MAX_GATE_ROWS} more not shown.")
    rest = len(failed) - len(shown)
    if rest:
        notes.append(f"{rest} more gate(s) not passed are explained by the attributions above.")
    note = f'<p id="gates-note">{" ".join(notes)}</p>' if notes else ""
    table = (
        '<table id="gates-failed"><tr><th>benchmark</th><th>gate</th><th>kind</th><th>observed</th><th>threshold</th>'
        "<th>reason</th><th>remedy</th></tr>" + "".join(rows) + "</table>"
        if rows
        else ""
    )
    return table + note + unjudged


def unjudged_section(data: ReportData) -> str:
    """The gates nobody judged (UNKNOWN): measured without a threshold, or not run (skipped), with the reason;
    folded, since they fail nothing."""
    unknown = [r for r in data.runs if r["verdict"] == "UNKNOWN"]
    if not unknown:
        return ""
    rows = [
        f'<tr class="v-UNKNOWN" data-name="{escape(r["name"])}"><td>{escape(r["benchmark"])}</td>'
        f"<td>{escape(r['name'])}</td><td>{'not run' if r['observed']['value'] is None else 'not judged'}</td>"
        f"<td>{_value(r)}</td><td>{escape(r['reason'])}</td></tr>"
        for r in sorted(unknown, key=lambda r: (r["benchmark"], r["name"]))[:MAX_GATE_ROWS]
    ]
    more = f"<p>{len(unknown) - MAX_GATE_ROWS} more not shown.</p>" if len(unknown) > MAX_GATE_ROWS else ""
    return (
        f'<details id="gates-unjudged"><summary>{len(unknown)} gate(s) not judged (no threshold set, or not run)'
        "</summary><table><tr><th>benchmark</th><th>gate</th><th>kind</th><th>observed</th><th>reason</th></tr>"
        + "".join(rows)
        + f"</table>{more}</details>"
    )


def _value(record) -> str:
    value = record["observed"]["value"]
    return "—" if value is None else f"{value:g} {escape(record['observed']['unit'])}"


def charts_section(data: ReportData, expected: list[str]) -> str:
    parts = []

    def add(title: str, body: str) -> None:
        if body.startswith("<svg"):
            expected.append(body.split('id="', 1)[1].split('"', 1)[0])
        parts.append(f"<h3>{escape(title)}</h3>{body}")

    by_benchmark: dict[str, list] = {}
    for record in data.runs:
        by_benchmark.setdefault(record["benchmark"], []).append(record)
    nccl = by_benchmark.get("nccl", [])
    if nccl:
        add("NCCL bus bandwidth", charts.nccl_curves(nccl))
    for benchmark in sorted(set(by_benchmark) - OWN_SECTIONS):
        groups: dict[str, list] = {}
        for record in by_benchmark[benchmark]:
            if len(record["nodes"]) == 1:
                groups.setdefault(record["group"], []).append(record)
        for group, runs in sorted(groups.items()):
            add(f"{benchmark} {group} per node", charts.gate_dots(benchmark, group, runs))
    sweep = sweep_runs(by_benchmark.get("resnet50", []))
    if sweep:
        add("ResNet-50 scaling", charts.resnet_scaling(sweep))
    rails: dict[str, list] = {}
    for record in by_benchmark.get("ib_write_bw", []):
        rails.setdefault(record["rail"] or "?", []).append(record)
    for rail, pairs in sorted(rails.items()):
        add(f"ib_write_bw on {rail}", charts.ib_rail(rail, pairs))
    targets: dict[str, list] = {}
    for record in by_benchmark.get("fio", []):
        targets.setdefault(record.get("target") or record["group"], []).append(record)
    for target, runs in sorted(targets.items()):
        drawn = charts.fio_target(target, runs)
        for title, body in drawn:
            add(title, body)
        if not drawn:
            parts.append(f'<h3>fio on {escape(target)}</h3><p class="not-run">no job measured on {escape(target)}</p>')
    if "p2p" in by_benchmark:
        parts.append("<h3>GPU peer-to-peer bandwidth (p2pBandwidthLatencyTest)</h3>" + p2p_table(by_benchmark["p2p"]))
    return "".join(parts) if parts else _not_run("Benchmarks")


def _number(value) -> str:
    return "—" if value is None else f"{value:g}"


def p2p_table(runs: list) -> str:
    """One row per node: verdict, GPUs, SKU, the lowest P2P=Enabled/Disabled ratios, the lowest bidirectional
    P2P=Enabled bandwidth against the site's floor, and the reason (a skipped node's is why it did not run)."""
    rows = []
    for record in sorted(runs, key=lambda r: (RANK[r["verdict"]], r["nodes"][0]))[:MAX_GATE_ROWS]:
        observed, limit = record["observed"], record["threshold"]["value"]
        rows.append(
            f'<tr class="v-{record["verdict"]}" data-node="{escape(record["nodes"][0])}" '
            f'data-verdict="{record["verdict"]}"><th>{escape(record["nodes"][0])}</th><td>{record["verdict"]}</td>'
            f"<td>{_number(observed.get('gpus'))}</td><td>{escape(str(observed.get('sku') or '—'))}</td>"
            f"<td>{_number(observed.get('uni_min_ratio'))}</td><td>{_number(observed.get('bi_min_ratio'))}</td>"
            f"<td>{_number(observed['value'])}</td><td>{'—' if limit is None else f'&gt;= {limit:g}'}</td>"
            f"<td>{escape(record['reason'])}</td></tr>"
        )
    more = f"<p>{len(runs) - MAX_GATE_ROWS} more nodes not shown.</p>" if len(runs) > MAX_GATE_ROWS else ""
    return (
        '<table id="p2p"><tr><th>node</th><th>verdict</th><th>GPUs</th><th>SKU</th>'
        "<th>lowest uni ratio (enabled/disabled)</th><th>lowest bi ratio</th><th>lowest bi P2P=Enabled GB/s</th>"
        "<th>site floor GB/s</th><th>reason</th></tr>" + "".join(rows) + f"</table>{more}"
    )


# -- burn-in -----------------------------------------------------------------------------------------------------
def burnin_section(data: ReportData, expected: list[str]) -> str:
    """gpuforge burnin: what ran, the trend verdict per node, node x round verdicts, counters that grew, DCGM per
    round and the rates per round (src/gpuforge/burnin_judge.py judged all of it; the page only shows it)."""
    view = data.burnin
    if view is None:
        return _not_run("Burn-in (gpuforge burnin)")
    summary, parameters = view.summary, view.parameters
    failed = [node for node in view.node_order() if view.trend.get(node, {}).get("verdict") == "FAIL"]
    verdict = str(summary.get("verdict") or "UNKNOWN")
    head = (
        f'<p id="burnin-summary" data-verdict="{escape(verdict)}" data-rounds="{len(view.rounds)}">'
        f'<span class="v-{escape(verdict)}"><strong>{escape(verdict)}</strong></span>'
        + (f" — failed: {escape(', '.join(failed))}" if failed else "")
        + f" — {len(view.rounds)} round(s) over {len(view.trend)} node(s)"
        + (f", {escape(str(summary['started']))} → {escape(str(summary['ended']))}" if summary.get("started") else "")
        + (f" (stopped: {escape(str(summary['stopped']))})" if summary.get("stopped") else "")
        + f"; slower means the median of the last rounds below {_number(parameters.get('slowdown_fraction'))} x the "
        f"median of the first {_number(parameters.get('window'))}; DCGM level {_number(parameters.get('dcgm_level'))}"
        + f"; <code>{escape(view.source)}</code></p>"
    )
    return (
        head
        + "<h3>Trend verdict per node</h3>"
        + burnin_trend_table(view)
        + "<h3>Verdict per node and round</h3>"
        + burnin_matrix(view)
        + "<h3>Port error counters that grew</h3>"
        + burnin_counters(view)
        + "<h3>DCGM diagnostics per round</h3>"
        + burnin_dcgm(view)
        + "<h3>NCCL and ib_write_bw per round</h3>"
        + burnin_rates(view, expected)
    )


def burnin_trend_table(view) -> str:
    rows = []
    for node in view.node_order():
        trend = view.trend.get(node)
        if trend is None:
            continue
        slowed = "; ".join(
            f"{s['metric']} {s['first_median']:g} → {s['last_median']:g} Gb/s ({s['ratio']:.0%})"
            for s in trend["slowed"]
        )
        grew = "; ".join(f"round {g['round']} {g['port']} {g['counter']} +{g['growth']}" for g in trend["errors_grew"])
        rows.append(
            f'<tr class="v-{trend["verdict"]}" data-node="{escape(node)}" data-verdict="{trend["verdict"]}">'
            f"<th>{escape(node)}</th><td>{trend['verdict']}</td><td>{trend['rounds']}</td>"
            f"<td>{escape(', '.join(str(n) for n in trend['failed_rounds'])) or '—'}</td>"
            f'<td data-what="errors-grew">{escape(grew) or "—"}</td><td data-what="slowed">{escape(slowed) or "—"}</td>'
            f"<td>{'<br>'.join(escape(r) for r in trend['reasons']) or '—'}</td>"
            f"<td>{escape(trend.get('remedy') or '')}</td></tr>"
        )
    return (
        '<table id="burnin-trend"><tr><th>node</th><th>verdict</th><th>rounds</th><th>failed rounds</th>'
        "<th>errors that grew</th><th>got slower</th><th>reasons</th><th>remedy</th></tr>" + "".join(rows) + "</table>"
    )


def _round_detail(record) -> str:
    return _detail(
        [
            ("verdict", record["verdict"]),
            *(("reason", reason) for reason in record["reasons"]),
            ("NCCL single-node busbw (Gb/s)", record["nccl"]["busbw_gbit_per_s"]),
            ("DCGM", f"{record['dcgm']['status']} {record['dcgm']['detail']}".strip()),
            ("remedy", record.get("remedy")),
            ("round", f"{record['started']} → {record['ended']}"),
        ]
    )


def burnin_matrix(view) -> str:
    """A row per node (failing first), a column per round in order, and the trend over all rounds."""
    rounds = view.rounds
    header = (
        '<tr><th class="node">node</th><th>trend</th>'
        + "".join(f'<th data-round="{n}">round {n}</th>' for n in rounds)
        + "</tr>"
    )
    rows = [header]
    for node in view.node_order():
        trend = (view.trend.get(node) or {}).get("verdict", "UNKNOWN")
        parts = [
            f'<tr data-node="{escape(node)}" data-verdict="{trend}"><th class="node">{escape(node)}</th>'
            f'<td class="v-{trend}">{trend}</td>'
        ]
        for number in rounds:
            record = view.cell(node, number)
            if record is None:
                parts.append(_matrix_cell("NONE", {"round": number}, f"{node} round {number}: no record"))
                continue
            verdict = record["verdict"]
            parts.append(
                _matrix_cell(
                    verdict,
                    {"round": number, "verdict": verdict},
                    f"{node} round {number}: {verdict}",
                    _round_detail(record) if verdict != "PASS" else "",
                )
            )
        rows.append("".join(parts) + "</tr>")
    return f'<div class="matrix-wrap"><table id="burnin-matrix">{"".join(rows)}</table></div>'


def burnin_counters(view) -> str:
    """Every port error counter that grew in a round (growth > 0, or at its maximum), with the values read before
    and after the benchmarks where the round's counters file is there, and its limit; nothing when none grew."""
    rows, unread = [], []
    for record in sorted(view.records, key=lambda r: (r["node"], r["round"])):
        block = record["counters"]
        if not block["read"]:
            unread.append(f"{record['node']} round {record['round']}")
        for port, counters in block["ports"].items():
            for name, growth in counters.items():
                if growth != "saturated" and growth <= 0:
                    continue
                limit = block["limits"].get(name, 0)
                over = name in block["over_limit"].get(port, {})
                verdict = "FAIL" if over else ("WARN" if growth == "saturated" else "PASS")
                before, after = view.counter_values.get((record["node"], record["round"], port, name), (None, None))
                rows.append(
                    (
                        RANK[verdict],
                        record["node"],
                        record["round"],
                        f'<tr class="v-{verdict}" data-node="{escape(record["node"])}" data-round="{record["round"]}" '
                        f'data-port="{escape(port)}" data-counter="{escape(name)}" data-growth="{escape(str(growth))}">'
                        f"<th>{escape(record['node'])}</th><td>{record['round']}</td><td>{escape(port)}</td>"
                        f"<td>{escape(name)}</td><td>{_number(before)}</td><td>{_number(after)}</td>"
                        f"<td><strong>{'at maximum' if growth == 'saturated' else f'+{growth}'}</strong></td>"
                        f"<td>{limit}</td><td>{'over the limit' if over else escape(verdict)}</td></tr>",
                    )
                )
    ports = {(r["node"], port) for r in view.records for port in r["counters"]["ports"]}
    note = (
        f'<p class="not-run" id="burnin-counters-unread">Counters not read: {escape(", ".join(unread))}.</p>'
        if unread
        else ""
    )
    if not rows:
        return (
            f'<p id="burnin-counters" data-grew="0">No port error counter grew in any round ({len(ports)} port(s) '
            f"read before and after every round's benchmarks).</p>" + note
        )
    rows.sort(key=lambda row: row[:3])
    shown = [row[3] for row in rows[:MAX_GATE_ROWS]]
    more = f"<p>{len(rows) - MAX_GATE_ROWS} more not shown.</p>" if len(rows) > MAX_GATE_ROWS else ""
    return (
        f'<table id="burnin-counters" data-grew="{len(rows)}"><tr><th>node</th><th>round</th><th>port</th>'
        "<th>counter</th><th>before</th><th>after</th><th>growth</th><th>limit</th><th>judged</th></tr>"
        + "".join(shown)
        + f"</table>{more}{note}"
    )


def burnin_dcgm(view) -> str:
    rounds = view.rounds
    rows = [
        '<tr><th class="node">node</th>' + "".join(f'<th data-round="{n}">round {n}</th>' for n in rounds) + "</tr>"
    ]
    for node in view.node_order():
        parts = [f'<tr data-node="{escape(node)}"><th class="node">{escape(node)}</th>']
        for number in rounds:
            record = view.cell(node, number)
            if record is None:
                parts.append(_matrix_cell("NONE", {"round": number}))
                continue
            dcgm = record["dcgm"]
            status = dcgm["status"]
            detail = (
                _detail([("DCGM level", dcgm["level"]), ("status", status), ("detail", dcgm["detail"])])
                if status != "pass" and dcgm["detail"]
                else ""
            )
            parts.append(
                _matrix_cell(
                    DCGM_VERDICT[status],
                    {"round": number, "status": status},
                    f"{node} round {number}: DCGM level {dcgm['level']} {status}",
                    detail,
                    label=status,
                )
            )
        rows.append("".join(parts) + "</tr>")
    return f'<div class="matrix-wrap"><table id="burnin-dcgm">{"".join(rows)}</table></div>'


def burnin_rates(view, expected: list[str]) -> str:
    """A trend chart per node (nodes that got slower and failing nodes first, MAX_TREND_CHARTS of them) and a table
    of every node's rates per round with the ratio of its last rounds' median to its first rounds'."""
    by_node: dict[str, list] = {}
    for record in view.records:
        by_node.setdefault(record["node"], []).append(record)
    ranked = view.node_order()
    order = sorted(ranked, key=lambda n: not (view.trend.get(n) or {}).get("slowed"))  # stable: failing first after
    fraction = view.parameters.get("slowdown_fraction")
    figures = []
    for node in [n for n in order if n in by_node][:MAX_TREND_CHARTS]:
        slowed = (view.trend.get(node) or {}).get("slowed") or []
        body = charts.burnin_trend(node, by_node[node], slowed, fraction)
        if body.startswith("<svg"):
            expected.append(charts.chart_id("burnin", node))
        caption = escape(node) + (" — got slower: " + escape(", ".join(s["metric"] for s in slowed)) if slowed else "")
        figures.append(
            f'<figure class="burnin-trend{" slowed" if slowed else ""}" data-node="{escape(node)}" '
            f'data-slowed="{escape(",".join(s["metric"] for s in slowed))}">{body}'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    more = len(by_node) - len(figures)
    rounds = view.rounds
    rows = []
    for node in order:
        slowed = {s["metric"]: s for s in (view.trend.get(node) or {}).get("slowed") or []}
        values: dict[str, dict] = {}
        for record in by_node.get(node, []):
            for metric, value in charts.burnin_metrics(record).items():
                values.setdefault(metric, {})[record["round"]] = value
        for metric in sorted(values, key=lambda m: (m not in slowed, m != charts.NCCL_METRIC, m)):
            entry = slowed.get(metric)
            rows.append(
                f'<tr class="{"slowed v-FAIL" if entry else ""}" data-node="{escape(node)}" '
                f'data-metric="{escape(metric)}">'
                f"<th>{escape(node)}</th><td>{escape(metric)}</td>"
                + "".join(f"<td>{_number(values[metric].get(n))}</td>" for n in rounds)
                + (f'<td class="ratio">{entry["ratio"]:.0%} (slower)</td>' if entry else "<td>—</td>")
                + "</tr>"
            )
    shown = rows[:MAX_GATE_ROWS]
    notes = []
    if more > 0:
        notes.append(f"{more} node(s) without a chart: their rates are in the table.")
    if len(rows) > MAX_GATE_ROWS:
        notes.append(f"{len(rows) - MAX_GATE_ROWS} more rows not shown.")
    table = (
        '<table id="burnin-rates"><tr><th>node</th><th>Gb/s</th>'
        + "".join(f"<th>round {n}</th>" for n in rounds)
        + "<th>last / first rounds (median)</th></tr>"
        + "".join(shown)
        + "</table>"
    )
    return (
        f'<div class="burnin-trends">{"".join(figures)}</div>' + (f"<p>{' '.join(notes)}</p>" if notes else "") + table
    )


# -- inventory ---------------------------------------------------------------------------------------------------
def inventory_section(data: ReportData) -> str:
    fleet = data.fleet
    if not fleet:
        return (
            '<p class="not-run" id="inventory-none">No fleet_consistency record in this run (validation files written '
            "before playbooks/validate.yml compared firmware, driver, VBIOS, OFED and kernel across nodes).</p>"
        )
    rows = []
    outlier_count = 0
    for record in sorted(fleet, key=lambda r: (RANK[r["verdict"]], r["node"])):
        observed, expected = record["observed"] or {}, record["threshold"].get("expected") or {}
        cells = []
        for prop, _label in INVENTORY_PROPERTIES:
            keys = sorted(key for key in observed if key == prop or key.startswith(prop + "."))
            off = [key for key in keys if observed.get(key) != expected.get(key)]
            values = sorted({str(observed[key]) for key in keys})
            if off:
                outlier_count += 1
                text = "<br>".join(
                    f"{escape(key.partition('.')[2] or prop)}: <strong>{escape(str(observed[key]))}</strong> "
                    f"(majority {escape(str(expected.get(key)))})"
                    for key in off
                )
                cells.append(f'<td class="outlier" data-property="{prop}">{text}</td>')
            else:
                cells.append(f'<td data-property="{prop}">{escape(", ".join(values)) or "—"}</td>')
        rows.append(
            f'<tr data-node="{escape(record["node"])}" class="v-{record["verdict"]}"><th>{escape(record["node"])}</th>'
            f"<td>{escape(str(record.get('system') or ''))}</td>{''.join(cells)}</tr>"
        )
    header = (
        "<tr><th>node</th><th>system</th>" + "".join(f"<th>{label}</th>" for _, label in INVENTORY_PROPERTIES) + "</tr>"
    )
    return (
        f"<p>{outlier_count} outlier value(s) against the majority of the same system.</p>"
        f'<table id="inventory">{header}{"".join(rows)}</table>'
    )


# -- stages and provenance ---------------------------------------------------------------------------------------
def provenance_section(data: ReportData) -> str:
    meta = data.meta or {}
    rows = [
        (key, meta.get(key))
        for key in ("run_id", "command", "playbook", "inventory", "started", "finished", "duration_s", "status", "rc")
    ]
    rows += [("git commit (checkout at report time)", meta.get("git_commit") or "unknown")]
    rows += sorted((meta.get("versions") or {}).items())
    parts = ['<table id="provenance">'] + [
        f"<tr><th>{escape(str(key))}</th><td>{_cell(value) if value is not None else '—'}</td></tr>"
        for key, value in rows
    ]
    parts.append("</table>")
    if data.stages:
        parts.append('<table id="stages"><tr><th>stage</th><th>status</th><th>rc</th><th>detail</th></tr>')
        parts += [
            f'<tr class="v-{s["verdict"]}"><td>{escape(s["stage"])}</td><td>{escape(s["status"])}</td>'
            f"<td>{_cell(s['rc'])}</td><td>{escape(s['detail'])}</td></tr>"
            for s in data.stages
        ]
        parts.append("</table>")
    return "".join(parts)


def render(data: ReportData) -> str:
    expected: list[str] = []
    benchmarks = (
        "<h3>Attributions</h3>" + attributions_section(data) + "<h3>Gates not passed</h3>" + gates_section(data)
        if data.runs or data.attributions
        else _not_run("Benchmarks")
    )
    body = (
        f"<h1>{escape(data.title)}</h1>{summary_line(data)}"
        f"<h2>Findings (root causes first)</h2>{findings_section(data)}"
        f"<h2>Nodes &times; checks</h2>{matrix_section(data)}"
        f"<h2>Benchmarks</h2>{benchmarks}{charts_section(data, expected) if data.runs else ''}"
        f"<h2>Burn-in</h2>{burnin_section(data, expected)}"
        f"<h2>Inventory across nodes</h2>{inventory_section(data)}"
        f"<h2>Run</h2>{provenance_section(data)}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(data.title)}</title><style>{_CSS}</style></head>"
        f"<body data-expected-charts='{escape(json.dumps(expected))}' data-charts-ok=\"pending\">"
        f"{body}<script>{_SCRIPT}</script></body></html>\n"
    )
