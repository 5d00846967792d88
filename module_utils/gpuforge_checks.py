"""The two shapes a check takes in gpuforge's result contract, built in one place.

Stdlib only; runs on the managed node's Python 3.8+.

- ``node_check``: a check of the gpu_node_check contract (validation: node health, DCGM, nvbandwidth, port
  counters, GPUDirect RDMA). ``fault``, ``remedy`` and ``caused_by`` are kept only when the check did not pass,
  so a healthy check carries no stale advice.
- ``bench_check``: a check of a benchmark run's verdict (nccl-tests, ResNet-50, fio, p2p, container smoke):
  name, status, observed, expected, remedy.
- ``worst_status``: the verdict of a list of checks, their worst status (``STATUS_RANK``).

The JSON Schemas of both are in schemas/ (gpu_node_check and the benchmark result kinds).
"""

from __future__ import annotations

__all__ = ["STATUS_RANK", "bench_check", "node_check", "worst_status"]

STATUS_RANK = {"ok": 0, "warn": 1, "fail": 2}


def node_check(name, status, observed, expected, fault="", remedy="", caused_by=None) -> dict:
    """A gpu_node_check check; status is ok, warn or fail."""
    return {
        "name": name,
        "status": status,
        "observed": observed,
        "expected": expected,
        "fault": fault if status != "ok" else "",
        "remedy": remedy if status != "ok" else "",
        "caused_by": caused_by if status != "ok" else None,
    }


def bench_check(name, status, observed, expected, remedy="") -> dict:
    """A check of a benchmark verdict; status is ok, warn or fail."""
    return {"name": name, "status": status, "observed": observed, "expected": expected, "remedy": remedy}


def worst_status(checks: list) -> str:
    """Worst status of a list of checks (``ok`` when the list is empty)."""
    return max((check["status"] for check in checks), key=STATUS_RANK.__getitem__, default="ok")
