"""The slurm role's health-check lines (issue 50): slurm.conf names gpuforge-health's scripts only when asked, and the
scripts run gpuforge-health on GPU nodes and pass on the others."""

from __future__ import annotations

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from test_slurm_templates import ROLE, lines, render


def test_no_health_lines_by_default():
    conf = "\n".join(lines(render("slurm.conf.j2", "head", None)))
    for key in ("HealthCheckProgram", "HealthCheckInterval", "Prolog=", "Epilog=", "SchedulerParameters", "AuthInfo"):
        assert key not in conf


def test_health_check_prolog_epilog_and_requeue_without_hold():
    conf = lines(
        render(
            "slurm.conf.j2",
            "head",
            None,
            slurm_health_check=True,
            slurm_health_check_interval_seconds="60",
            slurm_health_check_node_state="IDLE,CYCLE",
            slurm_cred_expire_seconds=30,
        )
    )
    assert [
        line
        for line in conf
        if line.split("=")[0]
        in (
            "HealthCheckProgram",
            "HealthCheckInterval",
            "HealthCheckNodeState",
            "Prolog",
            "Epilog",
            "SchedulerParameters",
            "AuthInfo",
        )
    ] == [
        "HealthCheckProgram=/etc/slurm/gpuforge/healthcheck",
        "HealthCheckInterval=60",
        "HealthCheckNodeState=IDLE,CYCLE",
        "Prolog=/etc/slurm/gpuforge/prolog",
        "Epilog=/etc/slurm/gpuforge/epilog",
        "SchedulerParameters=nohold_on_prolog_fail",
        "AuthInfo=cred_expire=30",
    ]


def hook(kind: str, gpu_node: bool) -> str:
    variables = {
        "ansible_managed": "Ansible managed",
        "slurm_hook": kind,
        "slurm_health_gpu_node": gpu_node,
        "slurm_gpu_group": "gpu_nodes",
        "node_health_command": "/usr/local/sbin/gpuforge-health",
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    text = (ROLE / "templates" / "gpuforge-slurm-hook.sh.j2").read_text(encoding="utf-8")
    return templar.template(trust_as_template(text))


def test_the_scripts_run_gpuforge_health_with_their_profile_on_gpu_nodes():
    for kind in ("full", "prolog", "epilog"):
        script = hook(kind, True)
        assert script.startswith("#!/bin/sh\n")
        assert f"exec /usr/local/sbin/gpuforge-health --profile {kind} --slurm\n" in script
        assert "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nexport PATH\n" in script
    assert hook("full", False).rstrip().endswith("exit 0")
    assert "exec " not in hook("prolog", False)
