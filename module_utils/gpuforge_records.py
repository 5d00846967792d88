"""Typed result records (schemas/*.schema.json, schema_version 1) and the one node verdict over them.

Six kinds, one verdict vocabulary (PASS / WARN / FAIL / UNKNOWN, gpuforge_checks.VERDICTS):

* ``node_check``     one check of one node. gpu_node_check returns them (``node_check_record`` of each judged check)
                     and validate.yml writes them as they are into ``validation/<host>.json`` ``records``;
* ``benchmark_run``  one benchmark gate: a ``results[]`` entry of ``bench/<run>/summary.json``
                     (roles/gpuforge_bench/tasks/summary.yml through the ``gpuforge_bench_attribution`` filter; fio
                     and p2p through ``gpuforge_bench_judged``, module_utils/gpuforge_bench_gates.py);
* ``attribution``    a node or link the attribution names as slow (``slow_nodes`` / ``slow_links`` there);
* ``stage_result``   one stage of a CLI run (demo, burnin): the CLI writes them (``stage_result_record``) as they
                     are into ``<run-id>/summary.json`` ``stages``;
* ``k8s_check``      one post-deploy check of the Kubernetes add-ons. ``gpuforge k8s verify``'s judges build them
                     (``k8s_check_record``, src/gpuforge/k8s_verify_judge.py) and it writes them as they are into
                     ``k8s/verify.json`` ``records``;
* ``burnin_round``   one burn-in round of one node (``gpuforge burnin``).

``node_verdicts`` is the one place a node's verdict is computed: gpu_node_check's result (``verdict``,
``healthy``, ``failed_checks``), validate.yml's files and assert, the runbooks, the CLI run's summary.json, the
report and the exports all read what it returns. What the verdicts mean, once:

* FAIL: something that names the node failed. The node is not healthy: validate.yml fails, the runbooks drain it,
  the verdicts export drains it in Slurm and taints it in Kubernetes.
* WARN: only warnings (a single link flap, a clock event below the limit, one slow link that cannot be pinned on
  one end). The node is healthy for scheduling (validate.yml passes, nothing is drained) but flagged: its verdict
  stays WARN, with the reasons, in every consumer.
* UNKNOWN: part of it was not judged (a benchmark run without a threshold, a DCGM level that was skipped); healthy
  for scheduling, flagged like WARN, ranked below it.
* PASS: everything that names the node passed.

The builders of the files one producer still writes in its own shape (the benchmark summaries) read that shape
strictly: a missing or mistyped key raises RecordError naming the file's key, so
a producer that changes what it writes fails the schema tests (tests/unit/schemas/). Stdlib only, Python 3.8: it
runs on the node inside gpu_node_check.
"""

from __future__ import annotations

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import (
    FAIL,
    PASS,
    UNKNOWN,
    VERDICTS,
    WARN,
)

SCHEMA_VERSION = 1
KINDS = ("node_check", "benchmark_run", "attribution", "stage_result", "k8s_check", "burnin_round")
_RANK = {PASS: 0, UNKNOWN: 1, WARN: 2, FAIL: 3}

# Where a threshold comes from, as the records name it.
NODE_CHECK_SOURCE = "expected hardware spec (roles/gpuforge/defaults/main/expected_hardware.yml)"
BENCH_SOURCE = "peer baseline of the run (gpuforge_bench_attribution, roles/gpuforge_bench/defaults/main.yml)"

# What a fio or p2p result adds to its record's ``observed`` (gpuforge_bench_gates), with the types read.
_NUMBER = (int, float, type(None))
_EXTRA_OBSERVED = {
    "fio": {"mib_per_second": _NUMBER, "iops": _NUMBER, "clat_p99_us": _NUMBER},
    "p2p": {"gpus": (int, type(None)), "sku": (str, type(None)), "uni_min_ratio": _NUMBER, "bi_min_ratio": _NUMBER},
}

__all__ = [
    "KINDS",
    "SCHEMA_VERSION",
    "VERDICTS",
    "RecordError",
    "attribution_records",
    "benchmark_run_records",
    "fleet_check_record",
    "k8s_check_record",
    "k8s_check_records",
    "node_check_record",
    "node_check_records",
    "node_report",
    "node_verdicts",
    "raw_result_path",
    "stage_result_record",
    "stage_result_records",
    "worst_verdict",
]


class RecordError(ValueError):
    """A file the playbooks wrote does not have the shape the record builders read."""


def _get(data, key, types, where):
    if not isinstance(data, dict) or key not in data:
        raise RecordError(f"{where}: missing key {key!r}")
    value = data[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise RecordError(f"{where}: {key!r} is {type(value).__name__}, expected {_names(types)}")
    return value


def _as_tuple(types):
    return types if isinstance(types, tuple) else (types,)


# None's type, named once: pylint 4 (ansible-test's pylint sanity test from ansible-core 2.20 on: "Update the pylint
# sanity test to pylint 4.0.2", 2.20 and 2.21 changelogs) reads `kind is type(None)` as a type check that asks for
# isinstance() (unidiomatic-typecheck); types.NoneType is Python 3.10+, and this runs on the node's 3.8.
_NONE_TYPE = type(None)


def _names(types):
    return " or ".join("null" if kind is _NONE_TYPE else kind.__name__ for kind in _as_tuple(types))


def _written_verdict(value, where, rerun, key="verdict"):
    """A verdict its producer wrote (under ``key``), one of VERDICTS; a word of the producers' older vocabularies (ok,
    slow, failed, unjudged, ...) is refused with the fix: ``rerun``, the command that writes the file again."""
    if value not in VERDICTS:
        raise RecordError(
            f"{where}: {key} {value!r} is not one of {', '.join(VERDICTS)}: this file was written by an older "
            f"gpuforge; {rerun}"
        )
    return value


def _written_record(record, kind, keys, at, rerun):
    """A record as its producer wrote it: each key of ``keys`` of its type, the ``kind`` and schema_version
    expected, and a verdict of VERDICTS (a word of an older vocabulary is refused with ``rerun``, the fix)."""
    for key, types in keys.items():
        _get(record, key, types, at)
    if record["kind"] != kind or record["schema_version"] != SCHEMA_VERSION:
        raise RecordError(f"{at}: not a {kind} record of schema_version {SCHEMA_VERSION}")
    _written_verdict(record["verdict"], at, rerun)
    return record


def worst_verdict(verdicts) -> str:
    """FAIL over WARN over UNKNOWN over PASS; PASS for none."""
    return max(verdicts, key=_RANK.__getitem__, default="PASS")


def node_check_record(check: dict, node: str, system=None, checked_at=None, run_id=None) -> dict:
    """The ``node_check`` record of one judged check (gpuforge_checks.node_check: name, status, observed, expected,
    fault, remedy, caused_by "a" or "a,b"), as gpu_node_check returns it and validate.yml writes it. RecordError for
    a status outside VERDICTS."""
    if check.get("status") not in VERDICTS:
        raise RecordError(
            f"check {check.get('name')!r}: status {check.get('status')!r} is not one of {', '.join(VERDICTS)}"
        )
    caused_by = check.get("caused_by")
    return {
        "kind": "node_check",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "node": node,
        "check": check["name"],
        "system": system,
        "checked_at": checked_at,
        "observed": check.get("observed"),
        "threshold": {"expected": check.get("expected"), "source": check.get("source") or NODE_CHECK_SOURCE},
        "verdict": check["status"],
        "remedy": check.get("remedy") or "",
        "fault": check.get("fault") or "",
        "caused_by": [name for name in str(caused_by).split(",") if name] if caused_by else [],
    }


# The keys of a node_check record and their types (schemas/node-check.schema.json).
_NODE_CHECK_KEYS = {
    "kind": str,
    "schema_version": int,
    "node": str,
    "check": str,
    "system": (str, type(None)),
    "checked_at": (str, type(None)),
    "threshold": dict,
    "verdict": str,
    "remedy": str,
    "fault": str,
    "caused_by": list,
}


def node_check_records(host_file: dict, run_id=None) -> list:
    """The node_check records of ``validation/<host>.json`` (``{host, system, checked_at, verdict, records}``), as
    gpu_node_check returned them; each is checked key by key and given the run's id."""
    where = "validation/<host>.json"
    host = _get(host_file, "host", str, where)
    records = []
    for index, record in enumerate(_get(host_file, "records", list, where)):
        at = f"{where} ({host}) records[{index}]"
        _written_record(record, "node_check", _NODE_CHECK_KEYS, at, "run playbooks/validate.yml again")
        if record["node"] != host:
            raise RecordError(f"{at}: the record of node {record['node']!r} in the file of {host!r}")
        records.append(dict(record, run_id=run_id if run_id is not None else record.get("run_id")))
    return records


def _result_identity(result, benchmark, at):
    nodes = _get(result, "nodes", list, at)
    if not all(isinstance(node, str) for node in nodes):
        raise RecordError(f"{at}: 'nodes' holds a non-string")
    hca = result.get("hca")
    link = None
    if benchmark == "ib_write_bw" and len(nodes) == 2:
        link = "__".join(nodes) + (f"__{hca}" if hca else "")
    return {"nodes": nodes, "link": link, "rail": hca}


def raw_result_path(benchmark, name):
    """Where, relative to ``bench/<run>/``, the playbooks write the parsed result behind a ``results[]`` entry;
    None where no file holds more than the summary does (ib_write_bw pairs, the Slurm-launched runs).

    nccl:     ``nccl-<stem>`` -> ``nccl/<stem>.json`` (playbooks/tasks/bench_nccl.yml, "Write the parsed results":
              single-<host>, multi-<mode>, rail-<hca>-<port>; bench_nccl_probe.yml: bisect-<n>);
    resnet50: ``resnet50-node-<host>`` or ``resnet50-node-<host>-<precision>`` -> ``resnet50/<host>/node.json``,
              ``resnet50-sweep-<n>gpu[-<precision>]`` -> ``resnet50/sweep.json``
              (roles/gpuforge_bench/tasks/resnet50.yml, "Write the parsed results").
    """
    if benchmark == "nccl" and name.startswith("nccl-") and "/" not in name:
        return f"nccl/{name[len('nccl-') :]}.json"
    if benchmark == "resnet50" and name.startswith("resnet50-node-") and "/" not in name:
        host, _precision = _node_and_precision(name[len("resnet50-node-") :])
        return f"resnet50/{host}/node.json"
    if benchmark == "resnet50" and name.startswith("resnet50-sweep-"):
        return "resnet50/sweep.json"
    return None


# The precisions a ResNet-50 run is named with (module resnet50_benchmark, option precision).
_RESNET50_PRECISIONS = ("fp32", "amp", "fp16", "bf16", "auto")


def _node_and_precision(rest):
    """``gpu01-amp`` -> (``gpu01``, ``amp``); ``gpu01`` (a run of one precision, older summaries) -> (``gpu01``, None).
    Host names may hold dashes; only a known precision at the end is split off."""
    host, _dash, suffix = rest.rpartition("-")
    if host and suffix in _RESNET50_PRECISIONS:
        return host, suffix
    return rest, None


def _nccl_series(document, at):
    """Message size (bytes) -> bus bandwidth (GB/s, out-of-place, else in-place) of a parsed nccl-tests run
    (module nccl_tests: ``nccl.rows[]``); None when the run produced no table."""
    nccl = document.get("nccl") if isinstance(document, dict) else None
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
    """What the parsed result file adds to a record's ``observed``: the NCCL size/busbw series, or the GPU
    count of a ResNet-50 run."""
    if not isinstance(document, dict):
        raise RecordError(f"{at}: not an object")
    if benchmark == "nccl":
        series = _nccl_series(document, at)
        return {"series": series} if series is not None else {}
    if name.startswith("resnet50-node-"):
        _host, precision = _node_and_precision(name[len("resnet50-node-") :])
        if "runs" not in document:  # one run per node (before the precisions were run side by side)
            gpus = _get(document, "gpus", (int, type(None)), at)
            return {"gpus": gpus} if gpus is not None else {}
        for index, run in enumerate(_get(document, "runs", list, at)):
            if precision is None or run.get("precision") == precision:
                gpus = _get(run, "gpus", (int, type(None)), f"{at} runs[{index}]")
                return {"gpus": gpus} if gpus is not None else {}
        return {}
    for index, run in enumerate(_get(document, "runs", list, at)):
        gpus = _get(run, "gpus", int, f"{at} runs[{index}]")
        # resnet50-sweep-<n>gpu, or resnet50-sweep-<n>gpu-<precision> since the sweep runs each precision
        if name == f"resnet50-sweep-{gpus}gpu" or name == f"resnet50-sweep-{gpus}gpu-{run.get('precision')}":
            return {"gpus": gpus}
    return {}


# The generic keys of summary.json results before each result named its unit (issue 16): refused, not guessed at.
_RETIRED_KEYS = ("gbps", "threshold_gbps", "expected_gbps")


def _value(result, at):
    """The measured value, ``value``, in the result's ``unit`` (every benchmark: schemas/bench-summary.schema.json).
    A result in the retired shape (``gbps`` for whatever it measured, ResNet-50 images/s included) is refused."""
    retired = [key for key in _RETIRED_KEYS if key in result]
    if retired:
        raise RecordError(
            f"{at}: {', '.join(map(repr, retired))} of a summary.json written before results named their unit; "
            "it now holds 'value', 'unit' and 'threshold' (rerun the benchmark)"
        )
    return _get(result, "value", _NUMBER, at)


def benchmark_run_records(bench_summary: dict, run_id=None, raw=None) -> list:
    """Records of ``bench/<run>/summary.json``: one per ``results[]`` entry of every benchmark.

    ``raw`` (optional) is a callable: a path relative to the bench run folder (raw_result_path) -> the parsed
    JSON file there, or None when it is absent; what it holds is added to ``observed`` (chart data).
    """
    records = []
    run_id = run_id or bench_summary.get("run_id")
    for benchmark, block in sorted(_benchmark_blocks(bench_summary)):
        baseline = block.get("baseline")
        for index, result in enumerate(_get(block, "results", list, f"summary.json {benchmark}")):
            at = f"summary.json {benchmark}.results[{index}]"
            name = _get(result, "name", str, at)
            value = _value(result, at)
            threshold = _get(result, "threshold", _NUMBER, at)
            unit = _get(result, "unit", str, at)
            reason = _get(result, "reason", str, at)
            observed = {"value": value, "unit": unit}
            for key, types in _EXTRA_OBSERVED.get(benchmark, {}).items():
                if key in result and _get(result, key, types, at) is not None:
                    observed[key] = result[key]
            path = raw_result_path(benchmark, name) if raw is not None else None
            document = raw(path) if path else None
            if document is not None:
                observed.update(_raw_observed(benchmark, name, document, f"{path} (for {name})"))
            limits = {
                "value": threshold,
                "unit": unit,
                "op": _get(result, "op", str, at) if "op" in result else ">=",
                "baseline": baseline,
                "source": _get(result, "threshold_source", str, at) if "threshold_source" in result else BENCH_SOURCE,
            }
            line_rate = (
                _get(result, "line_rate_gbit_per_s", (int, float), at) if "line_rate_gbit_per_s" in result else None
            )
            if line_rate is not None:
                limits["line_rate"] = float(line_rate)
            if "clat_p99_us_max" in result:
                limits["clat_p99_us_max"] = _get(result, "clat_p99_us_max", (int, float), at)
            record = {
                "kind": "benchmark_run",
                "schema_version": SCHEMA_VERSION,
                "run_id": run_id,
                "benchmark": benchmark,
                "name": name,
                "group": _get(result, "group", str, at),
                **_result_identity(result, benchmark, at),
                "observed": observed,
                "threshold": limits,
                "verdict": _written_verdict(_get(result, "verdict", str, at), at, "run playbooks/benchmark.yml again"),
                "run_failed": _get(result, "run_failed", bool, at),
                "module_verdict": result.get("module_verdict"),
                "reason": reason,
                "remedy": (_get(result, "remedy", str, at) if "remedy" in result else "") or result.get("error") or "",
                "caused_by": [],
            }
            for key in ("target", "job"):  # fio: the file system and the job
                if key in result:
                    record[key] = _get(result, key, (str, type(None)), at)
            records.append(record)
    return records


def _benchmark_blocks(bench_summary):
    if not isinstance(bench_summary, dict):
        raise RecordError("bench summary.json: not an object")
    return [(name, block) for name, block in bench_summary.items() if isinstance(block, dict) and "results" in block]


def attribution_records(bench_summary: dict, run_id=None) -> list:
    """One record per node and per link the attribution names slow (``slow_nodes`` / ``slow_links``)."""
    records = []
    run_id = run_id or bench_summary.get("run_id")
    for benchmark, block in sorted(_benchmark_blocks(bench_summary)):
        where = f"summary.json {benchmark}"
        for index, entry in enumerate(_get(block, "slow_nodes", list, where)):
            at = f"{where}.slow_nodes[{index}]"
            node = _get(entry, "node", str, at)
            reasons = _get(entry, "reasons", list, at)
            records.append(
                _attribution(run_id, benchmark, "node", node, [node], entry.get("hcas") or [], reasons, block, entry)
            )
        for index, entry in enumerate(_get(block, "slow_links", list, where)):
            at = f"{where}.slow_links[{index}]"
            link = _get(entry, "name", str, at) if "name" in entry else _get(entry, "link", str, at)
            nodes = entry.get("nodes") or link.split("__")[:2]
            reasons = entry.get("reasons") or [entry.get("reason") or ""]
            records.append(
                _attribution(run_id, benchmark, "link", link, nodes, [entry.get("hca")], reasons, block, entry)
            )
    return records


def _attribution(run_id, benchmark, subject, name, nodes, rails, reasons, block, entry):
    observed = {"reasons": [str(reason) for reason in reasons]}
    # The results the attribution rests on, where it names them (a port's pairs: gpuforge_bench_attribution).
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


FLEET_CHECK = "fleet_consistency"
FLEET_SOURCE = "majority of the nodes of the same system (fleet_consistency, library/fleet_consistency.py)"


def fleet_check_record(fleet_check: dict, host: str, system=None, checked_at=None, run_id=None) -> dict:
    """This node's ``fleet_consistency`` node_check record, from the fleet_consistency check of its system
    (library/fleet_consistency.py ``checks[<system>]``: observed: property -> {host: value} of the outliers;
    expected: property -> the majority value, properties such as ``vbios.<bus id>``). The record holds this node's
    value of every compared property (its own where it is an outlier, else the majority) and the majority as the
    threshold; FAIL where this node is an outlier, PASS where another node is."""
    at = f"fleet_consistency check of {system} ({host})"
    expected = _get(fleet_check, "expected", dict, at)
    outliers = _get(fleet_check, "observed", dict, at)
    values = dict(expected)
    mine = {}
    for prop, per_host in outliers.items():
        if not isinstance(per_host, dict):
            raise RecordError(f"{at}: observed[{prop!r}] is {type(per_host).__name__}, expected dict")
        if host in per_host:
            values[prop] = per_host[host]
            mine[prop] = per_host[host]
    status = _get(fleet_check, "status", str, at)
    if status not in VERDICTS:
        raise RecordError(f"{at}: unknown status {status!r} (known: {', '.join(VERDICTS)})")
    return {
        "kind": "node_check",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "node": host,
        "check": FLEET_CHECK,
        "system": system,
        "checked_at": checked_at,
        "observed": values,
        "threshold": {"expected": expected, "source": FLEET_SOURCE},
        "verdict": status if mine else PASS,
        "remedy": (fleet_check.get("remedy") or "") if mine else "",
        "fault": "; ".join(f"{key} is {val!r}, the majority {expected.get(key)!r}" for key, val in mine.items()),
        "caused_by": [],
    }


def stage_result_record(run_id, stage, status, verdict, rc, detail) -> dict:
    """One ``stage_result`` record (schemas/stage-result.schema.json): a stage of a CLI run, its status word
    (gpuforge.runner.STAGE_STATUS_VERDICT) and the verdict that status means. RecordError for a verdict outside
    VERDICTS."""
    if verdict not in VERDICTS:
        raise RecordError(f"stage {stage!r}: verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    return {
        "kind": "stage_result",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "stage": stage,
        "status": status,
        "rc": rc,
        "detail": detail or "",
        "verdict": verdict,
        "remedy": "",
        "caused_by": [],
    }


# The keys of a stage_result record and their types (schemas/stage-result.schema.json).
_STAGE_RESULT_KEYS = {
    "kind": str,
    "schema_version": int,
    "run_id": (str, type(None)),
    "stage": str,
    "status": str,
    "rc": (int, type(None)),
    "detail": str,
    "verdict": str,
    "remedy": str,
    "caused_by": list,
}


def stage_result_records(cli_summary: dict) -> list:
    """The stage_result records of a CLI run's ``summary.json`` ``stages`` (demo, burnin), as the CLI wrote them;
    each is checked key by key. A single-playbook run has none. A summary of an older gpuforge (stages without
    ``kind``) is refused with the fix."""
    where = "<run-id>/summary.json"
    run_id = _get(cli_summary, "run_id", str, where)
    records = []
    for index, record in enumerate(cli_summary.get("stages") or []):
        at = f"{where} stages[{index}]"
        if isinstance(record, dict) and "kind" not in record and "name" in record:
            raise RecordError(f"{at}: written by an older gpuforge (a stage without its record); run the command again")
        _written_record(record, "stage_result", _STAGE_RESULT_KEYS, at, "run the command again")
        if record["run_id"] != run_id:
            raise RecordError(f"{at}: the record of run {record['run_id']!r} in the summary of run {run_id!r}")
        records.append(dict(record))
    return records


def k8s_check_record(check, subject, verdict, observed, expected, source, remedy="", node=None, nodes=None):
    """One ``k8s_check`` record (schemas/k8s-check.schema.json) as a judge of ``gpuforge k8s verify`` returns it:
    ``nodes`` is every node involved (``[node]`` when only ``node`` is given); no remedy on a PASS. ``run_id`` and
    ``checked_at`` stay null until the verify run stamps them. RecordError for a verdict outside VERDICTS."""
    if verdict not in VERDICTS:
        raise RecordError(f"k8s check {check!r}: verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    return {
        "kind": "k8s_check",
        "schema_version": SCHEMA_VERSION,
        "run_id": None,
        "check": check,
        "subject": subject,
        "node": node,
        "nodes": list(nodes) if nodes is not None else ([node] if node else []),
        "checked_at": None,
        "observed": observed,
        "threshold": {"expected": expected, "source": source},
        "verdict": verdict,
        "remedy": remedy if verdict != PASS else "",
        "caused_by": [],
    }


# The keys of a k8s_check record and their types (schemas/k8s-check.schema.json; observed is any JSON value).
_K8S_CHECK_KEYS = {
    "kind": str,
    "schema_version": int,
    "run_id": (str, type(None)),
    "check": str,
    "subject": str,
    "node": (str, type(None)),
    "nodes": list,
    "checked_at": (str, type(None)),
    "threshold": dict,
    "verdict": str,
    "remedy": str,
    "caused_by": list,
}


def k8s_check_records(verify_file: dict, run_id=None) -> list:
    """The k8s_check records of ``k8s/verify.json`` (``{schema_version, run_id, checked_at, server, records, ...}``,
    gpuforge k8s verify), as its judges built them; each is checked key by key and given the run's id. A file of
    an older gpuforge (``checks`` instead of ``records``) is refused with the command that writes it again."""
    where = "k8s/verify.json"
    if "records" not in verify_file and "checks" in verify_file:
        raise RecordError(
            f"{where}: written by an older gpuforge (checks, not records); run `gpuforge k8s verify` again"
        )
    records = []
    for index, record in enumerate(_get(verify_file, "records", list, where)):
        at = f"{where} records[{index}]"
        _written_record(record, "k8s_check", _K8S_CHECK_KEYS, at, "run `gpuforge k8s verify` again")
        if "observed" not in record:
            raise RecordError(f"{at}: no 'observed'")
        if not all(isinstance(node, str) for node in record["nodes"]):
            raise RecordError(f"{at}: 'nodes' holds a non-string")
        _get(record["threshold"], "source", str, f"{at} threshold")
        records.append(dict(record, run_id=run_id if run_id is not None else record["run_id"]))
    return records


def node_verdicts(records, burnin_trends=None) -> dict:
    """The one node verdict: {node: {verdict, healthy, failed_checks, caused_failures, reasons}}.

    ``verdict`` is the worst verdict of what names the node (FAIL over WARN over UNKNOWN over PASS); ``healthy`` is
    ``verdict != FAIL`` (a WARN or UNKNOWN node stays schedulable, flagged: the module docstring says why);
    ``failed_checks`` names the FAIL root causes (a node check's name, else what failed), ``caused_failures`` the
    failed node checks that fail only because of another ({check: "root[,root]"}), so one fault counts once;
    ``reasons`` has every record not PASS: {verdict, what, remedy}.

    A node is named by its node checks, by attributions that name it (a slow node, or a node of a slow link),
    by benchmark runs on that node alone that were judged (a run over several nodes cannot blame one of them; an
    UNKNOWN run, measured without a threshold or not run, leaves the node as it is), by its burn-in
    rounds and by the burn-in trend over all rounds (``burnin_trends``, burnin_trend_verdicts' result).
    """
    nodes: dict = {}

    def entry_of(node):
        return nodes.setdefault(
            node, {"verdict": PASS, "healthy": True, "failed_checks": [], "caused_failures": {}, "reasons": []}
        )

    def note(node, record, label, name=None):
        entry = entry_of(node)
        verdict = record["verdict"]
        entry["verdict"] = worst_verdict([entry["verdict"], verdict])
        entry["healthy"] = entry["verdict"] != FAIL
        if verdict == PASS:
            return
        entry["reasons"].append({"verdict": verdict, "what": label, "remedy": record.get("remedy", "")})
        if verdict == FAIL:
            cause = record.get("caused_by") or []
            if cause:
                entry["caused_failures"][name or label] = ",".join(cause)
            elif (name or label) not in entry["failed_checks"]:
                entry["failed_checks"].append(name or label)

    slow_nodes = {
        (record["benchmark"], record["name"])
        for record in records
        if record["kind"] == "attribution" and record["subject"] == "node"
    }
    # Ports the attribution blamed on one node (a Down port, a slow rail of one node): the pairs through them
    # are its consequence, not a question about the other end.
    bad_ports = {
        (record["benchmark"], record["nodes"][0], rail)
        for record in records
        if record["kind"] == "attribution" and record["subject"] != "node" and len(record["nodes"]) == 1
        for rail in record.get("rails") or []
    }
    for record in records:
        kind = record["kind"]
        if kind == "node_check":
            cause = record.get("caused_by") or []
            label = f"check {record['check']}" + (f" (caused by {', '.join(cause)})" if cause else "")
            note(record["node"], record, label, record["check"])
        elif kind == "k8s_check" and record["node"] and record["subject"] == "node":
            note(record["node"], record, f"kubernetes {record['check']}")
        elif kind == BURNIN_KIND:
            note(record["node"], record, f"burn-in round {record['round']}: " + "; ".join(record["reasons"][:2]))
        elif kind == "attribution":
            for node in record["nodes"]:
                what = "slow node" if record["subject"] == "node" else f"slow link {record['name']}"
                # A slow link between several nodes (a pair, a multi-node run) does not say which end is at
                # fault: a warning on each; a node, or a port of one node, fails it.
                shared = record["subject"] != "node" and len(record["nodes"]) > 1
                note(
                    node,
                    dict(record, verdict="WARN") if shared and record["verdict"] == "FAIL" else record,
                    f"{record['benchmark']}: {what}",
                )
        elif kind == "benchmark_run":
            for node in record["nodes"]:
                entry_of(node)
            # A run nobody judged (no threshold set, or not run: no p2pBandwidthLatencyTest, a file system not
            # mounted) says nothing about its node: the record is UNKNOWN, the node keeps its verdict.
            if len(record["nodes"]) == 1 and record["verdict"] != "UNKNOWN":
                note(record["nodes"][0], record, f"{record['benchmark']} {record['name']}")
            elif record["link"] and record["verdict"] == "FAIL":
                # A failed link names two nodes without telling which one is at fault: a warning on both,
                # unless the attribution named one of them as the slow node (the link is its consequence).
                if any((record["benchmark"], node) in slow_nodes for node in record["nodes"]):
                    continue
                if any((record["benchmark"], node, record.get("rail")) in bad_ports for node in record["nodes"]):
                    continue
                for node in record["nodes"]:
                    note(
                        node,
                        dict(record, verdict="WARN"),
                        f"{record['benchmark']} link {record['name']}: {record['reason']}",
                    )
    for node, trend in sorted((burnin_trends or {}).items()):
        label = "burn-in trend" + (": " + "; ".join(trend["reasons"][:2]) if trend["reasons"] else "")
        note(node, {"verdict": trend["verdict"], "remedy": trend["remedy"]}, label)
    return nodes


def node_report(checks, node: str, system=None, checked_at=None) -> dict:
    """One node's judged checks as gpu_node_check returns them: ``records`` (node_check_record of each) and the
    node's verdict as node_verdicts gives it (``verdict``, ``healthy``, ``failed_checks``, ``caused_failures``,
    ``reasons``). No check at all: UNKNOWN and not healthy, since nothing was judged."""
    records = [node_check_record(check, node, system, checked_at) for check in checks]
    verdict = node_verdicts(records).get(node) or {
        "verdict": UNKNOWN,
        "healthy": False,
        "failed_checks": [],
        "caused_failures": {},
        "reasons": [{"verdict": UNKNOWN, "what": "no check was run", "remedy": ""}],
    }
    return {"records": records, **verdict}


BURNIN_KIND = "burnin_round"
_BURNIN_KEYS = {
    "node": str,
    "round": int,
    "started": str,
    "ended": str,
    "nccl": dict,
    "ib_write_bw": dict,
    "counters": dict,
    "dcgm": dict,
    "run": dict,
    "verdict": str,
    "reasons": list,
    "remedy": str,
}


def burnin_round_records(burnin_summary: dict, run_id=None) -> list:
    """Records of ``burnin/summary.json`` (``gpuforge burnin``, src/gpuforge/burnin_judge.py): its ``records[]``,
    one ``burnin_round`` per node per round (schemas/burnin-round.schema.json), checked key by key."""
    where = "burnin/summary.json"
    run_id = run_id or _get(burnin_summary, "run_id", (str, type(None)), where)
    records = []
    for index, record in enumerate(_get(burnin_summary, "records", list, where)):
        at = f"{where} records[{index}]"
        if _get(record, "kind", str, at) != BURNIN_KIND:
            raise RecordError(f"{at}: kind is {record['kind']!r}, expected {BURNIN_KIND!r}")
        for key, kind in _BURNIN_KEYS.items():
            _get(record, key, kind, at)
        if record["verdict"] not in VERDICTS:
            raise RecordError(f"{at}: unknown verdict {record['verdict']!r} (known: {', '.join(VERDICTS)})")
        records.append(
            dict(record, schema_version=SCHEMA_VERSION, run_id=run_id, caused_by=record.get("caused_by") or [])
        )
    return records


def burnin_trend_verdicts(burnin_summary: dict) -> dict:
    """{node: {verdict, reasons, remedy}} of ``burnin/summary.json`` ``trend``: the judgement over all rounds, which
    can fail a node whose every round passed (a node that got slower); node verdicts take it with the records."""
    where = "burnin/summary.json trend"
    found = {}
    for node, entry in _get(burnin_summary, "trend", dict, "burnin/summary.json").items():
        at = f"{where}[{node!r}]"
        verdict = _get(entry, "verdict", str, at)
        if verdict not in VERDICTS:
            raise RecordError(f"{at}: unknown verdict {verdict!r} (known: {', '.join(VERDICTS)})")
        reasons = _get(entry, "reasons", list, at)
        found[str(node)] = {
            "verdict": verdict,
            "reasons": [str(r) for r in reasons],
            "remedy": entry.get("remedy") or "",
        }
    return found
