#!/usr/bin/env bash
# Run on a real GPU node, as root: capture the raw outputs of the tools gpuforge parses, then validate this
# machine with playbooks/validate.yml over the local connection (inventory hosts.yml beside this file).
# Usage: benchmarks/real_node/run.sh OUTDIR   (needs ansible-core on PATH or importable by python3)
# Writes OUTDIR/capture.tar.gz (one file per command, each starting with `$ command` and ending with `rc=N`),
# OUTDIR/validate.log and OUTDIR/validation.tar.gz (the node's JSON report as the playbook wrote it).
set -u
out=$(realpath -m "${1:?usage: run.sh OUTDIR}")
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
work=$(mktemp -d)
cd "$work" || exit 1

# stdout in NAME.txt between the `$ command` and `rc=N` lines, stderr apart in NAME.err (a parser reads stdout
# only, as the modules do: the first H200 lspci capture had a libkmod warning mixed into it).
run() {
  local name=$1
  shift
  { echo "\$ $*"; timeout 120 "$@" 2>"$name.err"; echo "rc=$?"; } >"$name.txt"
  [ -s "$name.err" ] || rm -f "$name.err"
}

# Same as nvidia_smi_facts' clock event sample (library/nvidia_smi_facts.py, CLOCK_EVENT_FIELDS).
clock_fields=timestamp,index,pci.bus_id,serial,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown
sample_clock_events() {
  local name=$1
  { echo "\$ nvidia-smi --query-gpu=$clock_fields --format=csv (20 samples, 0.5 s apart)"
    for _ in $(seq 20); do nvidia-smi --query-gpu="$clock_fields" --format=csv; sleep 0.5; done
    echo "rc=$?"; } >"$name.txt" 2>&1
}

run uname uname -a
run os-release cat /etc/os-release
run nvidia-smi nvidia-smi
run nvidia-smi-L nvidia-smi -L
run nvidia-smi-q nvidia-smi -q
nvidia-smi -q -x >nvidia-smi-q-x.xml 2>nvidia-smi-q-x.err
echo "rc=$?" >>nvidia-smi-q-x.err
run nvidia-smi-topo-m nvidia-smi topo -m
run nvidia-smi-nvlink-status nvidia-smi nvlink --status
run nvidia-smi-nvlink-e nvidia-smi nvlink -e
sample_clock_events clock-events-idle
# Under load: a bf16 matrix product loop on every GPU for 25 s (PyTorch, when the machine has it).
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  python3 - >load.txt 2>&1 <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + 25
n = 0
while time.time() < end:
    a @ a
    n += 1
torch.cuda.synchronize()
print(f"{n} products of 8192x8192 bf16 in 25 s")
PY
  load=$!
  sleep 5
  sample_clock_events clock-events-load
  run nvidia-smi-q-d-performance-load nvidia-smi -q -d PERFORMANCE
  run nvidia-smi-query-gpu-load nvidia-smi --query-gpu=index,pci.bus_id,clocks.sm,clocks.max.sm,power.draw.average,power.draw.instant,temperature.gpu,utilization.gpu,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown --format=csv
  wait "$load"
fi
# The PCIe and kernel-module checks read these (gpu_node_check); a bare VM image may lack both.
command -v lspci >/dev/null && run lspci-vvv-D lspci -vvv -D
command -v lsmod >/dev/null && run lsmod lsmod
run which-tools sh -c 'for t in lspci dcgmi nvbandwidth ibstat ibv_devinfo ib_write_bw all_reduce_perf; do printf "%s: " $t; command -v $t || echo missing; done'
tar czf "$out/capture.tar.gz" .

# Validation: the project's playbook against this machine.
cd "$root" || exit 1
export ANSIBLE_CONFIG=$root/ansible.cfg ANSIBLE_CALLBACKS_ENABLED=ansible.builtin.default ANSIBLE_NOCOLOR=1
artifacts=$work/artifacts
ansible-playbook -i benchmarks/real_node/hosts.yml playbooks/validate.yml \
  -e gpuforge_artifacts_dir="$artifacts" >"$out/validate.log" 2>&1
echo "validate.yml rc=$?" >>"$out/validate.log"
tar czf "$out/validation.tar.gz" -C "$artifacts" .

# Second stage, when the benchmark tools were built on the node (GPUFORGE_REAL_NODE_TOOLS: build_tools.sh's OUT_DIR):
# validate.yml again with nvbandwidth (built_tools.yml names the site's own install), then benchmark.yml's nccl-tests
# and p2p on this node. Writes OUTDIR/validate-tools.log, OUTDIR/benchmark.log and OUTDIR/tools-run.tar.gz (the
# validation report with nvbandwidth, and the benchmark run's records and raw outputs).
if [ -n "${GPUFORGE_REAL_NODE_TOOLS:-}" ]; then
  tools=$(realpath "$GPUFORGE_REAL_NODE_TOOLS")
  export LD_LIBRARY_PATH="$(cat "$tools/nccl-lib-dir.txt")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  tools_artifacts=$work/tools-artifacts
  tool_vars=(-e @benchmarks/real_node/built_tools.yml -e gpuforge_real_node_tools_dir="$tools/bin"
    -e gpuforge_artifacts_dir="$tools_artifacts")
  ansible-playbook -i benchmarks/real_node/hosts.yml playbooks/validate.yml "${tool_vars[@]}" \
    >"$out/validate-tools.log" 2>&1
  echo "validate.yml rc=$?" >>"$out/validate-tools.log"
  ansible-playbook -i benchmarks/real_node/hosts.yml playbooks/benchmark.yml --tags nccl,p2p "${tool_vars[@]}" \
    >"$out/benchmark.log" 2>&1
  echo "benchmark.yml rc=$?" >>"$out/benchmark.log"
  tar czf "$out/tools-run.tar.gz" -C "$tools_artifacts" .
fi
