"""The verdict vocabulary and the two shapes a check takes, built in one place.

Stdlib only; runs on the managed node's Python 3.8+.

- ``PASS``, ``WARN``, ``FAIL``, ``UNKNOWN`` (``VERDICTS``): the one status vocabulary of a node check, from the
  judges (gpuforge_node_health, gpuforge_dcgm, gpuforge_nvbandwidth, gpuforge_gdr, gpuforge_perfquery) to the
  records (gpuforge_records) and the report. A node's verdict is gpuforge_records.node_verdicts, over them.
- ``node_check``: a check of the gpu_node_check contract (validation: node health, DCGM, nvbandwidth, port
  counters, GPUDirect RDMA). ``fault``, ``remedy`` and ``caused_by`` are kept only when the check did not pass,
  so a healthy check carries no stale advice. gpuforge_records.node_check_record makes it a record.
- ``bench_check``: a check of a benchmark run's verdict (nccl-tests, ResNet-50, fio, p2p, container smoke):
  name, status (the benchmark modules' ok/warn/fail), observed, expected, remedy.
- ``worst_status``: the verdict of a list of benchmark checks, their worst status (``STATUS_RANK``).
"""

from __future__ import annotations

__all__ = [
    "BENCH_STATUS_VERDICT",
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
# The benchmark modules' check statuses (bench_check), ranked for worst_status.
STATUS_RANK = {"ok": 0, "warn": 1, "fail": 2}
# The verdict each of them is where a benchmark check becomes a check of another producer (gpuforge k8s verify's
# in-pod nccl-tests run): the one place the two words meet.
BENCH_STATUS_VERDICT = {"ok": PASS, "warn": WARN, "fail": FAIL}


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
    """A check of a benchmark verdict; status is ok, warn or fail."""
    return {"name": name, "status": status, "observed": observed, "expected": expected, "remedy": remedy}


def worst_status(checks: list) -> str:
    """Worst status of a list of checks (``ok`` when the list is empty)."""
    return max((check["status"] for check in checks), key=STATUS_RANK.__getitem__, default="ok")
