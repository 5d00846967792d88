"""`gpuforge report`: HTML + Markdown from a run directory's result records (gpuforge.report.export.load_records)."""

from __future__ import annotations

import json
import platform
import subprocess
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


def git_commit(root: Path = paths.PROJECT_ROOT) -> str | None:
    """The checkout's commit (None outside a git checkout or without git)."""
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _is_run_dir(path: Path) -> bool:
    """A CLI run directory: summary.json with schema_version and the folder's name as run_id (docs/cli.md)."""
    try:
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and "schema_version" in summary and summary.get("run_id") == path.name


def latest_run_dir(artifacts: Path = paths.ARTIFACTS_DIR) -> Path | None:
    """The newest CLI run directory under artifacts/ (run ids start with their UTC time, so they sort by time)."""
    runs = (
        sorted(path for path in artifacts.iterdir() if path.is_dir() and _is_run_dir(path))
        if artifacts.is_dir()
        else []
    )
    return runs[-1] if runs else None


def build(run_dir: Path | None, out_dir: Path | None = None, artifacts: Path = paths.ARTIFACTS_DIR) -> ReportFiles:
    """Write report.html and report.md; without a run directory, read the shared artifacts/ folders (the
    validation files there and the newest benchmark run)."""
    if run_dir is None:
        validation = sorted((artifacts / "validation").glob("*.json")) if (artifacts / "validation").is_dir() else []
        benches = sorted((artifacts / "bench").glob("*/summary.json")) if (artifacts / "bench").is_dir() else []
        data = load(artifacts / "none", validation, benches[-1:])
        out_dir = out_dir or artifacts / "report"
    else:
        data = load(run_dir)
        out_dir = out_dir or run_dir
    data.meta.setdefault("versions", versions())
    data.meta.setdefault("git_commit", git_commit())
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    html_path.write_text(html.render(data), encoding="utf-8")
    md_path.write_text(markdown.render(data, html_path.name), encoding="utf-8")
    return ReportFiles(html_path, md_path, data)
