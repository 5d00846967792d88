"""Jinja2 filters shared by gpuforge playbooks.

gpuforge_bench_attribution: benchmark results -> verdicts and the slow nodes or links
(module_utils/gpuforge_bench_attribution.py holds the logic; this file only exposes it).
gpuforge_bench_fio_results, gpuforge_bench_p2p_results: one node's registered fio / p2p_bandwidth results ->
summary.json results; gpuforge_bench_judged: those results -> their summary.json block
(module_utils/gpuforge_bench_gates.py).
gpuforge_ib_schedule: nodes and their infiniband facts -> the ib_write_bw rounds of disjoint pairs per rail.
gpuforge_nccl_next_probe: the NCCL bisection's runs so far -> the next run or the conclusion
(both in module_utils/gpuforge_localize.py).
gpuforge_apt_read_packages, gpuforge_apt_unmet: the apt module's package specifiers -> the packages of the read
before an install (package_version_floor), and the specifiers that read does not find met
(module_utils/gpuforge_packages.py).
"""

from __future__ import annotations

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_attribution import attribute_results
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_gates import (
    fio_results,
    judged_block,
    p2p_results,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_localize import ib_schedule, next_probe
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_packages import (
    apt_read_packages,
    apt_specs_unmet,
)


def gpuforge_apt_read_packages(specs):
    """{{ wanted | gpuforge_apt_read_packages }} -> package_version_floor's packages for the read before apt."""
    return apt_read_packages(list(specs or []))


def gpuforge_apt_unmet(specs, read):
    """{{ wanted | gpuforge_apt_unmet(read_result) }} -> the specifiers of wanted that are not met (all of them
    when the read did not run)."""
    return apt_specs_unmet(list(specs or []), read)


def gpuforge_bench_attribution(
    results, baseline="absolute", min_fraction=0.9, median_fraction=0.5, expected=None, bisection=None
):
    """{{ results | gpuforge_bench_attribution(baseline='median') }} -> {results, slow_nodes, ...}; each result
    judged in its own ``unit`` (``value``, ``threshold``, ``expected``)."""
    return attribute_results(
        list(results or []),
        baseline=baseline,
        min_fraction=float(min_fraction),
        median_fraction=float(median_fraction),
        expected=None if expected in (None, "") else float(expected),
        bisection=dict(bisection) if bisection else None,
    )


def gpuforge_bench_fio_results(loop_results, node, thresholds=None):
    """{{ gpuforge_bench_fio.results | gpuforge_bench_fio_results(inventory_hostname, thresholds) }} -> results."""
    return fio_results(list(loop_results or []), str(node), dict(thresholds or {}))


def gpuforge_bench_p2p_results(registered, node, expect=None):
    """{{ gpuforge_bench_p2p | gpuforge_bench_p2p_results(inventory_hostname, expect) }} -> [its result]."""
    return p2p_results(dict(registered or {}), str(node), dict(expect or {}))


def gpuforge_bench_judged(results, baseline="site", what="results"):
    """{{ results.fio | gpuforge_bench_judged(baseline='site') }} -> {baseline, results, ..., summary}."""
    return judged_block(list(results or []), str(baseline), str(what))


def gpuforge_ib_schedule(nodes, infiniband):
    """{{ ansible_play_hosts | gpuforge_ib_schedule(infiniband_facts_by_node) }} -> rounds of pairs per rail."""
    return ib_schedule(list(nodes or []), dict(infiniband or {}))


def gpuforge_nccl_next_probe(state):
    """{{ {'nodes': [...], 'runs': [...]} | gpuforge_nccl_next_probe }} -> {done, probe, verdict, ...}."""
    return next_probe(dict(state or {}))


class FilterModule:
    def filters(self):
        return {
            "gpuforge_apt_read_packages": gpuforge_apt_read_packages,
            "gpuforge_apt_unmet": gpuforge_apt_unmet,
            "gpuforge_bench_attribution": gpuforge_bench_attribution,
            "gpuforge_bench_fio_results": gpuforge_bench_fio_results,
            "gpuforge_bench_judged": gpuforge_bench_judged,
            "gpuforge_bench_p2p_results": gpuforge_bench_p2p_results,
            "gpuforge_ib_schedule": gpuforge_ib_schedule,
            "gpuforge_nccl_next_probe": gpuforge_nccl_next_probe,
        }
