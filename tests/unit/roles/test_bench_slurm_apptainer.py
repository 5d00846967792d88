"""roles/gpuforge_bench/tasks/slurm.yml's Apptainer run: off unless gpuforge_bench_slurm_apptainer_image is set (the
results then stay those of the bare srun runs), and when set the all-reduce runs as
`srun ... apptainer exec --nv [args] <image> [interpreter] <binary> ...`, recorded as its own result."""

from __future__ import annotations

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from gpu_stack_render import ROOT
from role_yaml import load_yaml, trusted

TASKS = yaml.safe_load((ROOT / "roles/gpuforge_bench/tasks/slurm.yml").read_text(encoding="utf-8"))
# The role's defaults over the gpuforge role's (its dependency), as Ansible layers them.
DEFAULTS = {
    **load_yaml(ROOT / "roles/gpuforge/defaults/main/benchmark_tools.yml"),
    **load_yaml(ROOT / "roles/gpuforge_bench/defaults/main.yml"),
}
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
NCCL = {"verdict": "pass", "nccl": {"avg_busbw": 1.5}, "output_path": "/tmp/r/srun-nccl-tcp.txt"}
RESNET = {
    "verdict": "pass",
    "runs": [{"output_path": "/tmp/r/srun-resnet50/1.txt", "resnet50": {"total_imgs_per_sec": 9}}],
}


def task(name: str) -> dict:
    return next(t for t in TASKS if t["name"].startswith(name))


def templar(**extra) -> Templar:
    variables = {
        **DEFAULTS,
        "ansible_play_hosts": ["gpu01", "gpu02"],
        "gpuforge_bench_results": {},
        "gpuforge_bench_slurm_nccl": NCCL,
        "gpuforge_bench_slurm_resnet50": RESNET,
        "gpuforge_bench_slurm_apptainer_nccl": SKIPPED,
        **trusted(extra),
    }
    return Templar(loader=DataLoader(), variables=variables)


def render(value, **extra):
    return templar(**extra).template(trusted(value))


def when(name: str, **extra) -> bool:
    return templar(**extra).evaluate_conditional(trust_as_template(task(name)["when"]))


def results(**extra) -> list:
    keep = task("Keep the results")
    scope = {**extra, **keep["vars"]}
    return render(keep["ansible.builtin.set_fact"]["gpuforge_bench_results"], **scope)["slurm"]


def test_off_by_default_and_results_unchanged():
    assert DEFAULTS["gpuforge_bench_slurm_apptainer_image"] == ""
    assert not when("All-reduce across the nodes through srun in an Apptainer container")
    assert not when("Write the parsed result of the Apptainer run")
    assert [entry["name"] for entry in results()] == ["srun-nccl", "srun-resnet50"]
    fetched = render(task("Fetch the raw outputs")["loop"])
    assert fetched == ["/tmp/r/srun-nccl-tcp.txt", "/tmp/r/srun-resnet50/1.txt"]


def test_srun_apptainer_exec_nv_command_words():
    image = "/shared/apps/images/nccl-tests.sif"
    args = task("All-reduce across the nodes through srun in an Apptainer container")["gpuforge.cluster.nccl_tests"]
    assert when(
        "All-reduce across the nodes through srun in an Apptainer container", gpuforge_bench_slurm_apptainer_image=image
    )
    rendered = render(
        args,
        gpuforge_bench_slurm_apptainer_image=image,
        gpuforge_bench_slurm_apptainer_args=["--bind", "/scratch"],
        gpuforge_bench_remote_dir="/var/tmp/gpuforge-bench",
        gpuforge_bench_run_id="r1",
    )
    assert rendered["launcher"] == "srun"
    assert rendered["interpreter"] == ["apptainer", "exec", "--nv", "--bind", "/scratch", image]
    # The benchmark_tools role's build (roles/gpuforge/defaults/main/benchmark_tools.yml).
    assert rendered["binary"] == "/opt/gpuforge/benchmark-tools/bin/all_reduce_perf"
    assert rendered["srun_args"][0] == "--mpi=pmix"
    assert rendered["output_path"] == "/var/tmp/gpuforge-bench/r1/srun-apptainer-nccl-ib_gdr.txt"


def test_apptainer_run_is_its_own_result():
    run = {"verdict": "pass", "nccl": {"avg_busbw": 1.2}, "output_path": "/tmp/r/srun-apptainer-nccl-tcp.txt"}
    entries = results(gpuforge_bench_slurm_apptainer_image="/img.sif", gpuforge_bench_slurm_apptainer_nccl=run)
    assert [entry["name"] for entry in entries] == ["srun-nccl", "srun-resnet50", "srun-apptainer-nccl"]
    assert (entries[2]["value"], entries[2]["unit"]) == (1.2, "GB/s busbw") and entries[2][
        "group"
    ] == "srun_apptainer_nccl"
    fetched = render(task("Fetch the raw outputs")["loop"], gpuforge_bench_slurm_apptainer_nccl=run)
    assert fetched[-1] == "/tmp/r/srun-apptainer-nccl-tcp.txt"
