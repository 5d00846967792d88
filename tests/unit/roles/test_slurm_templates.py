"""Render the slurm role's slurm.conf and gres.conf from fixture facts and check the lines Slurm reads."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader
from ansible.template import Templar, trust_as_template
from role_yaml import load_yaml as _load

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "slurm"
filter_loader.add_directory(str(ROOT / "filter_plugins"))


def _v100(index: int, affinity: str) -> dict:
    return {"index": index, "minor_number": index, "product_name": "Tesla V100-SXM2-16GB", "cpu_affinity": affinity}


# DGX-1 (IBM Redpaper REDP-5610): 2x E5-2698 v4, 20 cores/socket, 2 threads, 512 GB; GPUs 0-3 on NUMA 0, 4-7 on NUMA 1.
DGX1 = {
    "hostname": "dgx01",
    "processor_vcpus": 80,
    "processor_count": 2,
    "processor_cores": 20,
    "processor_threads_per_core": 2,
    "memtotal_mb": 515896,
    "virtualization_type": "",
    "nvidia_smi": {"gpus": [_v100(i, "0-19,40-59" if i < 4 else "20-39,60-79") for i in range(8)]},
}
# PowerEdge C4140 (Dell EMC Ready Solutions for AI): 2x Gold 6148, 384 GB, 4 GPUs on NUMA 0.
C4140 = {
    "hostname": "node008",
    "processor_vcpus": 80,
    "processor_count": 2,
    "processor_cores": 20,
    "processor_threads_per_core": 2,
    "memtotal_mb": 385610,
    "virtualization_type": "",
    "nvidia_smi": {"gpus": [_v100(i, "0-19,40-59") for i in range(4)]},
}
HEAD = {"hostname": "headnode", "processor_vcpus": 80, "memtotal_mb": 385610}


def render(template: str, host: str, facts: dict, os_family: str = "Debian", **extra) -> str:
    hostvars = {"head": {"ansible_facts": HEAD}, "gpu01": {"ansible_facts": DGX1}, "gpu02": {"ansible_facts": C4140}}
    hostvars.update(extra.pop("hostvars", {}))
    variables = {
        **_load(ROLE / "defaults" / "main.yml"),
        **_load(ROLE / "vars" / f"{os_family}.yml"),
        **_load(ROLE / "vars" / "main.yml"),
        "groups": {"slurm_controller": ["head"], "slurm_compute": ["gpu01", "gpu02"], "gpu_nodes": ["gpu01", "gpu02"]},
        "hostvars": hostvars,
        "inventory_hostname": host,
        "ansible_facts": hostvars[host]["ansible_facts"] if facts is None else facts,
        "ansible_managed": "Ansible managed",
        "slurm_cgroup_enabled": True,
        **extra,
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template((ROLE / "templates" / template).read_text(encoding="utf-8")))


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize(
    ("os_family", "state_dir"),
    [("Debian", "/var/lib/slurm/slurmctld"), ("RedHat", "/var/spool/slurm/ctld")],
)
def test_slurm_conf_nodes_and_partitions(os_family, state_dir):
    conf = lines(render("slurm.conf.j2", "head", None, os_family=os_family))
    assert "SlurmctldHost=headnode" in conf
    assert "GresTypes=gpu" in conf
    assert f"StateSaveLocation={state_dir}" in conf
    assert (
        "NodeName=dgx01 CPUs=80 Sockets=2 CoresPerSocket=20 ThreadsPerCore=2 RealMemory=513848 "
        "Gres=gpu:v100:8 State=UNKNOWN"
    ) in conf
    assert (
        "NodeName=node008 CPUs=80 Sockets=2 CoresPerSocket=20 ThreadsPerCore=2 RealMemory=383562 "
        "Gres=gpu:v100:4 State=UNKNOWN"
    ) in conf
    assert "PartitionName=v100 Nodes=dgx01,node008 Default=YES MaxTime=INFINITE State=UP" in conf
    assert "ProctrackType=proctrack/cgroup" in conf
    assert "AccountingStorageType=accounting_storage/none" in conf


def test_slurm_conf_without_cgroups_and_partition_per_type():
    a100 = copy.deepcopy(C4140)
    for gpu in a100["nvidia_smi"]["gpus"]:
        gpu["product_name"] = "NVIDIA A100-SXM4-40GB"
    conf = lines(
        render("slurm.conf.j2", "head", None, hostvars={"gpu02": {"ansible_facts": a100}}, slurm_cgroup_enabled=False)
    )
    assert "ProctrackType=proctrack/linuxproc" in conf
    assert "TaskPlugin=task/none" in conf
    assert "PartitionName=a100 Nodes=node008 Default=YES MaxTime=INFINITE State=UP" in conf
    assert "PartitionName=v100 Nodes=dgx01 Default=NO MaxTime=INFINITE State=UP" in conf
    assert any(line.startswith("NodeName=node008 ") and line.endswith("Gres=gpu:a100:4 State=UNKNOWN") for line in conf)


def test_gres_conf_dgx1_cores_from_topology():
    gres = lines(render("gres.conf.j2", "gpu01", DGX1))
    assert gres == [
        "AutoDetect=off",
        "Name=gpu Type=v100 File=/dev/nvidia[0-3] Cores=0-19",
        "Name=gpu Type=v100 File=/dev/nvidia[4-7] Cores=20-39",
    ]


def test_gres_conf_in_a_small_container_leaves_cores_out():
    # The lab container sees the host's 2 CPUs; the simulated affinity (0-19,40-59) does not fit it.
    small = {**C4140, "processor_vcpus": 2, "processor_count": 1, "processor_cores": 2, "processor_threads_per_core": 1}
    assert lines(render("gres.conf.j2", "gpu02", small)) == [
        "AutoDetect=off",
        "Name=gpu Type=v100 File=/dev/nvidia[0-3]",
    ]


def test_gpu_count_change_touches_only_that_nodes_gres_conf():
    """Losing GPU 7 on dgx01 changes dgx01's gres.conf (restart slurmd there) and not node008's."""
    degraded = copy.deepcopy(DGX1)
    degraded["nvidia_smi"]["gpus"].pop()
    before_dgx, after_dgx = render("gres.conf.j2", "gpu01", DGX1), render("gres.conf.j2", "gpu01", degraded)
    before_c4140 = render("gres.conf.j2", "gpu02", C4140)
    after_c4140 = render("gres.conf.j2", "gpu02", C4140, hostvars={"gpu01": {"ansible_facts": degraded}})
    assert before_dgx != after_dgx
    assert "Name=gpu Type=v100 File=/dev/nvidia[4-6] Cores=20-39" in lines(after_dgx)
    assert before_c4140 == after_c4140
    conf = lines(render("slurm.conf.j2", "head", None, hostvars={"gpu01": {"ansible_facts": degraded}}))
    assert any(line.startswith("NodeName=dgx01 ") and "Gres=gpu:v100:7 " in line for line in conf)


def test_handlers_restart_slurmd_only_for_gres_conf():
    tasks = _load_list(ROLE / "tasks" / "config.yml")
    by_name = {task["name"]: task for task in tasks}
    assert by_name["Write gres.conf from this node's GPUs"]["notify"] == "Restart slurmd"
    assert "Restart slurmd" not in by_name["Slurm directories and slurm.conf"]["notify"]
    handlers = [h["name"] for h in _load_list(ROLE / "handlers" / "main.yml")]
    assert handlers.index("Restart slurmd") < handlers.index("Restart slurmctld") < handlers.index("Reconfigure slurm")


def _load_list(path: Path) -> list:
    return yaml.safe_load(path.read_text(encoding="utf-8"))
