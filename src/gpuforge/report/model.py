"""The report's input: a run's typed result records (schemas/*.schema.json), and views of them for the page.

Records come from ``gpuforge.report.export.load_records`` (the loader the exports use); nothing here reads a
playbook's file or guesses what a file holds. A node's verdict is ``gpuforge_records.node_verdicts``. The
small dataclasses at the end (Check, NcclSeries, ResnetPoint, IbWriteBw) are the views ``gpuforge demo``'s
closing summary reads (src/gpuforge/demo.py), derived from the same records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gpuforge.paths import collection_import

RANK = {"FAIL": 0, "WARN": 1, "UNKNOWN": 2, "PASS": 3}
_STATUS = {"PASS": "ok", "WARN": "warn", "FAIL": "fail", "UNKNOWN": "unknown"}
FLEET_CHECK = "fleet_consistency"
# What the cross-node inventory table shows, in this order (the properties fleet_consistency compares:
# module_utils/gpuforge_perfquery.py FLEET_PROPERTIES; sub-keys per HCA name or GPU bus ID).
INVENTORY_PROPERTIES = (
    ("gpu_driver", "GPU driver"),
    ("vbios", "VBIOS"),
    ("hca_firmware", "HCA firmware"),
    ("ofed", "OFED"),
    ("kernel", "kernel"),
)


def records_module():
    return collection_import("plugins.module_utils.gpuforge_records")


@dataclass
class Check:
    host: str
    name: str
    status: str  # ok | warn | fail | unknown
    observed: object = None
    expected: object = None
    fault: str = ""
    remedy: str = ""


@dataclass
class NcclSeries:
    mode: str
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
    """The records of one run, grouped for the page; ``meta`` is the run's summary.json header (provenance)."""

    title: str = "gpuforge cluster report"
    meta: dict = field(default_factory=dict)
    records: list = field(default_factory=list)

    def __post_init__(self):
        self.by_kind: dict[str, list] = {}
        for record in self.records:
            self.by_kind.setdefault(record["kind"], []).append(record)
        self.verdicts = records_module().node_verdicts(self.records) if self.records else {}

    # -- record groups -------------------------------------------------------------------------------------
    @property
    def node_checks(self) -> list:
        return [record for record in self.by_kind.get("node_check", []) if record["check"] != FLEET_CHECK]

    @property
    def fleet(self) -> list:
        return [record for record in self.by_kind.get("node_check", []) if record["check"] == FLEET_CHECK]

    @property
    def runs(self) -> list:
        return self.by_kind.get("benchmark_run", [])

    @property
    def attributions(self) -> list:
        return self.by_kind.get("attribution", [])

    @property
    def stages(self) -> list:
        return self.by_kind.get("stage_result", [])

    def node_order(self) -> list[str]:
        """Nodes, failing first (FAIL, WARN, UNKNOWN, PASS), then by name."""
        return sorted(self.verdicts, key=lambda node: (RANK[self.verdicts[node]["verdict"]], node))

    def verdict_counts(self) -> dict[str, int]:
        counts = {verdict: 0 for verdict in ("PASS", "WARN", "FAIL", "UNKNOWN")}
        for entry in self.verdicts.values():
            counts[entry["verdict"]] += 1
        return counts

    # -- the views demo.py's summary reads ----------------------------------------------------------------
    @property
    def checks(self) -> list[Check] | None:
        checks = self.by_kind.get("node_check")
        if checks is None:
            return None
        return [
            Check(
                r["node"],
                r["check"],
                _STATUS[r["verdict"]],
                r["observed"],
                r["threshold"].get("expected"),
                r.get("fault", ""),
                r["remedy"],
            )
            for r in checks
        ]

    def hosts_by_status(self) -> dict[str, str]:
        """node -> ok | warn | fail | unknown, from gpuforge_records.node_verdicts."""
        return {node: _STATUS[entry["verdict"]] for node, entry in self.verdicts.items()}

    @property
    def nccl(self) -> list[NcclSeries] | None:
        runs = [r for r in self.runs if r["benchmark"] == "nccl"]
        if not runs:
            return None
        return [
            NcclSeries(r["group"], r["name"], [(int(x), float(y)) for x, y in r["observed"]["series"]["points"]])
            for r in runs
            if r["observed"].get("series")
        ]

    @property
    def resnet50(self) -> list[ResnetPoint] | None:
        runs = [r for r in self.runs if r["benchmark"] == "resnet50"]
        if not runs:
            return None
        return sorted(
            (ResnetPoint(r["observed"]["gpus"], r["observed"]["value"], r["name"]) for r in sweep_runs(runs)),
            key=lambda point: point.gpus,
        )

    @property
    def ib_write_bw(self) -> list[IbWriteBw] | None:
        runs = [r for r in self.runs if r["benchmark"] == "ib_write_bw"]
        if not runs:
            return None
        return [
            IbWriteBw("->".join(r["nodes"]), r["rail"] or "?", r["observed"]["value"], r["threshold"].get("line_rate"))
            for r in runs
            if r["observed"]["value"] is not None
        ]


def sweep_runs(runs) -> list:
    """The ResNet-50 runs of the GPU-count sweep (several nodes, GPU count known, a value)."""
    return [
        r
        for r in runs
        if len(r["nodes"]) > 1 and isinstance(r["observed"].get("gpus"), int) and r["observed"]["value"] is not None
    ]


def read_meta(run_dir: Path | None) -> dict:
    """The run's summary.json header (run id, command, inventory, start/end) for the provenance table."""
    path = Path(run_dir) / "summary.json" if run_dir else None
    if not path or not path.is_file():
        return {}
    summary = json.loads(path.read_text(encoding="utf-8"))
    return {key: value for key, value in summary.items() if key not in ("stages", "hosts", "failed_tasks")}


def load(run_dir: Path | None, validation_files=None, bench_summaries=None) -> ReportData:
    """ReportData of a run directory (records through export.load_records)."""
    from gpuforge.report.export import load_records

    records = load_records(run_dir, validation_files, bench_summaries) if run_dir else []
    return ReportData(meta=read_meta(run_dir), records=records)
