"""fio_benchmark module: a real fio run on a temporary directory (when fio is installed), check mode, bad
directories, cleanup of the test file and verdicts from the captured fio 3.33 output."""

from __future__ import annotations

import os
import shutil
from functools import partial
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import fio_benchmark

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fio"
FOUR_JOBS = (FIXTURES / "fio-3.33_ext4_seq_rand_4jobs.json").read_text(encoding="utf-8")
JOB_ERROR = (FIXTURES / "fio-3.33_ext4_job_error_unlink.txt").read_text(encoding="utf-8")


@pytest.fixture
def run_module(ansible_module):
    return partial(ansible_module, fio_benchmark)


class FakeFio:
    """Answers the timeout-wrapped fio command with a captured output, creating the test file as fio would."""

    def __init__(self, rc, out):
        self.rc, self.out, self.calls = rc, out, []

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        directory = next(a.split("=", 1)[1] for a in argv if a.startswith("--directory="))
        name = next(a.split("=", 1)[1] for a in argv if a.startswith("--filename="))
        Path(directory, name).write_bytes(b"\0" * 16)
        return self.rc, self.out, ""


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed on this host (apt install fio)")
def test_really_runs_fio_on_a_temp_dir(ansible_module, tmp_path):
    target = tmp_path / "scratch"
    target.mkdir()
    result = ansible_module(
        fio_benchmark,
        {
            "directory": str(target),
            "label": "scratch",
            "node": "this",
            "size": "8M",
            "runtime": 1,
            "direct": False,
            "ioengine": "psync",
            "output_path": str(tmp_path / "out" / "fio.json"),
            "expect": {"seq_read_mib_per_s": 0.001, "rand_write_iops": 0.001},
        },
    )
    assert result["rc"] == 0
    assert result["fio"]["fio_version"].startswith("fio-3")
    assert [r["job"] for r in result["results"]] == ["seq_read", "seq_write", "rand_read", "rand_write"]
    assert all(r["mib_per_second"] > 0 and r["iops"] > 0 for r in result["results"])
    assert {r["job"]: r["verdict"] for r in result["results"]} == {
        "seq_read": "PASS",
        "seq_write": "UNKNOWN",
        "rand_read": "UNKNOWN",
        "rand_write": "PASS",
    }
    assert result["verdict"] == "PASS" and result["changed"] is True
    assert list(target.iterdir()) == []  # the test file is gone
    # fio's raw output, with the notes fio prints before the JSON (psync caps the queue depth at 1)
    assert '"fio version"' in (tmp_path / "out" / "fio.json").read_text(encoding="utf-8")
    assert any("queue depth will be capped at 1" in note for note in result["fio"]["notices"])


def test_captured_output_judged_and_test_file_removed(run_module, tmp_path):
    fake = FakeFio(0, FOUR_JOBS)
    result = run_module(
        {"directory": str(tmp_path), "node": "gpu01", "label": "nfs:/home", "expect": {"seq_read_mib_per_s": 700}},
        fake,
        expect_failure=True,
        bin_path="/usr/bin/{}".format,
    )
    argv, kwargs = fake.calls[0]
    assert argv[:3] == ["/usr/bin/timeout", "--kill-after=30", str(4 * 30 + 600)]
    assert argv[3:6] == ["fio", "--output-format=json", f"--directory={tmp_path}"]
    assert kwargs["environ_update"]["LC_ALL"] == "C"
    assert result["msg"].startswith("fio on nfs:/home: verdict FAIL: fio_seq_read=680.49 (expected >= 700 MiB/s")
    assert result["results"][0]["name"] == "fio-gpu01-nfs:/home-seq_read"
    assert list(tmp_path.iterdir()) == []


def test_job_error_fails_even_without_thresholds(run_module, tmp_path):
    result = run_module(
        {"directory": str(tmp_path), "fail_on": "never"}, FakeFio(1, JOB_ERROR), bin_path="/usr/bin/{}".format
    )
    assert result["verdict"] == "FAIL"
    assert [c["name"] for c in result["checks"] if c["status"] == "FAIL"] == ["fio_rand_read"]
    assert list(tmp_path.iterdir()) == []


def test_check_mode_runs_nothing(run_module, tmp_path):
    fake = FakeFio(0, FOUR_JOBS)
    result = run_module(
        {"directory": str(tmp_path), "output_path": str(tmp_path / "o" / "x.json")}, fake, check_mode=True
    )
    assert fake.calls == []
    assert result["cmd"][0] == "fio" and result["changed"] is False
    assert list(tmp_path.iterdir()) == []


def test_missing_directory(run_module, tmp_path):
    result = run_module({"directory": str(tmp_path / "gpfs")}, FakeFio(0, ""), expect_failure=True)
    assert result["msg"].startswith(f"{tmp_path / 'gpfs'} does not exist on ")
    assert "is it mounted?" in result["msg"]


def test_directory_not_writable(run_module, tmp_path, monkeypatch):
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if str(path) == str(tmp_path) else real_access(path, mode)
    )
    result = run_module({"directory": str(tmp_path)}, FakeFio(0, ""), expect_failure=True)
    assert "is not writable by this user" in result["msg"]


def test_fio_not_installed(run_module, tmp_path):
    def cannot_start(argv, **kwargs):
        return 127, "", "timeout: failed to run command 'fio': No such file or directory\n"

    result = run_module({"directory": str(tmp_path)}, cannot_start, expect_failure=True, bin_path="/usr/bin/{}".format)
    assert "fio not found" in result["msg"] and "apt install fio" in result["msg"]
