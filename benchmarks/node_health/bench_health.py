"""Benchmark: gpuforge-health's run time on lab nodes against the simulated tools (docs/monitoring.md,
"gpuforge-health"). Not a timed test: it measures and writes what it measured.

For each profile (lab/profiles/) and each gpuforge-health profile (full, prolog, epilog), it installs the command as
the node_health role lays it out, builds a simulated node on this machine (benchmarks/node_health/simnode.py: one
process per tool call, as on a lab node) and times `rounds` runs, the first on an empty state file. The target is
10 s for the full profile on an 8-GPU node (issue 50).

    python benchmarks/node_health/bench_health.py [--profiles dgx1-v100-edr,dgx-h100-ndr] [--rounds 5]
        [--python /usr/bin/python3] [--out benchmarks/node_health/results/<name>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import simnode

TARGET_SECONDS = 10.0


def bench(profile: str, rounds: int, python: str, work: Path) -> dict:
    node = simnode.SimNode(work / "node", profile, python=python)
    command = simnode.install(work / "opt", python=python)
    config = work / "health.json"
    # Lab profiles are named as their expected system (roles/gpuforge/defaults/main/expected_hardware.yml).
    config.write_text(json.dumps(simnode.health_config(profile)), encoding="utf-8")
    gpus = len(json.loads((work / "node" / "hardware.json").read_text(encoding="utf-8"))["gpu"]["devices"])
    result = {"profile": profile, "gpus": gpus, "health_profiles": {}}
    for health_profile in ("full", "prolog", "epilog"):
        seconds, codes = [], set()
        for _ in range(rounds):
            started = time.monotonic()
            done = node.run(
                [
                    str(command),
                    "--profile",
                    health_profile,
                    "--config",
                    str(config),
                    "--node",
                    profile,
                    "--state",
                    str(work / "state" / "state.json"),
                    "--record",
                    str(work / "state" / "last.json"),
                ]
            )
            seconds.append(round(time.monotonic() - started, 3))
            codes.add(done.returncode)
            if done.returncode != 0:
                raise SystemExit(f"{profile} {health_profile}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        result["health_profiles"][health_profile] = {
            "seconds": seconds,
            "min_seconds": min(seconds),
            "median_seconds": statistics.median(seconds),
            "max_seconds": max(seconds),
            "exit_codes": sorted(codes),
        }
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default="dgx1-v100-edr,dgx-h100-ndr")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--python", default="/usr/bin/python3", help="the node's Python (lab nodes: /usr/bin/python3)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    version = subprocess.run([args.python, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    report = {
        "benchmark": "gpuforge-health",
        "target_seconds": TARGET_SECONDS,
        # The 1-minute load average before the runs: the lab machine is shared (other runs inflate the times).
        "machine": {
            "cpus": os.cpu_count(),
            "python": version,
            "platform": platform.platform(),
            "load_average_1min": os.getloadavg()[0],
        },
        "rounds": args.rounds,
        "results": [],
    }
    for profile in args.profiles.split(","):
        with tempfile.TemporaryDirectory(prefix="gpuforge-health-bench-") as work:
            report["results"].append(bench(profile, args.rounds, args.python, Path(work)))
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    worst = max(r["health_profiles"]["full"]["max_seconds"] for r in report["results"])
    return 0 if worst <= TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
