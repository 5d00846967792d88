"""Slurm on an Ubuntu 22.04 cluster: 22.04's own pinned builds, daemons, GPU GRES from the simulated GPUs, an idle
node, a GPU job, and cgroup confinement off (Slurm 21.08 has no cgroup/v2 plugin)."""

import json

import pytest
import yaml

from gpuforge.paths import PROJECT_ROOT

HEAD = "slurm-jammy-head"
NODE = "slurm-jammy-dgx1"
# The builds gpuforge_slurm_packages pins for Ubuntu 22.04 (vendor_facts/ubuntu/jammy.yml).
PINS = yaml.safe_load((PROJECT_ROOT / "roles/gpuforge/defaults/main/slurm.yml").read_text(encoding="utf-8"))
JAMMY = PINS["gpuforge_slurm_packages"]["jammy"]
DPKG = "dpkg-query -W -f '${Package} ${Version}\\n'"


def _on(host, name):
    return host.backend.get_hostname() == name


def test_the_pins_are_jammys():
    # What the test checks below is 22.04's universe, not another release's build that happened to install.
    assert (JAMMY["slurm"], JAMMY["munge"]) == ("21.08.5-2ubuntu1", "0.5.14-6ubuntu0.1")


def test_installed_the_pinned_builds(host):
    daemon = "slurmctld" if _on(host, HEAD) else "slurmd"
    installed = sorted(host.check_output(f"{DPKG} {daemon} munge").splitlines())
    assert installed == sorted([f"{daemon} {JAMMY['slurm']}", f"munge {JAMMY['munge']}"])


def test_daemons_active(host):
    assert host.service("munge").is_running
    assert host.service("slurmctld" if _on(host, HEAD) else "slurmd").is_running


def test_cgroup_confinement_off_without_a_cgroup_v2_plugin(host):
    conf = host.file("/etc/slurm/slurm.conf").content_string.splitlines()
    assert "ProctrackType=proctrack/linuxproc" in conf
    assert "TaskPlugin=task/none" in conf
    assert not any(line.startswith("ProctrackType=proctrack/cgroup") for line in conf)


def test_node_idle_with_its_gpus(host):
    if not _on(host, HEAD):
        pytest.skip("checked from the controller")
    states = dict(line.split() for line in host.check_output("sinfo -h -N -o '%N %T'").splitlines())
    assert states == {NODE: "idle"}
    assert "Gres=gpu:v100:8" in host.check_output(f"scontrol show node -o {NODE}")


def test_gpu_job_runs(host):
    if not _on(host, HEAD):
        pytest.skip("submitted from the controller")
    visible = host.check_output(f"srun -N1 -w {NODE} --gres=gpu:2 -t 2 printenv CUDA_VISIBLE_DEVICES")
    assert visible.strip() == "0,1"
    result = host.run("srun -N1 --gres=gpu:16 -t 1 hostname")
    assert result.rc != 0 and "Requested node configuration is not available" in result.stderr


def test_slurm_job_role_submits_with_srun_and_sbatch(host):
    """side_effect.yml (molecule/slurm/slurm_job_side_effect.yml): roles/slurm_job from the controller."""
    if not _on(host, HEAD):
        pytest.skip("submitted from the controller")
    srun = json.loads(host.file("/root/slurm-job-srun.json").content_string)
    assert (srun["mode"], int(srun["rc"]), srun["stdout"].strip(), srun["job_id"]) == ("srun", 0, "0,1", "")
    sbatch = json.loads(host.file("/root/slurm-job-sbatch.json").content_string)
    assert (sbatch["mode"], int(sbatch["rc"])) == ("sbatch", 0) and sbatch["job_id"].isdigit()
    # read back from the job's batch host: its GPU and its name
    assert sbatch["stdout"].split() == ["0", NODE]
    refused = json.loads(host.file("/root/slurm-job-refused.json").content_string)
    assert int(refused["rc"]) != 0 and "Requested node configuration is not available" in refused["stderr"]
