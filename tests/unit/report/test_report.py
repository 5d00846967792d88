"""Report rendering from fixture JSON: charts with the expected data points, health table, Markdown rows."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from gpuforge import report
from gpuforge.report import charts, html, markdown
from gpuforge.report.model import ReportData, load

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "report" / "run"


def _points(page: str, chart_id: str) -> list[tuple[str, str]]:
    chart = re.search(rf'<svg id="{chart_id}".*?</svg>', page, re.S).group(0)
    return re.findall(r'class="(?:point|bar)"[^>]*data-x="([^"]+)" data-y="([^"]+)"', chart)


def test_load_recognises_every_section():
    data = load(RUN)
    assert sorted((s.mode, len(s.points)) for s in data.nccl) == [("ib", 4), ("ib_gdr", 4), ("tcp", 4)]
    assert [(p.gpus, p.images_per_sec) for p in data.resnet50] == [(1, 380.5), (8, 2900.0), (16, 5600.0)]
    assert [(i.hca, i.bw_gbps, i.line_rate_gbps) for i in data.ib_write_bw] == [
        ("mlx5_0", 96.5, 100.0),
        ("mlx5_1", 61.2, 100.0),
    ]
    assert data.hosts_by_status() == {"gpu01": "ok", "gpu03": "fail"}
    assert data.meta["run_id"] == "20260101T000000Z-abc123"


def test_html_has_charts_with_data_points():
    page = html.render(load(RUN))
    assert _points(page, charts.NCCL_CHART_ID)[:4] == [
        ("8", "0.01"), ("1024", "0.5"), ("1.04858e+06", "2.1"), ("1.34218e+08", "2.9")
    ]  # fmt: skip
    assert ("1.34218e+08", "12.3") in _points(page, charts.NCCL_CHART_ID)
    nccl = re.search(rf'<svg id="{charts.NCCL_CHART_ID}".*?</svg>', page, re.S).group(0)
    assert [label for label in re.findall(r'data-label="([^"]+)"', nccl)] == [
        "TCP",
        "IB",
        "IB+GDR",
    ]
    assert ("16", "5600") in _points(page, charts.RESNET_CHART_ID)
    # The ideal line: 380.5 images/s per GPU x 16 GPUs.
    assert 'class="series ideal" data-label="ideal scaling" data-points="1:380.5 8:3044 16:6088"' in page
    assert _points(page, charts.IB_CHART_ID) == [("gpu01 mlx5_0", "96.5"), ("gpu01 mlx5_1", "61.2")]
    assert '<tr class="status-fail"><td>gpu03</td><td>ecc_dbe gpu 3</td><td>fail</td><td>2</td><td>0</td>' in page
    assert "1 of 2 nodes healthy" in page
    assert "https://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_missing_sections_show_not_run():
    page = html.render(ReportData())
    for section in ("Validation", "NCCL bus bandwidth", "ResNet-50 scaling", "ib_write_bw per HCA"):
        assert f'<p class="not-run">{section}: not run</p>' in page
    assert "<svg" not in page
    assert "data-expected-charts='[]'" in page
    text = markdown.render(ReportData())
    assert "Validation: not run" in text and "NCCL: not run" in text and "ResNet-50: not run" in text


def test_markdown_rows():
    text = markdown.render(load(RUN))
    assert "1 of 2 nodes healthy." in text
    assert (
        "| gpu03 | ib_port_state mlx5_2/1 | fail | Down | Active | reseat the cable or check the switch port |" in text
    )
    assert "| IB+GDR | all_reduce_perf | 4 | 12.3 | 134217728 | 12.3 |" in text
    assert "| 16 | 5600.0 | 6088.0 | 92% |" in text
    assert "| gpu01 | mlx5_1 | 61.2 | 100.0 | 61% |" in text


def test_build_writes_both_files(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    files = report.build(run)
    assert files.html == run / "report.html" and files.html.read_text().startswith("<!DOCTYPE html>")
    assert files.markdown.read_text().startswith("# gpuforge cluster report")
    assert files.data.meta["versions"]["gpuforge"] == "0.1.0"


def test_ideal_scaling():
    assert charts.ideal_scaling([(8, 2900.0), (1, 400.0)]) == [(1, 400.0), (8, 3200.0)]


def test_slurm_launched_runs_are_labelled_and_kept_off_the_scaling_chart(tmp_path):
    # What playbooks/tasks/bench_slurm.yml writes: the nccl_tests result plus launcher, and the
    # ResNet-50 srun runs under runs_of_srun (the scaling chart plots the mpirun sweep only).
    bench = tmp_path / "bench" / "run1" / "slurm"
    bench.mkdir(parents=True)
    rows = [{"size": 8, "out_of_place": {"busbw": 0.01}}, {"size": 1024, "out_of_place": {"busbw": 0.5}}]
    nccl = {"launcher": "srun", "mode": "tcp", "nccl": {"rows": rows, "collective": "all_reduce_perf"}}
    (bench / "srun-nccl-tcp.json").write_text(json.dumps(nccl), encoding="utf-8")
    resnet = {
        "kind": "resnet50_srun",
        "launcher": "srun",
        "runs_of_srun": [{"resnet50": {"world_size": 3, "total_imgs_per_sec": 9.0}}],
    }
    (bench / "srun-resnet50.json").write_text(json.dumps(resnet), encoding="utf-8")
    data = load(tmp_path)
    assert [(s.mode, s.label, s.points) for s in data.nccl] == [("tcp", "TCP (srun)", [(8, 0.01), (1024, 0.5)])]
    assert data.resnet50 is None


def test_benchmark_playbook_files_pairs_and_run_labels(tmp_path):
    # What playbooks/tasks/bench_ib_pair.yml and bench_nccl.yml write: a pair file whose client side
    # carries the bandwidth (a Down port's pair has none and gets no bar), and one file per nccl run.
    bench = tmp_path / "bench" / "run1"
    (bench / "ib_write_bw").mkdir(parents=True)
    (bench / "nccl").mkdir()
    pair = {
        "name": "gpu01__gpu02__mlx5_0",
        "server": "gpu01",
        "client": "gpu02",
        "hca": "mlx5_0",
        "line_rate_gbps": 100,
    }
    fine = {"pair": pair, "client": {"result": {"bw_average_gbps": 22.5}}, "server": {"result": {}}}
    down = {"pair": {**pair, "hca": "mlx5_2"}, "client": {"result": None, "msg": "port not Active"}, "server": {}}
    (bench / "ib_write_bw" / "gpu01__gpu02__mlx5_0.json").write_text(json.dumps(fine), encoding="utf-8")
    (bench / "ib_write_bw" / "gpu01__gpu02__mlx5_2.json").write_text(json.dumps(down), encoding="utf-8")
    rows = [{"size": 8, "out_of_place": {"busbw": 0.01}}]
    for run in ("single-gpu01", "multi-ib"):
        (bench / "nccl" / f"{run}.json").write_text(
            json.dumps({"mode": "tcp", "nccl": {"rows": rows}}), encoding="utf-8"
        )
    data = load(tmp_path)
    assert [(i.host, i.hca, i.bw_gbps, i.line_rate_gbps) for i in data.ib_write_bw] == [
        ("gpu02->gpu01", "mlx5_0", 22.5, 100.0)
    ]
    assert sorted(s.label for s in data.nccl) == ["multi-ib (TCP)", "single-gpu01 (TCP)"]
