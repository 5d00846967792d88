"""Typed result records (schemas/*.schema.json, schema_version 1) built from what the playbooks write today.

Four kinds, one verdict vocabulary (PASS / WARN / FAIL / UNKNOWN):

* ``node_check``     one check of one node: a ``checks[]`` entry of ``validation/<host>.json``
                     (playbooks/validate.yml from ``gpu_node_check``);
* ``benchmark_run``  one benchmark gate: a ``results[]`` entry of ``bench/<run>/summary.json``
                     (playbooks/tasks/bench_summary.yml through the ``gpuforge_bench_attribution`` filter);
* ``attribution``    a node or link the attribution names as slow (``slow_nodes`` / ``slow_links`` there);
* ``stage_result``   one stage of a CLI run: a ``stages[]`` entry of ``<run-id>/summary.json``.

The builders read those shapes strictly: a missing or mistyped key raises RecordError naming the file's key,
so a playbook that changes what it writes fails the schema tests (tests/unit/schemas/). ``node_verdicts``
is the one place a node's verdict is computed from records. Stdlib only, Python 3.8.
"""

from __future__ import annotations

SCHEMA_VERSION = 1
VERDICTS = ("PASS", "WARN", "FAIL", "UNKNOWN")
KINDS = ("node_check", "benchmark_run", "attribution", "stage_result")
_RANK = {"PASS": 0, "UNKNOWN": 1, "WARN": 2, "FAIL": 3}

# Where a threshold comes from, as the records name it.
NODE_CHECK_SOURCE = "expected hardware spec (roles/gpuforge/defaults/main/expected_hardware.yml)"
BENCH_SOURCE = "peer baseline of the run (gpuforge_bench_attribution, roles/gpuforge_bench/defaults/main.yml)"

_CHECK_VERDICT = {"ok": "PASS", "warn": "WARN", "fail": "FAIL"}
_BENCH_VERDICT = {"ok": "PASS", "slow": "FAIL", "failed": "FAIL", "unjudged": "UNKNOWN"}
_STAGE_VERDICT = {"ok": "PASS", "failed": "FAIL", "skipped": "UNKNOWN"}

__all__ = [
    "KINDS",
    "SCHEMA_VERSION",
    "VERDICTS",
    "RecordError",
    "attribution_records",
    "benchmark_run_records",
    "node_check_records",
    "node_verdicts",
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


def _names(types):
    return " or ".join("null" if kind is type(None) else kind.__name__ for kind in _as_tuple(types))


def _verdict(table, value, where):
    if value not in table:
        raise RecordError(f"{where}: unknown status {value!r} (known: {', '.join(sorted(table))})")
    return table[value]


def worst_verdict(verdicts) -> str:
    """FAIL over WARN over UNKNOWN over PASS; PASS for none."""
    return max(verdicts, key=_RANK.__getitem__, default="PASS")


def node_check_records(host_file: dict, run_id=None) -> list:
    """Records of ``validation/<host>.json``: ``{host, checked_at, system, healthy, failed, checks}``."""
    where = "validation/<host>.json"
    host = _get(host_file, "host", str, where)
    system = _get(host_file, "system", (str, type(None)), where)
    checked_at = _get(host_file, "checked_at", (str, type(None)), where)
    records = []
    for index, check in enumerate(_get(host_file, "checks", list, where)):
        at = f"{where} ({host}) checks[{index}]"
        name = _get(check, "name", str, at)
        status = _get(check, "status", str, at)
        remedy = _get(check, "remedy", str, at)
        records.append(
            {
                "kind": "node_check",
                "schema_version": SCHEMA_VERSION,
                "run_id": run_id,
                "node": host,
                "check": name,
                "system": system,
                "checked_at": checked_at,
                "observed": check.get("observed"),
                "threshold": {"expected": check.get("expected"), "source": NODE_CHECK_SOURCE},
                "verdict": _verdict(_CHECK_VERDICT, status, at),
                "remedy": remedy,
                "fault": check.get("fault") or "",
                # gpu_node_check does not record root causes yet (issue 16 item 6): none is claimed.
                "caused_by": [],
            }
        )
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


def benchmark_run_records(bench_summary: dict, run_id=None) -> list:
    """Records of ``bench/<run>/summary.json``: one per ``results[]`` entry of every benchmark."""
    records = []
    run_id = run_id or bench_summary.get("run_id")
    for benchmark, block in sorted(_benchmark_blocks(bench_summary)):
        baseline = block.get("baseline")
        for index, result in enumerate(_get(block, "results", list, f"summary.json {benchmark}")):
            at = f"summary.json {benchmark}.results[{index}]"
            name = _get(result, "name", str, at)
            value = _get(result, "gbps", (int, float, type(None)), at)
            threshold = _get(result, "threshold_gbps", (int, float, type(None)), at)
            unit = result.get("unit") or "Gb/s"
            reason = _get(result, "reason", str, at)
            records.append(
                {
                    "kind": "benchmark_run",
                    "schema_version": SCHEMA_VERSION,
                    "run_id": run_id,
                    "benchmark": benchmark,
                    "name": name,
                    "group": _get(result, "group", str, at),
                    **_result_identity(result, benchmark, at),
                    "observed": {"value": value, "unit": unit},
                    "threshold": {
                        "value": threshold,
                        "unit": unit,
                        "op": ">=",
                        "baseline": baseline,
                        "source": BENCH_SOURCE,
                    },
                    "verdict": _verdict(_BENCH_VERDICT, _get(result, "verdict", str, at), at),
                    "module_verdict": result.get("module_verdict"),
                    "reason": reason,
                    "remedy": result.get("error") or "",
                    "caused_by": [],
                }
            )
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
                _attribution(run_id, benchmark, "node", node, [node], entry.get("hcas") or [], reasons, block)
            )
        for index, entry in enumerate(_get(block, "slow_links", list, where)):
            at = f"{where}.slow_links[{index}]"
            link = _get(entry, "name", str, at) if "name" in entry else _get(entry, "link", str, at)
            nodes = entry.get("nodes") or link.split("__")[:2]
            reasons = entry.get("reasons") or [entry.get("reason") or ""]
            records.append(_attribution(run_id, benchmark, "link", link, nodes, [entry.get("hca")], reasons, block))
    return records


def _attribution(run_id, benchmark, subject, name, nodes, rails, reasons, block):
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
        "observed": {"reasons": [str(reason) for reason in reasons]},
        "threshold": {"baseline": block.get("baseline"), "source": BENCH_SOURCE},
        "verdict": "FAIL",
        "remedy": (
            f"take {name} out of service and check its HCAs, cables and switch ports"
            if subject == "node"
            else f"check the cable, transceiver and switch port of link {name}"
        ),
        "caused_by": [],
    }


def stage_result_records(cli_summary: dict) -> list:
    """Records of a CLI run's ``summary.json`` ``stages[]`` (demo); a single-playbook run has none."""
    where = "<run-id>/summary.json"
    run_id = _get(cli_summary, "run_id", str, where)
    records = []
    for index, stage in enumerate(cli_summary.get("stages") or []):
        at = f"{where} stages[{index}]"
        records.append(
            {
                "kind": "stage_result",
                "schema_version": SCHEMA_VERSION,
                "run_id": run_id,
                "stage": _get(stage, "name", str, at),
                "status": _get(stage, "status", str, at),
                "rc": _get(stage, "rc", (int, type(None)), at),
                "detail": _get(stage, "detail", (str, type(None)), at) or "",
                "verdict": _verdict(_STAGE_VERDICT, stage["status"], at),
                "remedy": "",
                "caused_by": [],
            }
        )
    return records


def node_verdicts(records) -> dict:
    """Per node: its verdict (worst of what names it) and the records behind anything not PASS.

    A node is named by its node checks, by attributions that name it (a slow node, or a node of a slow link)
    and by benchmark runs on that node alone (a run over several nodes cannot blame one of them).
    """
    nodes: dict = {}

    def note(node, record, label):
        entry = nodes.setdefault(node, {"verdict": "PASS", "reasons": []})
        entry["verdict"] = worst_verdict([entry["verdict"], record["verdict"]])
        if record["verdict"] != "PASS":
            entry["reasons"].append({"verdict": record["verdict"], "what": label, "remedy": record.get("remedy", "")})

    slow_nodes = {
        (record["benchmark"], record["name"])
        for record in records
        if record["kind"] == "attribution" and record["subject"] == "node"
    }
    for record in records:
        kind = record["kind"]
        if kind == "node_check":
            note(record["node"], record, f"check {record['check']}")
        elif kind == "attribution":
            for node in record["nodes"]:
                what = "slow node" if record["subject"] == "node" else f"slow link {record['name']}"
                note(node, record, f"{record['benchmark']}: {what}")
        elif kind == "benchmark_run":
            for node in record["nodes"]:
                nodes.setdefault(node, {"verdict": "PASS", "reasons": []})
            if len(record["nodes"]) == 1:
                note(record["nodes"][0], record, f"{record['benchmark']} {record['name']}")
            elif record["link"] and record["verdict"] == "FAIL":
                # A failed link names two nodes without telling which one is at fault: a warning on both,
                # unless the attribution named one of them as the slow node (the link is its consequence).
                if any((record["benchmark"], node) in slow_nodes for node in record["nodes"]):
                    continue
                for node in record["nodes"]:
                    note(
                        node,
                        dict(record, verdict="WARN"),
                        f"{record['benchmark']} link {record['name']}: {record['reason']}",
                    )
    return nodes
