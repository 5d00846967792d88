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


def test_markdown_is_one_table_naming_each_sizes_tree():
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
    kinds = {
        "remote": {"tasks": 80, "seconds": 30.3},
        "controller": {"tasks": 120, "seconds": 6.2},
        "skipped": {"tasks": 75, "seconds": 2.6},
    }
    document["sizes"][2] = {
        **size,
        "gpu_nodes": 16,
        "commit": "bbb",
        "phases": {**phases, "rerun": {**phases["rerun"], "time_by_kind": kinds}},
    }
    text = bench.markdown(document)
    assert "Tree measured, by lab size: 1, 4 GPU: commit aaa (2026-11-27); 16 GPU: commit bbb (2026-11-27)." in text
    # docs/performance.md holds the method and one generated table: one row per size and phase, nothing else.
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + 3 * len(bench.PHASES)
    assert "| 16 | 3 | rerun | 1.0 (1.0-1.0) | 1 | 0.1 |" in text
    assert "```" not in text and "Growth" not in text


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
    assert "| 4 | 6 | rerun | 11.0 (10.0-12.0) | 100 | 0.05 | 1.2 | 5.0 | 0.02 | 0, 0, 0 |" in text
    assert bench.spread([3.0, 1.0, 2.0]) == {
        "median": 2.0,
        "min": 1.0,
        "max": 3.0,
        "spread": 2.0,
        "runs": [3.0, 1.0, 2.0],
    }


def test_the_runs_keep_ansible_cfg_s_callbacks_beside_the_recorder(tmp_path):
    # ANSIBLE_CALLBACKS_ENABLED replaces callbacks_enabled: the benchmark names the configured ones again, so the
    # toolkit is measured as configured (gc_freeze included) and the floor runs with the same settings.
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\ncallbacks_enabled = a.b.c,\n  d.e.f\n", encoding="utf-8")
    assert bench.configured_callbacks(config) == ["a.b.c", "d.e.f"]
    (tmp_path / "empty.cfg").write_text("[defaults]\n", encoding="utf-8")
    assert bench.configured_callbacks(tmp_path / "empty.cfg") == []
    enabled = bench.environment(tmp_path / "tasks.jsonl")["ANSIBLE_CALLBACKS_ENABLED"].split(",")
    assert enabled == [*bench.configured_callbacks(), "gpuforge_toolkit_tasks"]
    assert "gpuforge.cluster.gc_freeze" in enabled


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


def _record(task, host, status, remote, started, seconds=0.1, action="ansible.builtin.command"):
    return {
        "host": host,
        "task": task,
        "action": action,
        "status": status,
        "remote": remote,
        "items": 1,
        "seconds": seconds,
        "started": started,
    }


RECORDS = [
    # A remote task on two hosts, 2 s to the next task; a controller-only assert (1 s); a task skipped on both
    # hosts (0.5 s); a task one host skips and the other runs on the controller (0.5 s); the last remote task
    # (its slowest host ends 1.5 s after it started).
    _record("install", "gpu01", "ok", True, 100.0),
    _record("install", "gpu02", "ok", True, 100.2),
    _record("check", "gpu01", "ok", False, 102.0, action="ansible.builtin.assert"),
    _record("check", "gpu02", "ok", False, 102.1, action="ansible.builtin.assert"),
    _record("legacy", "gpu01", "skipped", False, 103.0),
    _record("legacy", "gpu02", "skipped", False, 103.0),
    _record("fact", "gpu01", "skipped", False, 103.5, action="ansible.builtin.set_fact"),
    _record("fact", "gpu02", "ok", False, 103.6, action="ansible.builtin.set_fact"),
    _record("start", "gpu02", "ok", True, 104.0, seconds=1.5),
    _record("start", "gpu01", "ok", True, 104.1, seconds=0.2),
]


def test_time_by_kind_splits_the_wall_time_by_what_each_task_did():
    assert bench.time_by_kind(list(reversed(RECORDS))) == {
        "remote": {"tasks": 2, "seconds": 3.5},
        "controller": {"tasks": 2, "seconds": 1.5},
        "skipped": {"tasks": 1, "seconds": 0.5},
    }


def test_from_artifacts_adds_time_by_kind_to_a_finished_run(tmp_path, monkeypatch):
    folder = tmp_path / "20261127T000000Z"
    run = folder / "gpus1" / "run1"
    run.mkdir(parents=True)
    lines = "\n".join(json.dumps(r) for r in RECORDS) + "\n"
    (run / "rerun.1.tasks.jsonl").write_text(lines)
    (run / "rerun.2.tasks.jsonl").write_text(lines)
    (run / "floor_rerun.1.tasks.jsonl").write_text(json.dumps(_record("ping", "gpu01", "ok", True, 1.0)) + "\n")
    run_result = bench.PlaybookRun("rerun", 6.0, 0, {"gpu01": {"ok": 2, "remote": 2}}, [], "log", 1.0)
    size = bench.aggregate(1, [{phase: [run_result] for phase in bench.PHASES}])
    machine = {"cpus": 2, "cpu_model": "cpu", "ansible_core": "core"}
    document = {
        "schema_version": 1,
        "date": "2026-11-27",
        "connection": "ssh",
        "runs": 1,
        "machine": machine,
        "sizes": [size],
    }
    (folder / "results.json").write_text(json.dumps(document))
    monkeypatch.setattr(bench, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(bench, "markdown", lambda document: "")
    assert bench.main(["--from-artifacts", str(folder)]) == 0
    written = json.loads((tmp_path / "results" / "ssh.json").read_text())["sizes"][0]["phases"]
    assert written["rerun"]["time_by_kind"]["remote"] == {"tasks": 2, "seconds": 3.5}
    assert written["floor_rerun"]["time_by_kind"]["remote"]["tasks"] == 1
    with pytest.raises(SystemExit, match=r"results\.json is missing"):
        bench.main(["--from-artifacts", str(tmp_path)])


def _toolkit_schema(name: str = "toolkit-bench"):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((PROJECT_ROOT / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def test_the_kept_results_validate_against_their_schema():
    paths = sorted((PROJECT_ROOT / "benchmarks" / "toolkit" / "results").glob("*.json"))
    assert "apt_cost.json" in [path.name for path in paths]
    for path in paths:
        validator = _toolkit_schema("toolkit-apt-cost" if path.name == "apt_cost.json" else "toolkit-bench")
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(json.loads(path.read_text(encoding="utf-8")))
        ]
        assert errors == [], path


def test_an_aggregated_size_validates_and_a_wrong_one_does_not(tmp_path, monkeypatch):
    validator = _toolkit_schema()
    hosts = {"gpu01": {"ok": 3, "remote": 2}}
    run = bench.PlaybookRun("rerun", 10.0, 0, hosts, [], "log", 4.0, bench.time_by_kind(RECORDS))
    size = bench.aggregate(1, [{phase: [run] for phase in bench.PHASES}])
    size.update(date="2026-11-27", commit="76b6350+changes")
    document = {
        "schema_version": 1,
        "date": "2026-11-27",
        "connection": "ssh",
        "runs": 1,
        "repeats": 1,
        "machine": {"cpus": 2, "cpu_model": "cpu", "ansible_core": "core"},
        "sizes": [size],
    }
    assert list(validator.iter_errors(document)) == []
    size["phases"]["rerun"]["wall_s"]["median"] = -1
    size["commit"] = "HEAD"
    assert {tuple(e.absolute_path)[-1] for e in validator.iter_errors(document)} == {"median", "commit"}
    monkeypatch.setattr(bench, "RESULTS_DIR", tmp_path)
    with pytest.raises(SystemExit, match="do not match"):
        bench.publish(document, merge=False, docs=False)
    assert not (tmp_path / "ssh.json").exists()


def test_unhealthy_nodes_names_a_missing_a_broken_and_an_unhealthy_report(tmp_path):
    """validate.yml's own files (the recorded demo run's: gpu01 healthy, gpu03 with its injected faults), a file of
    another shape, a broken one and a missing one."""
    recorded = PROJECT_ROOT / "tests" / "fixtures" / "records" / "demo-run" / "validate" / "validation"
    shutil.copy(recorded / "gpu01.json", tmp_path / "gpu01.json")
    shutil.copy(recorded / "gpu03.json", tmp_path / "gpu02.json")
    (tmp_path / "gpu03.json").write_text("{", encoding="utf-8")
    (tmp_path / "gpu05.json").write_text(json.dumps({"healthy": True, "failed": []}), encoding="utf-8")
    found = bench.unhealthy_nodes(tmp_path, bench.gpu_hosts(5))
    assert found[0] == "gpu02: ecc_volatile_dbe, ib_port_state, xid"  # gdr_ib_write_bw is their consequence
    assert found[1].startswith("gpu03: no report (") and "JSONDecodeError" in found[1]
    assert found[2].startswith("gpu04: no report (") and "FileNotFoundError" in found[2]
    assert found[3].startswith("gpu05: no node verdict in ")
    assert len(found) == 4


def test_an_unhealthy_node_in_the_healthy_lab_is_a_false_failure_of_the_measured_sizes_only():
    hosts = {"gpu01": {"ok": 3, "remote": 2}}
    runs = {phase: [bench.PlaybookRun(phase, 10.0, 0, hosts)] for phase in bench.PHASES}
    runs["validate"][0].unhealthy = ["gpu01: gdr_ib_write_bw"]
    size = bench.aggregate(1, [runs])
    assert size["phases"]["validate"]["unhealthy_nodes"] == [["gpu01: gdr_ib_write_bw"]]
    clean = bench.aggregate(4, [{phase: [bench.PlaybookRun(phase, 10.0, 0, hosts)] for phase in bench.PHASES}])
    assert bench.false_failures([size, clean], [1, 4]) == ["1 GPU: gpu01: gdr_ib_write_bw"]
    assert bench.false_failures([size, clean], [4]) == []  # a merged earlier size is not this run's failure


def test_apt_cost_playbook_interleaves_apt_the_read_and_ping_on_the_same_packages():
    spec = importlib.util.spec_from_file_location("apt_cost", PROJECT_ROOT / "benchmarks" / "toolkit" / "apt_cost.py")
    apt_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(apt_cost)
    (play,) = yaml.safe_load(apt_cost.playbook(3))
    assert (play["hosts"], play["connection"], play["vars"]["ansible_python_interpreter"]) == (
        "localhost",
        "local",
        "/usr/bin/python3",
    )
    names = [task["name"] for task in play["tasks"]]
    assert names == [f"{kind} {index}" for index in (1, 2, 3) for kind in ("apt", "dpkg_read", "ping")]
    apt = play["tasks"][0]["ansible.builtin.apt"]
    read = play["tasks"][1]["gpuforge.cluster.package_version_floor"]
    # The read asks for the packages apt asks for, fails on nothing, and changes nothing (state present, installed).
    assert [package["name"] for package in read["packages"]] == apt["name"] == apt_cost.PACKAGES
    assert (read["missing"], read["below_floor"], apt["state"]) == ("ignore", "ignore", "present")


def test_apt_cost_document_from_task_records_validates():
    spec = importlib.util.spec_from_file_location("apt_cost", PROJECT_ROOT / "benchmarks" / "toolkit" / "apt_cost.py")
    apt_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(apt_cost)
    records = [
        {"task": f"{kind} {index}", "seconds": seconds, "status": "ok"}
        for index in (1, 2, 3)
        for kind, seconds in (("apt", (1.9, 2.0, 2.1)[index - 1]), ("dpkg_read", 0.3), ("ping", 0.25))
    ]
    host = {"cpus": 2, "cpu_model": "test", "ansible_core": "core 2.19"}
    result = apt_cost.document(records, 63682, 3, host, "artifacts/toolkit-bench/apt-cost-x")
    assert result["seconds_per_call"]["apt"] == {"median": 2.0, "min": 1.9, "max": 2.1}
    assert apt_cost.schema_problems(result) == []
    assert apt_cost.schema_problems({**result, "seconds_per_call": {"apt": {"median": 1}}})
