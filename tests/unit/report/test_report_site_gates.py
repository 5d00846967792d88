"""The report and the exports of a run with fio and p2p gates (tests/unit/site_gates.py: the real modules' output
on captured fio 3.33 and p2pBandwidthLatencyTest runs, through the playbooks' filters into summary.json)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from hang_guard import HANG_GUARD_S
from junitparser import Failure, JUnitXml, Skipped

from gpuforge import report
from gpuforge.report import export, html, markdown
from gpuforge.report.model import load

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SEQ = "chart-fio-scratch_var_tmp-sequential"
RAND = "chart-fio-scratch_var_tmp-random"


@pytest.fixture(scope="module")
def data(site_gates_run):
    return load(site_gates_run)


@pytest.fixture(scope="module")
def page(data) -> str:
    return html.render(data)


def _svg(page: str, chart_id: str) -> str:
    return re.search(rf'<svg id="{chart_id}".*?</svg>', page, re.S).group(0)


def _bars(chart: str) -> dict:
    return {
        label: float(value) for label, value in re.findall(r'class="bar"[^>]*data-x="([^"]+)" data-y="([^"]+)"', chart)
    }


def test_fio_charts_per_target_draw_each_job_per_node_and_the_site_thresholds(page):
    expected = json.loads(re.search(r"data-expected-charts='([^']*)'", page).group(1).replace("&quot;", '"'))
    assert {SEQ, RAND, "chart-fio-data-sequential", "chart-fio-data-random"} <= set(expected)
    seq = _svg(page, SEQ)
    assert _bars(seq) == {
        "gpu01 seq_read": 680.49,
        "gpu02 seq_read": 680.49,
        "gpu03 seq_read": 340.25,
        "gpu01 seq_write": 1807.77,
        "gpu02 seq_write": 1807.77,
        "gpu03 seq_write": 1807.77,
    }
    # The floor of seq_read (600 MiB/s) on each of its bars; seq_write has none.
    assert re.findall(r'<g class="threshold" data-y="([^"]+)"', seq) == ["600"] * 3
    assert re.search(r'fill="#c62828" data-x="gpu03 seq_read"', seq)  # FAIL colour
    assert re.search(r'fill="#757575" data-x="gpu01 seq_write"', seq)  # not judged
    rand = _svg(page, RAND)
    assert _bars(rand)["gpu01 rand_read"] == 44866.1  # data-y: 6 significant digits
    assert re.findall(r'<g class="threshold" data-y="([^"]+)"', rand) == ["40000"] * 3
    assert "IOPS (red dashed: the site&#x27;s threshold; grey: not judged)" in rand
    # A job with no result is not drawn; a target where nothing ran says so.
    assert "gpu03 rand_read" not in _bars(_svg(page, "chart-fio-data-random"))
    assert "no job measured on nfs:/shared/home" in page
    # fio and p2p have their own sections, not the generic per-node dots.
    assert 'id="chart-fio-scratch_var_tmp"' not in page and 'id="chart-p2p-p2p"' not in page


def test_failed_and_unjudged_gates(page):
    gates = re.findall(r'<tr class="v-FAIL" data-name="([^"]+)" data-kind="([^"]+)"', page)
    assert ("fio-gpu03-data-rand_read", "failed run") in gates
    assert ("fio-gpu03-scratch:/var/tmp-seq_read", "below threshold") in gates
    unjudged = re.search(r'<details id="gates-unjudged">.*?</details>', page, re.S).group(0)
    assert "13 gate(s) not judged" in unjudged
    assert 'data-name="p2p-gpu02"' in unjudged and 'data-name="fio-gpu01-nfs:/shared/home"' in unjudged
    assert "not mounted on gpu01" in unjudged


def test_p2p_table_one_row_per_node_skipped_with_its_reason(page):
    table = re.search(r'<table id="p2p">.*?</table>', page, re.S).group(0)
    rows = re.findall(r'<tr class="v-[A-Z]+" data-node="([^"]+)" data-verdict="([A-Z]+)">', table)
    assert rows == [("gpu02", "UNKNOWN"), ("gpu01", "PASS"), ("gpu03", "PASS")]
    assert "p2pBandwidthLatencyTest not found at" in table
    assert "<td>Tesla V100-SXM2-16GB</td><td>3.43</td><td>7.22</td><td>75.25</td>" in table


def test_markdown_has_the_fio_and_p2p_tables(data):
    text = markdown.render(data)
    assert "| scratch:/var/tmp | seq_read | 3 | 340.25 | 680.49 | 680.49 | MiB/s | 600 | gpu03 |" in text
    assert "| nfs:/shared/home | (none ran) | 0 |  |  |  |  | not set | not run: gpu01, gpu02, gpu03 |" in text
    assert "| gpu02 | UNKNOWN |  |  |  |  |  |  | p2pBandwidthLatencyTest not found at " in text
    assert "13 gate(s) not judged (no threshold set, or not run)" in text


def test_junit_fails_the_missed_fio_threshold_and_skips_the_missing_p2p_binary(site_gates_run, tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(export.export(site_gates_run, "junit"), encoding="utf-8")
    cases = {(case.classname, case.name): case for suite in JUnitXml.fromfile(str(path)) for case in suite}
    slow = cases[("fio.scratch:/var/tmp", "fio-gpu03-scratch:/var/tmp-seq_read")]
    (failure,) = slow.result
    assert isinstance(failure, Failure)
    assert failure.message.startswith("340.25 MiB/s is below 600 MiB/s")
    assert "remedy: seq_read on scratch:/var/tmp is below the threshold" in failure.text
    (skipped,) = cases[("p2p.p2p", "p2p-gpu02")].result
    assert isinstance(skipped, Skipped) and skipped.message.startswith("p2pBandwidthLatencyTest not found at ")
    assert cases[("p2p.p2p", "p2p-gpu01")].result == []
    (unjudged,) = cases[("fio.scratch:/var/tmp", "fio-gpu01-scratch:/var/tmp-seq_write")].result
    assert isinstance(unjudged, Skipped)


def test_verdicts_drain_the_node_below_the_fio_threshold_and_resume_the_one_that_passed(site_gates_run):
    document = json.loads(export.export(site_gates_run, "verdicts"))
    nodes = {entry["node"]: entry for entry in document["nodes"]}
    assert nodes["gpu03"]["verdict"] == "FAIL"
    assert "fio fio-gpu03-scratch:/var/tmp-seq_read" in nodes["gpu03"]["actions"]["slurm"]["reason"]
    # gpu01: every fio and p2p gate it was judged on passed; the missing NFS mount and the unjudged jobs leave it
    # as the demo run's other gates left it: PASS (its slow ib_write_bw pairs all lead to gpu02), resumed.
    assert (nodes["gpu01"]["verdict"], nodes["gpu01"]["actions"]["slurm"]["state"]) == ("PASS", "RESUME")
    assert nodes["gpu01"]["reasons"] == []
    ctrf = json.loads(export.export(site_gates_run, "ctrf"))
    statuses = {test["name"]: test["status"] for test in ctrf["results"]["tests"]}
    assert statuses["p2p.p2p p2p-gpu02"] == "skipped"
    assert statuses["fio.scratch:/var/tmp fio-gpu03-scratch:/var/tmp-seq_read"] == "failed"


@pytest.mark.chromium
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
def test_the_fio_charts_are_in_chromiums_live_dom(site_gates_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(site_gates_run, run)
    files = report.build(run)
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
        files.html.as_uri(),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f'id="{SEQ}"' in result.stdout and '<table id="p2p">' in result.stdout
    assert 'data-charts-ok="true"' in result.stdout  # the page's script found every chart it promised
