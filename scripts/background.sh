#!/usr/bin/env bash
# Usage: background.sh COMMAND [ARG...]: run COMMAND as make test's background work (BACKGROUND in the Makefile).
# nice alone does not make it yield to the Molecule lanes: the kernel shares the CPU between control groups first
# (podman puts every lab node container in its own, beside the session make runs in) and compares nice values only
# within a group. So the command runs in a control group of its own with the CPU weight the kernel gives nice 10
# (sched_prio_to_weight: 110 of nice 0's 1024; cgroup v2's cpu.weight scale: 11 of 100), and at nice 10 within it.
# Where no control group can be made (no write access, no cpu controller), nice alone applies.
set -uo pipefail
group=gpuforge-background
if [[ -f /sys/fs/cgroup/cpu/cpu.shares ]]; then  # cgroup v1
  dir=/sys/fs/cgroup/cpu/$group
  { mkdir -p "$dir" && echo 110 > "$dir/cpu.shares" && echo $$ > "$dir/cgroup.procs"; } 2>/dev/null || true
elif grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then  # cgroup v2
  dir=/sys/fs/cgroup/$group
  { grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control; } 2>/dev/null
  { mkdir -p "$dir" && echo 11 > "$dir/cpu.weight" && echo $$ > "$dir/cgroup.procs"; } 2>/dev/null || true
fi
exec nice -n 10 "$@"
