"""apt_pinned: one dpkg read, apt only for what is unmet, a second read that judges what apt left, clear failures.

The module calls are replaced by canned results (the read's shape is package_version_floor's RETURN, tested with
the module in tests/unit/library/test_package_version_floor.py); the end-to-end case runs the plugin through
ansible-playbook on this host, where dpkg is real."""

from __future__ import annotations

import json
import subprocess
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.gpuforge.cluster.plugins.action.apt_pinned import APT_MODULE, READ_MODULE, ActionModule
from local_playbook import run_local_playbook

SPECS = ["nvidia-container-toolkit=1.17.8-1", "prometheus>=2.42.0+ds-5+deb12u1", "nfs-common"]
MET = {
    "installed": {
        "nvidia-container-toolkit": "1.17.8-1",
        "prometheus": "2.42.0+ds-5+deb12u2",
        "nfs-common": "1:2.6.2-4+deb12u1",
    },
    "below_floor": [],
    "missing": [],
    "manager": "dpkg",
}


def _read(installed, below=()):
    return {"installed": installed, "below_floor": list(below), "missing": [], "manager": "dpkg"}


class Calls:
    """_execute_module's stand-in: the answers in order, each call recorded as (module, args)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, module_name=None, module_args=None, task_vars=None, **_):
        self.calls.append((module_name, module_args))
        return self.answers.pop(0)


def run(args, *answers, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    calls = Calls(*answers)
    with (
        mock.patch.object(ActionModule, "_execute_module", side_effect=calls),
        mock.patch.object(ActionModule, "_remove_tmp_path"),
    ):
        result = action.run(task_vars={"inventory_hostname": "gpu01"})
    return result, calls.calls


def test_a_converged_host_costs_one_read_and_no_apt():
    result, calls = run({"name": SPECS, "cache_valid_time": 3600}, MET)
    assert [module for module, _ in calls] == [READ_MODULE]
    assert calls[0][1] == {
        "packages": [
            {"name": "nvidia-container-toolkit"},
            {"name": "prometheus", "version": "2.42.0+ds-5+deb12u1"},
            {"name": "nfs-common"},
        ],
        "manager": "dpkg",
        "missing": "ignore",
        "below_floor": "ignore",
    }
    assert result["changed"] is False and result["apt_ran"] is False and result["unmet"] == []
    assert not result.get("failed")


def test_apt_gets_only_the_unmet_specifiers_and_its_options():
    before = _read({"nvidia-container-toolkit": "1.17.7-1", "prometheus": "2.42.0+ds-5+deb12u2"})
    apt = {"changed": True}
    result, calls = run(
        {"name": SPECS, "cache_valid_time": 3600, "install_recommends": False, "policy_rc_d": 101},
        before,
        apt,
        MET,
    )
    assert [module for module, _ in calls] == [READ_MODULE, APT_MODULE, READ_MODULE]
    assert calls[1][1] == {
        "name": ["nvidia-container-toolkit=1.17.8-1", "nfs-common"],
        "state": "present",
        "cache_valid_time": 3600,
        "install_recommends": False,
        "policy_rc_d": 101,
    }
    assert result["changed"] is True and result["apt_ran"] is True
    assert result["unmet"] == ["nvidia-container-toolkit=1.17.8-1", "nfs-common"]
    assert result["installed"] == MET["installed"]
    assert not result.get("failed")


def test_a_package_apt_left_below_its_floor_fails_naming_it_and_the_fix():
    below = [{"name": "prometheus", "installed": "2.40.0+ds-1", "floor": "2.42.0+ds-5+deb12u1"}]
    before = _read({}, ())
    after = _read({**MET["installed"], "prometheus": "2.40.0+ds-1"}, below)
    result, _ = run({"name": SPECS, "fix": "refresh the mirror."}, before, {"changed": True}, after)
    assert result["failed"] is True
    assert result["msg"] == (
        "gpu01: after apt: prometheus 2.40.0+ds-1 is older than its floor 2.42.0+ds-5+deb12u1: refresh the mirror."
    )
    assert result["changed"] is True


def test_an_off_pin_and_a_missing_package_after_apt_are_named():
    after = _read({"nvidia-container-toolkit": "1.17.9-1", "prometheus": "2.42.0+ds-5+deb12u2"})
    result, _ = run({"name": SPECS}, _read({}), {"changed": True}, after)
    assert result["failed"] is True
    assert "nvidia-container-toolkit 1.17.9-1 does not match its pin 1.17.8-1" in result["msg"]
    assert "nfs-common is not installed" in result["msg"]


def test_check_mode_plans_with_apt_and_does_not_read_again():
    result, calls = run({"name": SPECS}, _read({}), {"changed": True, "diff": {"prepared": "3 new"}}, check_mode=True)
    assert [module for module, _ in calls] == [READ_MODULE, APT_MODULE]
    assert result["changed"] is True and result["diff"] == {"prepared": "3 new"}
    assert not result.get("failed")


def test_an_apt_failure_names_the_host_and_the_packages():
    result, calls = run({"name": SPECS}, _read({}), {"failed": True, "msg": "No package matching 'nfs-common'"})
    assert len(calls) == 2
    assert result["failed"] is True
    assert result["msg"].startswith("gpu01: apt could not install nvidia-container-toolkit=1.17.8-1, prometheus>=")
    assert result["msg"].endswith(": No package matching 'nfs-common'")


def test_retry_with_fresh_index_refreshes_once_and_ignores_cache_valid_time():
    args = {"name": ["slurmd>=22.05.8-4+deb12u3"], "cache_valid_time": 3600, "retry_with_fresh_index": True}
    after = _read({"slurmd": "22.05.8-4+deb12u3"})
    result, calls = run(args, _read({}), {"failed": True, "msg": "no candidate"}, {"changed": True}, after)
    assert [module for module, _ in calls] == [READ_MODULE, APT_MODULE, APT_MODULE, READ_MODULE]
    assert calls[1][1]["cache_valid_time"] == 3600 and "update_cache" not in calls[1][1]
    assert "cache_valid_time" not in calls[2][1] and calls[2][1]["update_cache"] is True
    assert result["changed"] is True and not result.get("failed")


def test_without_retry_one_apt_failure_is_final():
    result, calls = run({"name": ["slurmd"], "cache_valid_time": 3600}, _read({}), {"failed": True, "msg": "x"})
    assert [module for module, _ in calls] == [READ_MODULE, APT_MODULE]
    assert result["failed"] is True


def test_a_failed_read_fails_the_task_without_apt():
    result, calls = run({"name": SPECS}, {"failed": True, "msg": "dpkg-query not found"})
    assert len(calls) == 1
    assert result == {
        **result,
        "failed": True,
        "msg": "gpu01: could not read the installed packages: dpkg-query not found",
    }


def test_a_module_that_could_not_start_is_named_with_its_stderr():
    read = {"failed": True, "msg": "MODULE FAILURE", "module_stderr": "Traceback ...\n/usr/bin/python3: not found\n"}
    result, _ = run({"name": SPECS}, read)
    assert result["msg"] == "gpu01: could not read the installed packages: MODULE FAILURE (/usr/bin/python3: not found)"


def test_apt_warnings_reach_the_operator():
    after = _read({"nfs-common": "1:2.6.2-4+deb12u1"})
    result, _ = run({"name": ["nfs-common"]}, _read({}), {"changed": True, "warnings": ["held package"]}, after)
    assert result["warnings"] == ["held package"] and not result.get("failed")


def test_an_unknown_specifier_always_goes_to_apt():
    result, calls = run({"name": ["libc6:i386"]}, _read({"libc6": "2.36-9"}), {"changed": False}, _read({}))
    assert calls[1][1]["name"] == ["libc6:i386"]
    assert "libc6:i386: specifier not understood" in result["msg"]


def test_a_wrong_option_is_refused_before_any_module_runs():
    with pytest.raises(AnsibleActionFail, match="state"):
        run({"name": SPECS, "state": "latest"})


def test_end_to_end_on_this_hosts_dpkg_a_met_pin_runs_no_apt(tmp_path):
    """ansible-playbook, connection local: the read is real dpkg; every specifier is met, so apt never runs."""
    dpkg_version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "dpkg"], capture_output=True, text=True, check=True
    ).stdout
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        json.dumps(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "met",
                            "gpuforge.cluster.apt_pinned": {"name": [f"dpkg={dpkg_version}", f"dpkg>={dpkg_version}"]},
                            "register": "met",
                        },
                        {
                            "name": "show",
                            "ansible.builtin.copy": {"content": "{{ met | to_json }}", "dest": str(tmp_path / "r")},
                        },
                    ],
                }
            ]
        ),
        encoding="utf-8",
    )
    run_local_playbook(playbook, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    result = json.loads((tmp_path / "r").read_text(encoding="utf-8"))
    assert result["apt_ran"] is False and result["changed"] is False
    assert result["installed"] == {"dpkg": dpkg_version}
