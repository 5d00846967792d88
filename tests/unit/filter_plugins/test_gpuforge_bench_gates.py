"""The fio and p2p gates of summary.json (module_utils/gpuforge_bench_gates.py through the filters of
filter_plugins/gpuforge.py), from what the real modules return on captured outputs (tests/unit/conftest.py
runs them), and the playbook expressions of roles/gpuforge_bench/tasks/summary.yml that read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.gpuforge.cluster.plugins.filter import gpuforge as filters
from ansible_collections.gpuforge.cluster.plugins.modules import fio_benchmark, p2p_bandwidth
from site_gates import FIO_FIXTURES, P2P_FIXTURES, fake_fio, registered, run_module

ROOT = Path(__file__).resolve().parents[3]
FOUR_JOBS = (FIO_FIXTURES / "fio-3.33_ext4_seq_rand_4jobs.json").read_text(encoding="utf-8")
DELLEMC_C4140 = (P2P_FIXTURES / "dellemc_c4140_4xv100_sxm2_cuda91.txt").read_text(encoding="utf-8")
SCRATCH = {"kind": "scratch", "label": "scratch:/var/tmp", "path": "/var/tmp"}


def _summary(run_dir: Path) -> dict:
    return json.loads(next(run_dir.glob("bench/*/summary.json")).read_text(encoding="utf-8"))


def _by_name(results: list) -> dict:
    return {result["name"]: result for result in results}


def _fio_item(tmp_path, rc=0, out=FOUR_JOBS, expect=None, target=SCRATCH, **args):
    directory = tmp_path / "scratch"
    directory.mkdir(exist_ok=True)
    module_args = {"directory": str(directory), "label": target["label"], "node": "gpu01", "fail_on": "never"}
    module_args.update(expect=expect or {}, **args)
    return registered(run_module(fio_benchmark, module_args, fake_fio(rc, out)), target)


def test_fio_one_result_per_node_target_and_job_with_the_unit_it_holds(site_gates_run):
    fio = _summary(site_gates_run)["fio"]
    results = _by_name(fio["results"])
    assert (fio["baseline"], fio["slow_nodes"], fio["slow_links"]) == ("site", [], [])
    assert fio["summary"].startswith("19 results: 2 FAIL (1 run failed), 12 UNKNOWN, 5 PASS (first: ")
    seq = results["fio-gpu01-scratch:/var/tmp-seq_read"]
    assert (seq["value"], seq["unit"], seq["threshold"], seq["verdict"]) == (680.49, "MiB/s", 600, "PASS")
    assert (seq["group"], seq["target"], seq["job"], seq["nodes"]) == (
        "scratch:/var/tmp",
        "scratch:/var/tmp",
        "seq_read",
        ["gpu01"],
    )
    assert seq["threshold_source"] == "site threshold gpuforge_bench_fio_thresholds['scratch:/var/tmp']"
    rand = results["fio-gpu01-scratch:/var/tmp-rand_read"]
    assert (rand["value"], rand["unit"], rand["threshold"], rand["clat_p99_us_max"]) == (44866.07, "IOPS", 40000, 2000)
    assert (rand["mib_per_second"], rand["clat_p99_us"], rand["verdict"]) == (175.26, 1253.38, "PASS")
    unjudged = results["fio-gpu01-scratch:/var/tmp-seq_write"]
    assert (unjudged["value"], unjudged["threshold"], unjudged["verdict"]) == (1807.77, None, "UNKNOWN")
    slow = results["fio-gpu03-scratch:/var/tmp-seq_read"]
    assert (slow["value"], slow["verdict"], slow["run_failed"], slow["module_verdict"]) == (
        340.25,
        "FAIL",
        False,
        "FAIL",
    )
    assert slow["reason"].startswith("340.25 MiB/s is below 600 MiB/s")
    assert "is below the threshold" in slow["remedy"]
    failed = results["fio-gpu03-data-rand_read"]
    assert (failed["verdict"], failed["run_failed"]) == ("FAIL", True)
    assert failed["reason"] == "fio_rand_read: fio error 2 (expected no error)"
    assert "errno 2" in failed["remedy"]
    skipped = results["fio-gpu02-nfs:/shared/home"]
    assert (skipped["verdict"], skipped["run_failed"], skipped["job"], skipped["value"]) == (
        "UNKNOWN",
        False,
        None,
        None,
    )
    assert skipped["reason"] == "/shared/home is not mounted on gpu02: not measured"


def test_fio_a_run_that_could_not_start_is_one_failed_result_for_its_target(tmp_path):
    missing = {"kind": "nfs", "label": "nfs:/home", "path": str(tmp_path / "home")}
    item = registered(
        run_module(fio_benchmark, {"directory": missing["path"], "node": "gpu01"}, fake_fio(0, "")), missing
    )
    (result,) = filters.gpuforge_bench_fio_results([item], "gpu01", {})
    assert (result["name"], result["verdict"], result["run_failed"], result["value"], result["job"]) == (
        "fio-gpu01-nfs:/home",
        "FAIL",
        True,
        None,
        None,
    )
    assert result["reason"].startswith(f"{missing['path']} does not exist on ") and "is it mounted?" in result["reason"]


def test_fio_default_thresholds_apply_to_targets_without_their_own(tmp_path):
    thresholds = {"default": {"seq_write_mib_per_s": 2000}, "nfs:/home": {"seq_write_mib_per_s": 1}}
    item = _fio_item(tmp_path, expect=thresholds["default"])
    results = _by_name(filters.gpuforge_bench_fio_results([item], "gpu01", thresholds))
    write = results["fio-gpu01-scratch:/var/tmp-seq_write"]
    assert (write["verdict"], write["threshold"]) == ("FAIL", 2000)
    assert write["threshold_source"] == "site threshold gpuforge_bench_fio_thresholds['default']"


def test_fio_a_nonzero_exit_fails_the_jobs_it_measured(tmp_path):
    results = filters.gpuforge_bench_fio_results([_fio_item(tmp_path, rc=1)], "gpu01", {})
    assert {(result["verdict"], result["run_failed"]) for result in results} == {("FAIL", True)}
    assert results[0]["reason"].startswith("fio exited with rc 1")


def test_fio_check_mode_reports_nothing(tmp_path):
    directory = tmp_path / "scratch"
    directory.mkdir()
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    class Done(Exception):
        pass

    def stop(self, **result):
        raise Done(result)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(basic.AnsibleModule, "exit_json", stop)
        args = {"directory": str(directory), "_ansible_check_mode": True, "_ansible_diff": False}
        with patch_module_args(args), pytest.raises(Done) as done:
            fio_benchmark.main()
    assert filters.gpuforge_bench_fio_results([registered(done.value.args[0], SCRATCH)], "gpu01", {}) == []


def test_p2p_one_result_per_node_and_a_missing_binary_is_skipped_not_failed(site_gates_run):
    p2p = _summary(site_gates_run)["p2p"]
    results = _by_name(p2p["results"])
    assert p2p["summary"].startswith("3 nodes: 1 UNKNOWN, 2 PASS (first: p2p-gpu02: p2pBandwidthLatencyTest not found")
    v100 = results["p2p-gpu01"]
    assert (v100["value"], v100["unit"], v100["threshold"], v100["verdict"]) == (75.25, "GB/s", None, "PASS")
    assert (v100["gpus"], v100["sku"], v100["uni_min_ratio"], v100["bi_min_ratio"]) == (
        4,
        "Tesla V100-SXM2-16GB",
        3.43,
        7.22,
    )
    assert "p2p_uni_ratio PASS: worst pair 1->2 3.43x (34.18 / 9.96 GB/s)" in v100["reason"]
    skipped = results["p2p-gpu02"]
    assert (skipped["verdict"], skipped["run_failed"], skipped["value"], skipped["remedy"]) == (
        "UNKNOWN",
        False,
        None,
        "",
    )
    assert skipped["reason"].startswith("p2pBandwidthLatencyTest not found at ")
    assert results["p2p-gpu03"]["sku"] == "NVIDIA A100-SXM4-80GB"


def _p2p(tmp_path, rc, out, expect=None):
    binary = tmp_path / "p2pBandwidthLatencyTest"
    binary.write_text("#!/bin/sh\n", encoding="ascii")
    binary.chmod(0o755)
    args = {"binary": str(binary), "node": "gpu01", "expect": expect or {}, "fail_on": "never"}
    result = run_module(p2p_bandwidth, args, lambda argv, **kw: (rc, out, ""))
    return filters.gpuforge_bench_p2p_results({**result, "failed": False}, "gpu01", expect or {})


@pytest.mark.parametrize(
    ("rc", "out", "expect", "verdict", "run_failed", "reason"),
    [
        (
            1,
            "CUDA error: no CUDA-capable device is detected\n",
            {},
            "FAIL",
            True,
            "p2pBandwidthLatencyTest failed (rc 1)",
        ),
        (
            0,
            DELLEMC_C4140.replace("  1 47.86 738.42 34.18 38.74", "  1 47.86 738.42 10.50 38.74"),
            {},
            "FAIL",
            False,
            "p2p_uni_ratio FAIL",
        ),
        (0, DELLEMC_C4140, {"gpus": 8}, "FAIL", False, "p2p_gpus FAIL: 4 (expected >= 8)"),
        (
            0,
            DELLEMC_C4140,
            {"min_bidirectional_gbyte_per_s": 80},
            "FAIL",
            False,
            "p2p_bi_gbyte_per_s FAIL: lowest pair 0->1 75.25 GB/s",
        ),
        (0, DELLEMC_C4140, {}, "PASS", False, "p2p_uni_ratio PASS: worst pair 1->2 3.43x"),
    ],
)
def test_p2p_verdicts(tmp_path, rc, out, expect, verdict, run_failed, reason):
    (result,) = _p2p(tmp_path, rc, out, expect)
    assert (result["verdict"], result["run_failed"]) == (verdict, run_failed)
    assert result["reason"].startswith(reason)
    assert result["threshold"] == expect.get("min_bidirectional_gbyte_per_s")


def test_judged_block_counts_and_quotes_the_worst():
    block = filters.gpuforge_bench_judged([], baseline="site")
    assert block == {"baseline": "site", "results": [], "slow_nodes": [], "slow_links": [], "summary": "no results"}
    results = [{"name": "a", "verdict": "PASS"}, {"name": "b", "verdict": "UNKNOWN", "reason": "x"}]
    results.append({"name": "c", "verdict": "FAIL", "run_failed": False, "reason": "slow"})
    results.append({"name": "d", "verdict": "FAIL", "run_failed": True, "reason": "crashed"})
    assert (
        filters.gpuforge_bench_judged(results, what="nodes")["summary"]
        == "4 nodes: 2 FAIL (1 run failed), 1 UNKNOWN, 1 PASS (first: d: crashed)"
    )


def _task(name: str) -> dict:
    tasks = yaml.safe_load((ROOT / "roles" / "gpuforge_bench" / "tasks" / "summary.yml").read_text(encoding="utf-8"))
    return next(task for task in tasks if task["name"] == name)


def _render(expression: str, variables: dict):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def test_bench_summary_yml_builds_the_blocks_and_fails_the_play_on_a_failed_fio_run_not_on_a_skip(site_gates_run):
    summary = _summary(site_gates_run)
    facts = _task("Attribute slow nodes and links")["ansible.builtin.set_fact"]["gpuforge_bench_summary"]
    results = {"fio": summary["fio"]["results"], "p2p": summary["p2p"]["results"]}
    for block in ("fio", "p2p"):
        assert _render(facts[block], {"results": results}) == summary[block]
    # The records the file holds are those summary.yml adds to these blocks before it writes them.
    add = _task("Add the typed records")["ansible.builtin.set_fact"]["gpuforge_bench_summary"]
    bench_dir = str(next(site_gates_run.glob("bench/*")))
    blocks = {key: value for key, value in summary.items() if key != "records"}
    assert _render(add, {"gpuforge_bench_summary": blocks, "gpuforge_bench_dir": bench_dir}) == summary
    check = _task("Fail when a benchmark run produced no result")
    variables = {"gpuforge_bench_summary": summary}
    variables["failed_results"] = trust_as_template(check["vars"]["failed_results"])
    failed = _render(check["vars"]["failed_runs"], variables)
    # gpu03's fio job that could not run and the demo run's pairs over gpu03's Down port (both of them), read from
    # the records (in the order of the benchmarks' names); not gpu02's missing p2p binary.
    down_port = [f"{r['name']}: {r['reason']}" for r in summary["ib_write_bw"]["results"] if r["run_failed"]]
    assert down_port == [
        "gpu02__gpu03__mlx5_2: mlx5_2/1 is not Active on gpu03",
        "gpu03__gpu01__mlx5_2: mlx5_2/1 is not Active on gpu03",
    ]
    assert failed == ["fio-gpu03-data-rand_read: fio_rand_read: fio error 2 (expected no error)", *down_port]
    shown = _task("Show the attribution")["loop"]
    assert shown == ["ib_write_bw", "nccl", "resnet50", "slurm", "fio", "p2p"]


def test_fio_storage_kind_floors_judge_what_the_site_leaves_unset(tmp_path):
    """Issue 48 item 5: a scratch target without site thresholds is judged on sequential read by the floor gpuforge
    ships for local scratch, its source the document it comes from; the other jobs stay unjudged (no published
    figure). A site threshold for the same key wins (site > default), the others keep the default."""
    item = _fio_item(tmp_path, storage_kind="scratch")
    assert item["thresholds"] == {"seq_read_mib_per_s": 319}
    results = _by_name(filters.gpuforge_bench_fio_results([item], "gpu01", {}))
    seq = results["fio-gpu01-scratch:/var/tmp-seq_read"]
    assert (seq["value"], seq["threshold"], seq["verdict"]) == (680.49, 319, "PASS")
    assert seq["threshold_source"].startswith("gpuforge default for scratch: Dell EMC Ready Solutions for AI")
    assert results["fio-gpu01-scratch:/var/tmp-seq_write"]["verdict"] == "UNKNOWN"

    site = {"scratch:/var/tmp": {"seq_read_mib_per_s": 700, "seq_write_mib_per_s": 100}}
    item = _fio_item(tmp_path, expect=site["scratch:/var/tmp"], storage_kind="scratch")
    results = _by_name(filters.gpuforge_bench_fio_results([item], "gpu01", site))
    seq = results["fio-gpu01-scratch:/var/tmp-seq_read"]
    assert (seq["threshold"], seq["verdict"]) == (700, "FAIL")
    assert seq["threshold_source"] == "site threshold gpuforge_bench_fio_thresholds['scratch:/var/tmp']"
    assert results["fio-gpu01-scratch:/var/tmp-seq_write"]["verdict"] == "PASS"


def test_fio_gates_apply_the_kind_floor_of_a_target_the_module_did_not_report():
    """A skipped or failed target carries no module thresholds: the gates take them from the same function."""
    from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_gates import _thresholds_for

    expect, key, sources = _thresholds_for({}, "gpfs:/gpfs/fs1", "gpfs")
    assert (expect, key) == ({"seq_read_mib_per_s": 764}, None)
    assert sources["seq_read_mib_per_s"].startswith("gpuforge default for gpfs: IBM Redpaper REDP-5610, section 4.5")
    expect, key, _ = _thresholds_for({"default": {"seq_read_mib_per_s": 50}}, "nfs:/home", "nfs")
    assert (expect, key) == ({"seq_read_mib_per_s": 50}, "default")
