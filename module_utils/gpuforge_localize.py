"""Fault localization for the benchmarks: which pairs to run when, and which runs to make next.

Pure functions, stdlib only, Python 3.8+.

ib_write_bw over all pairs, per rail
    A rail is one HCA port identity (``mlx5_2/1``) across the nodes. Every pair of nodes is measured on every
    rail, in rounds of disjoint pairs so that the pairs of one round can run at the same time without sharing a
    node: the circle method of round-robin tournaments (one node stays put, the others rotate one place each
    round), n - 1 rounds of n / 2 pairs for even n; odd n adds a "bye" so each round leaves one node out, n
    rounds of (n - 1) / 2 pairs. Source: "Round-robin tournament", section "Circle method", Wikipedia,
    https://en.wikipedia.org/wiki/Round-robin_tournament#Circle_method
    With every pair measured, a node whose every pair is slow is the node (gpuforge_bench_attribution), one
    slow pair is the link, and one node's pairs slow on one rail only are that node's port of the rail.

NCCL bisection
    When the all-node NCCL run is below its threshold, ``next_probe(state)`` says which subset of nodes to run
    next, from the runs made so far, until one node is named: at most ceil(log2 N) + 2 runs counting the
    all-node run (ceil(log2 N) halvings and one run of all the other nodes that confirms they are fine). The
    state is plain data (``{"nodes", "runs", "known_slow", "max_runs"}``), so a playbook can drive it one run
    at a time and the result is reproducible from the runs alone. It assumes one slow node; when the runs
    contradict that (two slow nodes, an unsteady run) it says so and lists the suspects instead of guessing.
"""

from __future__ import annotations

# Source of the round schedule, cited in the records and the docs.
ROUND_ROBIN_SOURCE = "Round-robin tournament, circle method (https://en.wikipedia.org/wiki/Round-robin_tournament)"


def round_robin_rounds(nodes):
    """Rounds of disjoint pairs covering every pair of ``nodes`` once (circle method).

    Returns a list of rounds; each round is ``{"pairs": [(a, b), ...], "bye": node or None}``. n - 1 rounds for
    even n, n rounds for odd n (each node sits out exactly one). Each node is first in a pair (the ib_write_bw
    server) about as often as second.
    """
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        raise ValueError("nodes must be unique")
    if len(nodes) < 2:
        return []
    ring = [*nodes, None] if len(nodes) % 2 else list(nodes)
    size = len(ring)
    rounds = []
    for _round in range(size - 1):
        pairs = []
        bye = None
        for i in range(size // 2):
            first, second = ring[i], ring[size - 1 - i]
            if first is None or second is None:
                bye = second if first is None else first
                continue
            # Orientation by the nodes' places alone: of two nodes whose places add up to an odd number the
            # earlier one is first, else the later one, so every node is first in about half of its pairs.
            low, high = sorted((nodes.index(first), nodes.index(second)))
            first, second = (nodes[low], nodes[high]) if (low + high) % 2 else (nodes[high], nodes[low])
            pairs.append((first, second))
        rounds.append({"pairs": pairs, "bye": bye})
        # keep ring[0] in place, rotate the others one step
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def _split_port(port_id):
    hca, _sep, port = str(port_id).rpartition("/")
    if not hca:
        return str(port_id), 1
    try:
        return hca, int(port)
    except ValueError:
        return str(port_id), 1


def _rate(facts, hca, port):
    for entry in facts.get("hcas") or []:
        if entry.get("name") != hca:
            continue
        for port_facts in entry.get("ports") or []:
            if str(port_facts.get("port")) == str(port):
                return port_facts.get("rate_gbit_per_s")
    return None


def pair_name(server, client, hca, port=1):
    """``server__client__hca`` (``..._p2`` for a port other than 1), the name of a pair's result files."""
    name = f"{server}__{client}__{hca}"
    return name if int(port) == 1 else f"{name}_p{port}"


def ib_schedule(nodes, infiniband):
    """The ib_write_bw rounds of every rail: a list of ``{rail, hca, port, round, rounds, pairs, bye}``.

    ``nodes``: the nodes in play order; ``infiniband``: node -> its ``infiniband_facts`` (``active_ports``,
    ``inactive_ports`` as ``mlx5_0/1``, and ``hcas`` for the line rate). A rail is every port id any node has;
    the nodes on a rail are those that have that port (Active or not). Each pair is
    ``{server, client, hca, port, rail, name, round, line_rate_gbit_per_s, run, inactive}``: ``run`` is false when
    the port is not Active on an end, ``inactive`` names those ends (the pair is recorded, not measured).
    """
    nodes = list(nodes)
    facts = {node: (infiniband or {}).get(node) or {} for node in nodes}
    active = {node: set(facts[node].get("active_ports") or []) for node in nodes}
    present = {node: active[node] | set(facts[node].get("inactive_ports") or []) for node in nodes}
    rails = sorted(set().union(*present.values()) if present else set(), key=_split_port)
    schedule = []
    for rail in rails:
        hca, port = _split_port(rail)
        on_rail = [node for node in nodes if rail in present[node]]
        rounds = round_robin_rounds(on_rail)
        for number, current in enumerate(rounds, start=1):
            pairs = []
            for server, client in current["pairs"]:
                inactive = [node for node in (server, client) if rail not in active[node]]
                rate = next(
                    (
                        rate
                        for rate in (_rate(facts[end], hca, port) for end in (server, client) if end not in inactive)
                        if rate is not None
                    ),
                    None,
                )
                pairs.append(
                    {
                        "server": server,
                        "client": client,
                        "hca": hca,
                        "port": port,
                        "rail": rail,
                        "name": pair_name(server, client, hca, port),
                        "round": number,
                        "line_rate_gbit_per_s": rate,
                        "run": not inactive,
                        "inactive": inactive,
                    }
                )
            schedule.append(
                {
                    "rail": rail,
                    "hca": hca,
                    "port": port,
                    "round": number,
                    "rounds": len(rounds),
                    "pairs": pairs,
                    "bye": current["bye"],
                }
            )
    return schedule


def bisection_bound(node_count):
    """ceil(log2 N) + 2: the most NCCL runs, the all-node run included, that name one slow node among N."""
    return max(int(node_count) - 1, 0).bit_length() + 2


def _ordered(nodes, members):
    return [node for node in nodes if node in members]


def next_probe(state):
    """The next NCCL run of the bisection, or its conclusion, from the runs made so far.

    ``state``: ``{"nodes": [...], "runs": [{"nodes": [...], "slow": bool, ...}, ...], "known_slow": [...],
    "max_runs": int}``. ``runs`` are the runs made, in order, the all-node run first (``next_probe`` asks for it
    when there is none); ``slow`` is true when a run is below its threshold or failed. ``known_slow``: nodes
    already found slow alone (their single-node run); a run that holds one of them says nothing about the
    others. ``max_runs`` defaults to ``bisection_bound(len(nodes))``.

    Returns ``{done, probe, purpose, verdict, slow_nodes, suspects, cleared, runs_used, max_runs, summary}``:
    ``probe`` is the nodes of the next run (null when done); ``verdict`` is ``running``, ``ok`` (the all-node
    run is fine: no bisection), ``slow_node`` (``slow_nodes`` named) or ``unresolved`` (``suspects`` left).

    A run that is fine clears its nodes. A slow run that holds no known-slow node holds the slow node, so the
    candidates are the nodes in every such run and cleared by none. Each probe runs the first half of the
    candidates (with one cleared, or else presumed healthy, node beside a lone candidate: a multi-node run
    needs two nodes); once one candidate is left, all the other nodes run together to confirm it.
    """
    nodes = list(state.get("nodes") or [])
    if len(set(nodes)) != len(nodes):
        raise ValueError("nodes must be unique")
    runs = list(state.get("runs") or [])
    known_slow = set(state.get("known_slow") or []) & set(nodes)
    max_runs = state.get("max_runs")
    max_runs = bisection_bound(len(nodes)) if max_runs in (None, "") else int(max_runs)
    cleared = set()
    evidence = []
    for run in runs:
        members = set(run.get("nodes") or [])
        if not run.get("slow"):
            cleared |= members
        elif not members & known_slow:
            evidence.append(members)
    plan = {
        "done": True,
        "probe": None,
        "purpose": None,
        "verdict": "running",
        "slow_nodes": [],
        "suspects": [],
        "cleared": _ordered(nodes, cleared),
        "runs_used": len(runs),
        "max_runs": max_runs,
        "summary": "",
    }

    def ask(probe, purpose):
        plan.update(done=False, probe=_ordered(nodes, probe), purpose=purpose, verdict="running")
        plan["summary"] = f"run {len(runs) + 1} of at most {max_runs}: {purpose}"
        return plan

    def conclude(verdict, slow, suspects, summary):
        plan.update(verdict=verdict, slow_nodes=_ordered(nodes, slow), suspects=_ordered(nodes, suspects))
        plan["summary"] = summary
        return plan

    if len(nodes) < 2:
        return conclude("ok", [], [], "fewer than two nodes: nothing to bisect")
    if not runs:
        return ask(nodes, "all nodes")
    if not runs[0].get("slow"):
        return conclude("ok", [], [], "the all-node run reaches its threshold: no bisection")
    rest = set(nodes) - known_slow
    if not evidence:
        # Every slow run so far holds a node already slow alone: are the others fine without them?
        if not rest - cleared or len(rest) < 2:
            return conclude(
                "slow_node",
                known_slow,
                [],
                f"slow node: {', '.join(_ordered(nodes, known_slow))} (slow alone; the others are fine together)",
            )
        if len(runs) >= max_runs:
            return conclude("unresolved", known_slow, rest - cleared, f"no conclusion within {max_runs} runs")
        return ask(rest, "the nodes not slow alone, without " + ", ".join(_ordered(nodes, known_slow)))
    candidates = set(rest) - cleared
    for members in evidence:
        candidates &= members
    if not candidates:
        suspects = set(nodes) - cleared
        return conclude(
            "unresolved",
            known_slow,
            suspects,
            "the runs contradict one slow node (two or more slow nodes, or an unsteady run); suspects: "
            + ", ".join(_ordered(nodes, suspects)),
        )
    if len(candidates) == 1:
        (slow,) = candidates
        others = rest - {slow}
        found = sorted(known_slow | {slow}, key=nodes.index)
        if not others - cleared or len(others) < 2:
            return conclude("slow_node", found, [], f"slow node: {', '.join(found)} (the others are fine)")
        if len(runs) >= max_runs:
            return conclude(
                "unresolved", known_slow, {slow} | (others - cleared), f"no confirmation within {max_runs} runs"
            )
        return ask(others, f"confirm: every node but {slow}")
    if len(runs) >= max_runs:
        return conclude("unresolved", known_slow, candidates, f"no conclusion within {max_runs} runs")
    ordered = _ordered(nodes, candidates)
    half = ordered[: (len(ordered) + 1) // 2]
    if len(half) >= 2:
        return ask(half, "half of the suspects: " + ", ".join(ordered))
    helpers = _ordered(nodes, cleared - known_slow) or _ordered(nodes, rest - candidates)
    if not helpers:
        return conclude(
            "unresolved",
            known_slow,
            candidates,
            "two suspects and no third node to run either with: " + ", ".join(ordered),
        )
    return ask([half[0], helpers[0]], f"{half[0]} with {helpers[0]}, suspects: " + ", ".join(ordered))
