"""container_runtime_limits: drop-in text, supported releases per OS family, active-runtime selection."""

from __future__ import annotations

import pytest
from gpu_stack_render import RoleRender


@pytest.mark.parametrize("os_name", ["debian12", "ubuntu2204", "ubuntu2404", "rhel9"])
def test_dropin_text(os_name):
    render = RoleRender("container_runtime_limits", os_name)
    assert render.var("ansible_facts.distribution_major_version") in render.var(
        "container_runtime_limits_supported_versions"
    )
    lines = render.template("memlock.conf.j2").splitlines()
    assert lines[1:] == [
        "# RDMA needs unlimited locked memory in non-privileged containers"
        ' (IBM Redpaper REDP-5610: "Couldn\'t allocate MR").',
        "[Service]",
        "LimitMEMLOCK=infinity",
    ]


def _states(running: dict) -> dict:
    """The registered systemd_units result: its `units` by complete name (tests/unit/library/test_systemd_units.py
    covers how it reads systemctl show)."""
    return {"units": {name: {"running": value} for name, value in running.items()}}


def test_the_units_are_read_without_a_wanted_state():
    render = RoleRender("container_runtime_limits", "debian12")
    assert render.var("container_runtime_limits_unit_reads") == [
        {"name": "crio.service"},
        {"name": "containerd.service"},
        {"name": "docker.service"},
    ]


def test_only_running_runtimes_are_restarted_and_checked():
    render = RoleRender("container_runtime_limits", "debian12")
    render.templar.available_variables = {
        **render.templar.available_variables,
        "container_runtime_limits_unit_states": _states(
            {"crio.service": False, "containerd.service": True, "docker.service": False}
        ),
    }
    assert render.var("container_runtime_limits_active") == ["containerd"]
    assert render.var("container_runtime_limits_memlock_systemd") == "infinity"


def test_no_runtime_runs_when_nothing_was_read():
    render = RoleRender("container_runtime_limits", "debian12")
    render.templar.available_variables = {
        **render.templar.available_variables,
        "container_runtime_limits_unit_states": {"skipped": True},
    }
    assert render.var("container_runtime_limits_active") == []


def test_size_limits_compare_in_bytes():
    render = RoleRender("container_runtime_limits", "rhel9", container_runtime_limits_memlock="64G")
    assert render.var("container_runtime_limits_memlock_systemd") == 68719476736


def test_dropin_paths_per_runtime():
    render = RoleRender("container_runtime_limits", "rhel9", container_runtime_limits_runtimes=["crio", "docker"])
    assert render.var("container_runtime_limits_dropin_dirs") == [
        "/etc/systemd/system/crio.service.d",
        "/etc/systemd/system/docker.service.d",
    ]
    assert render.var("container_runtime_limits_dropin_files") == {
        "crio": "/etc/systemd/system/crio.service.d/50-gpuforge-memlock.conf",
        "docker": "/etc/systemd/system/docker.service.d/50-gpuforge-memlock.conf",
    }


def test_one_managed_files_call_writes_every_dropin_and_its_directory():
    render = RoleRender("container_runtime_limits", "debian12", container_runtime_limits_runtimes=["containerd"])
    args = render.task_args("main.yml", "Set LimitMEMLOCK for the container runtimes")
    assert args["directories"] == [{"path": "/etc/systemd/system/containerd.service.d", "mode": "0755"}]
    [dropin] = args["files"]
    assert dropin["path"] == "/etc/systemd/system/containerd.service.d/50-gpuforge-memlock.conf"
    assert dropin["mode"] == "0644"
    assert dropin["content"].splitlines()[-2:] == ["[Service]", "LimitMEMLOCK=infinity"]
