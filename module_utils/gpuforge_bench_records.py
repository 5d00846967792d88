"""The records of one benchmark run, built where ``bench/<run>/summary.json`` is written.

roles/gpuforge_bench/tasks/summary.yml writes summary.json through the ``gpuforge_bench_summary`` filter
(filter_plugins/gpuforge_bench.py), which puts these records into it as its ``records`` list, beside the per-benchmark
blocks that keep the measurement detail; ``gpuforge k8s verify`` does the same for its in-pod ib_write_bw pair
(src/gpuforge/k8s_verify.py). Readers take the records as written (gpuforge_records.bench_summary_records) and
recount nothing.

* ``benchmark_run`` (schemas/benchmark-run.schema.json): one per ``results[]`` entry of every block, with the
  verdict its judge gave (gpuforge_bench_attribution, gpuforge_bench_gates) and, where the run left a parsed result
  file beside summary.json (``raw_result_path``), its chart data: the NCCL size/busbw series, a ResNet-50 run's GPU
  count. Those files are read here, on the controller, when summary.json is written: the role writes them there
  first (delegate_to: localhost), and the record keeps what the report draws, so no reader opens them again.
* ``attribution`` (schemas/attribution.schema.json): one per node (``slow_nodes``) and per link or port
  (``slow_links``) the attribution names slow.

The blocks are read strictly: a missing or mistyped key is a gpuforge_records.RecordError naming the result, so a
judge that changes what it returns fails here, when the file is written, not in a reader. Stdlib only, Python 3.8:
it ships in module_utils because a filter plugin imports it.
"""

from __future__ import annotations

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import VERDICTS
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_records import (
    BENCH_SOURCE,
    SCHEMA_VERSION,
    RecordError,
)

__all__ = ["attribution_records", "benchmark_run_records", "raw_result_path", "summary_records"]

# None's type, named once (pylint 4 reads `kind is type(None)` as a type check: gpuforge_records says more).
_NONE_TYPE = type(None)
_NUMBER = (int, float, _NONE_TYPE)
# What a fio or p2p result adds to its record's ``observed`` (gpuforge_bench_gates), with the types read.
_EXTRA_OBSERVED = {
    "fio": {"mib_per_second": _NUMBER, "iops": _NUMBER, "clat_p99_us": _NUMBER},
    "p2p": {"gpus": (int, _NONE_TYPE), "sku": (str, _NONE_TYPE), "uni_min_ratio": _NUMBER, "bi_min_ratio": _NUMBER},
}
# The precisions a ResNet-50 run is named with (module resnet50_benchmark, option precision).
_RESNET50_PRECISIONS = ("fp32", "amp", "fp16", "bf16", "auto")


def summary_records(bench_summary: dict, raw=None) -> list:
    """What summary.json holds as ``records``: the benchmark_run records, then the attribution records, each with
    the summary's ``run_id``. ``raw``: see benchmark_run_records."""
    return benchmark_run_records(bench_summary, raw) + attribution_records(bench_summary)


def raw_result_path(benchmark, name):
    """Where, relative to ``bench/<run>/``, the role writes the parsed result behind a ``results[]`` entry;
    None where no file holds more than the summary does (ib_write_bw pairs, fio, p2p, the Slurm-launched runs).

    nccl:     ``nccl-<stem>`` -> ``nccl/<stem>.json`` (roles/gpuforge_bench/tasks/nccl.yml, "Write the parsed
              results": single-<host>, multi-<mode>, rail-<hca>-<port>; the bisection probes: bisect-<n>);
    resnet50: ``resnet50-node-<host>-<precision>`` -> ``resnet50/<host>/node.json``,
              ``resnet50-sweep-<n>gpu-<precision>`` -> ``resnet50/sweep.json``
              (roles/gpuforge_bench/tasks/resnet50.yml, "Write the parsed results").
    """
    if benchmark == "nccl" and name.startswith("nccl-") and "/" not in name:
        return f"nccl/{name[len('nccl-') :]}.json"
    if benchmark == "resnet50" and name.startswith("resnet50-node-") and "/" not in name:
        host, _dash, precision = name[len("resnet50-node-") :].rpartition("-")
        return f"resnet50/{host}/node.json" if host and precision in _RESNET50_PRECISIONS else None
    if benchmark == "resnet50" and name.startswith("resnet50-sweep-"):
        return "resnet50/sweep.json"
    return None


def _get(data, key, types, where):
    if not isinstance(data, dict) or key not in data:
        raise RecordError(f"{where}: missing key {key!r}")
    value = data[key]
    kinds = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join("null" if kind is _NONE_TYPE else kind.__name__ for kind in kinds)
        raise RecordError(f"{where}: {key!r} is {type(value).__name__}, expected {names}")
    return value


def _verdict(result, at):
    """The verdict its judge gave the result: one of VERDICTS, or the judge is wrong and nothing is written."""
    verdict = _get(result, "verdict", str, at)
    if verdict not in VERDICTS:
        raise RecordError(f"{at}: verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    return verdict


def _nccl_series(document, at):
    """Message size (bytes) -> bus bandwidth (GB/s, out-of-place, else in-place) of a parsed nccl-tests run
    (module nccl_tests: ``nccl.rows[]``); None when the run produced no table."""
    nccl = document.get("nccl")
    if not nccl:
        return None
    points = []
    for index, row in enumerate(_get(nccl, "rows", list, at)):
        size = _get(row, "size", int, f"{at} nccl.rows[{index}]")
        timing = row.get("out_of_place") or row.get("in_place") or {}
        busbw = timing.get("busbw") if isinstance(timing, dict) else None
        if isinstance(busbw, (int, float)) and not isinstance(busbw, bool):
            points.append([size, busbw])
    return {"x": "message size", "x_unit": "B", "y": "bus bandwidth", "y_unit": "GB/s", "points": points}


def _raw_observed(benchmark, name, document, at):
    """What the parsed result file adds to a record's ``observed``: the NCCL size/busbw series, or the GPU count of
    a ResNet-50 run (the per-node file and the sweep both hold ``runs``, one per precision and GPU count)."""
    if not isinstance(document, dict):
        raise RecordError(f"{at}: not an object")
    if benchmark == "nccl":
        series = _nccl_series(document, at)
        return {"series": series} if series is not None else {}
    runs = _get(document, "runs", list, at)
    if name.startswith("resnet50-node-"):
        precision = name.rpartition("-")[2]
        for index, run in enumerate(runs):
            if run.get("precision") == precision:
                gpus = _get(run, "gpus", (int, _NONE_TYPE), f"{at} runs[{index}]")
                return {"gpus": gpus} if gpus is not None else {}
        return {}
    for index, run in enumerate(runs):
        gpus = _get(run, "gpus", int, f"{at} runs[{index}]")
        if name == f"resnet50-sweep-{gpus}gpu-{run.get('precision')}":
            return {"gpus": gpus}
    return {}


def _blocks(bench_summary):
    if not isinstance(bench_summary, dict):
        raise RecordError("bench summary.json: not an object")
    return sorted(
        (name, block) for name, block in bench_summary.items() if isinstance(block, dict) and "results" in block
    )


def benchmark_run_records(bench_summary: dict, raw=None) -> list:
    """One ``benchmark_run`` record per ``results[]`` entry of every benchmark block (in the order of the blocks'
    names, each block's results in their order).

    ``raw`` (optional) is a callable: a path relative to the bench run folder (raw_result_path) -> the parsed JSON
    file there, or None when it is absent; what it holds is added to ``observed`` (chart data).
    """
    records = []
    run_id = bench_summary.get("run_id") if isinstance(bench_summary, dict) else None
    for benchmark, block in _blocks(bench_summary):
        for index, result in enumerate(_get(block, "results", list, f"summary.json {benchmark}")):
            records.append(
                _benchmark_run(run_id, benchmark, block, result, f"summary.json {benchmark}.results[{index}]", raw)
            )
    return records


def _benchmark_run(run_id, benchmark, block, result, at, raw):
    name = _get(result, "name", str, at)
    unit = _get(result, "unit", str, at)
    observed = {"value": _get(result, "value", _NUMBER, at), "unit": unit}
    for key, types in _EXTRA_OBSERVED.get(benchmark, {}).items():
        if key in result and _get(result, key, types, at) is not None:
            observed[key] = result[key]
    path = raw_result_path(benchmark, name) if raw is not None else None
    document = raw(path) if path else None
    if document is not None:
        observed.update(_raw_observed(benchmark, name, document, f"{path} (for {name})"))
    threshold = {
        "value": _get(result, "threshold", _NUMBER, at),
        "unit": unit,
        "op": _get(result, "op", str, at) if "op" in result else ">=",
        "baseline": block.get("baseline"),
        "source": _get(result, "threshold_source", str, at) if "threshold_source" in result else BENCH_SOURCE,
    }
    # The port's line rate, a reference on the chart; null where no rate was read (a pod that never started).
    line_rate = _get(result, "line_rate_gbit_per_s", _NUMBER, at) if "line_rate_gbit_per_s" in result else None
    if line_rate is not None:
        threshold["line_rate"] = float(line_rate)
    if "clat_p99_us_max" in result:
        threshold["clat_p99_us_max"] = _get(result, "clat_p99_us_max", (int, float), at)
    nodes = _get(result, "nodes", list, at)
    if not all(isinstance(node, str) for node in nodes):
        raise RecordError(f"{at}: 'nodes' holds a non-string")
    hca = result.get("hca")
    link = "__".join(nodes) + (f"__{hca}" if hca else "") if benchmark == "ib_write_bw" and len(nodes) == 2 else None
    record = {
        "kind": "benchmark_run",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "benchmark": benchmark,
        "name": name,
        "group": _get(result, "group", str, at),
        "nodes": nodes,
        "link": link,
        "rail": hca,
        "observed": observed,
        "threshold": threshold,
        "verdict": _verdict(result, at),
        "run_failed": _get(result, "run_failed", bool, at),
        "module_verdict": result.get("module_verdict"),
        "reason": _get(result, "reason", str, at),
        "remedy": (_get(result, "remedy", str, at) if "remedy" in result else "") or result.get("error") or "",
        "caused_by": [],
    }
    for key in ("target", "job"):  # fio: the file system and the job
        if key in result:
            record[key] = _get(result, key, (str, _NONE_TYPE), at)
    return record


def attribution_records(bench_summary: dict) -> list:
    """One ``attribution`` record per node (``slow_nodes``) and per link or port (``slow_links``) the attribution
    names slow (gpuforge_bench_attribution.attribute), FAIL."""
    records = []
    run_id = bench_summary.get("run_id") if isinstance(bench_summary, dict) else None
    for benchmark, block in _blocks(bench_summary):
        where = f"summary.json {benchmark}"
        for index, entry in enumerate(_get(block, "slow_nodes", list, where)):
            at = f"{where}.slow_nodes[{index}]"
            node = _get(entry, "node", str, at)
            reasons = _get(entry, "reasons", list, at)
            hcas = _get(entry, "hcas", list, at)
            records.append(_attribution(run_id, benchmark, "node", node, [node], hcas, reasons, block, entry))
        for index, entry in enumerate(_get(block, "slow_links", list, where)):
            at = f"{where}.slow_links[{index}]"
            link = _get(entry, "name", str, at)
            nodes = _get(entry, "nodes", list, at)
            reason = _get(entry, "reason", str, at)
            records.append(
                _attribution(run_id, benchmark, "link", link, nodes, [entry.get("hca")], [reason], block, entry)
            )
    return records


def _attribution(run_id, benchmark, subject, name, nodes, rails, reasons, block, entry):
    observed = {"reasons": [str(reason) for reason in reasons]}
    # The results the attribution rests on, where it names them (a node's or a port's: gpuforge_bench_attribution).
    if isinstance(entry.get("results"), list) and all(isinstance(item, str) for item in entry["results"]):
        observed["results"] = list(entry["results"])
    return {
        "kind": "attribution",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "benchmark": benchmark,
        "subject": subject,
        "name": name,
        "nodes": list(nodes),
        "link": name if subject == "link" else None,
        "rails": [rail for rail in rails if rail],
        "observed": observed,
        "threshold": {"baseline": block.get("baseline"), "source": BENCH_SOURCE},
        "verdict": "FAIL",
        "remedy": (
            f"take {name} out of service and check its HCAs, cables and switch ports"
            if subject == "node"
            else f"check the cable, transceiver and switch port of link {name}"
        ),
        "caused_by": [],
    }
