"""A benchmark run with fio and p2p results made by the real modules, for the filter, record and report tests
(the ``site_gates_run`` fixture of tests/unit/conftest.py; tests import the helpers from here).

``build_site_gates_run`` runs library/fio_benchmark.py and library/p2p_bandwidth.py in-process on captured real
outputs (tests/fixtures/fio/, tests/fixtures/p2p/, their SOURCES.md), registers what they return the way
Ansible registers a loop with ``failed_when: false`` (roles/gpuforge_bench/tasks/fio.yml, p2p.yml), turns
that into summary.json blocks through the collection's filters (summary.yml) and writes the run folder
the playbooks write: ``bench/<run>/summary.json`` (the real lab run's blocks of tests/fixtures/records/demo-run/,
its ``fio`` and ``p2p`` blocks replaced by these, and the records of all blocks as summary.yml's
gpuforge_bench_summary filter writes them), ``fio/<host>.json`` and ``p2p/<host>.json``.

Three nodes: every one measures local scratch with the captured fio 3.33 run (gpu03's with its sequential
read bandwidth halved, below the site's 600 MiB/s floor); the NFS share is not mounted anywhere; gpu03's extra
target ``data`` got the captured run whose rand_read job failed (errno 2). p2p: gpu01 the C4140's 4x V100 output,
gpu02 has no binary, gpu03 the 8x A100 output.

Imports are lazy: tests/unit/module_utils also runs under an older Python without Ansible.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bench_summaries import written

ROOT = Path(__file__).resolve().parents[2]
FIO_FIXTURES = ROOT / "tests" / "fixtures" / "fio"
P2P_FIXTURES = ROOT / "tests" / "fixtures" / "p2p"
DEMO_BENCH = ROOT / "tests" / "fixtures" / "records" / "demo-run" / "benchmark" / "bench" / "20261126T151133Z"
SITE_GATES_RUN_ID = "20261126T090000Z"
FIO_THRESHOLDS = {"scratch:/var/tmp": {"seq_read_mib_per_s": 600, "rand_read_iops": 40000, "rand_read_p99_us": 2000}}
NODES = ("gpu01", "gpu02", "gpu03")


class _Done(Exception):
    """exit_json / fail_json of a module run in-process; args[0] is the result."""


def run_module(module, args: dict, run_command) -> dict:
    """What ``module.main()`` returns for ``args``, run_command answered by ``run_command(argv, **kwargs)``."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    def done(failed):
        def method(self, **result):
            raise _Done({**result, "failed": True} if failed else result)

        return method

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(basic.AnsibleModule, "exit_json", done(False))
        patch.setattr(basic.AnsibleModule, "fail_json", done(True))
        patch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: run_command(argv, **kw))
        patch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: f"/usr/bin/{name}")
        with patch_module_args({**args, "_ansible_check_mode": False, "_ansible_diff": False}):
            try:
                module.main()
            except _Done as finished:
                return finished.args[0]
    raise AssertionError(f"{module.__name__} ended without exit_json or fail_json")


def fake_fio(rc: int, out: str):
    """fio answering with a captured output, creating its test file as fio would."""

    def run(argv, **kwargs):
        directory = next(a.split("=", 1)[1] for a in argv if a.startswith("--directory="))
        name = next(a.split("=", 1)[1] for a in argv if a.startswith("--filename="))
        Path(directory, name).write_bytes(b"\0" * 16)
        return rc, out, ""

    return run


def registered(result: dict, item: dict) -> dict:
    """A loop item as Ansible registers it under ``failed_when: false`` (failed is the condition's value)."""
    return {**result, "failed": False, "failed_when_result": False, "item": item, "ansible_loop_var": "item"}


def skipped_item(item: dict, condition: str) -> dict:
    """A loop item whose ``when`` was false, as Ansible registers it."""
    return {
        "changed": False,
        "skipped": True,
        "skip_reason": "Conditional result was False",
        "false_condition": condition,
        "item": item,
        "ansible_loop_var": "item",
    }


def fio_loop(node: str, workdir: Path) -> list:
    """The registered fio loop of one node (tasks/fio.yml's task over its targets)."""
    from ansible_collections.gpuforge.cluster.plugins.modules import fio_benchmark

    four_jobs = (FIO_FIXTURES / "fio-3.33_ext4_seq_rand_4jobs.json").read_text(encoding="utf-8")
    job_error = (FIO_FIXTURES / "fio-3.33_ext4_job_error_unlink.txt").read_text(encoding="utf-8")
    if node == "gpu03":
        # seq_read at half speed: its bandwidth (bytes/s, KiB/s) and IOPS halved
        for before, after in (('"bw_bytes" : 713549495', '"bw_bytes" : 356774747'), ('"bw" : 696825', '"bw" : 348412')):
            four_jobs = four_jobs.replace(before, after, 1)
        four_jobs = four_jobs.replace('"iops" : 680.493827', '"iops" : 340.246913', 1)
    loop = []
    scratch = {"kind": "scratch", "label": "scratch:/var/tmp", "path": "/var/tmp"}
    directory = workdir / node / "scratch"
    directory.mkdir(parents=True)
    args = {"directory": str(directory), "label": scratch["label"], "node": node, "fail_on": "never"}
    args["expect"] = FIO_THRESHOLDS[scratch["label"]]
    loop.append(registered(run_module(fio_benchmark, args, fake_fio(0, four_jobs)), scratch))
    nfs = {"kind": "nfs", "label": "nfs:/shared/home", "path": "/shared/home"}
    loop.append(skipped_item(nfs, "item.kind == 'scratch' or item.kind == 'extra' or item.path in mounted"))
    if node == "gpu03":
        data = {"kind": "extra", "label": "data", "path": "/data"}
        directory = workdir / node / "data"
        directory.mkdir(parents=True)
        args = {"directory": str(directory), "label": "data", "node": node, "fail_on": "never", "expect": {}}
        loop.append(registered(run_module(fio_benchmark, args, fake_fio(1, job_error)), data))
    return loop


def p2p_registered(node: str, workdir: Path) -> dict:
    """What tasks/p2p.yml's task registers on one node (failed_when: false)."""
    from ansible_collections.gpuforge.cluster.plugins.modules import p2p_bandwidth

    outputs = {
        "gpu01": "dellemc_c4140_4xv100_sxm2_cuda91.txt",
        "gpu03": "distserve_issue3_8xa100_sxm4_80gb.txt",
    }
    binary = workdir / node / "p2pBandwidthLatencyTest"
    binary.parent.mkdir(parents=True, exist_ok=True)
    if node in outputs:
        binary.write_text("#!/bin/sh\n", encoding="ascii")
        binary.chmod(0o755)
        text = (P2P_FIXTURES / outputs[node]).read_text(encoding="utf-8")
    else:
        text = ""
    result = run_module(p2p_bandwidth, {"binary": str(binary), "node": node}, lambda argv, **kw: (0, text, ""))
    return {**result, "failed": False, "failed_when_result": False}


def build_site_gates_run(run_dir: Path) -> Path:
    """Write the run folder (see the module docstring); returns the bench folder."""
    from ansible_collections.gpuforge.cluster.plugins.filter import gpuforge as filters

    bench = run_dir / "bench" / SITE_GATES_RUN_ID
    shutil.copytree(DEMO_BENCH, bench)
    work = run_dir.parent / f"{run_dir.name}-nodes"
    summary = json.loads((bench / "summary.json").read_text(encoding="utf-8"))
    summary["run_id"] = SITE_GATES_RUN_ID
    fio, p2p = [], []
    for folder in ("fio", "p2p"):
        (bench / folder).mkdir()
    for node in NODES:
        loop = fio_loop(node, work)
        entries = filters.gpuforge_bench_fio_results(loop, node, FIO_THRESHOLDS)
        document = {"kind": "fio", "host": node, "results": entries, "targets": loop}
        (bench / "fio" / f"{node}.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
        fio += entries
        reg = p2p_registered(node, work)
        (entry,) = filters.gpuforge_bench_p2p_results(reg, node, {})
        document = {
            "kind": "p2p",
            "host": node,
            "skipped": reg.get("skipped", False),
            "skip_reason": reg.get("skip_reason"),
            "error": entry["reason"] if entry["run_failed"] else None,
            "verdict": reg.get("verdict"),
            "checks": reg.get("checks", []),
            "result": entry,
            "p2p": reg.get("p2p"),
        }
        (bench / "p2p" / f"{node}.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
        p2p.append(entry)
    summary["fio"] = filters.gpuforge_bench_judged(fio, baseline="site")
    summary["p2p"] = filters.gpuforge_bench_judged(p2p, baseline="reference", what="nodes")
    summary = written(summary, bench)  # the records of these blocks, as summary.yml writes them
    (bench / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return bench
