"""Per-node attribution of benchmark results: which node or link is slow, and why.

Pure functions, stdlib only. A *result* is one measurement that involved one or more nodes:

    {"name": "gpu01__gpu02__mlx5_0", "group": "ib_write_bw", "nodes": ["gpu01", "gpu02"],
     "hca": "mlx5_0", "value": 92.1, "unit": "Gb/s", "expected": 100}

``value`` is the measurement in ``unit`` (``Gb/s`` for ib_write_bw pairs and NCCL busbw x 8, ``GB/s busbw`` for
the Slurm NCCL runs, ``images/s`` for ResNet-50; ``Gb/s`` when a result names none); ``expected`` (the reference
of the ``absolute`` baseline) and the ``threshold`` a result is judged against are in the same unit. The judged
result carries ``value``, ``unit``, ``threshold``, ``verdict`` and ``reason`` (``expected`` where it has one), so
ResNet-50 images/s is judged and reported as images/s. A result still carrying the old generic keys (``gbps``,
``threshold_gbps``, ``expected_gbps``) is refused.

- ib_write_bw pairs are two-node results (server, client), one per HCA port.
- NCCL single-node runs are one-node results; the multi-node run is one result with every node.

Each result is judged against a threshold, by one of two baselines:

- ``absolute`` (real hardware): ``expected * min_fraction`` - the 90 %-of-line-rate rule.
- ``median`` (the lab, whose TCP throughput has no fixed rate): ``median of the group * median_fraction``;
  a result far below its peers is slow. It needs at least three results in a group to mean anything,
  and a majority of fine ones: in a ring of three nodes one degraded node spoils two links of three.
- ``best``: ``best result of the group * median_fraction``; for small groups where a slow node can be the
  majority (the lab's three GPU nodes). Noisier: a healthy result far below the best is called slow too.

Then the slow results are attributed (``rail`` = HCA port identity, ``mlx5_2/1``, or ``hca`` and ``port``):

1. A slow one-node result names its node (the node alone is slow).
2. The NCCL bisection's conclusion (``bisection``, from ``gpuforge_localize.next_probe``) names its node.
3. A node every one of whose measured multi-node results is slow (at least two of them), while a multi-node
   result without it is fine, is named: with every pair measured (``gpuforge_localize.ib_schedule``) a
   degraded node spoils all its pairs, on every rail, and no other.
4. A port: a pair with ``inactive`` ends (the port is not Active there, the pair was not run) names that
   node's port of the rail; and so does one node whose every pair on one rail is slow (at least two, the other
   ends not named) while a pair on that rail without it is fine. Reported in ``slow_links`` with ``kind: port``.
5. A slow multi-node result nothing above explains is a slow link: ``kind: pair`` for two nodes (either end,
   the cable or the switch port; with two nodes that is all the data can say), ``rail`` for a result with
   ``scope: rail`` (a per-rail NCCL run), ``group`` for more nodes.

``summary`` reads ``slow node: gpu02 (...); slow link: gpu03:mlx5_2/1 (...)``.
"""

from __future__ import annotations

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, UNKNOWN
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_units import to_number


def median(values: list[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# Baselines that judge a result against its own group: the group's reference value.
PEER_REFERENCES = {"median": median, "best": max}
BASELINES = ("absolute", *PEER_REFERENCES)


DEFAULT_UNIT = "Gb/s"
# The generic keys of the contract before results named their unit (issue 16): refused, not read.
RETIRED_KEYS = ("gbps", "threshold_gbps", "expected_gbps")


def unit_of(result: dict) -> str:
    """The unit of a result's ``value`` (and of its ``threshold`` and ``expected``): its ``unit``, else Gb/s."""
    return str(result.get("unit") or DEFAULT_UNIT)


def check_keys(result: dict) -> None:
    """Refuse a result in the retired shape (``gbps`` for whatever it measured): it would be judged as no value."""
    retired = [key for key in RETIRED_KEYS if key in result]
    if retired:
        raise ValueError(
            f"benchmark result {result.get('name')!r} carries {', '.join(retired)}: the measurement is 'value' "
            "in its 'unit', judged against 'threshold' (and 'expected') in that unit"
        )


def judge_results(
    results: list[dict],
    baseline: str = "absolute",
    min_fraction: float = 0.9,
    median_fraction: float = 0.5,
    expected: float | None = None,
) -> list[dict]:
    """Each result with value, unit, threshold (in that unit), verdict, run_failed and reason (judge_value).

    ``expected``: the reference of baseline ``absolute`` for a result that carries no ``expected`` of its own; the
    judged result then carries it. A ``threshold`` the input carries is replaced (gpuforge_bench_attribution_floors
    judges results against their own)."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
    for result in results:
        check_keys(result)
    references: dict[str, float | None] = {}
    if baseline in PEER_REFERENCES:
        groups: dict[str, list[float]] = {}
        for result in results:
            value = to_number(result.get("value"))
            if value is not None:
                groups.setdefault(str(result.get("group", "")), []).append(value)
        references = {group: PEER_REFERENCES[baseline](values) for group, values in groups.items()}
    judged = []
    for result in results:
        value = to_number(result.get("value"))
        group = str(result.get("group", ""))
        unit = unit_of(result)
        entry = {**result, "value": value, "unit": unit}
        if baseline in PEER_REFERENCES:
            reference = references.get(group)
            threshold = None if reference is None else round(reference * median_fraction, 2)
            rule = f"{median_fraction:.0%} of the {baseline} of {group or 'all results'} ({reference} {unit})"
        else:
            reference = to_number(result.get("expected"))
            reference = expected if reference is None else reference
            threshold = None if reference is None else round(reference * min_fraction, 2)
            rule = f"{min_fraction:.0%} of the expected {reference} {unit}"
            if reference is not None:
                entry["expected"] = reference
        entry["threshold"] = threshold
        entry.update(judge_value(value, threshold, unit, rule, result.get("error")))
        judged.append(entry)
    return judged


def judge_value(value, threshold, unit: str, rule: str, error=None) -> dict:
    """A measured ``value`` against its ``threshold`` (both in ``unit``; ``rule`` says where the threshold comes from):
    ``{verdict, run_failed, reason}``. The verdict is FAIL for a value below its threshold and for a run that produced
    no value (``run_failed``: the toolkit's failure, the play fails on it; a low value is the cluster's), UNKNOWN
    when there is no threshold, else PASS."""
    if value is None:
        return {"verdict": FAIL, "run_failed": True, "reason": error or "the run produced no measurement"}
    if threshold is None:
        return {"verdict": UNKNOWN, "run_failed": False, "reason": "no threshold: set an expected value"}
    if value < threshold:
        return {"verdict": FAIL, "run_failed": False, "reason": f"{value} {unit} is below {threshold} {unit} ({rule})"}
    return {"verdict": PASS, "run_failed": False, "reason": f"{value} {unit} reaches {threshold} {unit} ({rule})"}


def _label(result: dict) -> str:
    return str(result.get("name") or "+".join(result.get("nodes", [])))


def _rail(result: dict) -> str:
    """The rail (HCA port identity, ``mlx5_2/1``) a result ran on; its HCA alone when no port is given."""
    if result.get("rail"):
        return str(result["rail"])
    hca = result.get("hca")
    if not hca:
        return ""
    port = result.get("port")
    return str(hca) if port in (None, "") else f"{hca}/{port}"


def _is_multi(result: dict) -> bool:
    return len(result.get("nodes") or []) > 1


def attribute(judged: list[dict], bisection: dict | None = None) -> dict:
    """Slow nodes and slow links from judged results (see the module docstring for the rules)."""
    bad_names = {id(r) for r in judged if r["verdict"] == FAIL}

    def is_bad(result: dict) -> bool:
        return id(result) in bad_names

    bad = [r for r in judged if is_bad(r)]
    # Results of a port that is not Active were recorded, not measured: they name that port, nothing else.
    measured = [r for r in judged if _is_multi(r) and not r.get("inactive")]
    named: dict[str, dict] = {}

    def name(node: str, reason: str, result_label: str, hca=None) -> None:
        entry = named.setdefault(node, {"node": node, "reasons": [], "hcas": [], "results": []})
        entry["reasons"].append(reason)
        entry["results"].append(result_label)
        if hca and hca not in entry["hcas"]:
            entry["hcas"].append(hca)

    # 1. A slow one-node result names its node.
    for result in bad:
        if len(result.get("nodes", [])) == 1:
            name(
                result["nodes"][0],
                f"its own run {_label(result)}: {result['reason']}",
                _label(result),
                result.get("hca"),
            )
    # 2. The NCCL bisection's conclusion names its node(s).
    if bisection and bisection.get("verdict") == "slow_node":
        for node in bisection.get("slow_nodes") or []:
            name(str(node), f"NCCL bisection: {bisection.get('summary', '')}", "nccl-bisection")
    # 3. A node every measured multi-node result of which is bad (at least two), while a multi-node result
    #    without it is fine: the node, not its links.
    nodes = sorted({n for r in measured for n in r["nodes"]})
    for node in nodes:
        mine = [r for r in measured if node in r["nodes"]]
        others_fine = any(not is_bad(r) and node not in r["nodes"] for r in measured)
        if len(mine) >= 2 and all(is_bad(r) for r in mine) and others_fine:
            rails = sorted({_rail(r) for r in mine if _rail(r)})
            scope = f" on {len(rails)} rail{'s' if len(rails) != 1 else ''}" if rails else ""
            every = f"every link it is in is slow ({len(mine)} of {len(mine)}{scope})"
            for result in mine:
                name(
                    node,
                    f"{every}; {_label(result)}: {result['reason']}",
                    _label(result),
                    result.get("hca"),
                )
    # 4. Ports: a port that is not Active, or one node's every pair on one rail bad (at least two, the node
    #    not named, the pairs' other ends not named) while a pair on that rail without it is fine.
    ports: dict[tuple, dict] = {}

    def port(node: str, result: dict, reason: str) -> None:
        rail = _rail(result)
        entry = ports.setdefault(
            (node, rail),
            {
                "name": f"{node}:{rail}",
                "kind": "port",
                "node": node,
                "nodes": [node],
                "hca": result.get("hca"),
                "port": result.get("port"),
                "rail": rail,
                "results": [],
                "reason": reason,
            },
        )
        entry["results"].append(_label(result))

    for result in judged:
        for node in result.get("inactive") or []:
            if node not in named:
                port(
                    node,
                    result,
                    f"{_rail(result)} is not Active on {node}, its pairs were not run: "
                    "its HCA port, the cable or the switch port",
                )
    for node in nodes:
        if node in named:
            continue
        for rail in sorted({_rail(r) for r in measured if node in r["nodes"] and _rail(r)}):
            if (node, rail) in ports:
                continue
            mine = [r for r in measured if node in r["nodes"] and _rail(r) == rail and not set(r["nodes"]) & set(named)]
            others_fine = any(not is_bad(r) and node not in r["nodes"] and _rail(r) == rail for r in measured)
            if len(mine) >= 2 and all(is_bad(r) for r in mine) and others_fine:
                for result in mine:
                    port(
                        node,
                        result,
                        f"every pair of {node} on {rail} is slow ({len(mine)} of {len(mine)}) while other pairs "
                        f"on {rail} are fine: its HCA port, the cable or the switch port",
                    )
    # 5. A bad multi-node result that no named node or port explains: the link (a pair), the rail, or the group.
    links = list(ports.values())
    for result in bad:
        if not _is_multi(result) or set(result["nodes"]) & set(named):
            continue
        if any((node, _rail(result)) in ports for node in result["nodes"]):
            continue
        if result.get("scope") == "rail":
            kind, where = "rail", "the HCAs, cables or switches of that rail"
        elif len(result["nodes"]) == 2:
            kind, where = "pair", "either end, the cable or the switch port"
        else:
            kind, where = "group", "one of its nodes or the fabric between them"
        links.append(
            {
                "name": _label(result),
                "kind": kind,
                "nodes": list(result["nodes"]),
                "hca": result.get("hca"),
                "port": result.get("port"),
                "rail": _rail(result) or None,
                "reason": f"{result['reason']}: {where}",
            }
        )
    slow_nodes = [named[node] for node in sorted(named)]
    if slow_nodes or links:
        parts = [f"slow node: {n['node']} ({n['reasons'][0]})" for n in slow_nodes]
        parts += [f"slow link: {link['name']} ({link['reason']})" for link in links]
        summary = "; ".join(parts)
    else:
        summary = "no slow node or link"
    return {"slow_nodes": slow_nodes, "slow_links": links, "summary": summary}


def attribute_results(
    results: list[dict],
    baseline: str = "absolute",
    min_fraction: float = 0.9,
    median_fraction: float = 0.5,
    expected: float | None = None,
    bisection: dict | None = None,
) -> dict:
    """Judge results and attribute the slow ones: {results, slow_nodes, slow_links, summary, baseline}.

    ``bisection``: the NCCL bisection's conclusion (``gpuforge_localize.next_probe``), kept as ``bisection``;
    the node it names is a slow node."""
    judged = judge_results(results, baseline, min_fraction, median_fraction, expected)
    out = {"baseline": baseline, "results": judged, **attribute(judged, bisection)}
    if bisection:
        out["bisection"] = bisection
    return out
