"""The toolkit benchmark's own parts (benchmarks/toolkit/): the floor playbook, the task records, the tables."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import pytest
import yaml

from gpuforge.paths import PROJECT_ROOT

_PATH = PROJECT_ROOT / "benchmarks" / "toolkit" / "bench_toolkit.py"
_SPEC = importlib.util.spec_from_file_location("bench_toolkit", _PATH)
bench = importlib.util.module_from_spec(_SPEC)
sys.modules["bench_toolkit"] = bench
_SPEC.loader.exec_module(bench)


def test_lab_spec_has_head_storage_and_the_gpu_nodes():
    nodes = yaml.safe_load(bench.lab_spec(4))["nodes"]
    assert [node["name"] for node in nodes] == ["head01", "storage01", "gpu01", "gpu02", "gpu03", "gpu04"]
    assert {node["profile"] for node in nodes[2:]} == {"dgx1-v100-edr"}


@pytest.mark.skipif(shutil.which("ansible-playbook") is None, reason="needs ansible-playbook")
def test_floor_playbook_makes_exactly_the_asked_remote_calls_per_host(tmp_path):
    """Run the generated floor over two local hosts with the benchmark's callback: 3 and 1 ping calls."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    lab:\n      hosts:\n        a: {}\n        b: {}\n"
        "      vars: {ansible_connection: local, ansible_python_interpreter: " + sys.executable + "}\n"
    )
    playbook = tmp_path / "floor.yml"
    playbook.write_text(bench.floor_playbook({"a": 3, "b": 1}))
    out = tmp_path / "out"
    out.mkdir()
    run = bench.run_playbook("floor", ["-i", str(inventory), str(playbook)], out, [])
    assert run.rc == 0, (out / "floor.log").read_text()
    assert run.remote_calls == {"a": 3, "b": 1}
    assert run.hosts["b"]["skipped"] == 2
    assert run.changed == 0


def test_summarise_counts_loop_items_as_remote_calls_and_controller_tasks_as_none():
    lines = [
        {"host": "a", "task": "t1", "action": "ansible.builtin.apt", "status": "ok", "remote": True, "items": 1},
        {"host": "a", "task": "t2", "action": "ansible.builtin.file", "status": "changed", "remote": True, "items": 4},
        {"host": "a", "task": "t3", "action": "ansible.builtin.assert", "status": "ok", "remote": False, "items": 1},
        {"host": "b", "task": "t1", "action": "ansible.builtin.apt", "status": "skipped", "remote": False, "items": 1},
    ]
    hosts, changed = bench.summarise_tasks(lines)
    assert hosts == {"a": {"remote": 5, "ok": 2, "changed": 1}, "b": {"remote": 0, "skipped": 1}}
    assert changed == ["a: t2"]


def test_merge_keeps_other_sizes_and_replaces_the_measured_ones():
    earlier = [{"gpu_nodes": 1, "commit": "old"}, {"gpu_nodes": 16, "commit": "old"}]
    measured = [{"gpu_nodes": 8, "commit": "new"}, {"gpu_nodes": 1, "commit": "new"}]
    merged = bench.merge_sizes(measured, earlier)
    assert [(s["gpu_nodes"], s["commit"]) for s in merged] == [(1, "new"), (8, "new"), (16, "old")]


def test_markdown_names_each_sizes_tree_and_marks_growth_across_trees():
    phases = {
        phase: {"wall_s": bench.spread([1.0]), "changed": [0], "remote_calls_per_host_max": 1, "s_per_host_task": 0.1}
        for phase in bench.PHASES
    }
    size = {"gpu_nodes": 1, "hosts": 3, "phases": phases, "idempotent": {}, "commit": "aaa", "date": "2026-11-27"}
    document = {
        "date": "2026-11-27",
        "connection": "ssh",
        "runs": 1,
        "machine": {"cpus": 2, "cpu_model": "cpu", "ansible_core": "core", "podman": "podman"},
        "sizes": [size, {**size, "gpu_nodes": 4}, {**size, "gpu_nodes": 16, "commit": "bbb"}],
    }
    text = bench.markdown(document)
    assert "Tree measured, by lab size: 1, 4 GPU: commit aaa (2026-11-27); 16 GPU: commit bbb (2026-11-27)." in text
    assert "- rerun: 4 GPU: x1.0, 16 GPU: x1.0 (commit bbb)" in text


def test_markdown_section_replaces_only_the_generated_part(tmp_path):
    phases = {
        phase: {
            "wall_s": bench.spread([10.0, 12.0, 11.0]),
            "changed": [0, 0, 0],
            "remote_calls_per_host_max": 100,
            "s_per_host_task": 0.05,
            "controller_cpu_s": bench.spread([4.0, 6.0, 5.0]),
            "controller_cpu_s_per_host_task": 0.02,
        }
        for phase in bench.PHASES
    }
    phases["rerun"]["ratio_to_floor"] = 1.2
    size = {"gpu_nodes": 1, "hosts": 3, "phases": phases, "idempotent": {}}
    document = {
        "date": "2026-11-23",
        "connection": "ssh",
        "runs": 3,
        "machine": {"cpus": 2, "cpu_model": "cpu", "ansible_core": "core 2.19", "podman": "podman 4.3.1"},
        "sizes": [size, {**size, "gpu_nodes": 4, "hosts": 6}],
    }
    docs = tmp_path / "performance.md"
    docs.write_text(f"# Title\n\nkept\n\n{bench.BEGIN}\nold\n{bench.END}\n\nafter\n")
    bench.write_docs(document, docs)
    text = docs.read_text()
    assert text.startswith("# Title\n\nkept\n\n") and text.endswith("\n\nafter\n")
    assert "old" not in text
    assert "| 1 | 3 | rerun | 11.0 (10.0-12.0) | 100 | 0.05 | 1.2 | 5.0 | 0.02 | 0, 0, 0 |" in text
    assert "- rerun: 4 GPU: x1.0" in text
    assert "- rerun, controller CPU: 4 GPU: x1.0" in text
    assert bench.spread([3.0, 1.0, 2.0]) == {
        "median": 2.0,
        "min": 1.0,
        "max": 3.0,
        "spread": 2.0,
        "runs": [3.0, 1.0, 2.0],
    }


def test_callback_records_are_json_lines(tmp_path):
    """The callback plugin loads in ansible-core and writes one JSON object per task result."""
    if shutil.which("ansible") is None:
        pytest.skip("needs ansible")
    tasks = tmp_path / "tasks.jsonl"
    env = bench.environment(tasks)
    interpreter = f"ansible_python_interpreter={sys.executable}"
    proc = subprocess.run(
        ["ansible", "-i", "localhost,", "-c", "local", "-e", interpreter, "-m", "ansible.builtin.ping", "all"],
        env={**env, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1"},
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in tasks.read_text().splitlines()]
    assert [(r["host"], r["status"], r["remote"]) for r in records] == [("localhost", "ok", True)]


def test_controller_cpu_counts_the_finished_children_and_not_before():
    # A child that burns CPU is counted once it is waited for; the mark before it excludes earlier children.
    mark = bench.controller_cpu_mark()
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    subprocess.run([sys.executable, "-c", burn], check=True)
    first = bench.controller_cpu(mark)
    assert first >= 0.3
    mark = bench.controller_cpu_mark()
    assert bench.controller_cpu(mark) < 0.3


def test_ssh_masters_reads_only_mux_processes(monkeypatch, tmp_path):
    # /proc/<pid>/stat: utime and stime are the 14th and 15th fields (proc(5)); the comm in parentheses may hold
    # spaces and parentheses, so fields are counted after the last ")".
    root = tmp_path / "proc"
    for pid, cmdline, comm in (("41", b"ssh: /root/.ansible/cp/ab12 [mux]\0", "ssh"), ("42", b"sshd\0", "sshd")):
        (root / pid).mkdir(parents=True)
        (root / pid / "cmdline").write_bytes(cmdline)
        (root / pid / "stat").write_text(f"{pid} ({comm} (x)) S 1 1 1 0 -1 0 0 0 0 0 250 50 0 0 20 0 1 0\n")
    (root / "self").mkdir()
    real_path = bench.Path
    monkeypatch.setattr(bench, "Path", lambda path: root if path == "/proc" else real_path(path))
    ticks = bench.os.sysconf("SC_CLK_TCK")
    assert bench._ssh_masters() == {41: 300 / ticks}
