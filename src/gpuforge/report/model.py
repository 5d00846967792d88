"""The report's input, read from a run directory's JSON artifacts.

Every section is optional: None means "not run" (no artifact found), an empty list means it ran and
produced nothing. Benchmark files are recognised by their content, not their names, because the
playbooks that write them may wrap the parser output ({"result": {...}}) or list several runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

NCCL_MODES = {"tcp": "TCP", "ib": "IB", "ib_gdr": "IB+GDR"}
_WRAPPERS = ("result", "parsed", "nccl", "resnet50", "ib_write_bw", "data", "summary")


@dataclass
class Check:
    host: str
    name: str
    status: str  # ok | warn | fail
    observed: object = None
    expected: object = None
    fault: str = ""
    remedy: str = ""


@dataclass
class NcclSeries:
    mode: str  # tcp | ib | ib_gdr
    label: str
    points: list[tuple[int, float]]  # (message size in bytes, bus bandwidth GB/s)
    collective: str = "all_reduce_perf"
    source: str = ""


@dataclass
class ResnetPoint:
    gpus: int
    images_per_sec: float
    source: str = ""


@dataclass
class IbWriteBw:
    host: str
    hca: str
    bw_gbps: float
    line_rate_gbps: float | None = None
    source: str = ""


@dataclass
class ReportData:
    title: str = "gpuforge cluster report"
    meta: dict = field(default_factory=dict)
    stages: list[dict] = field(default_factory=list)
    checks: list[Check] | None = None
    nccl: list[NcclSeries] | None = None
    resnet50: list[ResnetPoint] | None = None
    ib_write_bw: list[IbWriteBw] | None = None

    def hosts_by_status(self) -> dict[str, str]:
        """host -> worst status over its checks."""
        rank = {"ok": 0, "warn": 1, "fail": 2}
        worst: dict[str, str] = {}
        for check in self.checks or []:
            current = worst.get(check.host, "ok")
            if rank.get(check.status, 2) > rank[current]:
                current = check.status if check.status in rank else "fail"
            worst[check.host] = current
        return worst


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _candidates(document, depth: int = 0):
    """The document, the dicts it wraps and the items of lists, a few levels deep."""
    if depth > 3:
        return
    if isinstance(document, list):
        for item in document:
            yield from _candidates(item, depth + 1)
        return
    if not isinstance(document, dict):
        return
    yield document
    for key in _WRAPPERS:
        if isinstance(document.get(key), dict | list):
            yield from _candidates(document[key], depth + 1)
    for key in ("runs", "results", "series", "hcas"):
        if isinstance(document.get(key), list) and not _is_perftest(document):
            yield from _candidates(document[key], depth + 1)


def _is_perftest(document: dict) -> bool:
    return "bw_average_gbps" in document or ("bw_unit" in document and "results" in document)


def _nccl_mode(document: dict, parent: dict, path: Path) -> str | None:
    for source in (document, parent):
        mode = source.get("mode") or (source.get("transport") or {}).get("mode")
        if mode in NCCL_MODES:
            return mode
    name = path.stem.lower()
    for mode in ("ib_gdr", "gdr", "tcp", "socket", "ib"):
        if re.search(rf"(^|[_\-.]){mode}($|[_\-.])", name):
            return {"gdr": "ib_gdr", "socket": "tcp"}.get(mode, mode)
    return None


def _nccl_series(document: dict, parent: dict, path: Path) -> NcclSeries | None:
    rows = document.get("rows")
    if not isinstance(rows, list) or not rows or "size" not in rows[0]:
        return None
    points = []
    for row in rows:
        run = row.get("out_of_place") or row.get("in_place") or {}
        busbw = _number(run.get("busbw") if isinstance(run, dict) else row.get("busbw"))
        size = row.get("size")
        if busbw is not None and isinstance(size, int) and size > 0:
            points.append((size, busbw))
    mode = _nccl_mode(document, parent, path) or "unknown"
    label = NCCL_MODES.get(mode, mode)
    run = re.sub(r"^(srun-)?nccl[-_]?", "", path.stem)
    if run not in ("", mode):  # which run: single-gpu01, multi-ib, ...
        label = f"{run} ({label})"
    if parent.get("launcher") == "srun":  # the same transport, launched through Slurm
        label += " (srun)"
    return NcclSeries(mode, label, points, document.get("collective") or "all_reduce_perf", str(path))


def _resnet_point(document: dict, path: Path) -> ResnetPoint | None:
    total = _number(document.get("total_imgs_per_sec", document.get("images_per_sec")))
    gpus = document.get("world_size", document.get("gpus"))
    if total is None or gpus is None:
        return None
    return ResnetPoint(int(gpus), total, str(path))


def _ib_write_bw(document: dict, parent: dict, path: Path) -> IbWriteBw | None:
    bw = _number(document.get("bw_average_gbps"))
    if bw is None:
        return None
    header = document.get("header") or {}
    hca = document.get("hca") or document.get("device") or header.get("device") or parent.get("hca") or "?"
    host = document.get("host") or parent.get("host") or path.stem
    line_rate = None
    for source in (document, parent):
        for key in ("line_rate_gbps", "rate_gbps", "port_rate_gbps", "expected_gbps"):
            if line_rate is None:
                line_rate = _number(source.get(key))
    return IbWriteBw(str(host), str(hca), bw, line_rate, str(path))


def _ib_pair(document: dict, path: Path) -> IbWriteBw | None:
    """A pair file of playbooks/tasks/bench_ib_pair.yml: {pair: {server, client, hca, line_rate_gbps}, client:
    {result: perftest}, server: {...}}; the client's side carries the bandwidth it pushed to the server. A Down
    port's pair has no result and gets no bar (the attribution names it)."""
    pair = document.get("pair")
    result = (document.get("client") or {}).get("result")
    if not isinstance(pair, dict) or not isinstance(result, dict):
        return None
    return _ib_write_bw(result, {**pair, "host": f"{pair.get('client', '?')}->{pair.get('server', '?')}"}, path)


def classify_bench(document, path: Path, data: ReportData) -> None:
    """Add whatever benchmark results the document holds to data."""
    parent = document if isinstance(document, dict) else {}
    if "pair" in parent and "client" in parent:
        pair = _ib_pair(parent, path)
        data.ib_write_bw = [*(data.ib_write_bw or []), *([pair] if pair else [])]
        return
    for candidate in _candidates(document):
        kind = str(candidate.get("kind", "")).replace("-", "_")
        series = _nccl_series(candidate, parent, path) if kind in ("", "nccl", "nccl_tests") else None
        if series:
            data.nccl = [*(data.nccl or []), series]
            continue
        point = _resnet_point(candidate, path) if kind in ("", "resnet50") else None
        if point:
            data.resnet50 = [*(data.resnet50 or []), point]
            continue
        ib = _ib_write_bw(candidate, parent, path) if kind in ("", "ib_write_bw", "perftest") else None
        if ib:
            data.ib_write_bw = [*(data.ib_write_bw or []), ib]


def _checks_from(document, host: str) -> list[Check]:
    entries = document.get("checks", []) if isinstance(document, dict) else document
    checks = []
    for entry in entries or []:
        if isinstance(entry, dict) and "name" in entry:
            checks.append(
                Check(
                    host=str(entry.get("host", host)),
                    name=str(entry["name"]),
                    status=str(entry.get("status", "fail")),
                    observed=entry.get("observed"),
                    expected=entry.get("expected"),
                    fault=str(entry.get("fault") or ""),
                    remedy=str(entry.get("remedy") or ""),
                )
            )
    return checks


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load(run_dir: Path, validation_dirs: list[Path] | None = None, bench_dirs: list[Path] | None = None) -> ReportData:
    """Collect a run directory (a single command's or a demo's with stage subdirectories).

    validation/ and bench/ directories found anywhere below run_dir (outside runner/) are read; the
    extra directories are read as well (the shared artifacts/ when no run directory is given).
    """
    data = ReportData()
    validation_files: list[Path] = []
    bench_files: list[Path] = []
    summaries: list[Path] = []
    for path in sorted(run_dir.rglob("*.json")) if run_dir.is_dir() else []:
        relative = path.relative_to(run_dir).parts
        if "runner" in relative:
            continue
        if path.parent.name == "validation":
            validation_files.append(path)
        elif "bench" in relative[:-1]:
            bench_files.append(path)
        elif path.name == "summary.json":
            summaries.append(path)
    for directory in validation_dirs or []:
        validation_files += sorted(directory.glob("*.json")) if directory.is_dir() else []
    for directory in bench_dirs or []:
        bench_files += sorted(directory.rglob("*.json")) if directory.is_dir() else []

    if validation_files:
        data.checks = []
        seen = set()
        for path in validation_files:
            if path.stem in seen:  # the same host copied by several stages: the first (latest run) wins
                continue
            seen.add(path.stem)
            document = _read_json(path)
            data.checks += _checks_from(document, path.stem) if document is not None else []
    for path in bench_files:
        document = _read_json(path)
        if document is not None:
            classify_bench(document, path, data)
    for path in summaries:
        summary = _read_json(path)
        if not isinstance(summary, dict):
            continue
        if path.parent == run_dir:
            data.meta = summary
        else:
            data.stages.append(summary)
    if data.resnet50:
        data.resnet50.sort(key=lambda point: point.gpus)
    return data
