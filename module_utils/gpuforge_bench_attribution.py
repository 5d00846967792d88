"""Per-node attribution of benchmark results: which node or link is slow, and why.

Pure functions, stdlib only. A *result* is one measurement that involved one or more nodes:

    {"name": "gpu01__gpu02__mlx5_0", "group": "ib_write_bw", "nodes": ["gpu01", "gpu02"],
     "hca": "mlx5_0", "gbps": 92.1, "expected_gbps": 100}

``gbps`` holds the value whatever it measures; ``unit`` (default Gb/s) names it in the reasons, so
ResNet-50 images/s can be judged the same way.

- ib_write_bw pairs are two-node results (server, client), one per HCA port.
- NCCL single-node runs are one-node results; the multi-node run is one result with every node.

Each result is judged against a threshold, by one of two baselines:

- ``absolute`` (real hardware): ``expected_gbps * min_fraction`` - the 90 %-of-line-rate rule.
- ``median`` (the lab, whose TCP throughput has no fixed rate): ``median of the group * median_fraction``;
  a result far below its peers is slow. It needs at least three results in a group to mean anything,
  and a majority of fine ones: in a ring of three nodes one degraded node spoils two links of three.
- ``best``: ``best result of the group * median_fraction``; for small groups where a slow node can be the
  majority (the lab's three GPU nodes). Noisier: a healthy result far below the best is called slow too.

Then the slow results are attributed to nodes:

1. A slow one-node result names its node (the node alone is slow).
2. A node every one of whose multi-node results is slow (at least two of them), while some other node has
   a fine result, is named: in a ring of pairs a degraded node spoils both its links and no other.
3. A slow multi-node result no named node explains is reported as a slow link (either end, the cable or
   the switch port); with two nodes that is all the data can say.
"""

from __future__ import annotations


def median(values: list[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# Baselines that judge a result against its own group: the group's reference value.
PEER_REFERENCES = {"median": median, "best": max}
BASELINES = ("absolute", *PEER_REFERENCES)


def _number(value) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def judge_results(
    results: list[dict],
    baseline: str = "absolute",
    min_fraction: float = 0.9,
    median_fraction: float = 0.5,
    expected_gbps: float | None = None,
) -> list[dict]:
    """Each result with threshold_gbps, verdict (ok, slow, failed, unjudged) and reason."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
    references: dict[str, float | None] = {}
    if baseline in PEER_REFERENCES:
        groups: dict[str, list[float]] = {}
        for result in results:
            gbps = _number(result.get("gbps"))
            if gbps is not None:
                groups.setdefault(str(result.get("group", "")), []).append(gbps)
        references = {group: PEER_REFERENCES[baseline](values) for group, values in groups.items()}
    judged = []
    for result in results:
        gbps = _number(result.get("gbps"))
        group = str(result.get("group", ""))
        unit = str(result.get("unit") or "Gb/s")  # the value is in "gbps" whatever it measures (img/s too)
        if baseline in PEER_REFERENCES:
            reference = references.get(group)
            threshold = None if reference is None else round(reference * median_fraction, 2)
            rule = f"{median_fraction:.0%} of the {baseline} of {group or 'all results'} ({reference} {unit})"
        else:
            reference = _number(result.get("expected_gbps"))
            reference = expected_gbps if reference is None else reference
            threshold = None if reference is None else round(reference * min_fraction, 2)
            rule = f"{min_fraction:.0%} of the expected {reference} {unit}"
        entry = {**result, "gbps": gbps, "threshold_gbps": threshold}
        if gbps is None:
            entry.update(verdict="failed", reason=result.get("error") or "the run produced no bandwidth")
        elif threshold is None:
            entry.update(verdict="unjudged", reason="no threshold: set an expected rate")
        elif gbps < threshold:
            entry.update(verdict="slow", reason=f"{gbps} {unit} is below {threshold} {unit} ({rule})")
        else:
            entry.update(verdict="ok", reason=f"{gbps} {unit} reaches {threshold} {unit} ({rule})")
        judged.append(entry)
    return judged


def _label(result: dict) -> str:
    return str(result.get("name") or "+".join(result.get("nodes", [])))


def attribute(judged: list[dict]) -> dict:
    """Slow nodes and slow links from judged results (see the module docstring for the rules)."""
    bad = [r for r in judged if r["verdict"] in ("slow", "failed")]
    nodes: dict[str, dict] = {}
    for result in judged:
        for node in result.get("nodes", []):
            tally = nodes.setdefault(node, {"multi": 0, "multi_bad": 0})
            if len(result["nodes"]) > 1:
                tally["multi"] += 1
                tally["multi_bad"] += result in bad
    named: dict[str, dict] = {}

    def name(node: str, reason: str, result: dict) -> None:
        entry = named.setdefault(node, {"node": node, "reasons": [], "hcas": [], "results": []})
        entry["reasons"].append(reason)
        entry["results"].append(_label(result))
        if result.get("hca") and result["hca"] not in entry["hcas"]:
            entry["hcas"].append(result["hca"])

    for result in bad:
        if len(result.get("nodes", [])) == 1:
            name(result["nodes"][0], f"its own run {_label(result)}: {result['reason']}", result)
    some_fine = {n for r in judged if r["verdict"] == "ok" for n in r.get("nodes", [])}
    for node, tally in nodes.items():
        if tally["multi"] >= 2 and tally["multi_bad"] == tally["multi"] and some_fine - {node}:
            for result in bad:
                if len(result["nodes"]) > 1 and node in result["nodes"]:
                    name(node, f"every link it is in is slow; {_label(result)}: {result['reason']}", result)
    links = []
    for result in bad:
        if len(result.get("nodes", [])) > 1 and not set(result["nodes"]) & set(named):
            links.append(
                {
                    "name": _label(result),
                    "nodes": list(result["nodes"]),
                    "hca": result.get("hca"),
                    "reason": f"{result['reason']}: either end, the cable or the switch port",
                }
            )
    slow_nodes = [named[node] for node in sorted(named)]
    if slow_nodes or links:
        parts = [f"{n['node']} ({'; '.join(n['reasons'][:1])})" for n in slow_nodes]
        parts += [f"link {link['name']} ({link['reason']})" for link in links]
        summary = "slow: " + ", ".join(parts)
    else:
        summary = "no slow node or link"
    return {"slow_nodes": slow_nodes, "slow_links": links, "summary": summary}


def attribute_results(
    results: list[dict],
    baseline: str = "absolute",
    min_fraction: float = 0.9,
    median_fraction: float = 0.5,
    expected_gbps: float | None = None,
) -> dict:
    """Judge results and attribute the slow ones: {results, slow_nodes, slow_links, summary, baseline}."""
    judged = judge_results(results, baseline, min_fraction, median_fraction, expected_gbps)
    return {"baseline": baseline, "results": judged, **attribute(judged)}
