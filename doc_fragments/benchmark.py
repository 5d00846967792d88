"""Documentation shared by the benchmark modules (nccl_tests, resnet50_benchmark, fio_benchmark, p2p_bandwidth):
the options of gpuforge_bench_common.COMMON_OPTIONS and what check mode does. A module's own option keys win over
the fragment's (its description of expect, its timeout default)."""

from __future__ import annotations


class ModuleDocFragment:
    # gpuforge.cluster.benchmark
    DOCUMENTATION = r"""
options:
  env:
    description: Environment variables of the run.
    type: dict
    default: {}
  timeout:
    description: Seconds before the run's process group is terminated (then killed 30 s later).
    type: int
    default: 1800
  expect:
    description: The thresholds the run is judged against (each module lists its keys).
    type: dict
    default: {}
  fail_on:
    description:
      - Fail the task when the verdict is at least this bad (C(fail) at C(FAIL), C(warn) at C(WARN) or C(FAIL));
        C(never) only reports.
      - The verdict, the checks and the parsed output are returned either way.
    type: str
    choices: [fail, warn, never]
    default: fail
attributes:
  check_mode:
    support: partial
    details: Returns the command it would run; the benchmark is not run and nothing is written (no verdict).
  diff_mode:
    support: none
"""
