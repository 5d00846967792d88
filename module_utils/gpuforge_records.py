"""Typed result records (schemas/*.schema.json, schema_version 1) and the one node verdict over them.

Six kinds, one verdict vocabulary (PASS / WARN / FAIL / UNKNOWN, gpuforge_checks.VERDICTS):

* ``node_check``     one check of one node. gpu_node_check returns them (``node_check_record`` of each judged check)
                     and validate.yml writes them as they are into ``validation/<host>.json`` ``records``;
* ``benchmark_run``  one benchmark gate: a ``results[]`` entry of ``bench/<run>/summary.json`` as a record, which
                     summary.yml writes into that file's ``records`` (the ``gpuforge_bench_summary`` filter,
                     module_utils/gpuforge_bench_records.py, over the blocks the attribution filters judged);
* ``attribution``    a node or link the attribution names as slow, in the same ``records``;
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

Every producer writes its records as they are, and the readers here (``node_check_records``,
``bench_summary_records``, ``stage_result_records``, ``k8s_check_records``, ``burnin_round_records``) check each
record key by key and translate nothing: a missing or mistyped key raises RecordError naming the file and key, and a
file an older gpuforge wrote (a verdict of an older vocabulary, a file without its records) is refused with the
command that writes it again. Stdlib only, Python 3.8: it runs on the node inside gpu_node_check.
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

__all__ = [
    "KINDS",
    "SCHEMA_VERSION",
    "VERDICTS",
    "RecordError",
    "bench_summary_records",
    "fleet_check_record",
    "k8s_check_record",
    "k8s_check_records",
    "node_check_record",
    "node_check_records",
    "node_report",
    "node_verdicts",
    "stage_result_record",
    "stage_result_records",
    "worst_verdict",
]


class RecordError(ValueError):
    """A file the playbooks or the CLI wrote does not hold the records its reader takes, or a result the benchmark
    records are built from (gpuforge_bench_records) does not have the shape they are built from."""


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


# The keys of a benchmark_run record and their types (schemas/benchmark-run.schema.json; module_verdict, target and
# job are optional there, observed's value any JSON number or null).
_BENCHMARK_RUN_KEYS = {
    "kind": str,
    "schema_version": int,
    "run_id": (str, type(None)),
    "benchmark": str,
    "name": str,
    "group": str,
    "nodes": list,
    "link": (str, type(None)),
    "rail": (str, type(None)),
    "observed": dict,
    "threshold": dict,
    "verdict": str,
    "run_failed": bool,
    "reason": str,
    "remedy": str,
    "caused_by": list,
}
# The keys of an attribution record and their types (schemas/attribution.schema.json).
_ATTRIBUTION_KEYS = {
    "kind": str,
    "schema_version": int,
    "run_id": (str, type(None)),
    "benchmark": str,
    "subject": str,
    "name": str,
    "nodes": list,
    "link": (str, type(None)),
    "rails": list,
    "observed": dict,
    "threshold": dict,
    "verdict": str,
    "remedy": str,
    "caused_by": list,
}
_BENCH_KEYS = {"benchmark_run": _BENCHMARK_RUN_KEYS, "attribution": _ATTRIBUTION_KEYS}
# The command that writes a bench summary.json again (roles/gpuforge_bench through playbooks/benchmark.yml).
BENCH_RERUN = "run `gpuforge bench` (playbooks/benchmark.yml) again"


def bench_summary_records(bench_summary: dict, run_id=None, where="bench/<run>/summary.json", rerun=BENCH_RERUN):
    """The benchmark_run and attribution records of a bench ``summary.json``, as its producer wrote them into
    ``records`` (roles/gpuforge_bench/tasks/summary.yml through the gpuforge_bench_summary filter, module_utils/
    gpuforge_bench_records.py; ``gpuforge k8s verify`` for its in-pod pair); each is checked key by key and given
    the run's id. ``where`` names the file in errors and ``rerun`` the command that writes it again: a summary
    without ``records`` (written by an older gpuforge, whose readers built the records from the results) is
    refused with it, as is a verdict outside VERDICTS."""
    if not isinstance(bench_summary, dict):
        raise RecordError(f"{where}: not an object")
    if "records" not in bench_summary:
        raise RecordError(
            f"{where}: no 'records': this file was written by an older gpuforge, before the benchmark summary held "
            f"its benchmark_run and attribution records; {rerun}"
        )
    records = []
    for index, record in enumerate(_get(bench_summary, "records", list, where)):
        at = f"{where} records[{index}]"
        kind = _get(record, "kind", str, at)
        if kind not in _BENCH_KEYS:
            raise RecordError(f"{at}: kind is {kind!r}, expected benchmark_run or attribution")
        _written_record(record, kind, _BENCH_KEYS[kind], at, rerun)
        if not record["nodes"] or not all(isinstance(node, str) for node in record["nodes"]):
            raise RecordError(f"{at}: 'nodes' is empty or holds a non-string")
        _get(record["threshold"], "source", str, f"{at} threshold")
        records.append(dict(record, run_id=run_id if run_id is not None else record["run_id"]))
    return records


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
