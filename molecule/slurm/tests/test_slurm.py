"""Slurm on the lab: daemons, GPU GRES from the simulated GPUs, idle nodes, GPU jobs and their limits.

Runs after side_effect.yml took GPU 3 away from slurm-c4140 (4 -> 3 V100) and converged again.
"""

import pytest


def _on(host, name):
    return host.backend.get_hostname() == name


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
