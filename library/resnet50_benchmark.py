#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: ResNet-50 throughput sweep over GPU counts, with scaling efficiency and a per-SKU verdict."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: resnet50_benchmark
short_description: Run the gpuforge ResNet-50 benchmark over a list of GPU counts and judge throughput and scaling
description:
  - Runs C(benchmarks/resnet50/resnet50_bench.py) once per entry of I(precision) and of I(gpu_counts)
    (FP32 and mixed precision side by side by default, as Dell EMC Ready Solutions for AI compares them). A
    count that fits on one node (at most I(gpus_per_node)) runs with C(torchrun --standalone); a larger one runs across
    I(hosts) with Open MPI C(mpirun) (C(--host h1:N,h2:N), C(MASTER_ADDR) passed with C(-x)) or Slurm
    C(srun), as I(multi_node_launcher) says. I(launcher) forces one launcher for every count.
  - Each run's output is parsed (C(RESNET50 RESULT) line), judged against the per-GPU reference of
    I(expect.sku) (V100 from IBM Redpaper REDP-5610, T4 vGPU from VMware's vSphere vGPU and PVRDMA reference;
    mixed-precision references, so FP32 runs are not judged against them) or I(expect.min_per_gpu), and each
    precision's scaling efficiency against linear scaling from its smallest count is computed and judged against
    I(expect.min_scaling_efficiency).
  - Where FP32 and a mixed precision both ran at a GPU count, C(comparison) gives the speedup of the
    mixed precision over FP32 (Dell EMC Ready Solutions for AI measured 65 to 91 % faster with FP16 on V100),
    judged against I(expect.min_amp_speedup) when the site sets one.
  - Every run is wrapped in coreutils C(timeout) (whole process group) so a hung rank leaves no orphans.
  - Runs that fail are reported and the sweep goes on; the task fails at the end.
  - In check mode nothing runs; the commands are returned.
version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.benchmark
attributes:
  check_mode:
    support: partial
    details: Returns the commands it would run; the benchmark is not run and the output directory is not created.
options:
  script:
    description: Path of resnet50_bench.py (the same path on every host for multi-node runs).
    type: path
    required: true
  python:
    description: Interpreter for mpirun/srun launches (torchrun brings its own).
    type: str
    default: python3
  torchrun:
    description: torchrun program.
    type: str
    default: torchrun
  gpu_counts:
    description:
      - GPU (rank) counts to run, for example C([1, 2, 4, 8, 16]).
      - Empty runs the default sweep, 1, 2, 4, ... below I(gpus_per_node), then I(gpus_per_node) times
        1, 2, ... up to the number of I(hosts) (at least one node).
    type: list
    elements: int
    default: []
  gpus_per_node:
    description: GPUs per node; counts above it are multi-node.
    type: int
    default: 8
  hosts:
    description: Hosts for multi-node runs, filled in order with I(gpus_per_node) ranks each.
    type: list
    elements: str
    default: []
  launcher:
    description: C(auto) picks torchrun for one node and I(multi_node_launcher) beyond; others force one.
    type: str
    choices: [auto, torchrun, mpirun, srun]
    default: auto
  multi_node_launcher:
    description: Launcher of multi-node counts when I(launcher=auto).
    type: str
    choices: [mpirun, srun]
    default: mpirun
  master_addr:
    description: Rendezvous host of mpirun/srun runs; defaults to the first of I(hosts), else C(127.0.0.1).
    type: str
  master_port:
    description: Rendezvous port.
    type: int
    default: 29500
  mpirun:
    description: mpirun program.
    type: str
    default: mpirun
  mpirun_args:
    description: Extra mpirun arguments.
    type: list
    elements: str
    default: []
  srun:
    description: srun program.
    type: str
    default: srun
  srun_args:
    description: Extra srun arguments.
    type: list
    elements: str
    default: []
  batch_size:
    description: Images per rank per step.
    type: int
    default: 64
  image_size:
    description: Image side in pixels.
    type: int
    default: 224
  warmup_steps:
    description: Untimed steps first.
    type: int
    default: 10
  steps:
    description: Timed steps.
    type: int
    default: 50
  precision:
    description:
      - Precisions to run, each over every GPU count. C(amp) is automatic mixed precision (bf16 autocast
        where the GPU or CPU supports it, fp16 with loss scaling on GPUs without bf16); C(auto) is C(amp) on
        GPU and C(fp32) on CPU; C(fp16) and C(bf16) force one type.
    type: list
    elements: str
    choices: [auto, fp32, amp, fp16, bf16]
    default: [fp32, amp]
  batch_size_by_precision:
    description:
      - Images per rank per step for some precisions, overriding I(batch_size) (Dell EMC Ready Solutions for AI
        doubled the batch for FP16, which needs half the memory per value), for example C(amp) at 128.
    type: dict
    default: {}
  device:
    description: C(cpu) for the lab (no GPU); C(auto) uses CUDA when torch sees it.
    type: str
    choices: [auto, cuda, cpu]
    default: auto
  extra_args:
    description: More benchmark arguments.
    type: list
    elements: str
    default: []
  env:
    description: Environment for the runs (NCCL variables, for example); passed with C(-x) through mpirun.
    type: dict
    default: {}
  timeout:
    description: Seconds per run before its process group is terminated.
    type: int
    default: 1800
  output_dir:
    description: Directory for the raw output of each run (C(resnet50-<N>gpu-<precision>.txt)); created when missing.
    type: path
  expect:
    description:
      - C(sku) (a key of C(REFERENCES) in gpuforge_resnet50, for example C(Tesla V100-SXM2-16GB)),
        C(min_per_gpu), C(ratio) (0.9), C(fail_ratio) (0.75) for the per-GPU check of each run;
        C(min_scaling_efficiency) (default 0.9) and C(scaling_warn_margin) (0.1) for the sweep;
        C(min_amp_speedup), the site's floor on mixed-precision over FP32 throughput.
    type: dict
    default: {}
requirements:
  - torch on every node; torchrun, Open MPI or Slurm as launchers; coreutils C(timeout)
notes:
  - The references are tf_cnn_benchmarks numbers from those reference documents; this benchmark is PyTorch, so
    they are a floor with a margin, not an exact target.
"""

EXAMPLES = r"""
- name: ResNet-50 scaling on two DGX-1 (IBM Redpaper REDP-5610)
  gpuforge.cluster.resnet50_benchmark:
    script: /opt/gpuforge/benchmarks/resnet50/resnet50_bench.py
    gpu_counts: [1, 2, 4, 8, 16]
    precision: [fp32, amp]
    batch_size_by_precision: {amp: 128}
    hosts: [dgx01, dgx02]
    env: {NCCL_IB_DISABLE: "0", NCCL_NET_GDR_LEVEL: "PHB"}
    output_dir: /var/lib/gpuforge/bench
    expect:
      sku: Tesla V100-SXM2-16GB
      min_scaling_efficiency: 0.9

- name: Lab run on CPU processes, report only
  gpuforge.cluster.resnet50_benchmark:
    script: /usr/lib/gpuforge/bench/resnet50_bench.py
    gpu_counts: [1, 2]
    precision: [fp32]
    device: cpu
    image_size: 64
    batch_size: 2
    steps: 2
    warmup_steps: 1
    fail_on: never
"""

RETURN = r"""
runs:
  description:
    - One entry per precision and GPU count, C({precision, gpus, cmd, rc, output_path, resnet50,
      images_per_second, checks, verdict, error}); C(resnet50.precision) is the type the run used (C(bf16)
      for C(amp) on a GPU with bf16).
  returned: always
  type: list
  elements: dict
scaling:
  description:
    - Per precision, scaling against linear from its smallest successful count, C({precision, world_size,
      total_imgs_per_sec, per_gpu, speedup, ideal_imgs_per_sec, efficiency}).
  returned: when it ran
  type: list
  elements: dict
comparison:
  description:
    - Per GPU count where FP32 and another precision both ran, C({gpus, baseline, precision,
      baseline_images_per_second, images_per_second, speedup}).
  returned: when it ran
  type: list
  elements: dict
checks:
  description:
    - All checks (per run ones carry C(gpus) and C(precision)), each C({name, status, observed, expected, remedy}).
  returned: when it ran
  type: list
  elements: dict
verdict:
  description: Worst check status, C(PASS), C(WARN) or C(FAIL) (C(FAIL) when a run failed).
  returned: when it ran
  type: str
"""

import math
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_common import (
    COMMON_OPTIONS,
    check_common_options,
    finish,
    joined_output,
    last_lines,
    save_output,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_resnet50 import (
    EXPECT,
    ParseError,
    judge_precision_comparison,
    judge_resnet50,
    judge_scaling,
    overall_status,
    parse_resnet50,
    precision_comparison,
    scaling_efficiency,
    sweep_counts,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool

PRECISIONS = ("auto", "fp32", "amp", "fp16", "bf16")
# The keys of expect that judge_resnet50 reads for one run; the others judge the sweep.
RUN_EXPECT_KEYS = ("sku", "min_per_gpu", "ratio", "fail_ratio")


def _check_label(check):
    """A check named with its precision and GPU count (per_gpu_throughput@amp/2) in the failure message."""
    gpus = f"/{check['gpus']}" if "gpus" in check else ""
    return f"{check['name']}@{check.get('precision', '')}{gpus}"


class Resnet50Sweep:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.result = {"changed": False, "runs": []}

    def fail(self, msg):
        self.module.fail_json(msg=msg, **self.result)

    def bench_args(self, precision):
        params = self.params
        batch = params["batch_size_by_precision"].get(precision, params["batch_size"])
        args = [
            "--batch-size",
            str(batch),
            "--image-size",
            str(params["image_size"]),
            "--warmup-steps",
            str(params["warmup_steps"]),
            "--steps",
            str(params["steps"]),
            "--precision",
            precision,
            "--device",
            params["device"],
        ]
        return [self.params["script"], *args, *params["extra_args"]]

    def launcher_for(self, gpus):
        params = self.params
        if params["launcher"] != "auto":
            return params["launcher"]
        return "torchrun" if gpus <= params["gpus_per_node"] else params["multi_node_launcher"]

    def master_addr(self):
        # Without hosts every rank is on this node: loopback is the rendezvous.
        return self.params["master_addr"] or (self.params["hosts"][0] if self.params["hosts"] else "127.0.0.1")

    def command(self, gpus, precision):
        params = self.params
        per_node = params["gpus_per_node"]
        nodes = math.ceil(gpus / per_node)
        launcher = self.launcher_for(gpus)
        if launcher == "torchrun":
            if nodes > 1:
                self.fail(f"{gpus} GPUs do not fit on one node of {per_node}: torchrun runs one node here")
            return [params["torchrun"], "--standalone", f"--nproc_per_node={gpus}", *self.bench_args(precision)]
        if nodes > 1 and len(params["hosts"]) < nodes:
            self.fail(f"{gpus} GPUs need {nodes} hosts of {per_node} GPUs; hosts lists {len(params['hosts'])}")
        if launcher == "mpirun":
            cmd = [params["mpirun"], "-np", str(gpus)]
            if params["hosts"]:
                used = params["hosts"][:nodes]
                cmd += ["--host", ",".join(f"{host}:{per_node}" for host in used)]
            cmd += ["--bind-to", "none", "--map-by", "slot"]
            env = dict(self.run_env())
            for name, value in sorted(env.items()):
                cmd += ["-x", f"{name}={value}"]
            return cmd + params["mpirun_args"] + [params["python"], *self.bench_args(precision)]
        cmd = [
            params["srun"],
            "--ntasks",
            str(gpus),
            "--nodes",
            str(nodes),
            "--ntasks-per-node",
            str(min(gpus, per_node)),
        ]
        if params["hosts"]:
            cmd += ["--nodelist", ",".join(params["hosts"][:nodes])]
        return cmd + params["srun_args"] + [params["python"], *self.bench_args(precision)]

    def run_env(self):
        env = {str(k): str(v) for k, v in self.params["env"].items()}
        env.setdefault("MASTER_ADDR", self.master_addr())
        env.setdefault("MASTER_PORT", str(self.params["master_port"]))
        return env

    def validate(self):
        params = self.params
        try:
            check_common_options(params, EXPECT)
        except OptionError as exc:
            self.fail(str(exc))
        if params["gpus_per_node"] < 1:
            self.fail("gpus_per_node must be at least 1")
        if params["timeout"] < 1:
            self.fail(f"timeout must be at least 1 second, got {params['timeout']}")
        if not params["gpu_counts"]:
            params["gpu_counts"] = sweep_counts(params["gpus_per_node"], max(1, len(params["hosts"])))
        if min(params["gpu_counts"]) < 1:
            self.fail("gpu_counts must list positive GPU counts")
        if not params["precision"]:
            self.fail("precision must list at least one of auto, fp32, amp, fp16, bf16")
        for precision, batch in params["batch_size_by_precision"].items():
            if precision not in PRECISIONS:
                self.fail(f"batch_size_by_precision.{precision} is not a precision (known: {', '.join(PRECISIONS)})")
            if isinstance(batch, bool) or not str(batch).isdigit() or int(batch) < 1:
                self.fail(f"batch_size_by_precision.{precision} must be a positive integer, got {batch!r}")
            params["batch_size_by_precision"][precision] = int(batch)
        if not os.path.isfile(params["script"]):
            self.fail(f"benchmark script {params['script']} not found on {os.uname().nodename}")

    def make_output_dir(self):
        """Create output_dir; never in check mode (nothing is written then)."""
        if self.params["output_dir"] and not self.module.check_mode:
            try:
                os.makedirs(self.params["output_dir"], exist_ok=True)
            except OSError as exc:
                self.fail(f"cannot create output_dir {self.params['output_dir']}: {exc}")

    def launcher_fix(self, cmd):
        """What to do when timeout(1) cannot start cmd[0] (the launcher)."""
        params = self.params
        fixes = {
            params["torchrun"]: f"install torch (it brings torchrun) or set torchrun (now {params['torchrun']!r})",
            params["mpirun"]: f"install Open MPI (mpirun) or set mpirun (now {params['mpirun']!r})",
            params["srun"]: f"install the Slurm client (srun) or set srun (now {params['srun']!r})",
        }
        return fixes.get(cmd[0], "install it or give its full path")

    def run_one(self, precision, gpus, cmd):
        params = self.params
        run = {"precision": precision, "gpus": gpus, "cmd": cmd, "rc": None, "output_path": None, "resnet50": None}
        run["images_per_second"], run["checks"], run["verdict"], run["error"] = None, [], FAIL, None
        ran = Tool(self.module, cmd[0], self.launcher_fix(cmd), result=self.result).run_bounded(
            cmd[1:], params["timeout"], environ=self.run_env()
        )
        rc, raw, timed_out = ran.rc, joined_output(ran), ran.timed_out
        run["rc"] = rc
        if params["output_dir"]:
            path = os.path.join(params["output_dir"], f"resnet50-{gpus}gpu-{precision}.txt")
            save_output(self.module, path, raw, self.result)
            run["output_path"] = path
        if timed_out:
            run["error"] = f"timed out after {params['timeout']} s; its process group was terminated"
            return run
        if rc != 0:
            run["error"] = f"rc {rc}: {last_lines(raw, limit=None)}"
            return run
        try:
            parsed = parse_resnet50(raw)
        except ParseError as exc:
            run["error"] = f"could not read the benchmark output: {exc}"
            return run
        run["resnet50"] = parsed
        run["images_per_second"] = parsed["total_imgs_per_sec"]
        expect = {key: value for key, value in self.params["expect"].items() if key in RUN_EXPECT_KEYS}
        run["checks"] = [
            {**check, "gpus": gpus, "precision": precision}
            for check in judge_resnet50(parsed, {**expect, "world_size": gpus})
        ]
        run["verdict"] = overall_status(run["checks"])
        return run

    def run(self):
        params = self.params
        self.validate()
        counts = sorted(set(params["gpu_counts"]))
        precisions = list(dict.fromkeys(params["precision"]))
        commands = [(p, gpus, self.command(gpus, p)) for p in precisions for gpus in counts]
        if self.module.check_mode:
            self.result["runs"] = [{"precision": p, "gpus": gpus, "cmd": cmd} for p, gpus, cmd in commands]
            self.module.exit_json(**self.result)
        self.make_output_dir()
        for precision, gpus, cmd in commands:
            self.result["runs"].append(self.run_one(precision, gpus, cmd))
        expect = params["expect"]
        rows, checks = [], [check for run in self.result["runs"] for check in run["checks"]]
        for precision in precisions:
            parsed = [r["resnet50"] for r in self.result["runs"] if r["resnet50"] and r["precision"] == precision]
            own = [{**row, "precision": precision} for row in scaling_efficiency(parsed)]
            rows += own
            checks += [
                {**check, "precision": precision}
                for check in judge_scaling(
                    own, expect.get("min_scaling_efficiency", 0.9), expect.get("scaling_warn_margin", 0.1)
                )
            ]
        self.result["scaling"] = rows
        comparison = precision_comparison(self.result["runs"])
        self.result["comparison"] = comparison
        checks += judge_precision_comparison(comparison, expect.get("min_amp_speedup"))
        self.result["checks"] = checks
        failed = [run for run in self.result["runs"] if run["error"]]
        self.result["verdict"] = FAIL if failed else overall_status(checks)
        if failed:
            self.fail("; ".join(f"{run['precision']} {run['gpus']} GPUs: {run['error']}" for run in failed))
        finish(self.module, self.result, "ResNet-50", params["fail_on"], label=_check_label)


def main():
    module = AnsibleModule(
        argument_spec={
            "script": {"type": "path", "required": True},
            "python": {"type": "str", "default": "python3"},
            "torchrun": {"type": "str", "default": "torchrun"},
            "gpu_counts": {"type": "list", "elements": "int", "default": []},
            "gpus_per_node": {"type": "int", "default": 8},
            "hosts": {"type": "list", "elements": "str", "default": []},
            "launcher": {"type": "str", "choices": ["auto", "torchrun", "mpirun", "srun"], "default": "auto"},
            "multi_node_launcher": {"type": "str", "choices": ["mpirun", "srun"], "default": "mpirun"},
            "master_addr": {"type": "str"},
            "master_port": {"type": "int", "default": 29500},
            "mpirun": {"type": "str", "default": "mpirun"},
            "mpirun_args": {"type": "list", "elements": "str", "default": []},
            "srun": {"type": "str", "default": "srun"},
            "srun_args": {"type": "list", "elements": "str", "default": []},
            "batch_size": {"type": "int", "default": 64},
            "image_size": {"type": "int", "default": 224},
            "warmup_steps": {"type": "int", "default": 10},
            "steps": {"type": "int", "default": 50},
            "precision": {"type": "list", "elements": "str", "choices": list(PRECISIONS), "default": ["fp32", "amp"]},
            "batch_size_by_precision": {"type": "dict", "default": {}},
            "device": {"type": "str", "choices": ["auto", "cuda", "cpu"], "default": "auto"},
            "extra_args": {"type": "list", "elements": "str", "default": []},
            "output_dir": {"type": "path"},
            **COMMON_OPTIONS,
        },
        supports_check_mode=True,
    )
    Resnet50Sweep(module).run()


if __name__ == "__main__":
    main()
