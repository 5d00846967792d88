#!/usr/bin/env bash
# Run `molecule test` for each scenario given, in MOLECULE_LANES parallel lanes (default 4). Lab runs
# spend much of their time waiting on podman, systemd and apt rather than on the CPU, so lanes run side by side on a
# two-core machine: in make test's run of 2026-12-03 the unit suite, niced beside three lanes, still got about half a
# core, so the three lanes left CPU unused. Scenarios on the shared platform (.config/molecule/config.yml: one
# container named `instance`) cannot run beside each other, so they share the first lane; the others are spread over
# all lanes by their recorded duration.
# Each lane logs to .gpuforge/molecule/<scenario>.log; a failed scenario's log is printed in full when it fails,
# and once all lanes are done, each failed scenario's failing tasks and tests are printed again last, so that the
# end of the output (all a CI summary may keep) says what failed and why.
set -u -o pipefail
lanes=${MOLECULE_LANES:-4}
# The OS-shape images (GPUFORGE_LAB_IMAGE_RHEL9, ..._UBUNTU2204) that `gpuforge lab prepare` built on the shared image
# (src/gpuforge/lab/os_shapes.py): scenarios with OS-shaped platforms read them.
if [[ -f .gpuforge/lab/os-shape-images.env ]]; then
  set -a
  # shellcheck disable=SC1091  # written by gpuforge lab prepare
  source .gpuforge/lab/os-shape-images.env
  set +a
fi
log_dir=.gpuforge/molecule
mkdir -p "$log_dir"
rm -f "$log_dir"/*.failed
# While the lanes run, `gpuforge lab down` (make smoke, beside them in make test) leaves the mirror and the lab network
# to them (MOLECULE_LANES_PID_FILE in src/gpuforge/lab/cluster.py).
echo $$ > "$log_dir/lanes.pid"
trap 'rm -f "$log_dir/lanes.pid"' EXIT
declare -a lane_items lane_seconds
for (( lane = 0; lane < lanes; lane++ )); do lane_seconds[lane]=0; done
# How long each scenario took on the lab (molecule/scenario-seconds.txt, "name seconds" per line, updated from
# the "passed in" lines of a CI run); a scenario not listed counts as 600 s.
seconds_of() {
  local found
  found=$(awk -v name="$1" '$1 == name { print $2 }' molecule/scenario-seconds.txt 2>/dev/null)
  echo "${found:-600}"
}
# Longest first, each to the lane with the least work so far, so the lanes end at about the same time.
# Shared-platform scenarios all go to lane 0 (they cannot run beside each other).
ordered=$(for scenario in "$@"; do echo "$(seconds_of "$scenario") $scenario"; done | sort -rn | awk '{ print $2 }')
for scenario in $ordered; do
  if ! grep -q '^platforms:' "molecule/$scenario/molecule.yml"; then
    lane_items[0]="${lane_items[0]:-} $scenario"; lane_seconds[0]=$(( lane_seconds[0] + $(seconds_of "$scenario") ))
  fi
done
for scenario in $ordered; do
  grep -q '^platforms:' "molecule/$scenario/molecule.yml" || continue
  lane=0
  for (( candidate = 1; candidate < lanes; candidate++ )); do
    (( lane_seconds[candidate] < lane_seconds[lane] )) && lane=$candidate
  done
  lane_items[lane]="${lane_items[lane]:-} $scenario"; lane_seconds[lane]=$(( lane_seconds[lane] + $(seconds_of "$scenario") ))
done

run_lane() {
  local status=0 scenario started
  for scenario in "$@"; do
    started=$(date +%s)
    if molecule test -s "$scenario" > "$log_dir/$scenario.log" 2>&1; then
      echo "== molecule $scenario: passed in $(( $(date +%s) - started ))s"
    else
      echo "== molecule $scenario: FAILED after $(( $(date +%s) - started ))s; its log:"
      cat "$log_dir/$scenario.log"
      touch "$log_dir/$scenario.failed"
      status=1
    fi
  done
  return $status
}

if [[ -n "${MOLECULE_LANES_PLAN_ONLY:-}" ]]; then  # print the plan, run nothing
  for lane in "${!lane_items[@]}"; do echo "== molecule lane $lane (~${lane_seconds[lane]} s):${lane_items[lane]}"; done
  exit 0
fi
pids=()
for lane in "${!lane_items[@]}"; do
  # shellcheck disable=SC2086  # the lane's scenario list is split on purpose
  echo "== molecule lane $lane (~${lane_seconds[lane]} s):${lane_items[lane]}"
  run_lane ${lane_items[lane]} &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
# What failed, last: Ansible's failed tasks and pytest's failed tests with their assertion lines, colours removed.
for marker in "$log_dir"/*.failed; do
  [[ -e "$marker" ]] || continue
  scenario=$(basename "$marker" .failed)
  echo "== molecule $scenario FAILED; from its log ($log_dir/$scenario.log):"
  sed -e 's/\x1b\[[0-9;]*m//g' -e '/FAILED - RETRYING/d' "$log_dir/$scenario.log" \
    | grep -E -A3 '(fatal|failed): \[|^[^A-Za-z]*(E  |FAILED |ERROR |Failed: )|timed out' | tail -n 80
done
# Which OS-specific task files and vars files the passed scenarios ran, per OS shape (src/gpuforge/lab/os_coverage.py).
# After a full CI run that passed (every scenario of molecule/ci-scenarios.txt given), --complete also fails the run
# on an OS file no scenario executed that molecule/os-files-unexecuted.txt does not list, and on a listed one that ran.
coverage_args=()
missing=$(grep -v '^#' molecule/ci-scenarios.txt | grep -vxF -f <(printf '%s\n' "$@") || true)
if [[ $status -eq 0 && -z $missing ]]; then coverage_args=(--complete); fi
python3 -m gpuforge.lab.os_coverage "${coverage_args[@]}" > "$log_dir/os-coverage.yml" 2> "$log_dir/os-coverage.err"
coverage_rc=$?
echo "== OS coverage of the passed scenarios: $log_dir/os-coverage.yml (files no run executed listed last)"
if [[ $coverage_rc -ne 0 ]]; then
  cat "$log_dir/os-coverage.err"
  echo "== molecule: the OS coverage check failed (${coverage_args[*]:-record only})"
  status=1
fi
exit $status
