"""`gpuforge report`: HTML + Markdown from a run directory's JSON artifacts."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from gpuforge import __version__, paths
from gpuforge.report import html, markdown
from gpuforge.report.model import ReportData, load


@dataclass
class ReportFiles:
    html: Path
    markdown: Path
    data: ReportData


def versions() -> dict:
    found = {"gpuforge": __version__, "python": platform.python_version()}
    for package in ("ansible-core", "ansible-runner", "ansible"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def latest_run_dir(artifacts: Path = paths.ARTIFACTS_DIR) -> Path | None:
    """The newest artifacts/<run-id>/ (run ids sort by time) that has a summary.json."""
    runs = sorted(path for path in artifacts.glob("2*") if (path / "summary.json").is_file())
    return runs[-1] if runs else None


def build(run_dir: Path | None, out_dir: Path | None = None, artifacts: Path = paths.ARTIFACTS_DIR) -> ReportFiles:
    """Write report.html and report.md; without a run directory, read the shared artifacts/ folders."""
    if run_dir is None:
        data = load(artifacts / "none", [artifacts / "validation"], [artifacts / "bench"])
        out_dir = out_dir or artifacts / "report"
    else:
        data = load(run_dir)
        out_dir = out_dir or run_dir
    data.meta.setdefault("versions", versions())
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    html_path.write_text(html.render(data), encoding="utf-8")
    md_path.write_text(markdown.render(data, html_path.name), encoding="utf-8")
    return ReportFiles(html_path, md_path, data)
