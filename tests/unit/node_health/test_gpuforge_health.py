"""gpuforge-health (module_utils/gpuforge_health.py): the command on a simulated 8-GPU lab node (the lab's tools as
programs, benchmarks/node_health/simnode.py), its state between runs, its record and its Slurm hook."""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_health as health
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_health_checks as checks
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_registry as registry

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "node_health"))
import simnode  # noqa: E402

# The launcher's body: gpuforge-health's process runner and main() (not module_utils: the file says why).
_SPEC = importlib.util.spec_from_file_location("gpuforge_health_local", simnode.RUNNER)
local = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(local)

SYSTEM = "dgx1-v100-edr"  # 8 V100, 4 EDR HCAs (lab/profiles/dgx1-v100-edr.yml)
PORT_DOWN = {"type": "ib_port_state", "hca": "mlx5_1", "port": 1, "state": "Down", "phys_state": "Disabled"}


class Node:
    def __init__(self, tmp_path: Path, faults=None, **config):
        self.tmp = tmp_path
        self.sim = simnode.SimNode(tmp_path / "node", SYSTEM, faults or [])
        self.command = simnode.install(tmp_path / "opt")
        if "root" not in config:  # the registry's file sources (kernel_taint): an untainted kernel, not this host's
            kernel = tmp_path / "root" / "proc" / "sys" / "kernel"
            kernel.mkdir(parents=True)
            (kernel / "tainted").write_text("0\n", encoding="ascii")
            config["root"] = str(tmp_path / "root")
        (tmp_path / "health.json").write_text(json.dumps(simnode.health_config(SYSTEM, **config)), encoding="utf-8")

    def run(self, profile="full", *extra):
        argv = [str(self.command), "--profile", profile, "--config", str(self.tmp / "health.json"), "--node", "n1"]
        argv += ["--state", str(self.tmp / "var" / "state.json"), "--record", str(self.tmp / "var" / "last.json")]
        return self.sim.run([*argv, *extra])

    def record(self, profile="full"):
        return json.loads((self.tmp / "var" / f"last-{profile}.json").read_text(encoding="utf-8"))


def registered(name):
    return next(c for c in registry.HEALTH_CHECKS if c.names == (name,))


def failed_names(done):
    return [line.split()[2].rstrip(":") for line in done.stdout.splitlines() if line.startswith("FAIL ")]


@pytest.fixture(scope="module")
def node_check_schema():
    schema = json.loads((ROOT / "schemas" / "node-check.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def test_a_healthy_node_passes_every_profile_with_valid_records(tmp_path, node_check_schema):
    node = Node(tmp_path)
    for profile in ("full", "prolog", "epilog"):
        done = node.run(profile)
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
        record = node.record(profile)
        assert record["verdict"] == "PASS" and record["healthy"] is True
        assert [r["check"] for r in record["records"]] == [c["name"] for c in record["checks"]]
        for item in record["records"]:
            node_check_schema.validate(item)
    # Every check the issue lists is judged by the full profile; the bus IDs against the first healthy run's.
    assert "gpu_bus_ids" not in {c["name"] for c in node.record("full")["checks"]}
    assert node.run().returncode == 0
    full = {c["name"] for c in node.record("full")["checks"]}
    assert {"gpu_count", "gpu_bus_ids", "ecc_volatile_dbe", "xid", "row_remap", "retired_pages", "throttle"} <= full
    assert {"ib_port_state", "ib_port_rate", "peermem_loaded", "mounts_present"} <= full
    assert json.loads((tmp_path / "var" / "last.json").read_text(encoding="utf-8"))["profile"] == "full"


def test_an_xid_and_a_down_port_fail_with_one_line_each_and_the_xid_stays_until_acknowledged(tmp_path):
    node = Node(tmp_path, [{"type": "xid", "gpu": 2, "code": 79}, PORT_DOWN])
    done = node.run()
    assert done.returncode == 1
    assert failed_names(done) == ["xid", "ib_port_state"]
    assert "00000000:0A:00.0 (GPU 2" in done.stdout and "mlx5_1/1" in done.stdout
    # The port comes back; the Xid was judged already, but it asked for a GPU reset: still failing.
    node.sim.write_hardware(SYSTEM, [{"type": "xid", "gpu": 2, "code": 79}])
    again = node.run()
    assert (again.returncode, failed_names(again)) == (1, ["xid"])
    acknowledged = node.run("full", "--acknowledge")
    assert (acknowledged.returncode, acknowledged.stdout) == (0, ""), acknowledged.stdout
    # The same kernel log line is not judged again after the acknowledgement.
    assert node.run().returncode == 0


def test_the_epilog_catches_an_xid_logged_during_the_job(tmp_path):
    node = Node(tmp_path)
    assert node.run("prolog").returncode == 0
    assert node.run("epilog").returncode == 0
    node.sim.kernel_log("NVRM: Xid (PCI:0000:8a:00): 48, pid=4242, name=train.py, An uncorrectable double bit error")
    done = node.run("epilog")
    assert (done.returncode, failed_names(done)) == (1, ["xid"])
    assert "48" in done.stdout and "00000000:8A:00.0" in done.stdout
    # A non-fatal one (Xid 13, restart the application) only warns: the node stays in service.
    node.run("full", "--acknowledge")
    node.sim.kernel_log("NVRM: Xid (PCI:0000:8a:00): 13, pid=4243, name=train.py, Graphics Exception")
    done = node.run("epilog")
    assert (done.returncode, done.stdout) == (0, "")
    assert {c["name"]: c["status"] for c in node.record("epilog")["checks"]}["xid"] == "WARN"


def test_a_lost_gpu_is_named_by_bus_id_against_the_first_healthy_run(tmp_path):
    node = Node(tmp_path)
    assert node.run().returncode == 0
    node.sim.write_hardware(SYSTEM, [{"type": "gpu_missing", "gpu": 3}])
    done = node.run("prolog")
    assert done.returncode == 1
    checks = {c["name"]: c for c in node.record("prolog")["checks"]}
    assert checks["gpu_count"]["status"] == "FAIL" and checks["gpu_count"]["observed"] == 7
    assert checks["gpu_bus_ids"]["observed"] == ["00000000:0B:00.0"]
    assert checks["gpu_bus_ids"]["caused_by"] == "gpu_count"
    assert node.record("prolog")["failed_checks"] == ["gpu_count"]


def test_missing_mount_and_unreadable_config(tmp_path):
    node = Node(tmp_path, mounts=["/", "/nonexistent-gpuforge-mount"])
    done = node.run()
    assert (done.returncode, failed_names(done)) == (1, ["mounts_present"])
    assert "/nonexistent-gpuforge-mount" in done.stdout
    (tmp_path / "health.json").write_text("{", encoding="utf-8")
    broken = node.run()
    assert broken.returncode == 2 and "is not JSON" in broken.stderr and "node_health role" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_mount_points_decode_escapes():
    text = "36 35 98:0 /mnt1 /data\\040set rw - ext3 /dev/root rw\n37 35 0:1 / / rw - tmpfs x rw\n"
    assert checks.mount_points(text) == ["/", "/data set"]
    judge = registered("mounts_present").judge
    assert judge({"mountinfo": text}, {"mounts": ["/data set/", "/"]})["status"] == "PASS"
    assert judge({"mountinfo": text}, {"mounts": ["/scratch"]})["observed"] == ["/scratch"]
    unread = judge({"mountinfo": registry.Unreadable("/proc/self/mountinfo: Permission denied")}, {"mounts": ["/"]})
    assert unread["status"] == "FAIL" and "Permission denied" in unread["fault"]


def test_mount_points_of_a_real_mountinfo_keep_utf8_names_and_decode_the_space():
    """A real /proc/self/mountinfo (tests/fixtures/mountinfo/SOURCES.md): "/scratch local" is written
    /scratch\\040local, /scratch/données as UTF-8; both mount points come back as the operator names them."""
    text = (ROOT / "tests/fixtures/mountinfo/podman-lab-node_kernel6.18_space-and-utf8.txt").read_text(encoding="utf-8")
    points = checks.mount_points(text)
    assert {"/", "/data/shared", "/scratch local", "/scratch/données", "/proc", "/sys/fs/cgroup/memory"} <= set(points)
    assert len(points) == len(text.splitlines())
    judge = registered("mounts_present").judge
    assert judge({"mountinfo": text}, {"mounts": ["/scratch/données", "/scratch local", "/data/shared"]})["status"] == (
        "PASS"
    )
    assert judge({"mountinfo": text}, {"mounts": ["/scratch/données", "/gpfs/fs1"]})["observed"] == ["/gpfs/fs1"]


def test_kernel_events_start_over_on_a_new_boot():
    xid = {"line": "[ 5.0] NVRM: Xid (PCI:0000:0a:00): 79, ...", "code": 79}
    judged, _sx, state = health.new_kernel_events([xid], [], {}, "boot-1")
    assert judged == [xid]
    judged, _sx, _state2 = health.new_kernel_events([xid], [], {"seen": state["seen"], "boot_id": "boot-1"}, "boot-1")
    assert judged == []
    judged, _sx, _state = health.new_kernel_events([xid], [], {"seen": state["seen"], "boot_id": "boot-1"}, "boot-2")
    assert judged == [xid]


def _result(*failures):
    failing = {n for n, _f, _c in failures}
    checks = [
        {"name": n, "status": "PASS", "fault": "", "caused_by": None}
        for n in ("gpu_count", "xid", "ib_port_state")
        if n not in failing
    ]
    checks += [{"name": n, "status": "FAIL", "fault": f, "caused_by": c} for n, f, c in failures]
    return {"checks": checks, "healthy": not failures}


def test_drain_reason_names_the_root_cause_first_and_fits():
    reason = health.drain_reason(_result(("gpu_bus_ids", "x", "gpu_count"), ("xid", "Xid  79 on\nGPU 2", None)))
    assert reason == "gpuforge: xid: Xid 79 on GPU 2"
    long = health.drain_reason(_result(("ib_port_state", "p" * 500, None), ("xid", "y", None)))
    assert long.startswith("gpuforge: ib_port_state: ppp") and long.endswith("... (+xid)") and len(long) == 200


class FakeScontrol:
    """scontrol as a runner: show node answers with the given state and reason; updates are recorded."""

    def __init__(self, state, reason=None):
        self.line = f"NodeName=n1 Arch=x86_64 CPUTot=8 State={state} Partitions=v100"
        if reason:
            self.line += f" Reason={reason} [root@2026-12-02T08:00:00]"
        self.updates = []

    def get_bin_path(self, name, opt_dirs=None):
        return "/usr/bin/" + name

    def run_command(self, argv, environ_update=None, **_kw):
        if argv[1] == "show":
            return 0, self.line + "\n", ""
        self.updates.append(argv[1:])
        return 0, "", ""


@pytest.mark.parametrize(
    ("state", "reason", "healthy", "update"),
    [
        ("IDLE", None, False, ["update", "nodename=n1", "state=drain", "reason=gpuforge: xid: Xid 79"]),
        ("IDLE+DRAIN", "gpuforge: xid: Xid 79", True, ["update", "nodename=n1", "state=resume"]),
        ("IDLE+DRAIN", "disk replacement (ticket 42)", True, None),  # an operator's drain stays
        ("IDLE+DRAIN", "disk replacement (ticket 42)", False, None),  # and keeps its reason
        ("MIXED+DRAIN", "gpuforge: ib_port_state: down", False, None),  # the first reason stays
        ("IDLE", None, True, None),
    ],
)
def test_slurm_drains_on_fail_and_resumes_only_its_own_drains(state, reason, healthy, update):
    scontrol = FakeScontrol(state, reason)
    result = _result() if healthy else _result(("xid", "Xid 79", None))
    health.slurm_update(scontrol, "n1", result)
    assert scontrol.updates == ([update] if update else [])


def test_a_drain_for_a_check_the_run_did_not_judge_stays():
    """An Epilog drained the node for a process left on a GPU: the periodic check does not judge GPU processes (jobs
    run beside it), so its pass does not resume the node; a drain naming one more unjudged check stays too."""
    left = "gpuforge: gpu_processes_exited: process(es) left on the GPUs after the job: 00000000:0A:00.0: 4711 python3"
    scontrol = FakeScontrol("IDLE+DRAIN", left)
    assert "does not judge gpu_processes_exited" in health.slurm_update(scontrol, "n1", _result())
    assert scontrol.updates == []
    assert health.reason_checks("gpuforge: xid: Xid 79 on GPU 2 (+gpu_memory_released, ib_port_state)") == [
        "xid",
        "gpu_memory_released",
        "ib_port_state",
    ]
    scontrol = FakeScontrol("IDLE+DRAIN", "gpuforge: xid: Xid 79 (+gpu_memory_released)")
    health.slurm_update(scontrol, "n1", _result())
    assert scontrol.updates == []
    assert health.reason_checks("operator: fan") == []


def test_only_a_full_run_resumes():
    """A Prolog or Epilog pass judged a subset of the checks: not what the node may be drained for."""
    scontrol = FakeScontrol("IDLE+DRAIN", "gpuforge: ib_port_state: down")
    health.slurm_update(scontrol, "n1", _result(), resume=False)
    assert scontrol.updates == []


def test_slurm_names_a_node_it_cannot_find():
    scontrol = FakeScontrol("IDLE")
    with pytest.raises(health.HealthError, match="no node named n2: set --node"):
        health.slurm_update(scontrol, "n2", _result())


def test_what_the_command_imports_needs_no_ansible():
    """gpuforge-health runs on the node without Ansible: its launcher's body (the role's gpuforge_health_local.py)
    and the module_utils it imports, transitively, import no ansible.* module (the node_health role installs every
    module_utils file)."""
    seen, todo = set(), ["gpuforge_health_local", "gpuforge_health", "gpuforge_health_k8s"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = simnode.RUNNER if name == "gpuforge_health_local" else ROOT / "module_utils" / f"{name}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for item in ast.walk(tree):
            if isinstance(item, ast.ImportFrom) and (item.module or "").startswith("ansible_collections.gpuforge"):
                if item.module.endswith(".module_utils"):  # from ...module_utils import gpuforge_x as x
                    todo += [alias.name for alias in item.names]
                else:
                    todo.append(item.module.rsplit(".", 1)[1])
            if isinstance(item, (ast.Import, ast.ImportFrom)):
                modules = [item.module] if isinstance(item, ast.ImportFrom) else [a.name for a in item.names]
                for module in modules:
                    assert not (module or "").startswith("ansible."), f"{name} imports {module}: not on a node"
    assert {"gpuforge_node_health", "gpuforge_nvidia_smi_reader", "gpuforge_records"} <= seen


def test_the_launcher_the_role_writes_runs_the_command(tmp_path):
    """roles/node_health's launcher (templates/gpuforge-health.j2 with vars/main.yml's node_health_runner_source),
    rendered as the role renders it and run over the installed module_utils on the simulated node."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role = ROOT / "roles" / "node_health"
    node = Node(tmp_path)
    lib = node.command.parent.parent / "lib"  # simnode.install's tree: <prefix>/lib, as the role's release lib
    variables = {
        "role_path": str(role),
        "ansible_managed": "Ansible managed",
        "ansible_facts": {"python": {"executable": sys.executable}},
        "node_health_release": "0123456789abcdef",
        "node_health_lib": str(lib),
        "node_health_config": str(tmp_path / "health.json"),
        "node_health_state_dir": str(tmp_path / "var"),
        "node_health_textfile_dir": "",
    }
    expression = yaml.safe_load((role / "vars" / "main.yml").read_text(encoding="utf-8"))["node_health_runner_source"]
    variables["node_health_runner_source"] = Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template(expression)
    )
    template = (role / "templates" / "gpuforge-health.j2").read_text(encoding="utf-8")
    launcher = Templar(loader=DataLoader(), variables=variables).template(trust_as_template(template))
    assert launcher.startswith(f"#!{sys.executable}\n")
    assert simnode.RUNNER.read_text(encoding="utf-8") in launcher
    command = tmp_path / "gpuforge-health"
    command.write_text(launcher, encoding="utf-8")
    command.chmod(0o755)
    assert node.sim.run([str(command), "--help"]).returncode == 0
    # The launcher passes the configuration and state paths; the node's name is this test's.
    done = node.sim.run([str(command), "--profile", "prolog", "--node", "n1"])
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert node.record("prolog")["verdict"] == "PASS"


def test_the_verdicts_as_prometheus_metrics(tmp_path):
    """--textfile-dir: node-exporter's textfile format that promtool accepts, one series per check."""
    import shutil
    import subprocess

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: run `make setup` (Debian's prometheus package)")
    node = Node(tmp_path, [PORT_DOWN])
    (tmp_path / "textfile").mkdir()
    done = node.run("prolog", "--textfile-dir", str(tmp_path / "textfile"))
    assert done.returncode == 1
    text = (tmp_path / "textfile" / "gpuforge_health_prolog.prom").read_text(encoding="utf-8")
    assert 'gpuforge_health_check_failed{profile="prolog",check="ib_port_state"} 1' in text
    assert 'gpuforge_health_check_failed{profile="prolog",check="gpu_count"} 0' in text
    assert 'gpuforge_health_node_healthy{profile="prolog"} 0' in text
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_profiles_name_registered_checks_and_the_full_one_runs_the_registrys_standalone_checks(tmp_path):
    """Every check a profile reports is the check registry's: gpu_node_check's (CHECK_NAMES) or gpuforge-health's
    own (HEALTH_CHECK_NAMES); the full profile also runs the registry's standalone checks (kernel_taint) as
    gpu_node_check does, from their file sources under the configured root."""
    reported = {name for names in health.PROFILES.values() for name in names}
    assert reported <= set(registry.CHECK_NAMES) | set(registry.HEALTH_CHECK_NAMES)
    assert set(registry.HEALTH_CHECK_NAMES) <= reported  # each of gpuforge-health's registered checks is reported
    root = tmp_path / "tainted-root"
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "tainted").write_text("16\n", encoding="ascii")  # bit 4: machine check
    node = Node(tmp_path, root=str(root))
    done = node.run()
    assert (done.returncode, failed_names(done)) == (1, ["kernel_taint"])
    (root / "proc" / "sys" / "kernel" / "tainted").write_text("4096\n", encoding="ascii")  # bit 12 O: the driver
    assert node.run().returncode == 0
    assert {c["name"]: c["status"] for c in node.record("full")["checks"]}["kernel_taint"] == "PASS"


# Real nvidia-smi -q -x captures (tests/fixtures/nvidia-smi/SOURCES.md): an idle H200 on driver 580.159.04, DTD v13,
# whose <processes> element is empty.
H200_XML = sorted((ROOT / "tests" / "fixtures" / "nvidia-smi").glob("gpuforge-device_1xh200_*q_x*.xml"))
LEFT = {"type": "gpu_process_left", "gpu": 5, "pid": 31337, "name": "/usr/bin/python3", "memory_mib": 9212}


@pytest.mark.parametrize("capture", H200_XML, ids=lambda p: p.name)
def test_gpu_processes_of_a_real_idle_node_are_none(capture):
    text = capture.read_text(encoding="utf-8")
    found = checks.parse_gpu_processes(text)
    bus = text.split('<gpu id="', 1)[1].split('"', 1)[0]
    assert found == {bus: []}
    judged = registered("gpu_processes_exited").judge({"gpu_processes": text}, {})
    assert (judged["status"], judged["observed"]) == ("PASS", {})


def test_gpu_processes_parse_each_process_info_and_refuse_what_is_not_nvidia_smi():
    xml = (
        '<nvidia_smi_log><gpu id="00000000:0A:00.0"><processes><process_info><gpu_instance_id>N/A</gpu_instance_id>'
        "<compute_instance_id>N/A</compute_instance_id><pid>1002127</pid><type>C</type>"
        "<process_name>/usr/bin/python</process_name><used_memory>9212 MiB</used_memory></process_info>"
        "<process_info><pid>77</pid><type>G</type><process_name>Xorg</process_name><used_memory>N/A</used_memory>"
        '</process_info></processes></gpu><gpu id="00000000:0B:00.0"><processes></processes></gpu></nvidia_smi_log>'
    )
    assert checks.parse_gpu_processes(xml) == {
        "00000000:0A:00.0": [
            {"pid": 1002127, "type": "C", "name": "/usr/bin/python", "used_memory_mib": 9212},
            {"pid": 77, "type": "G", "name": "Xorg", "used_memory_mib": None},
        ],
        "00000000:0B:00.0": [],
    }
    judge = registered("gpu_processes_exited").judge
    judged = judge({"gpu_processes": xml}, {"gpu_process_names_allowed": ["Xorg"]})
    assert judged["status"] == "FAIL" and judged["observed"] == {"00000000:0A:00.0": ["1002127 /usr/bin/python"]}
    assert judge({"gpu_processes": xml}, {"gpu_process_names_allowed": ["python", "Xorg"]})["status"] == "PASS"
    for broken in ("", "<nvidia_smi_log><gpu>", registry.Unreadable("nvidia-smi: not found")):
        failed = judge({"gpu_processes": broken}, {})
        assert failed["status"] == "FAIL" and failed["fault"].startswith("GPU processes unknown: "), broken


def test_the_lab_prints_a_left_process_as_the_real_driver_does(tmp_path, real_output):
    """The simulated nvidia-smi -q lays a process out as the real R535 8x H100 capture does (Process ID with its Type,
    Name and Used GPU Memory one level deeper; a real output of the REAL_OUTPUTS test inputs), -q -x as
    <process_info>, and counts its memory in FB Memory Usage/Used."""
    node = simnode.SimNode(tmp_path / "node", SYSTEM, [LEFT])

    def section(text):
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip().startswith("Processes") and ":" not in line)
        block = []
        for line in lines[start + 1 : start + 7]:
            label = line.split(":")[0]
            block.append((len(label) - len(label.lstrip()), label.strip()))
        return block

    real = real_output("nvidia-smi-q-text__leptonai-gpud__8xh100_drv535.183.01.txt")
    smi_text = node.run(["nvidia-smi", "-q"]).stdout
    assert section(smi_text) == section(real)
    xml = node.run(["nvidia-smi", "-q", "-x"]).stdout
    found = checks.parse_gpu_processes(xml)
    left = [(bus, p) for bus, processes in found.items() for p in processes]
    assert left == [
        ("00000000:86:00.0", {"pid": 31337, "type": "C", "name": "/usr/bin/python3", "used_memory_mib": 9212})
    ]
    assert "<used>9212 MiB</used>" in xml


def test_the_epilog_drains_for_a_process_left_on_a_gpu(tmp_path):
    # One re-read a second after the first (the grace is tested without waiting in the tests below): the process
    # is still there, so the Epilog fails.
    node = Node(tmp_path, epilog_process_grace_seconds=1)
    assert node.run("epilog").returncode == 0
    node.sim.write_hardware(SYSTEM, [LEFT])
    done = node.run("epilog")
    assert (done.returncode, failed_names(done)) == (1, ["gpu_processes_exited", "gpu_memory_released"])
    record = node.record("epilog")
    assert record["failed_checks"] == ["gpu_processes_exited"]
    by_name = {c["name"]: c for c in record["checks"]}
    assert by_name["gpu_processes_exited"]["observed"] == {"00000000:86:00.0": ["31337 /usr/bin/python3"]}
    assert by_name["gpu_memory_released"]["caused_by"] == "gpu_processes_exited"
    reason = health.drain_reason(record)
    assert reason.startswith("gpuforge: gpu_processes_exited: process(es) left on the GPUs after the job: ")
    assert reason.endswith("00000000:86:00.0: 31337 /usr/bin/python3")  # the memory it holds is not a second cause
    # The process exits: the next Epilog passes (the periodic check, which does not judge a job's end, passes too).
    node.sim.write_hardware(SYSTEM, [])
    assert node.run("epilog").returncode == 0


class LeavingRunner(local.LocalRunner):
    """The command's one runner, on the simulated node, whose GPU process exits after the `leaves_after`-th
    nvidia-smi -q -x read (None: it never does), as a killed job's process leaves the GPU a moment after slurmstepd
    reaped it."""

    def __init__(self, sim, leaves_after):
        super().__init__()
        self.sim, self.leaves_after, self.reads = sim, leaves_after, 0

    def run_command(self, args, **kwargs):
        done = super().run_command(args, **kwargs)
        if [str(a) for a in args[1:]] == ["-q", "-x"]:
            self.reads += 1
            if self.reads == self.leaves_after:
                self.sim.write_hardware(SYSTEM, [])
        return done


def _run_in_process(tmp_path, monkeypatch, profile, leaves_after, **config):
    """gpuforge-health's run() in this process on the simulated node with a LeavingRunner; sleeps are recorded, not
    slept. Returns (exit status, stdout, stderr, the runner, the sleeps, the record)."""
    node = Node(tmp_path, [LEFT], **config)
    for key, value in node.sim.env().items():
        monkeypatch.setenv(key, value)
    runner, sleeps = LeavingRunner(node.sim, leaves_after), []
    out, err = io.StringIO(), io.StringIO()
    argv = ["--profile", profile, "--config", str(tmp_path / "health.json"), "--node", "n1"]
    argv += ["--state", str(tmp_path / "var" / "state.json"), "--record", str(tmp_path / "var" / "last.json")]
    rc = health.run(argv, runner=runner, out=out, err=err, sleep=sleeps.append)
    return rc, out.getvalue(), err.getvalue(), runner, sleeps, node.record(profile)


def test_the_epilog_reads_again_and_passes_when_the_process_leaves_within_the_grace(tmp_path, monkeypatch):
    rc, out, err, runner, sleeps, record = _run_in_process(
        tmp_path, monkeypatch, "epilog", leaves_after=1, epilog_process_grace_seconds=5
    )
    assert (rc, out) == (0, ""), err
    assert runner.reads == 2 and sleeps == [1.0]  # the first read saw it, one re-read a second later did not
    assert "read the GPU processes again 1 time(s)" in err
    by_name = {c["name"]: c["status"] for c in record["checks"]}
    assert by_name["gpu_processes_exited"] == by_name["gpu_memory_released"] == "PASS"


def test_the_epilog_fails_when_the_process_outlasts_the_grace_and_waits_no_longer(tmp_path, monkeypatch):
    rc, out, _err, runner, sleeps, record = _run_in_process(
        tmp_path, monkeypatch, "epilog", leaves_after=None, epilog_process_grace_seconds=2.5
    )
    assert rc == 1 and out.startswith("FAIL n1 gpu_processes_exited: ")
    assert sleeps == [1.0, 1.0, 0.5] and runner.reads == 4  # bounded: the grace, then the verdict
    assert record["failed_checks"] == ["gpu_processes_exited"]


def test_no_reread_without_a_grace_nor_outside_the_epilog(tmp_path, monkeypatch):
    rc, _, _, runner, sleeps, _ = _run_in_process(
        tmp_path / "a", monkeypatch, "epilog", leaves_after=None, epilog_process_grace_seconds=0
    )
    assert (rc, runner.reads, sleeps) == (1, 1, [])
    # The Prolog and the periodic check do not judge a job's leftovers: they never wait for them.
    for profile in ("prolog", "full"):
        rc, _, err, runner, sleeps, _ = _run_in_process(tmp_path / profile, monkeypatch, profile, leaves_after=None)
        assert (rc, sleeps) == (0, []), err


def test_await_gpu_processes_is_bounded_and_ignores_an_unreadable_process_list():
    left = {"checks": [{"name": "gpu_processes_exited", "status": "FAIL", "observed": {"bus": ["1 python"]}}]}
    unknown = {"checks": [{"name": "gpu_processes_exited", "status": "FAIL", "observed": {}}]}
    sleeps = []
    result, rereads = health.await_gpu_processes(left, lambda: left, 3, sleep=sleeps.append)
    assert (result, rereads, sleeps) == (left, 3, [1.0, 1.0, 1.0])
    assert health.await_gpu_processes(unknown, lambda: left, 3, sleep=sleeps.append) == (unknown, 0)
    with pytest.raises(health.HealthError, match="epilog_process_grace_seconds must be 0 to 60"):
        health.HealthConfig({"expected": {}, "epilog_process_grace_seconds": 600}, "health.json")
    with pytest.raises(health.HealthError, match="epilog_process_grace_seconds has the wrong type"):
        health.HealthConfig({"expected": {}, "epilog_process_grace_seconds": True}, "health.json")
