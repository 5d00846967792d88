"""The verdict vocabulary and the two shapes a check takes, built in one place.

Stdlib only; runs on the managed node's Python 3.8+.

- ``PASS``, ``WARN``, ``FAIL``, ``UNKNOWN`` (``VERDICTS``): the one status vocabulary, of a node check from the
  judges (gpuforge_node_health, gpuforge_dcgm, gpuforge_nvbandwidth, gpuforge_gdr, gpuforge_perfquery) and of a
  benchmark check and run (the benchmark modules, summary.json) to the records (gpuforge_records) and the report.
  A node's verdict is gpuforge_records.node_verdicts, over them.
- ``node_check``: a check of the gpu_node_check contract (validation: node health, DCGM, nvbandwidth, port
  counters, GPUDirect RDMA). ``fault``, ``remedy`` and ``caused_by`` are kept only when the check did not pass,
  so a healthy check carries no stale advice. gpuforge_records.node_check_record makes it a record.
- ``bench_check``: a check of a benchmark run's verdict (nccl-tests, ResNet-50, fio, p2p): name, status (PASS,
  WARN or FAIL), observed, expected, remedy.
- ``worst_status``: the verdict of a list of benchmark checks, their worst status (``STATUS_RANK``).
"""

from __future__ import annotations

__all__ = [
    "FAIL",
    "PASS",
    "STATUS_RANK",
    "UNKNOWN",
    "VERDICTS",
    "WARN",
    "bench_check",
    "node_check",
    "worst_status",
]

PASS, WARN, FAIL, UNKNOWN = "PASS", "WARN", "FAIL", "UNKNOWN"
VERDICTS = (PASS, WARN, FAIL, UNKNOWN)
# A benchmark check's statuses (bench_check), ranked for worst_status: a judge gives PASS, WARN or FAIL.
STATUS_RANK = {PASS: 0, WARN: 1, FAIL: 2}


def node_check(name, status, observed, expected, fault="", remedy="", caused_by=None) -> dict:
    """A gpu_node_check check; status is one of VERDICTS (a judge gives PASS, WARN or FAIL)."""
    if status not in VERDICTS:
        raise ValueError(f"node_check {name!r}: status {status!r} is not one of {', '.join(VERDICTS)}")
    return {
        "name": name,
        "status": status,
        "observed": observed,
        "expected": expected,
        "fault": fault if status != PASS else "",
        "remedy": remedy if status != PASS else "",
        "caused_by": caused_by if status != PASS else None,
    }


def bench_check(name, status, observed, expected, remedy="") -> dict:
    """A check of a benchmark verdict; status is PASS, WARN or FAIL."""
    if status not in STATUS_RANK:
        raise ValueError(f"bench_check {name!r}: status {status!r} is not one of {', '.join(STATUS_RANK)}")
    return {"name": name, "status": status, "observed": observed, "expected": expected, "remedy": remedy}


def worst_status(checks: list) -> str:
    """Worst status of a list of checks (PASS when the list is empty)."""
    return max((check["status"] for check in checks), key=STATUS_RANK.__getitem__, default=PASS)
