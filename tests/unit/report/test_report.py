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
from bench_summaries import written

from gpuforge import report
from gpuforge.report import charts, html, markdown
from gpuforge.report.export import load_records
from gpuforge.report.model import ReportData, load

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "tests" / "fixtures" / "records" / "demo-run"
BENCH = RUN / "benchmark" / "bench" / "20261126T151133Z"
FLEET_RUN = ROOT / "tests" / "fixtures" / "report" / "fleet-run"
# What lab/specs/demo.yml injects into gpu03 (a Down port, uncorrectable ECC errors, Xid 48/79), as the checks that
# find it; the GPUDirect RDMA loopback fails on the Down port as a consequence (caused_by ib_port_state).
FAULTS = {("gpu03", "ecc_volatile_dbe"), ("gpu03", "ib_port_state"), ("gpu03", "xid")}
CONSEQUENCE = ("gpu03", "gdr_ib_write_bw")
CHECKS_PER_NODE = 33
NODES = ("gpu01", "gpu02", "gpu03")


def _bench_results():
    summary = _read(BENCH / "summary.json")
    return [result for block in summary.values() if isinstance(block, dict) for result in block["results"]]


def _failed_gates():
    """Gates the bench summary did not pass: below their threshold or without a result (run_failed)."""
    return [result["name"] for result in _bench_results() if result["verdict"] == "FAIL"]


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
    assert data.meta["run_id"] == "20261126T150243Z-dbfcc6"
    # gpu01 passes (its slow ib_write_bw pairs all lead to gpu02; no NCCL run fell below the median in this run);
    # gpu02 is the slow node of ib_write_bw (its links degraded by the lab), gpu03 has the injected faults.
    assert {node: entry["verdict"] for node, entry in data.verdicts.items()} == {
        "gpu01": "PASS",
        "gpu02": "FAIL",
        "gpu03": "FAIL",
    }
    # The curves come from the parsed nccl-tests results beside the bench summary, 20 sizes each.
    assert sorted((series.label, len(series.points)) for series in data.nccl) == [
        ("nccl-multi-ib", 20),
        ("nccl-multi-ib_gdr", 20),
        ("nccl-multi-tcp", 20),
        ("nccl-rail-mlx5_0-1", 20),
        ("nccl-rail-mlx5_1-1", 20),
        ("nccl-rail-mlx5_2-1", 20),
        ("nccl-rail-mlx5_3-1", 20),
        ("nccl-single-gpu01", 20),
        ("nccl-single-gpu02", 20),
        ("nccl-single-gpu03", 20),
    ]
    # The sweep ran each GPU count in fp32 and amp (resnet50-sweep-<n>gpu-<precision>).
    sweep = sorted(
        (result["name"], int(result["name"].split("-")[2][: -len("gpu")]), result["images_per_second"])
        for result in _read(BENCH / "summary.json")["resnet50"]["results"]
        if result["name"].startswith("resnet50-sweep-")
    )
    assert len(sweep) == 6
    assert sorted((point.source, point.gpus, point.images_per_sec) for point in data.resnet50) == sweep


def test_summary_line_counts_nodes_and_failed_gates(page):
    line = re.search(r'<p id="summary".*?</p>', page, re.S).group(0)
    text = re.sub(r"<[^>]+>", "", line)
    assert "3 nodes: 1 PASS · 0 WARN · 2 FAIL · 0 UNKNOWN" in text
    # 9 ib_write_bw pairs (7 slow ones of gpu02, the 2 of gpu03's Down port without a result), of 61 gates
    # (fio 21, ib_write_bw 12, nccl 10, p2p 3, resnet50 12, slurm 3); no NCCL run failed in this run
    assert (len(_failed_gates()), len(_bench_results())) == (9, 61)
    assert "benchmark gates failed: 9 of 61" in text
    assert "20261126T150243Z-dbfcc6 (demo), 2026-11-26T15:02:43Z → 2026-11-26T15:20:59Z" in text


def test_matrix_has_a_row_per_node_failing_first_and_the_faults_as_failing_cells(page):
    rows = re.findall(r'<tr data-node="([^"]+)" data-verdict="([A-Z]+)">', page)
    assert rows == [("gpu02", "FAIL"), ("gpu03", "FAIL"), ("gpu01", "PASS")]
    cells = _matrix_cells(page)
    failing = {cell for cell, verdict in cells.items() if verdict == "FAIL"}
    # gpu03's benchmarks fail for its Down port (the ib_write_bw port attribution), gpu02's for its slow links
    assert failing == FAULTS | {CONSEQUENCE, ("gpu02", "benchmarks"), ("gpu03", "benchmarks")}
    assert {cell for cell, verdict in cells.items() if verdict == "WARN"} == set()
    assert cells[("gpu01", "benchmarks")] == "PASS"  # its slow pairs are gpu02's, explained by the attribution
    # every check of every node, and the fleet comparison (fleet_consistency) that the files now carry
    assert {check for _, check in cells} - {"benchmarks"} == {r["check"] for r in load_records(RUN) if "check" in r}
    assert len([cell for cell in cells if cell[1] not in ("benchmarks", "fleet_consistency")]) == 3 * CHECKS_PER_NODE
    assert {cell for cell in cells if cell[1] == "fleet_consistency"} == {(n, "fleet_consistency") for n in NODES}
    # Failing checks are the first columns.
    header = re.search(r'<table id="matrix"><tr>(.*?)</tr>', page, re.S).group(1)
    columns = re.findall(r'<th class="check"[^>]*>([^<]+)</th>', header)
    assert set(columns[:4]) == {"ecc_volatile_dbe", "ib_port_state", "xid", "gdr_ib_write_bw"}
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
    # the run's own consequence: the GPUDirect RDMA loopback on the Down port
    assert 'class="consequence" data-node="gpu03" data-check="gdr_ib_write_bw"' in port


def test_a_check_not_run_on_a_node_is_an_empty_cell_and_a_passing_one_folds_nothing():
    built = [r for r in load_records(RUN) if not (r.get("node") == "gpu01" and r.get("check") == "xid")]
    page = html.render(ReportData(records=built))
    assert '<td class="c v-NONE" data-check="xid" title="gpu01 xid: not run"></td>' in page
    assert '<td class="c v-PASS" data-check="xid" data-verdict="PASS" title="gpu02 xid: PASS"></td>' in page
    assert re.search(r'<td class="c v-FAIL" data-check="xid" data-verdict="FAIL"><details class="cell">'
                     r'<summary title="gpu03 xid: FAIL">✗</summary><dl class="detail">', page)  # fmt: skip


def test_the_runs_consequence_sits_under_its_root_cause(page):
    roots = re.findall(r'<li class="root v-FAIL" data-node="([^"]+)" data-check="([^"]+)"', page)
    assert set(roots) == FAULTS
    findings = re.search(r'<ul id="findings".*?</ul>\s*</li>\s*(<li|</ul>)', page, re.S).group(0)
    port = re.search(r'data-check="ib_port_state">.*?</li>\s*</ul>', findings, re.S).group(0)
    assert 'class="consequence" data-node="gpu03" data-check="gdr_ib_write_bw"' in port


def test_benchmark_attribution_and_the_failed_run_are_shown(page):
    attributions = re.search(r'<table id="attributions">.*?</table>', page, re.S).group(0)
    assert re.findall(r'data-subject="([a-z]+)" data-name="([^"]+)"', attributions) == [
        ("node", "gpu02"),
        ("link", "gpu03:mlx5_2/1"),
    ]
    assert "take gpu02 out of service" in attributions
    gates = re.findall(r'<tr class="v-FAIL" data-name="([^"]+)" data-kind="([^"]+)"', page)
    # The Down port's two pairs never ran: they stay listed as failed runs; the 7 slow pairs of gpu02 sit under
    # their attribution and are only counted.
    assert gates == [("gpu02__gpu03__mlx5_2", "failed run"), ("gpu03__gpu01__mlx5_2", "failed run")]
    assert len(_failed_gates()) - len(gates) == 7
    assert "7 more gate(s) not passed are explained by the attributions above." in page
    node = re.search(r'data-name="gpu02">.*?</tr>', attributions, re.S).group(0)
    assert "7 failed gate(s) explained" in node
    port = re.search(r'data-name="gpu03:mlx5_2/1">.*?</tr>', attributions, re.S).group(0)
    assert "2 failed gate(s) explained" in port
    assert "mlx5_2/1 is not Active on gpu03" in page


def test_every_chart_draws_its_threshold(page):
    ids = json.loads(re.search(r"data-expected-charts='([^']+)'", page).group(1).replace("&quot;", '"'))
    assert charts.NCCL_CHART_ID in ids and charts.RESNET_CHART_ID in ids
    per_node = {"chart-nccl-nccl_single", "chart-resnet50-resnet50_node_fp32", "chart-resnet50-resnet50_node_amp"}
    assert {"chart-ib_write_bw-mlx5_0", "chart-ib_write_bw-mlx5_3"} | per_node <= set(ids)
    # fio ran with no site threshold set (gpuforge_bench_fio_thresholds): its charts show values not judged.
    unjudged = {chart_id for chart_id in ids if chart_id.startswith("chart-fio-")}
    assert unjudged == {"chart-fio-scratch_var_tmp-sequential", "chart-fio-scratch_var_tmp-random"}
    for chart_id in unjudged:
        assert "grey: not judged" in _svg(page, chart_id) and 'class="threshold"' not in _svg(page, chart_id)
    for chart_id in set(ids) - unjudged:
        assert re.search(r'class="(series )?threshold"', _svg(page, chart_id)), chart_id
    nccl = _svg(page, charts.NCCL_CHART_ID)
    limits = sorted(r["threshold"] for r in _read(BENCH / "summary.json")["nccl"]["results"])
    assert re.findall(r'class="threshold" data-y="([^"]+)"', nccl) == [f"{limit:g}" for limit in limits]
    assert [f"{limit:g}" for limit in limits] == ["0.07"] * 3 + ["0.08"] * 4 + ["2.72"] * 3


def test_chart_points_are_the_records_values(page):
    raw = _read(BENCH / "nccl" / "multi-ib_gdr.json")
    last = raw["nccl"]["rows"][-1]
    gdr = re.search(r'data-label="nccl-multi-ib_gdr" data-points="([^"]+)"', page).group(1).split()
    assert gdr[-1] == f"{last['size']:g}:{round(last['out_of_place']['busbw'] * 8, 3):g}"
    assert re.findall(
        r'class="point v-[A-Z]+"[^>]*data-x="(gpu0\d)" data-y="([^"]+)"', _svg(page, "chart-nccl-nccl_single")
    ) == [
        ("gpu03", "5.09"),
        ("gpu02", "5.44"),
        ("gpu01", "5.82"),
    ]
    resnet = _svg(page, charts.RESNET_CHART_ID)
    sweep = [r for r in _read(BENCH / "summary.json")["resnet50"]["results"] if r["name"].startswith("resnet50-sweep-")]
    gpus = {r["name"]: int(r["name"].split("-")[2][: -len("gpu")]) for r in sweep}
    drawn = re.findall(r'data-label="(measured[^"]*)" data-points="([^"]+)"', resnet)
    assert sorted(point for _, points in drawn for point in points.split()) == sorted(
        f"{gpus[r['name']]}:{r['images_per_second']:g}" for r in sweep
    )
    limits = [
        point
        for points in re.findall(r'data-label="threshold[^"]*" data-points="([^"]+)"', resnet)
        for point in points.split()
    ]
    assert sorted(limits) == sorted(f"{gpus[r['name']]}:{r['threshold']:g}" for r in sweep)
    bars = re.findall(r'class="bar" [^>]*data-x="([^"]+)" data-y="([^"]+)"', _svg(page, "chart-ib_write_bw-mlx5_2"))
    assert bars == [("gpu01__gpu02__mlx5_2", "0")]  # the Down port's pair has no value: it is a failed run


def test_the_scaling_chart_draws_each_precision_as_its_own_curve(page):
    resnet = _svg(page, charts.RESNET_CHART_ID)
    series = re.findall(r'data-points="([^"]+)"', resnet)
    by_name = {r["name"]: r["images_per_second"] for r in _read(BENCH / "summary.json")["resnet50"]["results"]}
    for precision in ("fp32", "amp"):
        curve = " ".join(f"{n}:{by_name[f'resnet50-sweep-{n}gpu-{precision}']:g}" for n in (1, 2, 3))
        assert curve in series, precision


def test_the_page_is_offline(page):
    assert not re.search(r"""(src|href)\s*=|url\(|@import|<link""", page)
    # An address may be quoted as text (the xid check's remedy cites NVIDIA's Xid catalogue), never inside a tag,
    # a style or a script, where a browser would fetch it.
    assert "(https://docs.nvidia.com/deploy/xid-errors/)" in page
    assert not re.search(r"""<[^>]*https?://(?!www\.w3\.org/2000/svg")""", page)
    for _, body in re.findall(r"<(style|script)[^>]*>(.*?)</\1>", page, re.S):
        assert "://" not in body


def test_inventory_lists_the_fleet_values_of_each_node():
    page = html.render(load(FLEET_RUN))
    inventory = re.search(r'<table id="inventory">.*?</table>', page, re.S).group(0)
    assert re.findall(r'<tr data-node="([^"]+)"', inventory) == ["gpu01", "gpu02", "gpu03"]
    assert inventory.count("550.90.07") == 3 and inventory.count("12.23.1020") == 3
    assert 'class="outlier"' not in inventory


def test_an_outlier_is_marked_and_fails_its_node():
    # gpu02's file as fleet_consistency writes it when gpu02's mlx5_1 carries other firmware.
    files = {path.stem: _read(path) for path in sorted((FLEET_RUN / "validation").glob("*.json"))}
    check = {
        "status": "FAIL",
        "observed": {"hca_firmware.mlx5_1": {"gpu02": "12.22.4030"}},
        "expected": next(r for r in files["gpu01"]["records"] if r["check"] == "fleet_consistency")["threshold"][
            "expected"
        ],
        "remedy": "flash it",
    }
    built = [records.fleet_check_record(check, name, files[name]["system"], None, "run") for name in sorted(files)]
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
    assert "3 nodes: 1 PASS, 0 WARN, 2 FAIL, 0 UNKNOWN; benchmark gates failed: 9 of 61" in text
    assert "| gpu02 | FAIL | ib_write_bw: slow node |" in text
    assert "| gpu01 |" not in text.split("## Nodes", 1)[1].split("\n## ", 1)[0]  # a passed node has no row
    benchmarks = text.split("## Benchmarks", 1)[1].split("\n## ", 1)[0]
    assert "| nccl |" not in benchmarks  # nccl named no node or link and failed no gate
    assert "| ib_write_bw | slow node | gpu02 |" in text
    assert "| ib_write_bw | slow link | gpu03:mlx5_2/1 |" in text
    assert "| ib_write_bw | gpu02__gpu03__mlx5_2 | failed run |" in text
    assert "| ib_write_bw | gpu03__gpu01__mlx5_2 | failed run |" in text
    # the consequence is named beside its root cause, not as a finding of its own
    assert '| gpu03 | ib_port_state | FAIL | {"mlx5_2/1": "Down/Disabled"} | Active/LinkUp | gdr_ib_write_bw |' in text
    assert "| gpu03 | gdr_ib_write_bw | FAIL |" not in text


def test_build_writes_both_files_into_the_run_directory(tmp_path):
    run = tmp_path / "20261126T150243Z-dbfcc6"
    shutil.copytree(RUN, run)
    files = report.build(run)
    assert files.html == run / "report.html" and files.markdown == run / "report.md"
    assert '<table id="matrix">' in files.html.read_text(encoding="utf-8")
    assert files.data.meta["versions"]["gpuforge"]
    assert report.latest_run_dir(tmp_path) == run
    (tmp_path / "bench").mkdir()  # the shared folders are not runs
    assert report.latest_run_dir(tmp_path) == run


def test_a_parsed_result_of_another_shape_is_refused_when_the_summary_is_written(tmp_path):
    """The chart data come from the parsed files when summary.yml writes the records (the role's filter reads
    them on the controller); a file of another shape stops it there, named."""
    bench = tmp_path / "bench"
    shutil.copytree(BENCH, bench)
    path = bench / "nccl" / "multi-ib.json"
    document = _read(path)
    document["nccl"]["rows"][0]["size"] = "8"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(records.RecordError, match=r"nccl/multi-ib.json \(for nccl-multi-ib\).*'size' is str"):
        written(_read(bench / "summary.json"), bench)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda summary: summary.pop("records"), r": no 'records': this file was written by an older gpuforge"),
        (lambda summary: summary["records"][3].update(verdict="slow"), r" records\[3\]: verdict 'slow' is not one of"),
    ],
)
def test_a_bench_summary_the_report_cannot_read_is_refused_naming_it(tmp_path, change, message):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    path = run / "benchmark" / "bench" / "20261126T151133Z" / "summary.json"
    summary = _read(path)
    change(summary)
    path.write_text(json.dumps(summary), encoding="utf-8")
    with pytest.raises(records.RecordError, match=re.escape(str(path)) + message) as refused:
        report.build(run)
    assert str(refused.value).endswith("run `gpuforge bench` (playbooks/benchmark.yml) again")


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
    path = run / "validate" / "validation" / "gpu01.json"
    path.write_text(json.dumps(dict(_read(path), records={})), encoding="utf-8")
    assert cli.main(["report", str(run), "--out", str(tmp_path / "out")]) == 1
    assert "gpuforge report: validation/<host>.json: 'records' is dict, expected list" in capsys.readouterr().err
