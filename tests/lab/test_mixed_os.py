"""The mixed-OS lab (lab/specs/mixed-os.yml; issue 46, docs/lab.md "OS shapes"): two DGX H100 GPU nodes on the rhel9
shape, the head node on ubuntu2404 and the storage node on debian12, through `gpuforge demo` as a user runs it:
site.yml converges every node (failed=0), validate.yml finds both GPU nodes healthy, the benchmarks run on the RHEL
nodes (nccl-tests through mpirun and srun --mpi=pmix, ResNet-50) and find nothing; then site.yml again changes
nothing.
Run with make smoke (lab marker); it takes the lab down at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpuforge.paths import PROJECT_ROOT

pytestmark = pytest.mark.lab

SPEC = "lab/specs/mixed-os.yml"
GPU_NODES = ("gpu01", "gpu02")


def _run(*command: str, timeout: int = 3000) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT_ROOT / "ansible.cfg"))
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def _tail(proc: subprocess.CompletedProcess) -> str:
    return (proc.stdout + proc.stderr)[-6000:]


def test_mixed_os_lab_converges_validates_benchmarks_and_reruns_unchanged():
    try:
        demo = _run("gpuforge", "demo", "--spec", SPEC, "--skip-doctor")
        output = demo.stdout.splitlines()
        run_dirs = [line.split(" in ", 1)[1] for line in output if line.startswith("demo: artifacts in ")]
        assert run_dirs, _tail(demo)
        summary = json.loads((Path(run_dirs[0]) / "summary.json").read_text(encoding="utf-8"))
        stages = {stage["stage"]: stage for stage in summary["stages"]}
        # Every stage ran ("faults" would be a stage that failed on faults it found: the cluster's verdict, not the
        # toolkit's failure; the benchmark stage must be "ok" below, as nothing is injected here).
        assert {"lab", "lab-services", "provision", "validate", "benchmark"} <= set(stages), stages
        not_run = {name: stage["detail"] for name, stage in stages.items() if stage["status"] not in ("ok", "faults")}
        assert not not_run, not_run
        assert demo.returncode == 0, _tail(demo)
        assert "toolkit: every stage ran" in "\n".join(output), _tail(demo)
        # validate.yml: both RHEL GPU nodes healthy. The benchmarks ran on them (mpirun, srun --mpi=pmix, ResNet-50)
        # and found nothing: the spec injects no fault, and with two GPU nodes the demo degrades no link
        # (demo.degraded_node).
        assert f"nodes healthy: 2/2 ({', '.join(GPU_NODES)})" in output, _tail(demo)
        assert "cluster verdict: PASS, no fault found" in output, _tail(demo)
        nccl = [line for line in output if line.startswith("NCCL ")]
        assert any(line.startswith("NCCL nccl-multi-") for line in nccl), _tail(demo)
        assert "NCCL: not run" not in output and "ResNet-50: not run" not in output, _tail(demo)
        assert stages["benchmark"]["status"] == "ok", stages["benchmark"]

        # The second converge of every node, on each OS shape, changes nothing.
        rerun = _run("gpuforge", "provision", "--json")
        result = json.loads(rerun.stdout)
        assert rerun.returncode == 0, _tail(rerun)
        assert sorted(result["hosts"]) == ["gpu01", "gpu02", "head01", "storage01"], result["hosts"]
        changed = {host: counts["changed"] for host, counts in result["hosts"].items() if counts["changed"]}
        failed = {host: counts["failed"] for host, counts in result["hosts"].items() if counts["failed"]}
        assert not changed and not failed, (changed, failed)
    finally:
        down = _run("gpuforge", "lab", "down", timeout=600)
    assert down.returncode == 0, down.stderr
