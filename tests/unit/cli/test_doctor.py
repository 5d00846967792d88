"""gpuforge doctor: each check's verdict and fix from faked command results, the exit code, the clean-up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuforge import cli, doctor
from gpuforge.doctor import GIB, CommandResult, Host

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
"""
PODMAN_INFO = {
    "host": {
        "ociRuntime": {"name": "runc", "version": "runc version 1.1.5+ds1\ncommit: x"},
        "security": {"rootless": False},
        "networkBackend": "netavark",
    },
    "store": {"graphRoot": "/var/lib/containers/storage"},
    "version": {"Version": "4.3.1"},
}
HELPERS = {"netavark", "aardvark-dns"}
TOOLS = {"podman": "/usr/bin/podman", "runc": "/usr/bin/runc", "iptables": "/usr/sbin/iptables"}
TOOLS["debootstrap"] = "/usr/sbin/debootstrap"


class FakeMachine:
    """Answers the commands doctor runs; `answers` overrides one (a key of _key()) with a CommandResult."""

    def __init__(self, answers: dict | None = None, image: str | None = "localhost/gpuforge-lab-node:abc123"):
        self.answers = answers or {}
        self.image = image
        self.calls: list[list[str]] = []

    @staticmethod
    def _key(argv: list[str]) -> str:
        if argv[0] == "podman":
            return " ".join(argv[:3]) if argv[1] == "network" else " ".join(argv[:2])
        return f"{Path(argv[0]).name} {' '.join(argv[1:])}"

    def run(self, argv, timeout=60.0, env=None) -> CommandResult:
        argv = list(argv)
        self.calls.append(argv)
        answer = self.answers.get(self._key(argv))
        if isinstance(answer, BaseException):
            raise answer
        if answer is not None:
            return answer
        return self.default(argv)

    def default(self, argv: list[str]) -> CommandResult:
        key = self._key(argv)
        if key == "ansible-playbook --version":
            return CommandResult(0, "ansible-playbook [core 2.19.5]\n  config file = x\n")
        if key == "podman info":
            return CommandResult(0, json.dumps(PODMAN_INFO))
        if key == "podman network inspect":
            return CommandResult(0, "true bridge\n")
        if key == "podman images":
            return CommandResult(0, f"{self.image}\n" if self.image else "")
        if key == "podman exec":
            return CommandResult(0, f"10.89.0.2       {argv[-1]}.dns.podman\n")
        if key == "debootstrap --version":
            return CommandResult(0, "debootstrap 1.0.128+nmu2+deb12u2\n")
        return CommandResult(0, "")

    def podman_calls(self, *words: str) -> list[list[str]]:
        return [argv for argv in self.calls if argv[0] == "podman" and argv[1 : 1 + len(words)] == list(words)]


def make_host(tmp_path: Path, machine: FakeMachine, **overrides) -> Host:
    conf = tmp_path / "containers.conf"
    conf.write_text(CONTAINERS_CONF, encoding="utf-8")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["ansible-core==2.19.5", "rich>=1"]\n', encoding="utf-8")
    missing_helpers = overrides.pop("missing_helpers", set())
    options = {
        "run": machine.run,
        "which": lambda name: TOOLS.get(name),
        "which_in": lambda name, directory: (
            f"{directory}/{name}" if directory == "/usr/lib/podman" and name in HELPERS - missing_helpers else None
        ),
        "disk": lambda path: (50 * GIB, 1),
        "mem_available": lambda: 16 * GIB,
        "hard_limits": lambda: {"nofile": 20000, "nproc": None},
        "installed_version": lambda name: {"ansible-core": "2.19.5"}.get(name),
        "euid": lambda: 0,
        "python": tmp_path / ".venv" / "bin" / "python",
        "containers_conf": conf,
        "state_dir": tmp_path / ".gpuforge",
        "pyproject": pyproject,
    }
    options.update(overrides)
    return Host(**options)


def by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {check.name: check for check in checks}


def assert_cleaned_up(machine: FakeMachine) -> None:
    created = [argv[-1] for argv in machine.podman_calls("network", "create")]
    started = [argv[argv.index("--name") + 1] for argv in machine.podman_calls("run")]
    assert all(name.startswith(doctor.SCRATCH_PREFIX) for name in created + started)
    removed_containers = {name for argv in machine.podman_calls("rm") for name in argv if name in started}
    assert removed_containers == set(started)
    assert {argv[-1] for argv in machine.podman_calls("network", "rm")} == set(created)


def test_all_ok_exits_0_and_removes_what_it_created(tmp_path):
    machine = FakeMachine()
    lines: list[str] = []
    assert doctor.main(host=make_host(tmp_path, machine), out=lines.append) == 0
    output = "\n".join(lines)
    assert "doctor: all 8 checks passed" in output
    assert "fail" not in output
    assert {check.status for check in doctor.run_checks(make_host(tmp_path, FakeMachine()))} == {"ok"}
    assert len(machine.podman_calls("run")) == 2
    assert len(machine.podman_calls("exec")) == 2  # each container resolves the other
    assert_cleaned_up(machine)
    # podman runs with the project's containers.conf (runc, the ulimits checked above)
    assert machine.podman_calls("info")


def test_missing_aardvark_dns_fails_with_its_install_command(tmp_path):
    machine = FakeMachine()
    host = make_host(tmp_path, machine, missing_helpers={"aardvark-dns"})
    lines: list[str] = []
    assert doctor.main(host=host, out=lines.append) == 1
    check = by_name(doctor.run_checks(make_host(tmp_path, FakeMachine(), missing_helpers={"aardvark-dns"})))[
        "container-dns"
    ]
    assert check.status == "fail"
    assert "aardvark-dns" in check.detail
    assert check.fix == "apt-get install aardvark-dns"
    output = "\n".join(lines)
    assert "fix: apt-get install aardvark-dns" in output
    assert "1 of 8 checks failed (container-dns)" in output
    assert_cleaned_up(machine)


def test_failing_podman_fails_and_skips_the_network_checks(tmp_path):
    machine = FakeMachine({"podman info": CommandResult(125, "", "Error: cannot open /run/libpod: permission denied")})
    checks = by_name(doctor.run_checks(make_host(tmp_path, machine)))
    assert checks["podman"].status == "fail"
    assert "permission denied" in checks["podman"].detail
    assert checks["podman"].fix == "make setup"
    assert checks["network"].status == checks["container-dns"].status == "skipped"
    assert not machine.podman_calls("network", "create")
    assert doctor.exit_code(list(checks.values())) == 1


def test_podman_failing_for_a_normal_user_says_run_as_root(tmp_path):
    machine = FakeMachine({"podman info": CommandResult(125, "", "Error: cannot open /run/libpod: permission denied")})
    check = by_name(doctor.run_checks(make_host(tmp_path, machine, euid=lambda: 1000)))["podman"]
    assert check.status == "fail" and check.fix.startswith("sudo ")


def test_podman_not_installed(tmp_path):
    tools = {name: path for name, path in TOOLS.items() if name != "podman"}
    host = make_host(tmp_path, FakeMachine(), which=tools.get)
    check = by_name(doctor.run_checks(host))["podman"]
    assert (check.status, check.fix) == ("fail", "apt-get install podman runc")


def test_crun_runtime_and_rootless_podman_fail(tmp_path):
    info = json.loads(json.dumps(PODMAN_INFO))
    info["host"]["ociRuntime"]["name"] = "crun"
    machine = FakeMachine({"podman info": CommandResult(0, json.dumps(info))})
    check = by_name(doctor.run_checks(make_host(tmp_path, machine)))["podman"]
    assert check.status == "fail" and "crun" in check.detail and check.fix == "make setup"
    info["host"]["ociRuntime"]["name"] = "runc"
    info["host"]["security"]["rootless"] = True
    machine = FakeMachine({"podman info": CommandResult(0, json.dumps(info))})
    check = by_name(doctor.run_checks(make_host(tmp_path, machine)))["podman"]
    assert check.status == "fail" and "rootless" in check.detail and "sudo" in check.fix


def test_no_lab_image_is_a_partial_check_that_passes(tmp_path):
    machine = FakeMachine(image=None)
    checks = doctor.run_checks(make_host(tmp_path, machine))
    check = by_name(checks)["container-dns"]
    assert check.status == "partial"
    assert "netavark" in check.detail and "aardvark-dns" in check.detail and "iptables" in check.detail
    assert "not tried" in check.detail
    assert doctor.exit_code(checks) == 0
    assert "(container-dns partial)" in doctor.verdict(checks)
    assert not machine.podman_calls("run")
    assert_cleaned_up(machine)


def test_names_that_do_not_resolve_fail_with_podmans_warning(tmp_path):
    message = "aardvark-dns binary not found, container dns will not be enabled"
    warning = f'time="2026-01-01T00:00:00Z" level=warning msg="{message}"'
    machine = FakeMachine({"podman run": CommandResult(0, "abc\n", warning), "podman exec": CommandResult(2, "")})
    check = by_name(doctor.run_checks(make_host(tmp_path, machine)))["container-dns"]
    assert check.status == "fail"
    assert "cannot resolve" in check.detail and "aardvark-dns binary not found" in check.detail
    assert check.detail.count("aardvark-dns binary not found") == 1 and "level=warning" not in check.detail
    assert check.fix == "apt-get install aardvark-dns"
    assert_cleaned_up(machine)


def test_netavark_missing_fails_with_its_install_command(tmp_path):
    machine = FakeMachine()
    check = by_name(doctor.run_checks(make_host(tmp_path, machine, missing_helpers={"netavark"})))["container-dns"]
    assert check.status == "fail"
    assert check.fix == "apt-get install netavark"


def test_container_start_failure_names_the_fix(tmp_path):
    error = "Error: netavark: No such file or directory (os error 2)"
    machine = FakeMachine({"podman run": CommandResult(126, "", error)})
    check = by_name(doctor.run_checks(make_host(tmp_path, machine)))["container-dns"]
    assert check.status == "fail" and "No such file" in check.detail
    assert check.fix == "apt-get install netavark"
    assert_cleaned_up(machine)


def test_network_create_failure(tmp_path):
    machine = FakeMachine(
        {"podman network create": CommandResult(125, "", "Error: netavark: No such file or directory")}
    )
    checks = by_name(doctor.run_checks(make_host(tmp_path, machine)))
    assert checks["network"].status == "fail"
    assert checks["network"].fix == "apt-get install netavark"
    assert checks["container-dns"].status == "skipped"


def test_debootstrap_missing(tmp_path):
    tools = {name: path for name, path in TOOLS.items() if name != "debootstrap"}
    check = by_name(doctor.run_checks(make_host(tmp_path, FakeMachine(), which=tools.get)))["debootstrap"]
    assert (check.status, check.fix) == ("fail", "apt-get install debootstrap")


def test_ulimits_above_the_hard_limits_fail(tmp_path):
    host = make_host(tmp_path, FakeMachine(), hard_limits=lambda: {"nofile": 512, "nproc": 4096})
    check = by_name(doctor.run_checks(host))["ulimits"]
    assert check.status == "fail"
    assert "nofile 1024 > 512 (ulimit -Hn)" in check.detail
    assert check.fix == "make setup"


def test_missing_containers_conf(tmp_path):
    host = make_host(tmp_path, FakeMachine())
    host.containers_conf.unlink()
    checks = by_name(doctor.run_checks(host))
    assert checks["podman"].status == checks["ulimits"].status == "fail"
    assert checks["ulimits"].fix == "make setup"


def test_low_disk_and_memory_fail(tmp_path):
    host = make_host(tmp_path, FakeMachine(), disk=lambda path: (3 * GIB, 1), mem_available=lambda: 1 * GIB)
    checks = by_name(doctor.run_checks(host))
    assert checks["disk"].status == "fail" and "3.0 GiB free" in checks["disk"].detail and checks["disk"].fix
    assert checks["memory"].status == "fail" and checks["memory"].fix


def test_disk_checks_podman_storage_on_another_filesystem(tmp_path):
    def disk(path):
        return (2 * GIB, 2) if str(path).startswith("/var/lib/containers") else (50 * GIB, 1)

    check = by_name(doctor.run_checks(make_host(tmp_path, FakeMachine(), disk=disk)))["disk"]
    assert check.status == "fail" and "podman storage /var/lib/containers/storage: 2.0 GiB" in check.detail


def test_python_pins_that_do_not_match(tmp_path):
    host = make_host(tmp_path, FakeMachine(), installed_version=lambda name: "2.18.0")
    check = by_name(doctor.run_checks(host))["python"]
    assert check.status == "fail" and "ansible-core 2.18.0 (pinned 2.19.5)" in check.detail
    assert check.fix == "make setup"
    broken = FakeMachine({"ansible-playbook --version": CommandResult(127, "", "ansible-playbook: command not found")})
    check = by_name(doctor.run_checks(make_host(tmp_path, broken)))["python"]
    assert check.status == "fail" and "command not found" in check.detail


def test_ctrl_c_still_removes_the_network_and_containers(tmp_path):
    machine = FakeMachine({"podman exec": KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        doctor.run_checks(make_host(tmp_path, machine))
    assert len(machine.podman_calls("run")) == 2
    assert_cleaned_up(machine)


def test_json_output(tmp_path):
    lines: list[str] = []
    host = make_host(tmp_path, FakeMachine(), missing_helpers={"aardvark-dns"})
    assert doctor.main(json_output=True, host=host, out=lines.append) == 1
    document = json.loads("\n".join(lines))
    assert document["ok"] is False
    checks = {check["name"]: check for check in document["checks"]}
    assert set(checks["container-dns"]) == {"name", "status", "detail", "fix"}
    assert checks["container-dns"]["status"] == "fail"
    assert checks["container-dns"]["fix"] == "apt-get install aardvark-dns"
    assert checks["python"]["status"] == "ok"


def test_command_failures_are_results_not_exceptions():
    assert doctor.run_command(["/nonexistent/gpuforge-doctor-test"]).rc == 127
    assert doctor.run_command(["sleep", "5"], timeout=0.1).rc == 124


FAILED = [doctor.Check("container-dns", "fail", "missing aardvark-dns", "apt-get install aardvark-dns")]


def test_cli_doctor_exit_code_and_table(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "run_checks", lambda host=None: FAILED)
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "container-dns" in out and "fix: apt-get install aardvark-dns" in out
    monkeypatch.setattr(doctor, "run_checks", lambda host=None: [doctor.Check("memory", "ok", "16 GiB")])
    assert cli.main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_lab_up_and_demo_stop_before_starting_when_doctor_fails(monkeypatch, capsys):
    from gpuforge import demo
    from gpuforge.lab import cluster

    monkeypatch.setattr(doctor, "run_checks", lambda host=None: FAILED)

    def must_not_run(*args, **kwargs):
        raise AssertionError("started despite a failed doctor check")

    monkeypatch.setattr(cluster, "up", must_not_run)
    monkeypatch.setattr(demo, "run", must_not_run)
    assert cli.main(["lab", "up"]) == 1
    assert "gpuforge lab up: not started" in capsys.readouterr().out
    assert cli.main(["demo", "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # --json: the doctor's table goes to stderr
    assert "fix: apt-get install aardvark-dns" in captured.err
    assert "gpuforge demo: not started" in captured.err


def test_skip_doctor(monkeypatch):
    from gpuforge import demo

    monkeypatch.setattr(doctor, "run_checks", lambda host=None: pytest.fail("doctor ran despite --skip-doctor"))
    monkeypatch.setattr(demo, "run", lambda *args, **kwargs: 0)
    assert cli.main(["demo", "--skip-doctor"]) == 0
