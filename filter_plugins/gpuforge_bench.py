"""Jinja2 filters of the benchmark role (roles/gpuforge_bench): thresholds from data tables and the records the
role keeps, built in Python rather than by Jinja string or loop building.

Thresholds (issue 17: thresholds as data, tables in roles/gpuforge/defaults/main/acceptance_checks.yml):

- gpuforge_bench_ib_port_links: one node's infiniband facts and expected system -> the link speed of each port
  (``mlx5_0/1`` -> ``{link, from}``): the expected system's ``hcas[].ports[].link`` first (what the port should
  run at, so a link that trained at a lower rate is still judged at its designed speed), else the port's ibstat
  Rate and link layer looked up in ``gpuforge_expected_link_speeds``.
- gpuforge_bench_ib_thresholds: the ib_write_bw rounds (gpuforge_ib_schedule) -> the same rounds with each pair's
  ``threshold``: the slower end's link speed judged by its ``gpuforge_expected_ib_write_bw`` entry, converted to
  ib_write_bw's MB/sec (2^20 bytes) for the module's ``min_mib_per_s``; a link speed without an entry keeps
  ``gpuforge_bench_ib_min_fraction`` of the line rate.
- gpuforge_bench_nccl_single_threshold: a node's GPU SKU and GPU count -> its single-node busbw floor from
  ``gpuforge_expected_nccl_single_node_busbw`` (only when the run uses exactly the entry's ``gpus``), or {}.
- gpuforge_bench_attribution_floors: gpuforge_bench_attribution, except that a result carrying its own absolute
  floor (a number in ``threshold``, in the result's ``unit``) is judged against that floor and names its
  ``threshold_source``.

Records (no JSON or dicts assembled in Jinja loops). Every summary result names its measurement ``value`` and its
``unit`` (module_utils/gpuforge_bench_attribution.py: the judged result adds ``threshold`` in that unit):

- gpuforge_bench_nccl_single_result: a node's registered single-node nccl_tests run -> its summary result.
- gpuforge_bench_fio_targets: the configured file systems and scratch folders -> fio's targets.
- gpuforge_bench_resnet50_node_documents / gpuforge_bench_resnet50_results: the registered ResNet-50 runs ->
  the per-node result files and the summary results.
- gpuforge_bench_slurm_results: the registered srun runs -> the summary results.

summary.json as it is written (gpuforge_bench_summary): the judged blocks and their typed records, ``records``
(module_utils/gpuforge_bench_records.py: a benchmark_run per result, an attribution per slow node or link), with the
chart data of the parsed result files the role wrote beside it (read here, on the controller, once). Readers take
the records as written (gpuforge_records.bench_summary_records).

Pure functions over plain data (gpuforge_bench_summary also reads the bench folder's parsed results); the
attribution itself is module_utils/gpuforge_bench_attribution.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_attribution import (
    attribute,
    check_keys,
    judge_results,
    judge_value,
    unit_of,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_records import summary_records
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, UNKNOWN
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_records import RecordError

MIB = 1 << 20  # perftest's "MB" (ib_write_bw's MB/sec column): 2^20 bytes
# The units of the summary results built here (the role's Jinja-built ib_write_bw and NCCL entries use Gb/s too).
NCCL_UNIT = "Gb/s"  # busbw GB/s x 8
SRUN_NCCL_UNIT = "GB/s busbw"  # nccl-tests' avg_busbw as printed
IMAGES_UNIT = "images/s"  # ResNet-50 throughput
NCCL_TABLE = "gpuforge_expected_nccl_single_node_busbw"
IB_TABLE = "gpuforge_expected_ib_write_bw"


def gbit_to_mib_per_s(gbit_per_s: float) -> float:
    """Gb/s (10^9 bit) -> ib_write_bw's MB/sec (2^20 bytes): 100 Gb/s is 11,920.93 MB/sec."""
    return float(gbit_per_s) * 1e9 / 8 / MIB


def mib_to_gbit_per_s(mib_per_s: float) -> float:
    """ib_write_bw's MB/sec (2^20 bytes) -> Gb/s (10^9 bit): 11,000 MB/sec is 92.27 Gb/s."""
    return float(mib_per_s) * MIB * 8 / 1e9


def _number(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _provenance(entry: dict, known: dict | None, keys: tuple) -> str | None:
    """Where a table entry's value comes from: the entry's own ``source``, else the shipped source of that key
    when the entry still holds the shipped value (a site's own value is not credited to the published one)."""
    if entry.get("source"):
        return str(entry["source"])
    if not known or not known.get("source"):
        return None
    stated = [key for key in keys if key in known]
    if stated and all(_number(entry.get(key)) == _number(known.get(key)) for key in stated):
        return str(known["source"])
    return None


def _source_text(table: str, key: str, value_text: str, provenance: str | None) -> str:
    where = f"{table}['{key}'] = {value_text}"
    return f"{provenance} ({where})" if provenance else f"{where} (no source recorded: a site value)"


# --- ib_write_bw ---------------------------------------------------------------------------------------------


def ib_port_links(infiniband: dict | None, system: dict | None = None, link_speeds: dict | None = None) -> dict:
    """``{"mlx5_0/1": {"link": "EDR", "from": "expected system"}}`` for every port of the node's infiniband facts.

    ``system``: the node's entry of gpuforge_expected_systems ({} when it names none); ``link_speeds``:
    gpuforge_expected_link_speeds. A port the system does not list is looked up by its ibstat Rate and link layer;
    a port neither names has ``link`` None.
    """
    designed = {}
    for hca in (system or {}).get("hcas") or []:
        for port in hca.get("ports") or []:
            if port.get("link"):
                designed[f"{hca.get('name')}/{port.get('port', 1)}"] = str(port["link"])
    speeds = link_speeds or {}
    links = {}
    for hca in (infiniband or {}).get("hcas") or []:
        for port in hca.get("ports") or []:
            rail = f"{hca.get('name')}/{port.get('port')}"
            if rail in designed:
                links[rail] = {"link": designed[rail], "from": "expected system"}
                continue
            rate = _number(port.get("rate_gbit_per_s"))
            layer = port.get("link_layer")
            found = [
                name
                for name, speed in speeds.items()
                if rate is not None
                and _number((speed or {}).get("rate_gbit_per_s")) == rate
                and (layer is None or (speed or {}).get("link_layer") == layer)
            ]
            # Without a link layer a rate can name two speeds (100: EDR and 100GbE): then it names none.
            if len(found) == 1:
                links[rail] = {"link": found[0], "from": f"ibstat Rate {rate:g} Gb/s ({layer or 'link layer unknown'})"}
            else:
                links[rail] = {"link": None, "from": None}
    return links


def _pair_link(pair: dict, links_by_node: dict, link_speeds: dict) -> tuple:
    """The link speed a pair is judged at: the slower end's (a link trains to the slower of its ends)."""
    ends = []
    for node in (pair.get("server"), pair.get("client")):
        found = ((links_by_node or {}).get(node) or {}).get(pair.get("rail")) or {}
        if found.get("link"):
            rate = _number(((link_speeds or {}).get(found["link"]) or {}).get("rate_gbit_per_s"))
            ends.append((rate if rate is not None else float("inf"), found["link"], found.get("from")))
    if not ends:
        return None, None
    _rate, link, origin = min(ends, key=lambda end: end[0])
    return link, origin


def ib_pair_threshold(
    pair: dict,
    links_by_node: dict | None,
    table: dict | None,
    link_speeds: dict | None = None,
    min_fraction: float = 0.9,
    expected_gbit_per_s=None,
    sources: dict | None = None,
) -> dict:
    """What one ib_write_bw pair is judged against.

    ``{link_speed, link_speed_from, min_mib_per_s, min_gbit_per_s, threshold_source}``: ``min_mib_per_s``
    (ib_write_bw's MB/sec, 2^20 bytes, the module's ``min_mib_per_s``) and ``min_gbit_per_s`` (the same floor in
    Gb/s, the pair result's ``threshold`` in summary.json) come from the link speed's entry of ``table``
    (gpuforge_expected_ib_write_bw: ``min_mib_per_s`` or ``min_gbit_per_s``); both are None where the site set
    ``expected_gbit_per_s`` (gpuforge_bench_ib_expected_gbit_per_s, which keeps the fraction-of-line-rate rule)
    or the link speed has no entry: then ``min_fraction`` of the line rate applies.
    """
    link, origin = _pair_link(pair, links_by_node or {}, link_speeds or {})
    out = {"link_speed": link, "link_speed_from": origin, "min_mib_per_s": None, "min_gbit_per_s": None}
    override = _number(expected_gbit_per_s)
    entry = (table or {}).get(link) if link and override is None else None
    fraction = float(min_fraction)
    if entry:
        gbit = _number(entry.get("min_gbit_per_s"))
        mib = _number(entry.get("min_mib_per_s"))
        if mib is not None:
            out["min_mib_per_s"] = mib
            out["min_gbit_per_s"] = round(mib_to_gbit_per_s(mib), 2)
            value_text = f"{mib:g} MB/sec (2^20 bytes)"
        elif gbit is not None:
            out["min_mib_per_s"] = round(gbit_to_mib_per_s(gbit), 2)
            out["min_gbit_per_s"] = gbit
            value_text = f"{gbit:g} Gb/s"
        else:
            raise ValueError(f"{IB_TABLE}['{link}'] holds neither min_mib_per_s nor min_gbit_per_s: {entry!r}")
        known = ((sources or {}).get(link)) or None
        out["threshold_source"] = _source_text(
            IB_TABLE, link, value_text, _provenance(entry, known, ("min_mib_per_s", "min_gbit_per_s"))
        )
        return out
    if override is not None:
        out["threshold_source"] = (
            f"gpuforge_bench_ib_min_fraction ({fraction:g}) of "
            f"gpuforge_bench_ib_expected_gbit_per_s ({override:g} Gb/s)"
        )
        return out
    rate = _number(pair.get("line_rate_gbit_per_s"))
    why = f"no {IB_TABLE} entry for {link}" if link else "no link speed known for the port"
    out["threshold_source"] = (
        f"gpuforge_bench_ib_min_fraction ({fraction:g}) of the line rate ({rate:g} Gb/s, ibstat Rate): {why}"
        if rate is not None
        else f"no threshold: no line rate and {why}"
    )
    return out


def ib_thresholds(
    rounds, links_by_node, table, link_speeds=None, min_fraction=0.9, expected_gbit_per_s=None, sources=None
):
    """The ib_write_bw rounds with each pair's ``threshold`` (ib_pair_threshold)."""
    out = []
    for current in rounds or []:
        pairs = [
            {
                **pair,
                "threshold": ib_pair_threshold(
                    pair, links_by_node, table, link_speeds, min_fraction, expected_gbit_per_s, sources
                ),
            }
            for pair in current.get("pairs") or []
        ]
        out.append({**current, "pairs": pairs})
    return out


# --- NCCL single node ----------------------------------------------------------------------------------------


def nccl_single_threshold(sku, gpus, table: dict | None, sources: dict | None = None) -> dict:
    """The single-node busbw floor of a node whose GPU SKU has an entry and whose run uses exactly that entry's
    ``gpus``: ``{sku, gpus, min_busbw_gbyte_per_s, min_gbit_per_s, threshold_source}`` (``min_gbit_per_s`` = GB/s
    x 8, Gb/s, the unit of the NCCL results); {} otherwise (the node is compared with the others)."""
    entry = (table or {}).get(sku) if sku else None
    if not entry:
        return {}
    count = _number(gpus)
    wanted = _number(entry.get("gpus"))
    floor = _number(entry.get("min_busbw_gbyte_per_s"))
    if floor is None or count is None or wanted is None or count != wanted:
        return {}
    known = (sources or {}).get(sku) or None
    provenance = _provenance(entry, known, ("gpus", "min_busbw_gbyte_per_s"))
    return {
        "sku": str(sku),
        "gpus": int(wanted),
        "min_busbw_gbyte_per_s": floor,
        "min_gbit_per_s": round(floor * 8, 2),
        "threshold_source": _source_text(
            NCCL_TABLE, str(sku), f"{floor:g} GB/s busbw over {int(wanted)} GPUs", provenance
        ),
    }


def _large_busbw(registered: dict):
    for check in registered.get("checks") or []:
        if check.get("name") == "large_message_busbw":
            return _number(check.get("observed"))
    return None


def nccl_single_result(registered: dict | None, node: str, floor: dict | None = None) -> dict:
    """A node's single-node run (the registered nccl_tests result) -> its summary result, ``value`` in Gb/s (busbw
    GB/s x 8, ``unit`` Gb/s). With a ``floor`` (nccl_single_threshold) the value is the busbw at the largest message
    size (the module's large_message_busbw check, what the floor is stated for) and the result carries that floor
    as its ``threshold`` (Gb/s) with ``threshold_source``; without one it is the run's average busbw, compared with
    the other nodes."""
    registered = registered or {}
    busbw = _large_busbw(registered) if floor else _number((registered.get("nccl") or {}).get("avg_busbw"))
    result = {
        "name": f"nccl-single-{node}",
        "group": "nccl_single",
        "nodes": [node],
        "value": round(busbw * 8, 2) if busbw is not None else None,
        "unit": NCCL_UNIT,
        "module_verdict": registered.get("verdict", FAIL),
    }
    # One rank (a one-GPU node): nccl-tests' busbw is algbw x 2(n-1)/n for all-reduce, x (n-1)/n for the gathers and
    # scatters (NVIDIA/nccl-tests doc/PERFORMANCE.md), 0 for n = 1,
    # so the value measures nothing and a peer baseline would pass 0 against 0; the run still shows NCCL works there
    # (module_verdict: the module's correctness checks).
    if len((registered.get("nccl") or {}).get("devices") or []) == 1:
        result["not_applicable"] = (
            "one rank: nccl-tests' bus bandwidth is 0 for a single GPU (busbw = algbw x 2(n-1)/n or (n-1)/n), "
            "so there is no bandwidth to judge; the run shows only that NCCL works on the node"
        )
    if floor:
        result.update(
            busbw_measure="largest message size",
            min_busbw_gbyte_per_s=floor["min_busbw_gbyte_per_s"],
            threshold=floor["min_gbit_per_s"],
            threshold_source=floor["threshold_source"],
        )
    return result


# --- judging with floors -------------------------------------------------------------------------------------


def _judge_floor(result: dict) -> dict:
    check_keys(result)
    value = _number(result.get("value"))
    floor = round(float(result["threshold"]), 2)
    unit = unit_of(result)
    rule = result.get("threshold_source") or "the result's own floor"
    return {
        **result,
        "value": value,
        "unit": unit,
        "threshold": floor,
        **judge_value(value, floor, unit, rule, result.get("error")),
    }


def _not_applicable(result: dict) -> dict:
    check_keys(result)
    return {
        **result,
        "value": _number(result.get("value")),
        "unit": unit_of(result),
        "threshold": None,
        "verdict": UNKNOWN,
        "run_failed": False,
        "reason": str(result["not_applicable"]),
    }


def attribution_floors(
    results,
    baseline="absolute",
    min_fraction=0.9,
    median_fraction=0.5,
    expected=None,
    bisection=None,
) -> dict:
    """gpuforge_bench_attribution where a result with a number in ``threshold`` (its own floor, in its ``unit``) is
    judged against that floor (reason naming its threshold_source); the others by ``baseline`` among themselves,
    as that filter does. Same output: {baseline, results (in the input order), slow_nodes, slow_links,
    summary[, bisection]}."""
    results = [dict(result) for result in results or []]
    # A result that says why its value is no measurement (not_applicable) is UNKNOWN with that reason, and stays out
    # of its group's baseline.
    kinds = [
        "na" if result.get("not_applicable") else "floor" if _number(result.get("threshold")) is not None else "peer"
        for result in results
    ]
    rest = judge_results(
        [result for result, kind in zip(results, kinds, strict=True) if kind == "peer"],
        baseline=str(baseline),
        min_fraction=float(min_fraction),
        median_fraction=float(median_fraction),
        expected=_number(expected),
    )
    others = iter(rest)
    judged = [
        _not_applicable(result) if kind == "na" else _judge_floor(result) if kind == "floor" else next(others)
        for result, kind in zip(results, kinds, strict=True)
    ]
    bisection = dict(bisection) if bisection else None
    out = {"baseline": str(baseline), "results": judged, **attribute(judged, bisection)}
    if bisection:
        out["bisection"] = bisection
    return out


# --- records -------------------------------------------------------------------------------------------------


def fio_targets(nfs_paths=None, gpfs_paths=None, scratch_dirs=None, extra_targets=None) -> list:
    """fio's targets in order, each ``{kind, label, path}``: NFS (``nfs:<path>``), Spectrum Scale
    (``gpfs:<path>``), local scratch (``scratch:<path>``), then the extra targets under their own labels."""
    targets = [{"kind": "nfs", "label": f"nfs:{path}", "path": path} for path in nfs_paths or []]
    targets += [{"kind": "gpfs", "label": f"gpfs:{path}", "path": path} for path in gpfs_paths or []]
    targets += [{"kind": "scratch", "label": f"scratch:{path}", "path": path} for path in scratch_dirs or []]
    targets += [{"kind": "extra", "label": extra["label"], "path": extra["path"]} for extra in extra_targets or []]
    return targets


def resnet50_node_documents(registered_by_node) -> list:
    """``[{file: '<host>/node.json', document}]`` for each node's registered per-node ResNet-50 run. The runs keep
    no parsed "resnet50" documents, so the report's scaling chart reads only the sweep."""
    documents = []
    for node, registered in (registered_by_node or {}).items():
        registered = registered or {}
        runs = [
            {
                "precision": run.get("precision"),
                "gpus": run.get("gpus"),
                "cmd": run.get("cmd"),
                "images_per_second": run.get("images_per_second"),
                "checks": run.get("checks", []),
                "verdict": run.get("verdict", FAIL),
                "error": run.get("error"),
            }
            for run in registered.get("runs") or []
        ]
        document = {
            "kind": "resnet50_node",
            "host": node,
            "verdict": registered.get("verdict", FAIL),
            "comparison": registered.get("comparison", []),
            "error": registered.get("msg") if registered.get("failed", False) else None,
            "runs": runs,
        }
        documents.append({"file": f"{node}/node.json", "document": document})
    return documents


def resnet50_results(registered_by_node, sweep, precisions, nodes) -> list:
    """The ResNet-50 summary results: one per node and precision (``resnet50-node-<host>-<precision>``), then one
    per sweep run (``resnet50-sweep-<n>gpu-<precision>``), or one failed ``resnet50-sweep`` when the sweep failed
    before its first run. ``value`` is the images/s (``unit`` images/s), also kept as ``images_per_second``."""
    results = []
    for node, registered in (registered_by_node or {}).items():
        registered = registered or {}
        for precision in precisions or []:
            run = next((r for r in registered.get("runs") or [] if r.get("precision") == precision), {})
            value = run.get("images_per_second")
            results.append(
                {
                    "name": f"resnet50-node-{node}-{precision}",
                    "group": f"resnet50_node_{precision}",
                    "value": value,
                    "unit": IMAGES_UNIT,
                    "images_per_second": value,
                    "precision": precision,
                    "nodes": [node],
                    "module_verdict": run.get("verdict", registered.get("verdict", FAIL)),
                    "error": run.get("error", registered.get("msg")),
                }
            )
    sweep = sweep or {}
    runs = sweep.get("runs") or []
    if not runs:
        results.append(
            {
                "name": "resnet50-sweep",
                "group": "resnet50_sweep",
                "value": None,
                "unit": IMAGES_UNIT,
                "nodes": list(nodes or []),
                "images_per_second": None,
                "error": sweep.get("msg", "no run"),
            }
        )
    for run in runs:
        value = run.get("images_per_second")
        results.append(
            {
                "name": f"resnet50-sweep-{run.get('gpus')}gpu-{run.get('precision')}",
                "group": f"resnet50_sweep_{run.get('gpus')}_{run.get('precision')}",
                "value": value,
                "unit": IMAGES_UNIT,
                "precision": run.get("precision"),
                "nodes": list(nodes or []),
                "images_per_second": value,
                "module_verdict": run.get("verdict", FAIL),
            }
        )
    return results


def slurm_results(nccl, resnet50, nodes, apptainer_nccl=None, apptainer_image="") -> list:
    """The Slurm-launched runs' summary results: srun-nccl, srun-resnet50 and, with an Apptainer image,
    srun-apptainer-nccl: ``value`` in ``unit`` GB/s busbw for the NCCL runs (nccl-tests' average busbw),
    images/s for ResNet-50 (also kept as ``images_per_second``)."""
    nodes = list(nodes or [])
    nccl = nccl or {}
    resnet50 = resnet50 or {}
    first = (resnet50.get("runs") or [{}])[0] or {}
    images = (first.get("resnet50") or {}).get("total_imgs_per_sec")
    results = [
        {
            "name": "srun-nccl",
            "group": "srun_nccl",
            "nodes": nodes,
            "value": (nccl.get("nccl") or {}).get("avg_busbw"),
            "unit": SRUN_NCCL_UNIT,
            "module_verdict": nccl.get("verdict", FAIL),
        },
        {
            "name": "srun-resnet50",
            "group": "srun_resnet50",
            "nodes": nodes,
            "value": images,
            "unit": IMAGES_UNIT,
            "images_per_second": images,
            "module_verdict": resnet50.get("verdict", FAIL),
        },
    ]
    if apptainer_image:
        apptainer_nccl = apptainer_nccl or {}
        results.append(
            {
                "name": "srun-apptainer-nccl",
                "group": "srun_apptainer_nccl",
                "nodes": nodes,
                "value": (apptainer_nccl.get("nccl") or {}).get("avg_busbw"),
                "unit": SRUN_NCCL_UNIT,
                "module_verdict": apptainer_nccl.get("verdict", FAIL),
            }
        )
    return results


# --- summary.json ------------------------------------------------------------------------------------------


def _parsed_results(bench_dir):
    """A reader of the parsed result files under ``bench_dir`` (a path relative to it -> the JSON there, or None
    when the role wrote no such file)."""

    def read(relative: str):
        path = Path(bench_dir) / relative
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise RecordError(f"{path}: not JSON ({exc})") from exc

    return read


def bench_summary(summary: dict, bench_dir=None) -> dict:
    """summary.json as summary.yml writes it: ``summary`` (run_id, nodes, the judged blocks) with ``records``, the
    benchmark_run and attribution records of its blocks (gpuforge_bench_records.summary_records). With ``bench_dir``
    (the run's folder on the controller, where the role wrote the parsed results first) the records carry the chart
    data of those files; without it they carry none."""
    summary = {key: value for key, value in summary.items() if key != "records"}
    return {**summary, "records": summary_records(summary, _parsed_results(bench_dir) if bench_dir else None)}


# --- the filters ---------------------------------------------------------------------------------------------


def gpuforge_bench_ib_port_links(infiniband, system=None, link_speeds=None):
    """{{ ansible_facts.infiniband | gpuforge_bench_ib_port_links(system, gpuforge_expected_link_speeds) }}."""
    return ib_port_links(dict(infiniband or {}), dict(system or {}), dict(link_speeds or {}))


def gpuforge_bench_ib_thresholds(
    rounds, links_by_node, table, link_speeds=None, min_fraction=0.9, expected_gbit_per_s=None, sources=None
):
    """{{ rounds | gpuforge_bench_ib_thresholds(links_by_node, gpuforge_expected_ib_write_bw, ...) }}."""
    return ib_thresholds(
        list(rounds or []),
        dict(links_by_node or {}),
        dict(table or {}),
        dict(link_speeds or {}),
        float(min_fraction),
        expected_gbit_per_s,
        dict(sources or {}),
    )


def gpuforge_bench_nccl_single_threshold(sku, gpus, table, sources=None):
    """{{ sku | gpuforge_bench_nccl_single_threshold(gpus, gpuforge_expected_nccl_single_node_busbw) }}."""
    return nccl_single_threshold(sku, gpus, dict(table or {}), dict(sources or {}))


def gpuforge_bench_nccl_single_result(registered, node, floor=None):
    """{{ gpuforge_bench_nccl_single | gpuforge_bench_nccl_single_result(inventory_hostname, floor) }}."""
    return nccl_single_result(dict(registered or {}), str(node), dict(floor or {}))


def gpuforge_bench_attribution_floors(
    results, baseline="absolute", min_fraction=0.9, median_fraction=0.5, expected=None, bisection=None
):
    """{{ results | gpuforge_bench_attribution_floors(baseline='median') }}."""
    return attribution_floors(results, baseline, min_fraction, median_fraction, expected, bisection)


def gpuforge_bench_fio_targets(nfs_paths, gpfs_paths=None, scratch_dirs=None, extra_targets=None):
    """{{ nfs_paths | gpuforge_bench_fio_targets(gpfs_paths, scratch_dirs, extra_targets) }}."""
    return fio_targets(
        list(nfs_paths or []), list(gpfs_paths or []), list(scratch_dirs or []), list(extra_targets or [])
    )


def gpuforge_bench_resnet50_node_documents(registered_by_node):
    """{{ dict(hosts | zip(registered)) | gpuforge_bench_resnet50_node_documents }}."""
    return resnet50_node_documents(dict(registered_by_node or {}))


def gpuforge_bench_resnet50_results(registered_by_node, sweep, precisions, nodes):
    """{{ dict(hosts | zip(registered)) | gpuforge_bench_resnet50_results(sweep, precisions, hosts) }}."""
    return resnet50_results(
        dict(registered_by_node or {}), dict(sweep or {}), list(precisions or []), list(nodes or [])
    )


def gpuforge_bench_slurm_results(nccl, resnet50, nodes, apptainer_nccl=None, apptainer_image=""):
    """{{ nccl | gpuforge_bench_slurm_results(resnet50, hosts, apptainer_nccl, image) }}."""
    return slurm_results(
        dict(nccl or {}), dict(resnet50 or {}), list(nodes or []), dict(apptainer_nccl or {}), apptainer_image
    )


def gpuforge_bench_summary(summary, bench_dir=None):
    """{{ gpuforge_bench_summary | gpuforge_bench_summary(gpuforge_bench_dir) }}: the blocks and their records."""
    return bench_summary(dict(summary or {}), str(bench_dir) if bench_dir else None)


class FilterModule:
    def filters(self):
        return {
            "gpuforge_bench_attribution_floors": gpuforge_bench_attribution_floors,
            "gpuforge_bench_fio_targets": gpuforge_bench_fio_targets,
            "gpuforge_bench_ib_port_links": gpuforge_bench_ib_port_links,
            "gpuforge_bench_ib_thresholds": gpuforge_bench_ib_thresholds,
            "gpuforge_bench_nccl_single_result": gpuforge_bench_nccl_single_result,
            "gpuforge_bench_nccl_single_threshold": gpuforge_bench_nccl_single_threshold,
            "gpuforge_bench_resnet50_node_documents": gpuforge_bench_resnet50_node_documents,
            "gpuforge_bench_resnet50_results": gpuforge_bench_resnet50_results,
            "gpuforge_bench_slurm_results": gpuforge_bench_slurm_results,
            "gpuforge_bench_summary": gpuforge_bench_summary,
        }
