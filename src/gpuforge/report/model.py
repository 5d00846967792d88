"""The report's input: a run's typed result records (schemas/*.schema.json), and views of them for the page.

Records come from ``gpuforge.report.export.load_records`` (the loader the exports use); nothing here reads a
playbook's file or guesses what a file holds, except the burn-in's per-round counter files for the absolute
before/after values behind a counter that grew (``BurninView``: the records keep the growth only). A node's verdict
is ``gpuforge_records.node_verdicts``, with the burn-in trend over all rounds when the run has one. The
small dataclasses at the end (Check, NcclSeries, ResnetPoint, IbWriteBw) are the views ``gpuforge demo``'s
closing summary reads (src/gpuforge/demo.py), derived from the same records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gpuforge.paths import collection_import

RANK = {"FAIL": 0, "WARN": 1, "UNKNOWN": 2, "PASS": 3}
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
    status: str  # the record's verdict: PASS | WARN | FAIL | UNKNOWN
    observed: object = None
    expected: object = None
    fault: str = ""
    remedy: str = ""
    # Names of the failed checks of the same node this one fails because of (empty: a root cause).
    caused_by: tuple[str, ...] = ()


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
    bw_gbit_per_s: float
    line_rate_gbit_per_s: float | None = None
    source: str = ""


@dataclass
class ReportData:
    """The records of one run, grouped for the page; ``meta`` is the run's summary.json header (provenance)."""

    title: str = "gpuforge cluster report"
    meta: dict = field(default_factory=dict)
    records: list = field(default_factory=list)
    burnin: BurninView | None = None

    def __post_init__(self):
        self.by_kind: dict[str, list] = {}
        for record in self.records:
            self.by_kind.setdefault(record["kind"], []).append(record)
        trends = self.burnin.trend if self.burnin else None
        self.verdicts = records_module().node_verdicts(self.records, trends) if self.records else {}

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
                r["verdict"],
                r["observed"],
                r["threshold"].get("expected"),
                r.get("fault", ""),
                r["remedy"],
                tuple(r.get("caused_by") or ()),
            )
            for r in checks
        ]

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
    """ReportData of a run directory (records through export.load_records, the burn-in's trend beside them)."""
    from gpuforge.report.export import burnin_summaries, load_records

    records = load_records(run_dir, validation_files, bench_summaries) if run_dir else []
    burnin = None
    for path in burnin_summaries(Path(run_dir)) if run_dir else []:
        burnin = load_burnin(path, records)  # a run folder holds one burn-in; the last one found wins
    return ReportData(meta=read_meta(run_dir), records=records, burnin=burnin)


# -- burn-in -------------------------------------------------------------------------------------------------------
DCGM_VERDICT = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skipped": "UNKNOWN", "unknown": "UNKNOWN"}
_NUM = (int, float, type(None))


@dataclass
class BurninView:
    """One ``gpuforge burnin`` run: its rounds, the per-node trend (src/gpuforge/burnin_judge.judge_trend) and
    its ``burnin_round`` records (those of the run folder: one burn-in per run).

    ``counter_values[(node, round, port, counter)] = (before, after)`` for every counter that grew, from
    ``round-<n>/counters/<host>.json`` (absent when that file is gone: the records keep the growth only)."""

    source: str
    summary: dict
    records: list
    trend: dict
    counter_values: dict = field(default_factory=dict)

    @property
    def rounds(self) -> list[int]:
        return sorted({record["round"] for record in self.records})

    @property
    def parameters(self) -> dict:
        return self.summary.get("parameters") or {}

    def node_order(self) -> list[str]:
        """Nodes, failing first (by trend verdict, then the worst round, then the count of rounds not PASS)."""
        if self._order is None:
            self._order = self._node_order()
        return list(self._order)

    def _node_order(self) -> list[str]:
        worst: dict = {}
        for record in self.records:
            entry = worst.setdefault(record["node"], [3, 0])
            entry[0] = min(entry[0], RANK[record["verdict"]])
            entry[1] -= record["verdict"] != "PASS"
        nodes = set(worst) | set(self.trend)
        return sorted(
            nodes,
            key=lambda n: (RANK[(self.trend.get(n) or {}).get("verdict", "UNKNOWN")], *worst.get(n, [3, 0]), n),
        )

    def cell(self, node: str, number: int):
        return self._cells.get((node, number))

    def __post_init__(self):
        self._cells = {(record["node"], record["round"]): record for record in self.records}
        self._order = None


def _need(value, key, types, where):
    """value[key] of the given types, or RecordError naming the file, the entry and the key."""
    error = records_module().RecordError
    if not isinstance(value, dict) or key not in value:
        raise error(f"{where}: missing key {key!r}")
    found = value[key]
    kinds = types if isinstance(types, tuple) else (types,)
    if not isinstance(found, kinds) or (isinstance(found, bool) and bool not in kinds):
        names = " or ".join("null" if kind is type(None) else kind.__name__ for kind in kinds)
        raise error(f"{where}: {key!r} is {type(found).__name__}, expected {names}")
    return found


def _check_burnin_record(record: dict, where: str) -> None:
    """The parts of a burnin_round record (schemas/burnin-round.schema.json) the page reads, checked so that a
    wrong shape is a RecordError naming the key rather than a traceback halfway through the page."""
    nccl = _need(record, "nccl", dict, where)
    _need(nccl, "busbw_gbit_per_s", _NUM, f"{where} nccl")
    _need(nccl, "runs", dict, f"{where} nccl")
    for hca, rail in _need(record, "ib_write_bw", dict, where).items():
        _need(rail, "gbit_per_s", _NUM, f"{where} ib_write_bw[{hca!r}]")
        _need(rail, "pairs", dict, f"{where} ib_write_bw[{hca!r}]")
    counters = _need(record, "counters", dict, where)
    _need(counters, "read", bool, f"{where} counters")
    for key in ("ports", "over_limit", "saturated", "limits"):
        for port, value in _need(counters, key, dict, f"{where} counters").items():
            kind = int if key == "limits" else (list if key == "saturated" else dict)
            _need({port: value}, port, kind, f"{where} counters.{key}")
    for port, growth in counters["ports"].items():
        for name, value in growth.items():
            if not (isinstance(value, int) and not isinstance(value, bool)) and value != "saturated":
                raise records_module().RecordError(
                    f"{where} counters.ports[{port!r}]: {name!r} is {value!r}, expected an integer or 'saturated'"
                )
    _need(counters, "errors", list, f"{where} counters")
    dcgm = _need(record, "dcgm", dict, where)
    if _need(dcgm, "status", str, f"{where} dcgm") not in DCGM_VERDICT:
        raise records_module().RecordError(
            f"{where} dcgm: unknown status {dcgm['status']!r} (known: {', '.join(DCGM_VERDICT)})"
        )
    _need(dcgm, "level", int, f"{where} dcgm")
    _need(dcgm, "detail", str, f"{where} dcgm")
    run = _need(record, "run", dict, where)
    _need(run, "failed", bool, f"{where} run")
    _need(run, "reasons", list, f"{where} run")


def _check_trend(node: str, entry: dict, where: str) -> None:
    at = f"{where} trend[{node!r}]"
    for key, kind in (("rounds", int), ("failed_rounds", list), ("errors_grew", list), ("slowed", list)):
        _need(entry, key, kind, at)
    for key in ("series", "counter_totals"):
        _need(entry, key, dict, at)
    for index, slowed in enumerate(entry["slowed"]):
        for key in ("metric",):
            _need(slowed, key, str, f"{at} slowed[{index}]")
        for key in ("first_median", "last_median", "ratio"):
            _need(slowed, key, (int, float), f"{at} slowed[{index}]")
    for index, grew in enumerate(entry["errors_grew"]):
        for key, kind in (("round", int), ("port", str), ("counter", str), ("growth", int), ("limit", int)):
            _need(grew, key, kind, f"{at} errors_grew[{index}]")


def _counter_values(round_dir: Path, node: str) -> dict:
    """{port: (before counters, after counters)} of round-<n>/counters/<node>.json; {} when absent or not that shape."""
    try:
        document = json.loads((round_dir / "counters" / f"{node}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    before = document.get("before") if isinstance(document, dict) else None
    after = document.get("after") if isinstance(document, dict) else None
    if not isinstance(before, dict) or not isinstance(after, dict):
        return {}
    return {port: (before.get(port) or {}, after.get(port) or {}) for port in set(before) | set(after)}


def load_burnin(path: Path, records: list) -> BurninView:
    """The burn-in view of ``burnin/summary.json`` at ``path``; its records are those of ``records`` (already built by
    gpuforge_records.burnin_round_records). RecordError (a ValueError naming the file
    and the key) when the summary or a record does not have the shape the page reads."""
    error = records_module().RecordError
    where = str(path)
    try:
        summary = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise error(f"{where}: not JSON ({exc})") from None
    if not isinstance(summary, dict):
        raise error(f"{where}: not an object")
    trend = _need(summary, "trend", dict, where)
    _need(summary, "rounds", list, where)
    if not isinstance(summary.get("parameters", {}), dict):
        raise error(f"{where}: 'parameters' is {type(summary['parameters']).__name__}, expected dict")
    records_mod = records_module()
    for node, entry in trend.items():
        _check_trend(str(node), entry, where)
    records_mod.burnin_trend_verdicts(summary)  # verdict, reasons, remedy: the same checks the exports make
    mine = [record for record in records if record["kind"] == "burnin_round"]
    for index, record in enumerate(mine):
        _check_burnin_record(record, f"{where} records[{index}] ({record['node']} round {record['round']})")
    values: dict = {}
    for record in mine:
        grown = {
            port: [name for name, growth in counters.items() if growth == "saturated" or growth > 0]
            for port, counters in record["counters"]["ports"].items()
        }
        if not any(grown.values()):
            continue
        read = _counter_values(Path(path).parent / f"round-{record['round']}", record["node"])
        for port, names in grown.items():
            before, after = read.get(port, ({}, {}))
            for name in names:
                if isinstance(before.get(name), int) and isinstance(after.get(name), int):
                    values[(record["node"], record["round"], port, name)] = (before[name], after[name])
    return BurninView(where, summary, mine, trend, values)
