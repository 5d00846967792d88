"""Slurm on the lab: each OS shape's own packages, daemons, GPU GRES from the simulated GPUs, idle nodes (MUNGE
authenticates the RHEL node with the key the Ubuntu controller's package made), GPU jobs and their limits.

Runs after side_effect.yml took GPU 3 away from slurm-c4140 (4 -> 3 V100) and converged again.
"""

import json

import pytest


def _on(host, name):
    return host.backend.get_hostname() == name


# What each OS's own package manager installed, the builds gpuforge_slurm_packages pins for that OS: Ubuntu 24.04's
# universe (vendor_facts/ubuntu/noble.yml: the newest MUNGE security build meets the floor), Debian 12's archive
# (vendor_facts/debian/bookworm.yml), EPEL 9's Slurm and RHEL 9 AppStream's MUNGE (vendor_facts/epel/el9.yml,
# vendor_facts/rhel-appstream/rhel9.yml).
DPKG = "dpkg-query -W -f '${Package} ${Version}\\n'"
RPM = "rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE}\\n'"
INSTALLED = {
    "slurm-head": (f"{DPKG} slurmctld munge", ["slurmctld 23.11.4-1.2ubuntu5", "munge 0.5.15-4ubuntu0.1"]),
    "slurm-dgx1": (f"{DPKG} slurmd munge", ["slurmd 22.05.8-4+deb12u3", "munge 0.5.15-2+deb12u1"]),
    "slurm-c4140": (
        f"{RPM} slurm-slurmd slurm munge munge-libs",
        ["slurm-slurmd 22.05.9-1.el9", "slurm 22.05.9-1.el9", "munge 0.5.13-13.el9", "munge-libs 0.5.13-13.el9"],
    ),
}


def test_each_os_installed_its_own_pinned_builds(host):
    command, expected = INSTALLED[host.backend.get_hostname()]
    # dpkg-query lists in package name order, rpm -q in the order asked.
    assert sorted(host.check_output(command).splitlines()) == sorted(expected)


def test_daemons_active(host):
    name = host.backend.get_hostname()
    assert host.service("munge").is_running
    if name == "slurm-head":
        assert host.service("slurmctld").is_running
    else:
        assert host.service("slurmd").is_running
        key = host.file("/etc/munge/munge.key")
        assert key.user == "munge" and key.mode == 0o400


@pytest.mark.parametrize(("node", "gres"), [("slurm-dgx1", "gpu:v100:8"), ("slurm-c4140", "gpu:v100:3")])
def test_gres_from_simulated_gpus(host, node, gres):
    if not _on(host, "slurm-head"):
        pytest.skip("checked from the controller")
    line = host.check_output(f"scontrol show node -o {node}")
    assert f"Gres={gres}" in line


def test_nodes_idle(host):
    if not _on(host, "slurm-head"):
        pytest.skip("checked from the controller")
    states = dict(line.split() for line in host.check_output("sinfo -h -N -o '%N %T'").splitlines())
    assert states == {"slurm-c4140": "idle", "slurm-dgx1": "idle"}


def test_gpu_job_runs_on_a_node_with_enough_gpus(host):
    if not _on(host, "slurm-head"):
        pytest.skip("submitted from the controller")
    # Only the DGX-1 has 8 GPUs.
    out = host.check_output("srun -N1 --gres=gpu:8 -t 2 hostname")
    assert out.strip() == "slurm-dgx1"
    visible = host.check_output("srun -N1 -w slurm-c4140 --gres=gpu:3 -t 2 printenv CUDA_VISIBLE_DEVICES")
    assert visible.strip() == "0,1,2"


def test_job_asking_for_too_many_gpus_is_rejected(host):
    if not _on(host, "slurm-head"):
        pytest.skip("submitted from the controller")
    result = host.run("srun -N1 --gres=gpu:16 -t 1 hostname")
    assert result.rc != 0
    assert "Requested node configuration is not available" in result.stderr


def test_gpu_count_change_rewrote_gres_conf_on_that_node_only(host):
    name = host.backend.get_hostname()
    if name == "slurm-head":
        pytest.skip("no gres.conf on the controller")
    gres = host.file("/etc/slurm/gres.conf").content_string
    wanted = "/dev/nvidia[0-2]" if name == "slurm-c4140" else "/dev/nvidia[0-7]"
    assert wanted in gres


def test_slurmd_restarted_only_where_the_gpus_changed(host):
    name = host.backend.get_hostname()
    if name == "slurm-head":
        pytest.skip("no slurmd on the controller")
    before = host.file("/root/slurmd-invocation-before").content_string.strip()
    now = host.check_output("systemctl show slurmd --property=InvocationID --value").strip()
    assert before and now
    assert (now != before) is (name == "slurm-c4140")


def test_job_no_longer_fits_on_the_shrunk_node(host):
    if not _on(host, "slurm-head"):
        pytest.skip("submitted from the controller")
    result = host.run("srun -N1 -w slurm-c4140 --gres=gpu:4 -t 1 hostname")
    assert result.rc != 0


def test_slurm_job_role_submits_with_srun_and_sbatch(host):
    """side_effect.yml's last play (molecule/slurm/slurm_job_side_effect.yml): roles/slurm_job from the Ubuntu
    24.04 controller, after slurm-c4140 lost GPU 3."""
    if not _on(host, "slurm-head"):
        pytest.skip("submitted from the controller")
    srun = json.loads(host.file("/root/slurm-job-srun.json").content_string)
    assert (srun["mode"], int(srun["rc"]), srun["stdout"].strip(), srun["job_id"]) == ("srun", 0, "0,1", "")
    sbatch = json.loads(host.file("/root/slurm-job-sbatch.json").content_string)
    assert (sbatch["mode"], int(sbatch["rc"])) == ("sbatch", 0) and sbatch["job_id"].isdigit()
    gpu, batch_host = sbatch["stdout"].split()
    assert gpu == "0" and batch_host in ("slurm-dgx1", "slurm-c4140")
    refused = json.loads(host.file("/root/slurm-job-refused.json").content_string)
    assert int(refused["rc"]) != 0 and "Requested node configuration is not available" in refused["stderr"]


def test_slurm_job_role_submits_from_each_compute_node(host):
    """slurm_job_side_effect.yml's last play: roles/slurm_job with each compute node as its own submit host, so its
    commands ran on Debian 12 (slurm-dgx1) and RHEL 9 (slurm-c4140)."""
    if _on(host, "slurm-head"):
        pytest.skip("the compute nodes submitted these")
    result = json.loads(host.file("/root/slurm-job-from-compute.json").content_string)
    assert (result["mode"], int(result["rc"])) == ("sbatch", 0) and result["job_id"].isdigit(), result
    gpu, batch_host = result["stdout"].split()
    assert gpu == "0" and batch_host in ("slurm-dgx1", "slurm-c4140")
