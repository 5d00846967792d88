"""The HTML and Markdown report from the records of a real lab run (tests/fixtures/records/demo-run/, see its
SOURCES.md) and of the fleet comparison of a later one (tests/fixtures/report/fleet-run/)."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records

from gpuforge import report
from gpuforge.report import charts, html, markdown
from gpuforge.report.export import load_records
from gpuforge.report.model import ReportData, load

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "tests" / "fixtures" / "records" / "demo-run"
BENCH = RUN / "benchmark" / "bench" / "20261123T160859Z"
FLEET_RUN = ROOT / "tests" / "fixtures" / "report" / "fleet-run"
FAULTS = {("gpu03", "ecc_volatile_dbe"), ("gpu03", "ib_port_state"), ("gpu03", "xid")}


def _read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def data() -> ReportData:
    return load(RUN)


@pytest.fixture(scope="module")
def page(data) -> str:
    return html.render(data)


def _svg(page: str, chart_id: str) -> str:
    return re.search(rf'<svg id="{chart_id}".*?</svg>', page, re.S).group(0)


def _matrix_cells(page: str) -> dict[tuple[str, str], str]:
    matrix = re.search(r'<table id="matrix">.*?</table>', page, re.S).group(0)
    cells = {}
    for node, body in re.findall(r'<tr data-node="([^"]+)" data-verdict="[A-Z]+">(.*?)</tr>', matrix, re.S):
        for check, verdict in re.findall(r'data-check="([^"]+)" data-verdict="([A-Z]+)"', body):
            cells[(node, check)] = verdict
    return cells


def test_the_report_reads_the_records_the_exports_read(data):
    assert data.records == load_records(RUN)
    assert data.meta["run_id"] == "20261123T155743Z-bfb025"
    assert data.hosts_by_status() == {"gpu01": "ok", "gpu02": "fail", "gpu03": "fail"}
    # The curves come from the parsed nccl-tests results beside the bench summary, 20 sizes each.
    assert sorted((series.label, len(series.points)) for series in data.nccl) == [
        ("nccl-multi-ib", 20),
        ("nccl-multi-ib_gdr", 20),
        ("nccl-multi-tcp", 20),
        ("nccl-single-gpu01", 20),
        ("nccl-single-gpu02", 20),
        ("nccl-single-gpu03", 20),
    ]
    assert [(point.gpus, point.images_per_sec) for point in data.resnet50] == [(1, 11.35), (2, 11.28), (3, 10.26)]


def test_summary_line_counts_nodes_and_failed_gates(page):
    line = re.search(r'<p id="summary".*?</p>', page, re.S).group(0)
    text = re.sub(r"<[^>]+>", "", line)
    assert "3 nodes: 1 PASS · 0 WARN · 2 FAIL · 0 UNKNOWN" in text
    assert "benchmark gates failed: 8 of 25" in text
    assert "20261123T155743Z-bfb025 (demo), 2026-11-23T15:57:43Z → 2026-11-23T16:17:00Z" in text


def test_matrix_has_a_row_per_node_failing_first_and_the_faults_as_failing_cells(page):
    rows = re.findall(r'<tr data-node="([^"]+)" data-verdict="([A-Z]+)">', page)
    assert rows == [("gpu02", "FAIL"), ("gpu03", "FAIL"), ("gpu01", "PASS")]
    cells = _matrix_cells(page)
    failing = {cell for cell, verdict in cells.items() if verdict == "FAIL"}
    assert failing == FAULTS | {("gpu02", "benchmarks")}
    assert len([cell for cell in cells if cell[1] != "benchmarks"]) == 3 * 22
    # Failing checks are the first columns.
    header = re.search(r'<table id="matrix"><tr>(.*?)</tr>', page, re.S).group(1)
    columns = re.findall(r'<th class="check"[^>]*>([^<]+)</th>', header)
    assert set(columns[:3]) == {"ecc_volatile_dbe", "ib_port_state", "xid"}
    # A failing cell opens to observed, threshold and remedy.
    cell = re.search(
        r'data-check="ib_port_state" data-verdict="FAIL"><details class="cell">(.*?)</details>', page, re.S
    )
    assert "mlx5_2/1" in cell.group(1) and "Active/LinkUp" in cell.group(1) and "subnet manager" in cell.group(1)


def test_consequences_are_grouped_under_their_root_cause():
    built = load_records(RUN)
    affinity = next(r for r in built if r.get("node") == "gpu03" and r.get("check") == "gpu_hca_affinity")
    consequence = dict(copy.deepcopy(affinity), verdict="FAIL", caused_by=["ib_port_state"])
    built[built.index(affinity)] = consequence
    page = html.render(ReportData(records=built))
    findings = re.search(r'<ul id="findings".*?</ul>\s*</li>\s*(<li|</ul>)', page, re.S).group(0)
    roots = re.findall(r'<li class="root v-FAIL" data-node="([^"]+)" data-check="([^"]+)"', page)
    assert ("gpu03", "gpu_hca_affinity") not in roots and ("gpu03", "ib_port_state") in roots
    port = re.search(r'data-check="ib_port_state">.*?</li>\s*</ul>', findings, re.S).group(0)
    assert 'class="consequence" data-node="gpu03" data-check="gpu_hca_affinity"' in port
    assert re.search(r'class="c v-FAIL consequence" data-check="gpu_hca_affinity"', page)


def test_benchmark_attribution_and_the_failed_run_are_shown(page):
    attributions = re.search(r'<table id="attributions">.*?</table>', page, re.S).group(0)
    assert re.findall(r'data-subject="([a-z]+)" data-name="([^"]+)"', attributions) == [("node", "gpu02")]
    assert "take gpu02 out of service" in attributions
    gates = re.findall(r'<tr class="v-FAIL" data-name="([^"]+)" data-kind="([^"]+)"', page)
    # The failed run is listed; the 7 slow pairs of gpu02 sit under its attribution and are only counted.
    assert gates == [("gpu02__gpu03__mlx5_2", "failed run")]
    assert "7 more gate(s) not passed are explained by the attributions above." in page
    assert "8 failed gate(s) explained" in attributions
    assert "mlx5_2 port 1 is not Active on gpu03" in page


def test_every_chart_draws_its_threshold(page):
    ids = json.loads(re.search(r"data-expected-charts='([^']+)'", page).group(1).replace("&quot;", '"'))
    assert charts.NCCL_CHART_ID in ids and charts.RESNET_CHART_ID in ids
    assert {"chart-ib_write_bw-mlx5_0", "chart-nccl-nccl_single", "chart-resnet50-resnet50_node"} <= set(ids)
    for chart_id in ids:
        assert re.search(r'class="(series )?threshold"', _svg(page, chart_id)), chart_id
    nccl = _svg(page, charts.NCCL_CHART_ID)
    assert re.findall(r'class="threshold" data-y="([^"]+)"', nccl) == ["0.09", "0.12", "0.13", "2.31", "2.31", "2.31"]


def test_chart_points_are_the_records_values(page):
    raw = _read(BENCH / "nccl" / "multi-ib_gdr.json")
    last = raw["nccl"]["rows"][-1]
    gdr = re.search(r'data-label="nccl-multi-ib_gdr" data-points="([^"]+)"', page).group(1).split()
    assert gdr[-1] == f"{last['size']:g}:{round(last['out_of_place']['busbw'] * 8, 3):g}"
    assert re.findall(
        r'class="point v-[A-Z]+"[^>]*data-x="(gpu0\d)" data-y="([^"]+)"', _svg(page, "chart-nccl-nccl_single")
    ) == [
        ("gpu02", "3.75"),
        ("gpu03", "4.63"),
        ("gpu01", "5.95"),
    ]
    resnet = _svg(page, charts.RESNET_CHART_ID)
    assert 'data-label="measured" data-points="1:11.35 2:11.28 3:10.26"' in resnet
    assert 'data-label="threshold" data-points="1:5.67 2:5.64 3:5.13"' in resnet
    bars = re.findall(r'class="bar" [^>]*data-x="([^"]+)" data-y="([^"]+)"', _svg(page, "chart-ib_write_bw-mlx5_2"))
    assert bars == [("gpu01__gpu02__mlx5_2", "0")]  # the Down port's pair has no value: it is a failed run


def test_the_page_is_offline(page):
    assert not re.search(r"""(src|href)\s*=|url\(|@import|<link|https?://(?!www\.w3\.org/2000/svg")""", page)


def test_inventory_lists_the_fleet_values_of_each_node():
    page = html.render(load(FLEET_RUN))
    inventory = re.search(r'<table id="inventory">.*?</table>', page, re.S).group(0)
    assert re.findall(r'<tr data-node="([^"]+)"', inventory) == ["gpu01", "gpu02", "gpu03"]
    assert inventory.count("550.90.07") == 3 and inventory.count("12.23.1020") == 3
    assert 'class="outlier"' not in inventory


def test_an_outlier_is_marked_and_fails_its_node():
    # gpu02's file as fleet_consistency writes it when gpu02's mlx5_1 carries other firmware.
    files = {path.stem: _read(path) for path in sorted((FLEET_RUN / "validation").glob("*.json"))}
    for host_file in files.values():
        check = host_file["fleet"][host_file["system"]]
        check.update(status="fail", observed={"hca_firmware.mlx5_1": {"gpu02": "12.22.4030"}}, remedy="flash it")
    built = [record for name in sorted(files) for record in records.fleet_check_records(files[name], "run")]
    page = html.render(ReportData(records=built))
    inventory = re.search(r'<table id="inventory">.*?</table>', page, re.S).group(0)
    assert re.findall(r'<tr data-node="([^"]+)"', inventory)[0] == "gpu02"
    outliers = re.findall(r'<td class="outlier" data-property="([a-z_]+)">(.*?)</td>', inventory)
    assert outliers == [("hca_firmware", "mlx5_1: <strong>12.22.4030</strong> (majority 12.23.1020)")]
    assert _matrix_cells(page)[("gpu02", "fleet_consistency")] == "FAIL"


def test_nothing_run_shows_not_run():
    page = html.render(ReportData())
    for section in ("Validation", "Validation and benchmarks", "Benchmarks"):
        assert f'<p class="not-run">{section}: not run</p>' in page
    assert "<svg" not in page and "data-expected-charts='[]'" in page


def test_markdown_summary(data):
    text = markdown.render(data)
    assert "3 nodes: 1 PASS, 0 WARN, 2 FAIL, 0 UNKNOWN; benchmark gates failed: 8 of 25" in text
    assert "| gpu02 | FAIL | ib_write_bw: slow node |" in text
    assert "| ib_write_bw | slow node | gpu02 |" in text
    assert "| ib_write_bw | gpu02__gpu03__mlx5_2 | failed run |" in text
    assert "| gpu03 | ib_port_state | FAIL |" in text


def test_build_writes_both_files_into_the_run_directory(tmp_path):
    run = tmp_path / "20261123T155743Z-bfb025"
    shutil.copytree(RUN, run)
    files = report.build(run)
    assert files.html == run / "report.html" and files.markdown == run / "report.md"
    assert '<table id="matrix">' in files.html.read_text(encoding="utf-8")
    assert files.data.meta["versions"]["gpuforge"]
    assert report.latest_run_dir(tmp_path) == run
    (tmp_path / "bench").mkdir()  # the shared folders are not runs
    assert report.latest_run_dir(tmp_path) == run


def test_a_file_of_another_shape_is_refused(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    path = run / "benchmark" / "bench" / "20261123T160859Z" / "nccl" / "multi-ib.json"
    document = _read(path)
    document["nccl"]["rows"][0]["size"] = "8"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(records.RecordError, match=r"nccl/multi-ib.json \(for nccl-multi-ib\).*'size' is str"):
        report.build(run)


def test_a_port_attribution_explains_the_pairs_it_names():
    page = html.render(load(ROOT / "tests" / "fixtures" / "report" / "localize-run"))
    attributions = re.search(r'<table id="attributions">.*?</table>', page, re.S).group(0)
    assert re.findall(r'data-subject="([a-z]+)" data-name="([^"]+)"', attributions)[:2] == [
        ("link", "gpu03:mlx5_2/1"),
        ("link", "gpu01:mlx5_3/1"),
    ]
    # The Down port's two pairs never ran: they stay listed as failed runs; the slow pairs are under their port
    # or pair attribution.
    gates = re.findall(r'<tr class="v-FAIL" data-name="([^"]+)" data-kind="([^"]+)"', page)
    assert gates == [("gpu02__gpu03__mlx5_2", "failed run"), ("gpu03__gpu01__mlx5_2", "failed run")]
    assert "5 more gate(s) not passed are explained by the attributions above." in page
    port = re.search(r'data-name="gpu01:mlx5_3/1">.*?</tr>', attributions, re.S).group(0)
    assert "2 failed gate(s) explained" in port and "gpu03__gpu01__mlx5_3" in port


def test_the_cli_names_a_file_it_cannot_read(tmp_path, capsys):
    from gpuforge import cli

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    path = run / "benchmark" / "validation" / "gpu01.json"
    path.write_text(json.dumps(dict(_read(path), checks={})), encoding="utf-8")
    assert cli.main(["report", str(run), "--out", str(tmp_path / "out")]) == 1
    assert "gpuforge report: validation/<host>.json: 'checks' is dict, expected list" in capsys.readouterr().err
