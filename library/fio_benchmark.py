#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: fio sequential and random read/write on one directory, judged against site thresholds."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fio_benchmark
short_description: Run fio sequential and random read/write jobs in a directory and judge them
description:
  - Runs one C(fio --output-format=json) with the jobs of I(jobs) one after another (C(stonewall)) on one
    test file in I(directory), each for I(runtime) seconds (C(time_based)), in the C locale.
  - C(seq_read)/C(seq_write) use I(seq_block_size), C(rand_read)/C(rand_write) I(rand_block_size); the
    result has each job's bandwidth (MiB/s), IOPS and 99th-percentile completion latency.
  - Each job is judged against I(expect), the site's thresholds for this directory, over the floors gpuforge
    ships for I(storage_kind); a job without a threshold from either is reported, not judged. A job fio
    reports an error for, or that moved no data, fails.
  - The test file is removed afterwards, whatever happened; it is named for this host and process, so
    nodes that share the directory (NFS, Spectrum Scale) do not share a file.
  - In check mode nothing runs; the command is returned.
version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.benchmark
attributes:
  check_mode:
    support: partial
    details: Returns the fio command it would run; fio is not run and nothing is written.
options:
  directory:
    description:
      - Directory to test (a mount point of a shared file system, or local scratch); must exist and be writable.
    type: path
    required: true
  label:
    description: Name of the target in the results (C(nfs:/home), C(scratch)); defaults to I(directory).
    type: str
  node:
    description:
      - Name of this node in the results (the playbook passes C(inventory_hostname)); defaults to the host name.
    type: str
  fio:
    description: fio program.
    type: str
    default: fio
  size:
    description: Size of the test file (fio size syntax, C(1G)); the directory needs this much free space.
    type: str
    default: 1G
  runtime:
    description: Seconds each job runs.
    type: int
    default: 30
  jobs:
    description: Jobs to run, in this order.
    type: list
    elements: str
    choices: [seq_read, seq_write, rand_read, rand_write]
    default: [seq_read, seq_write, rand_read, rand_write]
  seq_block_size:
    description: Block size of the sequential jobs.
    type: str
    default: 1M
  rand_block_size:
    description: Block size of the random jobs.
    type: str
    default: 4k
  ioengine:
    description: fio I/O engine (C(libaio) on Linux; C(psync) where libaio is missing).
    type: str
    default: libaio
  iodepth:
    description: Outstanding I/Os per job.
    type: int
    default: 16
  direct:
    description: O_DIRECT (bypass the page cache) so that cached data does not inflate the numbers.
    type: bool
    default: true
  output_path:
    description: File to write fio's raw output to (its directory is created); none by default.
    type: path
  env:
    description: Environment of the run.
    type: dict
    default: {}
  timeout:
    description: Seconds before fio is terminated; 0 gives the jobs' runtimes plus 600 s to lay out the file.
    type: int
    default: 0
  expect:
    description:
      - The site's thresholds for this directory, each optional
        C(seq_read_mib_per_s), C(seq_write_mib_per_s) (MiB/s floors), C(rand_read_iops), C(rand_write_iops) (IOPS
        floors), C(rand_read_p99_us), C(rand_write_p99_us) (ceilings on the 99th-percentile completion latency).
      - They win key by key over the floors gpuforge ships for O(storage_kind).
    type: dict
    default: {}
  storage_kind:
    description:
      - What the directory is - C(nfs) (NFS, over IPoIB in the reference designs), C(gpfs) (IBM Spectrum Scale),
        C(scratch) (local disk) or C(extra) (a site's own target) - whose floors gpuforge ships
        (module_utils/gpuforge_fio.py DEFAULT_THRESHOLDS, each with its source - the sequential read one training
        node of a reference design needed) judge the jobs O(expect) leaves without a threshold.
      - Not given, or C(extra) - only O(expect) judges.
    type: str
    choices: [nfs, gpfs, scratch, extra]
requirements:
  - fio (Debian/Ubuntu package C(fio), EPEL C(fio) on EL); coreutils C(timeout)
notes:
  - fio(1) reports bandwidth in JSON in KiB/s; the module gives MiB/s (KiB/s / 1024).
"""

EXAMPLES = r"""
- name: fio on the NFS home share, judged against what the site measured at acceptance
  gpuforge.cluster.fio_benchmark:
    directory: /home
    label: nfs:/home
    size: 4G
    runtime: 60
    storage_kind: nfs
    expect:
      seq_read_mib_per_s: 900
      rand_read_iops: 20000

- name: Local scratch, report only
  gpuforge.cluster.fio_benchmark:
    directory: /scratch
    runtime: 10
    fail_on: never
"""

RETURN = r"""
cmd:
  description: The fio command.
  returned: always
  type: list
  elements: str
fio:
  description: Parsed output, C({fio_version, jobs, notices, errors}); each job C({name, rw, bs, error, measured}).
  returned: when fio ran
  type: dict
results:
  description:
    - One entry per job, C({name, nodes, label, directory, job, mib_per_second, iops, clat_p99_us, verdict}),
      ready to be written as the run's JSON; the verdict is its checks' worst, C(UNKNOWN) without a threshold.
  returned: when fio ran
  type: list
  elements: dict
thresholds:
  description: The thresholds the jobs were judged against - O(expect) over the floors for O(storage_kind).
  returned: when the options are valid
  type: dict
  sample: {seq_read_mib_per_s: 319}
threshold_sources:
  description: Threshold key to where it comes from - the site (O(expect)) or gpuforge's default for O(storage_kind).
  returned: when the options are valid
  type: dict
  sample: {seq_read_mib_per_s: "gpuforge default for nfs: Dell EMC Ready Solutions for AI, section 3.1.5 ..."}
checks:
  description: Each C({name, status, observed, expected, remedy}).
  returned: when fio ran
  type: list
  elements: dict
verdict:
  description: Worst check status, C(PASS) or C(FAIL).
  returned: when fio ran
  type: str
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_bench_common import (
    COMMON_OPTIONS,
    check_common_options,
    finish,
    joined_output,
    judge_run,
    last_lines,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_checks import FAIL, PASS, UNKNOWN, bench_check
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_fio import (
    EXPECT,
    JOBS,
    STORAGE_KINDS,
    fio_command,
    judge_fio,
    overall_status,
    parse_fio,
    thresholds_for,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool

LAYOUT_SLACK_S = 600


def _results(parsed, checks, node, label, directory):
    by_job = {}
    for check in checks:
        job = check["name"][len("fio_") :].replace("_p99", "")
        by_job.setdefault(job, []).append(check["status"])
    results = []
    for job in parsed["jobs"]:
        measured = job.get("measured") or {}
        statuses = by_job.get(job["name"], [])
        results.append(
            {
                "name": f"fio-{node}-{label}-{job['name']}",
                "nodes": [node],
                "label": label,
                "directory": directory,
                "job": job["name"],
                "mib_per_second": measured.get("bw_mib_s"),
                "iops": measured.get("iops"),
                "clat_p99_us": measured.get("clat_p99_us"),
                "verdict": overall_status([{"status": s} for s in statuses]) if statuses else UNKNOWN,
            }
        )
    return results


def main():
    module = AnsibleModule(
        argument_spec={
            "directory": {"type": "path", "required": True},
            "label": {"type": "str"},
            "node": {"type": "str"},
            "fio": {"type": "str", "default": "fio"},
            "size": {"type": "str", "default": "1G"},
            "runtime": {"type": "int", "default": 30},
            "jobs": {"type": "list", "elements": "str", "choices": list(JOBS), "default": list(JOBS)},
            "seq_block_size": {"type": "str", "default": "1M"},
            "rand_block_size": {"type": "str", "default": "4k"},
            "ioengine": {"type": "str", "default": "libaio"},
            "iodepth": {"type": "int", "default": 16},
            "direct": {"type": "bool", "default": True},
            "output_path": {"type": "path"},
            "storage_kind": {"type": "str", "choices": list(STORAGE_KINDS)},
            **COMMON_OPTIONS,
            "timeout": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    params = module.params
    result = {"changed": False}
    try:
        check_common_options(params, EXPECT)
    except OptionError as exc:
        module.fail_json(msg=str(exc), **result)
    # The site's thresholds over the floors shipped for the storage kind (one precedence: site > default).
    expect, result["threshold_sources"] = thresholds_for(params["expect"], params["storage_kind"])
    result["thresholds"] = expect
    if params["runtime"] < 1 or params["iodepth"] < 1:
        module.fail_json(msg="runtime and iodepth must be at least 1", **result)
    if not params["jobs"]:
        module.fail_json(msg="jobs must name at least one of " + ", ".join(JOBS), **result)
    directory = params["directory"]
    label = params["label"] or directory
    host = platform.node() or "host"
    test_file = f".gpuforge-fio-{host}-{os.getpid()}.dat"
    cmd = fio_command(
        params["fio"],
        directory,
        test_file,
        params["size"],
        params["runtime"],
        params["jobs"],
        params["seq_block_size"],
        params["rand_block_size"],
        params["ioengine"],
        params["iodepth"],
        params["direct"],
    )
    result["cmd"] = cmd
    if not os.path.isdir(directory):
        module.fail_json(msg=f"{directory} does not exist on {host} (or is not a directory): is it mounted?", **result)
    if not os.access(directory, os.W_OK | os.X_OK):
        module.fail_json(
            msg=f"{directory} is not writable by this user on {host}: fio needs to create its test file", **result
        )
    if module.check_mode:
        module.exit_json(**result)

    seconds = params["timeout"] or params["runtime"] * len(params["jobs"]) + LAYOUT_SLACK_S
    path = os.path.join(directory, test_file)
    try:
        run = Tool(module, cmd[0], "install fio (Debian: apt install fio)", result=result).run_bounded(
            cmd[1:], seconds, environ=params["env"]
        )
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            module.warn(f"could not remove the test file {path}: {exc}")

    def judge(parsed):
        checks = judge_fio(parsed, expect, label)
        result["results"] = _results(parsed, checks, params["node"] or host, label, directory)
        if run.rc != 0 and overall_status(checks) == PASS:
            remedy = "; ".join(parsed["notices"]) or "fio exited with an error"
            checks.append(bench_check("fio_rc", FAIL, run.rc, 0, remedy))
        return checks

    judge_run(
        module,
        result,
        run,
        parse_fio,
        judge,
        key="fio",
        output_path=params["output_path"],
        timed_out=f"fio on {directory} timed out after {seconds} s and was terminated",
        unreadable=lambda exc: (
            f"could not read fio's output for {directory} (rc {run.rc}): {exc}; last lines: "
            f"{last_lines(joined_output(run))}"
        ),
    )
    finish(module, result, f"fio on {label}:", params["fail_on"])


if __name__ == "__main__":
    main()
