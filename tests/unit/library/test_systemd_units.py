"""systemd_units: one systemctl show, then enable/start/disable/stop in list order, run in-process (conftest.py's
harness) against a fake systemctl that keeps the units' state - check mode, diff mode, a failed start, malformed
output, a converged second run, and a real executable run through run_command."""

from __future__ import annotations

import json
import platform
import stat
import sys

import pytest
from ansible_collections.gpuforge.cluster.plugins.modules import systemd_units

HOST = platform.node()
SYSTEMCTL = "/usr/bin/systemctl"
SHOW = [SYSTEMCTL, "show", "--property=Id,LoadState,ActiveState,UnitFileState", "--"]
# A Slurm GPU node before the slurm role: munge and slurmd installed, neither enabled nor running.
NODE = {
    "munge.service": {"LoadState": "loaded", "ActiveState": "inactive", "UnitFileState": "disabled"},
    "slurmd.service": {"LoadState": "loaded", "ActiveState": "inactive", "UnitFileState": "disabled"},
}
MUNGE_SLURMD = [
    {"name": "munge", "enabled": True, "state": "started"},
    {"name": "slurmd.service", "enabled": True, "state": "started"},
]
# What systemctl printed on this machine, where systemd is installed but not PID 1 (exit 1).
NOT_BOOTED = (
    "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
    "Failed to connect to bus: Host is down\n"
)
# What systemctl start prints when the unit's start job fails (systemd 252; exit 1).
JOB_FAILED = (
    'Job for slurmd.service failed because the control process exited with error code.\nSee "systemctl status '
    'slurmd.service" and "journalctl -xeu slurmd.service" for details.\n'
)


class FakeSystemctl:
    """run_command stand-in: `show` prints a block per unit asked from units (a unit it does not hold is
    not-found, as systemd prints it), enable/disable/start/stop change units; fail maps (verb, unit) to (rc, err).
    Records every call with its keyword arguments."""

    def __init__(self, units: dict, fail=None, show=None):
        self.units = json.loads(json.dumps(units))
        self.fail = fail or {}
        self.show = show  # text printed by show in place of the blocks, or (rc, out, err)
        self.calls: list = []

    def block(self, name: str) -> str:
        found = self.units.get(name, {"LoadState": "not-found", "ActiveState": "inactive", "UnitFileState": ""})
        return "".join(f"{key}={value}\n" for key, value in {"Id": name, **found}.items())

    def __call__(self, argv, **kwargs):
        self.calls.append((list(argv), kwargs))
        verb, names = argv[1], argv[argv.index("--") + 1 :]
        if verb == "show":
            if isinstance(self.show, tuple):
                return self.show
            return 0, self.show if self.show is not None else "\n".join(self.block(n) for n in names), ""
        (name,) = names
        if (verb, name) in self.fail:
            rc, err = self.fail[(verb, name)]
            return rc, "", err
        unit = self.units[name]
        if verb in ("enable", "disable"):
            unit["UnitFileState"] = f"{verb}d"
        else:
            unit["ActiveState"] = "active" if verb == "start" else "inactive"
        return 0, "", ""

    @property
    def argvs(self) -> list:
        return [argv for argv, _ in self.calls]


@pytest.fixture
def run(ansible_module):
    def run(units, fake: FakeSystemctl, expect_failure=False, check_mode=False, diff=False, **args):
        return ansible_module(
            systemd_units,
            {"units": units, **args},
            fake,
            expect_failure,
            check_mode,
            diff,
            bin_path=lambda name: name if name.startswith("/") else f"/usr/bin/{name}",
        )

    return run


# ---------------------------------------------------------------------------------------------------------
# Converging, then converged


def test_enables_and_starts_in_list_order(run):
    systemctl = FakeSystemctl(NODE)
    result = run(MUNGE_SLURMD, systemctl)
    assert systemctl.argvs == [
        [*SHOW, "munge.service", "slurmd.service"],
        [SYSTEMCTL, "enable", "--", "munge.service"],
        [SYSTEMCTL, "start", "--", "munge.service"],
        [SYSTEMCTL, "enable", "--", "slurmd.service"],
        [SYSTEMCTL, "start", "--", "slurmd.service"],
    ]
    # every call an argv list in the C locale (no shell)
    assert all(kwargs["environ_update"] == {"LC_ALL": "C"} for _argv, kwargs in systemctl.calls)
    assert not any(kwargs.get("use_unsafe_shell") for _argv, kwargs in systemctl.calls)
    assert result["changed"] is True
    assert result["changed_units"] == ["munge.service", "slurmd.service"]
    assert result["actions"] == systemctl.argvs[1:]
    assert result["units"] == {
        "munge.service": {
            "load_state": "loaded",
            "active_state": "inactive",
            "unit_file_state": "disabled",
            "running": False,
        },
        "slurmd.service": {
            "load_state": "loaded",
            "active_state": "inactive",
            "unit_file_state": "disabled",
            "running": False,
        },
    }
    assert "diff" not in result


def test_second_run_changes_nothing(run):
    systemctl = FakeSystemctl(NODE)
    run(MUNGE_SLURMD, systemctl)
    again = FakeSystemctl(systemctl.units)
    result = run(MUNGE_SLURMD, again, diff=True)
    assert again.argvs == [[*SHOW, "munge.service", "slurmd.service"]]
    assert result["changed"] is False
    assert (result["changed_units"], result["actions"]) == ([], [])
    assert result["diff"] == {"before": "", "after": ""}
    assert result["units"]["slurmd.service"] == {
        "load_state": "loaded",
        "active_state": "active",
        "unit_file_state": "enabled",
        "running": True,
    }


def test_only_what_differs_runs_and_disable_stop(run):
    units = {
        "munge.service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"},
        "nvidia-dcgm.service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"},
        "gpuforge-gpu-metrics.timer": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "disabled"},
    }
    systemctl = FakeSystemctl(units)
    wanted = [
        {"name": "munge", "enabled": True, "state": "started"},
        {"name": "nvidia-dcgm", "enabled": False, "state": "stopped"},
        {"name": "gpuforge-gpu-metrics.timer", "enabled": True},
    ]
    result = run(wanted, systemctl)
    assert systemctl.argvs[1:] == [
        [SYSTEMCTL, "disable", "--", "nvidia-dcgm.service"],
        [SYSTEMCTL, "stop", "--", "nvidia-dcgm.service"],
        [SYSTEMCTL, "enable", "--", "gpuforge-gpu-metrics.timer"],
    ]
    assert result["changed_units"] == ["nvidia-dcgm.service", "gpuforge-gpu-metrics.timer"]


def test_the_systemctl_option_is_the_binary_run(run):
    systemctl = FakeSystemctl(NODE)
    run(MUNGE_SLURMD[:1], systemctl, systemctl="/opt/fake/systemctl")
    assert {argv[0] for argv in systemctl.argvs} == {"/opt/fake/systemctl"}


# ---------------------------------------------------------------------------------------------------------
# Check mode and diff mode


def test_check_mode_runs_only_show_and_reports(run):
    systemctl = FakeSystemctl(NODE)
    result = run(MUNGE_SLURMD, systemctl, check_mode=True, diff=True)
    assert systemctl.argvs == [[*SHOW, "munge.service", "slurmd.service"]]
    assert systemctl.units == NODE
    assert result["changed"] is True
    assert result["changed_units"] == ["munge.service", "slurmd.service"]
    assert result["actions"] == [
        [SYSTEMCTL, "enable", "--", "munge.service"],
        [SYSTEMCTL, "start", "--", "munge.service"],
        [SYSTEMCTL, "enable", "--", "slurmd.service"],
        [SYSTEMCTL, "start", "--", "slurmd.service"],
    ]
    assert result["diff"] == {
        "before": (
            "munge.service: enabled=disabled active=inactive\nslurmd.service: enabled=disabled active=inactive\n"
        ),
        "after": "munge.service: enabled=enabled active=active\nslurmd.service: enabled=enabled active=active\n",
    }


def test_diff_lists_only_the_units_that_change(run):
    units = {**NODE, "munge.service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}}
    result = run(MUNGE_SLURMD, FakeSystemctl(units), diff=True)
    assert result["diff"] == {
        "before": "slurmd.service: enabled=disabled active=inactive\n",
        "after": "slurmd.service: enabled=enabled active=active\n",
    }


# ---------------------------------------------------------------------------------------------------------
# Failures


def test_a_failed_start_names_the_unit_command_rc_stderr_and_journalctl(run):
    units = {**NODE, "slurmd.service": {"LoadState": "loaded", "ActiveState": "failed", "UnitFileState": "enabled"}}
    systemctl = FakeSystemctl(units, fail={("start", "slurmd.service"): (1, JOB_FAILED)})
    result = run(MUNGE_SLURMD, systemctl, expect_failure=True)
    assert result["msg"] == (
        f"slurmd.service: `{SYSTEMCTL} start -- slurmd.service` failed on {HOST} (exit 1): {JOB_FAILED.strip()}; "
        "`journalctl -u slurmd.service` (and `systemctl status slurmd.service`) says why"
    )
    assert (result["rc"], result["stderr"], result["cmd"]) == (
        1,
        JOB_FAILED,
        [SYSTEMCTL, "start", "--", "slurmd.service"],
    )
    # munge, handled before it, changed and stays listed; nothing ran after the failure
    assert result["changed"] is True
    assert result["changed_units"] == ["munge.service"]
    assert systemctl.argvs[-1] == [SYSTEMCTL, "start", "--", "slurmd.service"]
    assert result["actions"] == systemctl.argvs[1:]


def test_a_unit_enabled_before_its_start_failed_is_listed_as_changed(run):
    systemctl = FakeSystemctl(NODE, fail={("start", "munge.service"): (1, "Job for munge.service failed.\n")})
    result = run(MUNGE_SLURMD, systemctl, expect_failure=True)
    assert result["changed_units"] == ["munge.service"]
    assert systemctl.units["munge.service"]["UnitFileState"] == "enabled"
    assert [argv[1] for argv in systemctl.argvs] == ["show", "enable", "start"]


def test_fewer_blocks_than_units_fails_naming_them_and_runs_nothing(run):
    systemctl = FakeSystemctl(NODE)
    systemctl.show = systemctl.block("munge.service")
    result = run(MUNGE_SLURMD, systemctl, expect_failure=True)
    assert result["msg"] == (
        f"could not read `systemctl show` on {HOST}: it printed 1 unit block(s) for the 2 unit(s) asked "
        "(munge.service, slurmd.service): one block per unit was expected"
    )
    assert len(systemctl.calls) == 1
    assert result["changed"] is False


def test_a_missing_unit_fails_before_anything_runs(run):
    systemctl = FakeSystemctl(NODE)
    wanted = [*MUNGE_SLURMD, {"name": "nvidia-persistenced", "enabled": True, "state": "started"}]
    result = run(wanted, systemctl, expect_failure=True)
    assert result["msg"] == (
        "nvidia-persistenced.service: no such unit (systemctl show says LoadState=not-found); install the package "
        "that ships it first (a unit file this play wrote needs `systemctl daemon-reload` before this task)"
    )
    assert len(systemctl.calls) == 1
    assert result["units"]["nvidia-persistenced.service"] == {
        "load_state": "not-found",
        "active_state": "inactive",
        "unit_file_state": "",
        "running": False,
    }


def test_a_masked_unit_asked_to_start_fails(run):
    units = {**NODE, "slurmd.service": {"LoadState": "masked", "ActiveState": "inactive", "UnitFileState": "masked"}}
    result = run(MUNGE_SLURMD, FakeSystemctl(units), expect_failure=True)
    assert "slurmd.service is masked" in result["msg"] and "systemctl unmask slurmd.service" in result["msg"]


def test_show_failing_says_so(run):
    result = run(MUNGE_SLURMD, FakeSystemctl(NODE, show=(1, "", NOT_BOOTED)), expect_failure=True)
    assert result["msg"] == (
        f"`systemctl show` failed on {HOST} (exit 1): {NOT_BOOTED.strip()}; this module needs systemd running as PID 1"
    )


def test_systemctl_missing(ansible_module):
    result = ansible_module(
        systemd_units, {"units": MUNGE_SLURMD}, FakeSystemctl(NODE), True, bin_path=lambda name: None
    )
    assert result["msg"] == (
        f"systemctl not found in PATH on {HOST}: systemd_units needs systemd (systemctl); on a host without it use "
        "ansible.builtin.service"
    )


@pytest.mark.parametrize(
    ("units", "message"),
    [
        ([], "units must list at least one unit"),
        (
            [{"name": "munge"}, {"name": "munge.service", "state": "started"}],
            "units[1].name names munge.service a second time (units[0].name): list each unit once",
        ),
        ([{"name": "getty@.service"}], "units[0].name is a template, got 'getty@.service'"),
    ],
)
def test_bad_units_fail_before_systemctl_runs(run, units, message):
    systemctl = FakeSystemctl(NODE)
    result = run(units, systemctl, expect_failure=True)
    assert result["msg"].startswith(message)
    assert systemctl.calls == []


# ---------------------------------------------------------------------------------------------------------
# A real executable, through AnsibleModule.run_command


def test_a_fake_systemctl_binary_gets_the_argv_and_the_c_locale(ansible_module, tmp_path):
    """No run_command stand-in: the module runs an executable that logs its argv and LC_ALL."""
    log = tmp_path / "calls.jsonl"
    fake = tmp_path / "systemctl"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(log)!r}, 'a') as out:\n"
        "    out.write(json.dumps([sys.argv[1:], os.environ.get('LC_ALL')]) + '\\n')\n"
        "if sys.argv[1] == 'show':\n"
        "    print('Id=munge.service\\nLoadState=loaded\\nActiveState=inactive\\nUnitFileState=enabled')\n",
        encoding="utf-8",
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    result = ansible_module(
        systemd_units, {"units": [{"name": "munge", "state": "started"}], "systemctl": str(fake)}, None
    )
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert calls == [
        [["show", "--property=Id,LoadState,ActiveState,UnitFileState", "--", "munge.service"], "C"],
        [["start", "--", "munge.service"], "C"],
    ]
    assert result["changed_units"] == ["munge.service"]
    assert result["actions"] == [[str(fake), "start", "--", "munge.service"]]


def test_units_only_read_report_which_run_and_a_missing_one_is_no_error(run):
    """Entries without enabled or state are read, not changed (container_runtime_limits asks which runtimes run)."""
    units = {
        "containerd.service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"},
        "docker.service": {"LoadState": "loaded", "ActiveState": "failed", "UnitFileState": "enabled"},
    }
    systemctl = FakeSystemctl(units)
    result = run([{"name": "crio.service"}, {"name": "containerd.service"}, {"name": "docker"}], systemctl)
    assert len(systemctl.calls) == 1
    assert result["changed"] is False and result["actions"] == []
    assert {name: unit["running"] for name, unit in result["units"].items()} == {
        "crio.service": False,
        "containerd.service": True,
        "docker.service": False,
    }
    assert result["units"]["crio.service"]["load_state"] == "not-found"
