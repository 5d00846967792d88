#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: run an nccl-tests *_perf benchmark on one node or across nodes and judge it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_tests
short_description: Run an nccl-tests benchmark (all_reduce_perf, ...) and judge bandwidth, latency and transport
description:
  - Runs an nccl-tests C(*_perf) binary on this node (C(-g N) GPUs in one process), or across nodes with
    Open MPI C(mpirun) (a hostfile is written from I(hosts)) or Slurm C(srun).
  - I(mode) selects the NCCL transport the way IBM Redpaper REDP-5610 does. C(tcp) sets
    C(NCCL_IB_DISABLE=1 NCCL_NET_GDR_LEVEL=0), C(ib) sets C(NCCL_IB_DISABLE=0 NCCL_NET_GDR_LEVEL=0),
    C(ib_gdr) sets C(NCCL_IB_DISABLE=0) and C(NCCL_NET_GDR_LEVEL) to I(gdr_level). With a mode,
    C(NCCL_ALGO) is set to I(nccl_algo) (Ring) so the fabric, not the algorithm choice, is measured.
  - The run is wrapped in coreutils C(timeout), which signals the whole process group, so a hung
    benchmark leaves no orphan processes (mpirun then takes its remote daemons down).
  - The raw output is written to I(output_path); the parsed table, the transport NCCL reported
    (C(NCCL_DEBUG=INFO)) and the checks of I(expect) are returned.
  - In check mode nothing runs; the command that would run is returned.
version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.benchmark
attributes:
  check_mode:
    support: partial
    details: Returns the command it would run; the benchmark is not run and nothing is written (no verdict).
options:
  binary:
    description:
      - The C(*_perf) program, for example C(/opt/nccl-tests/build/all_reduce_perf). With C(mpirun) or
        C(srun) the same path must exist on every host; it is checked on the node that runs the module.
    type: path
    required: true
  interpreter:
    description:
      - Words put before I(binary), for a program that is a script (the lab's stand-in runs as
        C([/usr/bin/python3])).
    type: list
    elements: str
    default: []
  launcher:
    description:
      - C(local) runs the binary here; C(mpirun) runs I(np) processes on I(hosts); C(srun) lets Slurm
        place I(np) tasks (on I(hosts) when given).
    type: str
    choices: [local, mpirun, srun]
    default: local
  gpus:
    description: GPUs per process (C(-g)).
    type: int
    default: 1
  hosts:
    description: Hosts for C(mpirun) (hostfile lines C(name slots=N)) or C(srun --nodelist).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Host name as the launcher reaches it.
        type: str
        required: true
      slots:
        description: Processes on this host.
        type: int
        default: 1
  np:
    description: Number of processes; defaults to the sum of the I(hosts) slots (1 without hosts).
    type: int
  hostfile:
    description: Where to write the mpirun hostfile; defaults to I(output_path) with C(.hosts) appended.
    type: path
  mpirun:
    description: mpirun program.
    type: str
    default: mpirun
  mpirun_args:
    description: Extra mpirun arguments (for example C(--allow-run-as-root), C(--mca btl_tcp_if_include eth0)).
    type: list
    elements: str
    default: []
  srun:
    description: srun program.
    type: str
    default: srun
  srun_args:
    description: Extra srun arguments (for example C(--mpi=pmix), C(--gpus-per-task=1)).
    type: list
    elements: str
    default: []
  gpus_per_host:
    description:
      - GPUs each host has. With C(mpirun), a host whose slots x I(gpus) exceed it fails the run before it
        starts. With C(local) it replaces counting C(nvidia-smi -L).
    type: int
  count_gpus:
    description: With C(local) and no I(gpus_per_host), count the GPUs with C(nvidia-smi -L) first.
    type: bool
    default: true
  mode:
    description: NCCL transport to force (see description); C(none) leaves NCCL to choose.
    type: str
    choices: [none, tcp, ib, ib_gdr]
    default: none
  gdr_level:
    description:
      - C(NCCL_NET_GDR_LEVEL) for C(ib_gdr). IBM Redpaper REDP-5610 used C(1) (PIX) on DGX-1, where each HCA
        shares a PCIe switch with its GPUs; C(PHB) also allows GPU-NIC paths through the host bridge.
    type: str
    default: PHB
  nccl_algo:
    description: C(NCCL_ALGO) set when I(mode) is not C(none); empty to leave it unset.
    type: str
    default: Ring
  nccl_debug:
    description: C(NCCL_DEBUG); C(INFO) is needed to see the transport NCCL used.
    type: str
    default: INFO
  env:
    description: More environment variables for the benchmark (passed with C(-x) through mpirun).
    type: dict
    default: {}
  min_bytes:
    description: C(-b), smallest message (nccl-tests size syntax, C(8), C(1M), C(2G)).
    type: str
    default: "8"
  max_bytes:
    description: C(-e), largest message.
    type: str
    default: 256M
  step_factor:
    description: C(-f), multiply the size by this each step.
    type: int
    default: 2
  iters:
    description: C(-n), timed iterations per size.
    type: int
    default: 20
  warmup_iters:
    description: C(-w), warm-up iterations per size.
    type: int
    default: 5
  check:
    description: C(-c), check the results (C(#wrong)).
    type: bool
    default: true
  datatype:
    description: C(-d), data type.
    type: str
    default: float
  op:
    description: C(-o), reduction operation.
    type: str
    default: sum
  per_iter_timing:
    description:
      - C(-I 1), per-iteration timing (nccl-tests 2.17 and later); the table gains C(i_min i_max i_p99 i_cv%)
        per run, judged by C(expect.max_iter_cv_pct).
    type: bool
    default: false
  json_output:
    description:
      - C(-J) file for the nccl-tests JSON output (nccl-tests 2.17 and later). nccl-tests never overwrites it;
        when the file exists it writes C(FILE.0), C(FILE.1)..., and the module reads the file the program says it
        wrote. The numbers then come from that file, the transport from the NCCL INFO lines of the output.
      - With C(mpirun) rank 0 writes the file; it must be the node that runs this module (the first host).
    type: path
  extra_args:
    description: More benchmark arguments, appended last.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds before the whole process group is terminated (then killed 30 s later).
    type: int
    default: 1800
  output_path:
    description: File the raw output (stdout and stderr) is written to; its folder is created when missing.
    type: path
  expect:
    description:
      - Expectations judged by C(judge_nccl), keys C(min_busbw_gbyte_per_s) (GB/s at the largest size, or at sizes of at
        least C(large_message_bytes)), C(warn_ratio), C(transport) (defaults to I(mode)),
        C(max_small_latency_us) (100, two-digit microseconds, when the transport is C(ib)/C(ib_gdr)),
        C(small_message_bytes), C(max_wrong), C(max_iter_cv_pct) (with I(per_iter_timing)).
      - Set C(NCCL_TESTS_MIN_BW) in I(env) to let nccl-tests judge the average bus bandwidth itself; its
        C(FAILED) becomes the failed check C(nccl_tests_min_bw) (and the program exits non-zero).
    type: dict
    default: {}
requirements:
  - nccl-tests built against NCCL (or the lab stand-in), coreutils C(timeout); Open MPI or Slurm for multi-node
notes:
  - The stand-in used in the gpuforge lab always moves data over TCP whatever I(mode) says.
"""

EXAMPLES = r"""
- name: NCCL all-reduce on the 8 GPUs of this node
  gpuforge.cluster.nccl_tests:
    binary: /opt/nccl-tests/build/all_reduce_perf
    gpus: 8
    max_bytes: 256M
    output_path: /var/lib/gpuforge/bench/nccl-1x8.txt
    expect:
      min_busbw_gbyte_per_s: 120

- name: Two DGX-1 over InfiniBand with GPUDirect RDMA, one process per GPU (IBM Redpaper REDP-5610, Example 4-3)
  gpuforge.cluster.nccl_tests:
    binary: /opt/nccl-tests/build/all_reduce_perf
    launcher: mpirun
    hosts:
      - {name: dgx01, slots: 8}
      - {name: dgx02, slots: 8}
    mode: ib_gdr
    mpirun_args: [--mca, pml, ob1, --mca, btl, ^openib]
    output_path: /var/lib/gpuforge/bench/nccl-16x1-ib_gdr.txt
    expect:
      min_busbw_gbyte_per_s: 5.0

- name: Lab stand-in over TCP between two lab nodes
  gpuforge.cluster.nccl_tests:
    binary: /usr/lib/gpuforge/bench/all_reduce_perf.py
    interpreter: [/usr/bin/python3]
    launcher: mpirun
    mpirun_args: [--allow-run-as-root]
    hosts: [{name: node1}, {name: node2}]
    mode: tcp
    max_bytes: 16M
    output_path: /tmp/nccl-lab.txt
    fail_on: never
"""

RETURN = r"""
cmd:
  description: The command run (without the timeout wrapper).
  returned: always
  type: list
  elements: str
  sample: [mpirun, -np, "16", --hostfile, /tmp/nccl.txt.hosts, all_reduce_perf, -b, "8", -e, 256M]
nccl_env:
  description: The NCCL variables set for the run.
  returned: always
  type: dict
  sample: {NCCL_DEBUG: INFO, NCCL_IB_DISABLE: "0", NCCL_NET_GDR_LEVEL: PHB, NCCL_ALGO: Ring}
hostfile:
  description: The mpirun hostfile written (null for other launchers).
  returned: always
  type: str
rc:
  description: Exit status of the benchmark (124/137 on timeout).
  returned: when it ran
  type: int
output_path:
  description: Where the raw output was written.
  returned: when it ran and output_path is set
  type: str
nccl:
  description:
    - Parsed output (kind C(nccl-tests), see docs/parsers-benchmarks.md) with keys collective, tests_version,
      format (text or json), era, header, devices, columns, rows, avg_busbw, min_bw_check, peak_busbw,
      out_of_bounds, out_of_bounds_ok, wrong_total, max_error, correctness, per_iteration, nccl_version,
      nccl_version_source, complete, transport, nccl_warnings, failures, errors.
  returned: when it ran and the output could be read
  type: dict
checks:
  description: Verdict checks, each C({name, status, observed, expected, remedy}).
  returned: when it ran and the output could be read
  type: list
  elements: dict
verdict:
  description: Worst check status, C(PASS), C(WARN) or C(FAIL).
  returned: when it ran and the output could be read
  type: str
  sample: PASS
json_output:
  description: The C(-J) file read (nccl-tests may have added C(.N) to I(json_output)).
  returned: when json_output is set and the file was read
  type: str
output_tail:
  description: Last 30 lines of the raw output.
  returned: when it ran
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_common import (
    COMMON_OPTIONS,
    check_common_options,
    finish,
    joined_output,
    judge_run,
    save_output,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_nccl_tests import (
    EXPECT,
    json_output_path,
    judge_nccl,
    parse_nccl_tests,
    parse_nccl_tests_json,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool

# IBM Redpaper REDP-5610, section 4.1: the three NCCL modes of its MPI jobs.
MODE_ENV = {
    "tcp": {"NCCL_IB_DISABLE": "1", "NCCL_NET_GDR_LEVEL": "0"},
    "ib": {"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "0"},
    "ib_gdr": {"NCCL_IB_DISABLE": "0"},
}


class NcclTests:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.result = {"changed": False, "cmd": [], "nccl_env": {}, "hostfile": None}

    def fail(self, msg):
        self.module.fail_json(msg=msg, **self.result)

    def nccl_env(self):
        params = self.params
        env = {"NCCL_DEBUG": params["nccl_debug"]} if params["nccl_debug"] else {}
        if params["mode"] != "none":
            env.update(MODE_ENV[params["mode"]])
            if params["mode"] == "ib_gdr":
                env["NCCL_NET_GDR_LEVEL"] = params["gdr_level"]
            if params["nccl_algo"]:
                env["NCCL_ALGO"] = params["nccl_algo"]
        env.update({str(k): str(v) for k, v in params["env"].items()})
        return env

    def bench_args(self):
        params = self.params
        return [
            *params["interpreter"],
            params["binary"],
            "-b",
            params["min_bytes"],
            "-e",
            params["max_bytes"],
            "-f",
            str(params["step_factor"]),
            "-g",
            str(params["gpus"]),
            "-n",
            str(params["iters"]),
            "-w",
            str(params["warmup_iters"]),
            "-c",
            "1" if params["check"] else "0",
            "-d",
            params["datatype"],
            "-o",
            params["op"],
            *(["-I", "1"] if params["per_iter_timing"] else []),
            *(["-J", params["json_output"]] if params["json_output"] else []),
            *params["extra_args"],
        ]

    def process_count(self):
        params = self.params
        if params["np"] is not None:
            return params["np"]
        return sum(host["slots"] for host in params["hosts"]) or 1

    def hostfile_path(self):
        if self.params["hostfile"]:
            return self.params["hostfile"]
        if self.params["output_path"]:
            return self.params["output_path"] + ".hosts"
        self.fail("launcher mpirun with hosts needs hostfile or output_path (where to write the hostfile)")
        return None

    def command(self, env):
        params = self.params
        launcher = params["launcher"]
        if launcher == "local":
            return self.bench_args()
        if launcher == "mpirun":
            cmd = [params["mpirun"], "-np", str(self.process_count())]
            if params["hosts"]:
                self.result["hostfile"] = self.hostfile_path()
                cmd += ["--hostfile", self.result["hostfile"]]
            # As IBM Redpaper REDP-5610's MPIJobs: no binding (NCCL picks CPUs), fill each host's slots in turn.
            cmd += ["--bind-to", "none", "--map-by", "slot"]
            for name, value in sorted(env.items()):
                cmd += ["-x", f"{name}={value}"]
            return cmd + params["mpirun_args"] + self.bench_args()
        cmd = [params["srun"], "--ntasks", str(self.process_count())]
        if params["hosts"]:
            cmd += ["--nodes", str(len(params["hosts"]))]
            cmd += ["--nodelist", ",".join(host["name"] for host in params["hosts"])]
        # srun exports the caller's environment by default; the NCCL variables travel that way.
        return cmd + params["srun_args"] + self.bench_args()

    def check_options(self):
        """env and expect, coerced ("50" -> 50.0); a malformed value fails naming its key, before anything runs."""
        params = self.params
        try:
            check_common_options(params, EXPECT)
        except OptionError as exc:
            self.fail(str(exc))
        for index, host in enumerate(params["hosts"]):
            if host["slots"] < 1:
                self.fail(f"hosts[{index}].slots must be at least 1, got {host['slots']}")

    def launcher_fix(self):
        """What to do when timeout(1) cannot start the command's first word."""
        params = self.params
        if params["launcher"] == "mpirun":
            return f"install Open MPI (mpirun) or set mpirun to its path (now {params['mpirun']!r})"
        if params["launcher"] == "srun":
            return f"install the Slurm client (srun) or set srun to its path (now {params['srun']!r})"
        if params["interpreter"]:
            return f"install {params['interpreter'][0]} or fix interpreter"
        return "check binary, and the interpreter its #! line names"

    def validate(self):
        params = self.params
        self.check_options()
        if params["gpus"] < 1:
            self.fail(f"gpus must be at least 1, got {params['gpus']}")
        if params["timeout"] < 1:
            self.fail(f"timeout must be at least 1 second, got {params['timeout']}")
        binary = params["binary"]
        if not (os.path.isfile(binary) and os.access(binary, os.R_OK)):
            self.fail(f"benchmark binary {binary} not found on {os.uname().nodename}")
        if not params["interpreter"] and not os.access(binary, os.X_OK):
            self.fail(f"benchmark binary {binary} is not executable")
        if params["launcher"] != "local" and not params["hosts"] and params["np"] is None:
            self.fail(f"launcher {params['launcher']} needs hosts or np")
        self.check_gpu_count()

    def check_gpu_count(self):
        params = self.params
        wanted = params["gpus"]
        if params["launcher"] == "mpirun":
            if params["gpus_per_host"] is None:
                return
            short = [
                f"{host['name']} ({host['slots']} x {wanted} > {params['gpus_per_host']})"
                for host in params["hosts"]
                if host["slots"] * wanted > params["gpus_per_host"]
            ]
            if short:
                self.fail(f"fewer GPUs than requested on: {', '.join(short)}")
            return
        if params["launcher"] != "local":
            return
        have = params["gpus_per_host"]
        if have is None:
            if not params["count_gpus"]:
                return
            fix = "cannot count GPUs: install the NVIDIA driver, or set gpus_per_host or count_gpus=false"
            nvidia_smi = Tool(self.module, "nvidia-smi", fix, result=self.result)
            nvidia_smi.require()
            _rc, out, _err = nvidia_smi.run(["-L"], check=True)
            have = sum(1 for line in out.splitlines() if line.startswith("GPU "))
        self.result["gpus_available"] = have
        if have < wanted:
            self.fail(f"fewer GPUs than requested: {have} available, gpus={wanted}")

    def parse(self, raw):
        """The -J file when one was asked for and written (the log adds the transport), else the text."""
        if not self.params["json_output"]:
            return parse_nccl_tests(raw)
        path = json_output_path(raw) or self.params["json_output"]
        try:
            with open(path, encoding="utf-8") as handle:
                data = handle.read()
        except OSError as exc:
            parsed = parse_nccl_tests(raw)
            parsed["errors"].append(f"json_output {path} not read ({exc.strerror}); the table of the output was used")
            return parsed
        self.result["json_output"] = path
        return parse_nccl_tests_json(data, text=raw)

    def run(self):
        params = self.params
        self.validate()
        env = self.nccl_env()
        cmd = self.command(env)
        self.result["cmd"] = cmd
        self.result["nccl_env"] = env
        if self.module.check_mode:
            self.module.exit_json(**self.result)
        if self.result["hostfile"]:
            hosts = "".join(f"{host['name']} slots={host['slots']}\n" for host in params["hosts"])
            save_output(self.module, self.result["hostfile"], hosts, self.result)
        run = Tool(self.module, cmd[0], self.launcher_fix(), result=self.result).run_bounded(
            cmd[1:], params["timeout"], environ=env
        )
        rc = run.rc
        self.result["output_tail"] = joined_output(run).splitlines()[-30:]
        if params["output_path"]:
            self.result["output_path"] = params["output_path"]

        def read(text):
            parsed = self.parse(text)
            if parsed.get("min_bw_env") is None:
                parsed["min_bw_env"] = env.get("NCCL_TESTS_MIN_BW")
            return parsed

        expect = dict(params["expect"])
        if params["mode"] != "none":
            expect.setdefault("transport", params["mode"])
        parsed = judge_run(
            self.module,
            self.result,
            run,
            read,
            lambda parsed: judge_nccl(parsed, expect),
            key="nccl",
            output_path=params["output_path"],
            timed_out=f"benchmark timed out after {params['timeout']} s; its process group was terminated",
            unreadable=lambda exc: f"could not read nccl-tests output (rc {rc}): {exc}",
        )
        if rc != 0:
            reason = "; ".join(parsed["failures"][:3]) or "see output_tail"
            self.fail(f"benchmark exited with rc {rc}: {reason}")
        if parsed["errors"] and not parsed["rows"]:
            self.fail(f"no result rows in the output: {'; '.join(parsed['errors'])}")
        finish(self.module, self.result, "NCCL", params["fail_on"])


def main():
    module = AnsibleModule(
        argument_spec={
            "binary": {"type": "path", "required": True},
            "interpreter": {"type": "list", "elements": "str", "default": []},
            "launcher": {"type": "str", "choices": ["local", "mpirun", "srun"], "default": "local"},
            "gpus": {"type": "int", "default": 1},
            "hosts": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {"name": {"type": "str", "required": True}, "slots": {"type": "int", "default": 1}},
            },
            "np": {"type": "int"},
            "hostfile": {"type": "path"},
            "mpirun": {"type": "str", "default": "mpirun"},
            "mpirun_args": {"type": "list", "elements": "str", "default": []},
            "srun": {"type": "str", "default": "srun"},
            "srun_args": {"type": "list", "elements": "str", "default": []},
            "gpus_per_host": {"type": "int"},
            "count_gpus": {"type": "bool", "default": True},
            "mode": {"type": "str", "choices": ["none", "tcp", "ib", "ib_gdr"], "default": "none"},
            "gdr_level": {"type": "str", "default": "PHB"},
            "nccl_algo": {"type": "str", "default": "Ring"},
            "nccl_debug": {"type": "str", "default": "INFO"},
            "min_bytes": {"type": "str", "default": "8"},
            "max_bytes": {"type": "str", "default": "256M"},
            "step_factor": {"type": "int", "default": 2},
            "iters": {"type": "int", "default": 20},
            "warmup_iters": {"type": "int", "default": 5},
            "check": {"type": "bool", "default": True},
            "datatype": {"type": "str", "default": "float"},
            "op": {"type": "str", "default": "sum"},
            "per_iter_timing": {"type": "bool", "default": False},
            "json_output": {"type": "path"},
            "extra_args": {"type": "list", "elements": "str", "default": []},
            "output_path": {"type": "path"},
            **COMMON_OPTIONS,
        },
        supports_check_mode=True,
    )
    NcclTests(module).run()


if __name__ == "__main__":
    main()
