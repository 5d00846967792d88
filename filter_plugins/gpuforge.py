"""Jinja2 filters shared by gpuforge playbooks.

gpuforge_bench_attribution: benchmark results -> verdicts and the slow nodes or links
(module_utils/gpuforge_bench_attribution.py holds the logic; this file only exposes it).
"""

from __future__ import annotations

import os
import sys

try:
    from ansible.module_utils.gpuforge_bench_attribution import attribute_results
except ImportError:  # controller-side plugins do not see the project's module_utils through ansible's path
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils"))
    from gpuforge_bench_attribution import attribute_results


def gpuforge_bench_attribution(results, baseline="absolute", min_fraction=0.9, median_fraction=0.5, expected_gbps=None):
    """{{ results | gpuforge_bench_attribution(baseline='median') }} -> {results, slow_nodes, ...}."""
    return attribute_results(
        list(results or []),
        baseline=baseline,
        min_fraction=float(min_fraction),
        median_fraction=float(median_fraction),
        expected_gbps=None if expected_gbps in (None, "") else float(expected_gbps),
    )


class FilterModule:
    def filters(self):
        return {"gpuforge_bench_attribution": gpuforge_bench_attribution}
