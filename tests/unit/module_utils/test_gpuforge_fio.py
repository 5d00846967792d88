"""gpuforge_fio: fio 3.33 JSON captured on Debian bookworm (tests/fixtures/fio/SOURCES.md), command and verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_fio import (
    JOBS,
    ParseError,
    fio_command,
    judge_fio,
    overall_status,
    parse_fio,
    thresholds_for,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fio"
FOUR_JOBS = (FIXTURES / "fio-3.33_ext4_seq_rand_4jobs.json").read_text(encoding="utf-8")
JOB_ERROR = (FIXTURES / "fio-3.33_ext4_job_error_unlink.txt").read_text(encoding="utf-8")


def by_name(result):
    return {job["name"]: job for job in result["jobs"]}


def test_four_jobs_bandwidth_iops_and_latency():
    result = parse_fio(FOUR_JOBS)
    assert result["fio_version"] == "fio-3.33"
    assert result["errors"] == [] and result["notices"] == []
    jobs = by_name(result)
    assert list(jobs) == ["seq_read", "seq_write", "rand_read", "rand_write"]
    # bw is KiB/s (fio(1) "JSON OUTPUT"): 696825 KiB/s = 680.49 MiB/s; the document's bw_bytes agrees.
    raw = json.loads(FOUR_JOBS)["jobs"][0]["read"]
    assert abs(raw["bw"] * 1024 - raw["bw_bytes"]) < 1024
    assert jobs["seq_read"]["measured"]["bw_mib_s"] == 680.49
    assert jobs["seq_write"]["direction"] == "write"
    assert jobs["seq_write"]["measured"]["bw_mib_s"] == 1807.77
    assert jobs["rand_read"]["measured"]["iops"] == 44866.07
    assert jobs["rand_read"]["bs"] == "4k" and jobs["rand_read"]["rw"] == "randread"
    # clat_ns.percentile["99.000000"] = 1253376 ns
    assert jobs["rand_read"]["measured"]["clat_p99_us"] == 1253.38
    assert jobs["rand_write"]["measured"]["iops"] == 51001.5


def test_job_error_and_the_line_fio_printed_before_the_json():
    result = parse_fio(JOB_ERROR)
    assert result["notices"] == [
        "fio: pid=13531, err=2/file:filesetup.c:805, func=open(/tmp/fiocap/gpuforge-fio.dat), "
        "error=No such file or directory"
    ]
    assert by_name(result)["rand_read"]["error"] == 2
    assert result["errors"] == ["job rand_read: fio error 2"]
    checks = {check["name"]: check for check in judge_fio(result, {}, "scratch:/tmp")}
    assert checks["fio_rand_read"]["status"] == "FAIL"
    assert "scratch:/tmp" in checks["fio_rand_read"]["remedy"]
    assert list(checks) == ["fio_rand_read"]  # the others moved data and have no threshold: reported only


def test_thresholds_floor_and_latency_ceiling():
    result = parse_fio(FOUR_JOBS)
    expect = {
        "seq_read_mib_per_s": 700,
        "seq_write_mib_per_s": "1000",
        "rand_read_iops": 40000,
        "rand_write_p99_us": 500,
    }
    checks = {check["name"]: check for check in judge_fio(result, expect)}
    assert checks["fio_seq_read"]["status"] == "FAIL"  # 680.49 < 700
    assert checks["fio_seq_write"]["status"] == "PASS"  # "1000" from -e is a number
    assert checks["fio_rand_read"]["status"] == "PASS"
    assert checks["fio_rand_write_p99"]["status"] == "FAIL"  # 692.22 us > 500
    assert "fio_rand_write" not in checks
    assert overall_status(list(checks.values())) == "FAIL"


def test_unknown_threshold_key_is_refused():
    with pytest.raises(OptionError, match=r"expect\.seq_read_mbps"):
        judge_fio(parse_fio(FOUR_JOBS), {"seq_read_mbps": 100})


@pytest.mark.parametrize(
    "text", ["", "fio: engine libaio not loadable\n", '{"fio version": "fio-3.33"}', FOUR_JOBS[:500]]
)
def test_no_document(text):
    with pytest.raises(ParseError):
        parse_fio(text)


def test_command_runs_the_jobs_one_after_another():
    argv = fio_command("fio", "/scratch", ".t.dat", "1G", 30, ["seq_read", "rand_write"], direct=False)
    assert argv == [
        *("fio", "--output-format=json", "--directory=/scratch", "--filename=.t.dat", "--size=1G"),
        *("--runtime=30", "--time_based", "--ioengine=libaio", "--iodepth=16", "--direct=0"),
        *("--name=seq_read", "--rw=read", "--bs=1M", "--stonewall"),
        *("--name=rand_write", "--rw=randwrite", "--bs=4k", "--stonewall"),
    ]
    with pytest.raises(ValueError):
        fio_command("fio", "/scratch", "f", "1G", 30, ["seq_rw"])


def test_default_thresholds_per_storage_kind_have_units_and_sources():
    """The floors gpuforge ships: each key a threshold of EXPECT (unit in its name), each entry a source that names
    a document of docs/sources.md by its title, never a seed file."""
    from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_fio import (
        DEFAULT_THRESHOLDS,
        EXPECT,
        STORAGE_KINDS,
        thresholds_for,
    )

    sources_md = (Path(__file__).resolve().parents[3] / "docs" / "sources.md").read_text(encoding="utf-8")
    assert set(DEFAULT_THRESHOLDS) == {"nfs", "gpfs", "scratch"} and set(DEFAULT_THRESHOLDS) < set(STORAGE_KINDS)
    for kind, (floors, source) in DEFAULT_THRESHOLDS.items():
        assert EXPECT("expect", floors) == floors, kind
        assert all(key.endswith(("_mib_per_s", "_iops", "_us")) for key in floors), kind
        assert "seed" not in source.lower()
        assert any(
            title in source and title in sources_md
            for title in ("Dell EMC Ready Solutions for AI", "IBM Redpaper REDP-5610")
        )
    # One precedence, key by key: the site's value over the kind's floor; a kind without floors (extra) has none.
    assert thresholds_for({"seq_read_mib_per_s": 5, "rand_read_iops": 9}, "nfs")[0] == {
        "seq_read_mib_per_s": 5,
        "rand_read_iops": 9,
    }
    assert thresholds_for({}, "extra") == ({}, {})
    assert thresholds_for(None, None) == ({}, {})


def test_the_lab_judges_every_scratch_job():
    """The lab inventory's floors over the shipped scratch floor leave no lab job unjudged, the lab demo's measured
    scratch (the run of 2026-11-26 in tests/fixtures/records) passes them, and a disk 1000 times slower fails each."""
    root = Path(__file__).resolve().parents[3]
    lab = yaml.safe_load((root / "inventories/lab/group_vars/all/benchmark.yml").read_text(encoding="utf-8"))
    expect, sources = thresholds_for(lab["gpuforge_bench_fio_thresholds"]["default"], "scratch")
    assert sources["seq_read_mib_per_s"].startswith("gpuforge default for scratch")
    demo = root / "tests/fixtures/records/demo-run/benchmark/bench/20261126T151133Z/summary.json"
    measured = {}
    for result in json.loads(demo.read_text(encoding="utf-8"))["fio"]["results"]:
        if "scratch:" in result["name"]:
            job = result["name"].rsplit("-", 1)[1]
            measured[job] = min(measured.get(job, result["value"]), result["value"])
    assert sorted(measured) == sorted(JOBS)
    for scale, status in ((1, "PASS"), (0.001, "FAIL")):
        jobs = [
            {"name": job, "measured": {"io_bytes": 1, "bw_mib_s": value * scale, "iops": value * scale}}
            for job, value in measured.items()
        ]
        checks = judge_fio({"jobs": jobs}, expect, "scratch:/var/tmp")
        assert sorted(c["name"] for c in checks) == sorted(f"fio_{job}" for job in JOBS)
        assert {c["status"] for c in checks} == {status}, checks
