"""The burn-in section of the HTML and Markdown report, from run folders the real `gpuforge burnin` loop wrote
(conftest.py, burnin_run.py: src/gpuforge/burnin_judge.py judged real-format round files)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import statistics
from pathlib import Path

import burnin_run
import jsonschema
import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records_mod

from gpuforge import cli, report
from gpuforge.report import charts, html, markdown
from gpuforge.report.model import load

ROOT = Path(__file__).resolve().parents[3]


def _schema(name: str):
    schema = json.loads((ROOT / "schemas" / name).read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "burnin" / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def data(burnin_run_dir):
    return load(burnin_run_dir)


@pytest.fixture(scope="module")
def page(data) -> str:
    return html.render(data)


def _table(page: str, table_id: str) -> str:
    return re.search(rf'<table id="{table_id}"[^>]*>.*?</table>', page, re.S).group(0)


def _round_cells(page: str) -> dict:
    """{node: (trend verdict, {round: verdict})} of the node x round matrix, in row order."""
    found = {}
    for node, trend, body in re.findall(
        r'<tr data-node="([^"]+)" data-verdict="([A-Z]+)">(.*?)</tr>', _table(page, "burnin-matrix"), re.S
    ):
        cells = re.findall(r'data-round="(\d+)" data-verdict="([A-Z]+)"', body)
        found[node] = (trend, {int(n): verdict for n, verdict in cells})
    return found


def test_the_fixture_run_is_what_the_code_writes(burnin_run_dir):
    """Every record validates against the schemas; the round files have the shapes docs/burnin.md names."""
    summary = _summary(burnin_run_dir)
    validator = _schema("burnin-round.schema.json")
    assert len(summary["records"]) == 18
    for record in summary["records"]:
        validator.validate(record)
    stages = _schema("stage-result.schema.json")
    top = json.loads((burnin_run_dir / "summary.json").read_text(encoding="utf-8"))
    for record in records_mod.stage_result_records(top):
        stages.validate(record)
    for path in sorted((burnin_run_dir / "burnin").glob("round-*/counters/*.json")):
        assert set(json.loads(path.read_text())) == {"node", "before", "after", "max_growth", "errors"}, path
    for path in sorted((burnin_run_dir / "burnin").glob("round-*/dcgm/*.json")):
        document = json.loads(path.read_text())
        # validate_dcgm.yml's document, or the burn-in's own when the DCGM tasks failed
        written = (
            {"host", "checked_at", "level", "ran", "healthy", "check", "dcgm"},
            {"node", "level", "status", "detail"},
        )
        assert set(document) in written, path


def test_verdict_per_node_and_round_failing_first(page, burnin_run_dir):
    cells = _round_cells(page)
    assert list(cells) == ["gpu02", "gpu03", "gpu01"]
    assert cells["gpu02"] == ("FAIL", {1: "PASS", 2: "FAIL", 3: "PASS", 4: "PASS", 5: "FAIL", 6: "PASS"})
    # gpu03 only warned once (DCGM skips in round 1): the trend over the rounds fails it (it got slower)
    assert cells["gpu03"] == ("FAIL", {1: "WARN", 2: "PASS", 3: "PASS", 4: "PASS", 5: "PASS", 6: "PASS"})
    assert cells["gpu01"] == ("PASS", dict.fromkeys(range(1, 7), "PASS"))
    # the cells are the records' verdicts, not the page's own judgement
    records = {(r["node"], r["round"]): r["verdict"] for r in _summary(burnin_run_dir)["records"]}
    assert {(node, n): v for node, (_, row) in cells.items() for n, v in row.items()} == records
    failing = re.search(r'<tr data-node="gpu02".*?</tr>', _table(page, "burnin-matrix"), re.S).group(0)
    assert "error counters grew on mlx5_0/1: LinkErrorRecoveryCounter +1 (limit 0)" in failing
    assert "DCGM level 3 failed: the DCGM tasks failed" in failing


def test_the_trend_verdict_names_the_errors_that_grew_and_the_node_that_got_slower(page):
    table = _table(page, "burnin-trend")
    rows = dict(re.findall(r'<tr class="v-[A-Z]+" data-node="([^"]+)" data-verdict="([A-Z]+)">', table))
    assert rows == {"gpu02": "FAIL", "gpu03": "FAIL", "gpu01": "PASS"}
    gpu02 = re.search(r'<tr[^>]*data-node="gpu02".*?</tr>', table, re.S).group(0)
    grew = re.search(r'data-what="errors-grew">(.*?)</td>', gpu02).group(1)
    assert grew == "round 2 mlx5_0/1 LinkErrorRecoveryCounter +1; round 2 mlx5_0/1 SymbolErrorCounter +12"
    assert "DCGM level 3 failed in round(s) 5" in gpu02 and "reseat or replace the cable" in gpu02
    gpu03 = re.search(r'<tr[^>]*data-node="gpu03".*?</tr>', table, re.S).group(0)
    slowed = re.search(r'data-what="slowed">(.*?)</td>', gpu03).group(1)
    # gpu03's single-node NCCL busbw of the lab run (nccl-single-gpu03), 0.6 x and the round's jitter from round 4
    bench = json.loads(burnin_run.BENCH.read_text(encoding="utf-8"))
    (single,) = [r["value"] for r in bench["nccl"]["results"] if r["name"] == "nccl-single-gpu03"]
    slower = round(single * 0.6 * burnin_run.JITTER[3], 2)
    assert f"nccl single-node busbw {single:g} → {slower:g} Gb/s (59%)" in slowed
    assert "nccl single-node busbw 5.09 → 3.02 Gb/s (59%)" in slowed
    assert "got slower: " in gpu03 and "thermal or power throttling" in gpu03
    gpu01 = re.search(r'<tr[^>]*data-node="gpu01".*?</tr>', table, re.S).group(0)
    assert 'data-what="errors-grew">—' in gpu01 and 'data-what="slowed">—' in gpu01


def test_counter_deltas_list_only_the_growth_with_before_and_after(page, burnin_run_dir):
    table = _table(page, "burnin-counters")
    rows = re.findall(
        r'<tr class="v-([A-Z]+)" data-node="([^"]+)" data-round="(\d+)" data-port="([^"]+)" data-counter="([^"]+)" '
        r'data-growth="([^"]+)"><th>[^<]*</th><td>\d+</td><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td>',
        table,
    )
    counters = json.loads((burnin_run_dir / "burnin" / "round-2" / "counters" / "gpu02.json").read_text())
    port = ("mlx5_0/1",)
    expected = [
        ("FAIL", "gpu02", "2", *port, name, str(growth), str(counters["before"]["mlx5_0/1"][name]),
         str(counters["after"]["mlx5_0/1"][name]))
        for name, growth in (("LinkErrorRecoveryCounter", 1), ("SymbolErrorCounter", 12))
    ]  # fmt: skip
    assert rows == expected
    assert int(expected[1][7]) - int(expected[1][6]) == 12
    assert 'data-grew="2"' in table


def test_dcgm_level_3_per_round(page):
    table = _table(page, "burnin-dcgm")
    status = {
        (node, int(n)): s
        for node, body in re.findall(r'<tr data-node="([^"]+)">(.*?)</tr>', table, re.S)
        for n, s in re.findall(r'data-round="(\d+)" data-status="([a-z]+)"', body)
    }
    assert len(status) == 18
    assert {key: s for key, s in status.items() if s != "pass"} == {("gpu02", 5): "fail", ("gpu03", 1): "warn"}
    assert "not run: Diagnostic, EUD Test, GPU Memory, PCIe, Targeted Stress" in table


def test_rates_per_round_a_chart_per_node_and_the_slower_node_highlighted(page, burnin_run_dir):
    found = re.findall(r'<figure class="(burnin-trend(?: slowed)?)" data-node="([^"]+)"', page)
    assert found == [("burnin-trend slowed", "gpu03"), ("burnin-trend", "gpu02"), ("burnin-trend", "gpu01")]
    chart = re.search(rf'<svg id="{charts.chart_id("burnin", "gpu03")}".*?</svg>', page, re.S).group(0)
    records = sorted((r for r in _summary(burnin_run_dir)["records"] if r["node"] == "gpu03"), key=lambda r: r["round"])
    nccl = re.search(r'<g class="series slowed" data-label="NCCL busbw slower" data-points="([^"]+)"', chart).group(1)
    assert nccl == " ".join(f"{r['round']}:{r['nccl']['busbw_gbit_per_s']:g}" for r in records)
    # the slowdown line: 0.9 x the median of the first three rounds
    lines = re.findall(r'<g class="threshold" data-y="([^"]+)" data-label="nccl single-node busbw: slowdown', chart)
    first = statistics.median(r["nccl"]["busbw_gbit_per_s"] for r in records[:3])
    assert lines == [f"{round(0.9 * first, 3):g}"] == ["4.581"]
    healthy = re.search(rf'<svg id="{charts.chart_id("burnin", "gpu01")}".*?</svg>', page, re.S).group(0)
    assert "slowed" not in healthy and 'class="threshold"' not in healthy
    rates = _table(page, "burnin-rates")
    slow_rows = re.findall(r'<tr class="slowed v-FAIL" data-node="([^"]+)" data-metric="([^"]+)">', rates)
    assert slow_rows == [
        ("gpu03", "nccl single-node busbw"),
        ("gpu03", "ib_write_bw mlx5_0"),
        ("gpu03", "ib_write_bw mlx5_1"),
        ("gpu03", "ib_write_bw mlx5_3"),
    ]
    # every burn-in chart is promised to the page's check script
    promised = json.loads(re.search(r"data-expected-charts='([^']*)'", page).group(1).replace("&quot;", '"'))
    assert {charts.chart_id("burnin", n) for n in ("gpu01", "gpu02", "gpu03")} <= set(promised)


def test_the_trend_reaches_the_node_verdicts_and_the_main_matrix(data, page):
    # gpu03's rounds passed or warned; only the trend fails it, as in the exports' verdict document
    assert data.verdicts["gpu03"]["verdict"] == "FAIL"
    matrix = _table(page, "matrix")
    assert re.search(r'<tr data-node="gpu03" data-verdict="FAIL">.*?data-check="burn-in" data-verdict="FAIL"', matrix)
    assert re.search(r'<tr data-node="gpu01" data-verdict="PASS">.*?data-check="burn-in" data-verdict="PASS"', matrix)


def test_a_round_without_a_record_is_an_empty_cell_in_both_round_matrices(data):
    gone = next(r for r in data.burnin.records if r["node"] == "gpu01" and r["round"] == 2)
    burnin = dataclasses.replace(data.burnin, records=[r for r in data.burnin.records if r is not gone])
    page = html.render(dataclasses.replace(data, burnin=burnin))
    row = re.search(r'<tr data-node="gpu01" data-verdict="PASS">.*?</tr>', _table(page, "burnin-matrix"), re.S).group(0)
    assert '<td class="c v-NONE" data-round="2" title="gpu01 round 2: no record"></td>' in row
    assert '<td class="c v-PASS" data-round="3" data-verdict="PASS" title="gpu01 round 3: PASS"></td>' in row
    dcgm = re.search(r'<tr data-node="gpu01">.*?</tr>', _table(page, "burnin-dcgm"), re.S).group(0)
    assert '<td class="c v-NONE" data-round="2"></td>' in dcgm
    assert (
        '<td class="c v-PASS" data-round="3" data-status="pass" title="gpu01 round 3: DCGM level 3 pass">pass</td>'
        in dcgm
    )


def test_a_healthy_run_shows_no_deltas(healthy_burnin_run_dir):
    data = load(healthy_burnin_run_dir)
    page = html.render(data)
    assert re.search(r'<p id="burnin-counters" data-grew="0">No port error counter grew in any round \(12 port', page)
    assert '<table id="burnin-counters"' not in page
    cells = _round_cells(page)
    assert cells == {node: ("PASS", dict.fromkeys((1, 2, 3), "PASS")) for node in ("gpu01", "gpu02", "gpu03")}
    assert "burnin-trend slowed" not in page and 'class="slowed' not in page
    text = markdown.render(data)
    assert "No port error counter grew in any round." in text and "DCGM passed in every round." in text


def test_markdown_mirrors_the_burn_in(data):
    text = markdown.render(data)
    section = text.split("## Burn-in", 1)[1]
    assert "| gpu02 | FAIL | P F P P F P |" in section
    assert "| gpu03 | FAIL | W P P P P P | got slower: " in section
    assert "| gpu01 | PASS | P P P P P P |" in section
    assert "| gpu02 | 2 | mlx5_0/1 | SymbolErrorCounter | +12 | 0 | 12 | 0 | over the limit |" in section
    assert "| gpu02 | 5 | 3 | fail | the DCGM tasks failed" in section


def test_without_a_burn_in_the_section_says_not_run():
    page = html.render(load(ROOT / "tests" / "fixtures" / "records" / "demo-run"))
    assert '<p class="not-run">Burn-in (gpuforge burnin): not run</p>' in page
    assert 'data-check="burn-in"' not in page


def test_the_page_stays_self_contained(page):
    assert not re.search(r"""(src|href)\s*=|url\(|<link|@import""", page)


def test_counter_values_are_optional(burnin_run_dir, tmp_path):
    """Without the round's counters file the growth is still listed (the record has it), before/after as —."""
    run = tmp_path / "run"
    shutil.copytree(burnin_run_dir, run)
    shutil.rmtree(run / "burnin" / "round-2" / "counters")
    table = _table(html.render(load(run)), "burnin-counters")
    assert table.count("<td>—</td><td>—</td><td><strong>+") == 2


def _corrupt(burnin_run_dir: Path, tmp_path: Path, change) -> Path:
    run = tmp_path / "run"
    shutil.copytree(burnin_run_dir, run)
    summary = _summary(run)
    change(summary)
    (run / "burnin" / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return run


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: s["records"][4]["dcgm"].update(status="exploded"),
            r"records\[4\] \(gpu02 round 2\) dcgm: unknown status 'exploded'",
        ),
        (
            lambda s: s["records"][1]["counters"].update(ports=[]),
            r"records\[1\] \(gpu02 round 1\) counters: 'ports' is list, expected dict",
        ),
        (
            lambda s: s["records"][0]["counters"]["ports"]["mlx5_0/1"].update(SymbolErrorCounter="12"),
            r"counters.ports\['mlx5_0/1'\]: 'SymbolErrorCounter' is '12', expected an integer or 'saturated'",
        ),
        (
            lambda s: s["records"][0]["nccl"].pop("busbw_gbit_per_s"),
            r"records\[0\] \(gpu01 round 1\) nccl: missing key",
        ),
        (lambda s: s["trend"]["gpu03"]["slowed"][0].pop("ratio"), r"trend\['gpu03'\] slowed\[0\]: missing key 'ratio'"),
        (lambda s: s.pop("trend"), r"burnin/summary.json: missing key 'trend'"),
    ],
)
def test_a_malformed_record_is_reported_by_file_and_key(burnin_run_dir, tmp_path, capsys, change, message):
    run = _corrupt(burnin_run_dir, tmp_path, change)
    with pytest.raises(records_mod.RecordError, match=message):
        load(run)
    # the command says so in one line and exits 1: no traceback
    assert cli.main(["report", str(run), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuforge report: ") and re.search(message, err) and "Traceback" not in err
    assert not (tmp_path / "out" / "report.html").exists()


def test_report_build_writes_both_files(burnin_run_dir, tmp_path):
    files = report.build(burnin_run_dir, tmp_path)
    assert '<h2>Burn-in</h2><p id="burnin-summary" data-verdict="FAIL" data-rounds="6">' in files.html.read_text()
    assert "## Burn-in" in files.markdown.read_text()
