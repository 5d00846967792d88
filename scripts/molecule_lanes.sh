#!/usr/bin/env bash
# Run `molecule test` for each scenario given, in MOLECULE_LANES parallel lanes (default 3). Lab runs
# spend most of their time waiting on podman, systemd and apt rather than on the CPU, so lanes run side by side on a
# two-core machine. Scenarios on the shared platform (.config/molecule/config.yml: one container named
# `instance`) cannot run beside each other, so they share lane 1; the others are spread over all lanes.
# Each lane logs to .gpuforge/molecule/<scenario>.log; a failed scenario's log is printed in full.
set -u -o pipefail
lanes=${MOLECULE_LANES:-3}
log_dir=.gpuforge/molecule
mkdir -p "$log_dir"
declare -a lane_items lane_counts
for (( lane = 0; lane < lanes; lane++ )); do lane_counts[lane]=0; done
# Shared-platform scenarios first, all in lane 0; then each other scenario to the lane with the fewest.
for scenario in "$@"; do
  if ! grep -q '^platforms:' "molecule/$scenario/molecule.yml"; then
    lane_items[0]="${lane_items[0]:-} $scenario"; lane_counts[0]=$(( lane_counts[0] + 1 ))
  fi
done
for scenario in "$@"; do
  grep -q '^platforms:' "molecule/$scenario/molecule.yml" || continue
  lane=0
  for (( candidate = 1; candidate < lanes; candidate++ )); do
    (( lane_counts[candidate] < lane_counts[lane] )) && lane=$candidate
  done
  lane_items[lane]="${lane_items[lane]:-} $scenario"; lane_counts[lane]=$(( lane_counts[lane] + 1 ))
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
      status=1
    fi
  done
  return $status
}

pids=()
for lane in "${!lane_items[@]}"; do
  # shellcheck disable=SC2086  # the lane's scenario list is split on purpose
  echo "== molecule lane $lane:${lane_items[lane]}"
  run_lane ${lane_items[lane]} &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
exit $status
