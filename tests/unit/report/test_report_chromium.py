"""The HTML report of a real lab run's records in headless Chromium: the live DOM has the node x check matrix with
the run's faults as failing cells and every chart the page promises; the page logs nothing and asks for nothing
over the network."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S

from gpuforge import report
from gpuforge.report import charts

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "records" / "demo-run"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)"),
]


def _chromium(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
        # Any host name the page asked for would fail to resolve and be logged as a failed load.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--enable-logging=stderr", "--v=0", *arguments,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("chromium")
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    files = report.build(run)
    result = _chromium(tmp_path, "--dump-dom", files.html.as_uri())
    return tmp_path, files, result


def test_matrix_and_failing_cells_in_the_live_dom(rendered):
    _, _, result = rendered
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert '<table id="matrix">' in dom
    rows = re.findall(r'<tr data-node="([^"]+)" data-verdict="([A-Z]+)">', dom)
    # gpu01 passes: its slow ib_write_bw pairs all lead to gpu02, and no NCCL run fell below the median
    assert rows == [("gpu02", "FAIL"), ("gpu03", "FAIL"), ("gpu01", "PASS")]
    gpu03 = re.search(r'<tr data-node="gpu03".*?</tr>', dom, re.S).group(0)
    failing = re.findall(r'data-check="([^"]+)" data-verdict="FAIL"', gpu03)
    # the lab's faults, the GPUDirect RDMA loopback that failed on the Down port, and the port's attribution
    assert sorted(failing) == ["benchmarks", "ecc_volatile_dbe", "gdr_ib_write_bw", "ib_port_state", "xid"]
    gpu02 = re.search(r'<tr data-node="gpu02".*?</tr>', dom, re.S).group(0)
    assert re.findall(r'data-check="([^"]+)" data-verdict="FAIL"', gpu02) == ["benchmarks"]
    gpu01 = re.search(r'<tr data-node="gpu01".*?</tr>', dom, re.S).group(0)
    assert re.findall(r'data-check="([^"]+)" data-verdict="(?:FAIL|WARN)"', gpu01) == []
    assert re.search(r'<table id="attributions">.*data-subject="node" data-name="gpu02"', dom, re.S)
    assert re.search(r'<table id="attributions">.*data-subject="link" data-name="gpu03:mlx5_2/1"', dom, re.S)


def test_all_charts_present_in_dom(rendered):
    _, _, result = rendered
    dom = result.stdout
    for chart_id in (charts.NCCL_CHART_ID, charts.RESNET_CHART_ID, "chart-ib_write_bw-mlx5_0"):
        assert f'id="{chart_id}"' in dom
    # Set only by the page's inline script when every promised chart exists.
    assert 'data-charts-ok="true"' in dom
    assert "<title>gpuforge cluster report [charts ok]</title>" in dom


def test_no_console_errors_and_no_requests(rendered):
    _, _, result = rendered
    # The page logs nothing; any console line (console.error, an uncaught exception) is a defect.
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    assert not re.search(r"net::ERR_|Failed to load resource", result.stderr)
    assert not re.search(r"""(src|href)\s*=|url\(|<link""", result.stdout)


def test_screenshot(rendered):
    tmp_path, files, _ = rendered
    shot = tmp_path / "report.png"
    result = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2400", files.html.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000


@pytest.fixture(scope="module")
def rendered_burnin(tmp_path_factory, burnin_run_dir):
    """The report of a burn-in run (conftest.py: the real `gpuforge burnin` loop's files) in headless Chromium."""
    tmp_path = tmp_path_factory.mktemp("chromium-burnin")
    files = report.build(burnin_run_dir, tmp_path / "out")
    return tmp_path, files, _chromium(tmp_path, "--dump-dom", files.html.as_uri())


def test_burnin_section_in_the_live_dom(rendered_burnin):
    tmp_path, files, result = rendered_burnin
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    matrix = re.search(r'<table id="burnin-matrix">.*?</table>', dom, re.S).group(0)
    rows = re.findall(r'<tr data-node="([^"]+)" data-verdict="([A-Z]+)">', matrix)
    assert rows == [("gpu02", "FAIL"), ("gpu03", "FAIL"), ("gpu01", "PASS")]
    gpu02 = re.search(r'<tr data-node="gpu02".*?</tr>', matrix, re.S).group(0)
    assert re.findall(r'data-round="(\d+)" data-verdict="FAIL"', gpu02) == ["2", "5"]
    assert re.search(r'<table id="burnin-counters" data-grew="2">', dom)
    assert re.search(r'<figure class="burnin-trend slowed" data-node="gpu03"', dom)
    for node in ("gpu01", "gpu02", "gpu03"):
        assert f'id="{charts.chart_id("burnin", node)}"' in dom
    # the page's script found every promised chart, the burn-in trend charts included
    assert 'data-charts-ok="true"' in dom
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    assert not re.search(r"net::ERR_|Failed to load resource", result.stderr)
    shot = tmp_path / "burnin.png"
    done = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,3000", files.html.as_uri())
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
