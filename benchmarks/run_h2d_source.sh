#!/bin/bash
# Why an input's host-to-device copy is sometimes 4x slower (BENCHMARKS §51, §69-§71): runs
# bench_h2d_source (sources, placements, idle gaps, ways of storing; benchmarks/h2d_source.cc) with
# the policy net's batch-128 input (819200 bytes) and, for scale, a batch-1 input (6400 bytes);
# records the CPUs and the PCIe link as the host reports them.
# Usage: benchmarks/run_h2d_source.sh BUILD_DIR OUT_DIR   (GPU builds; EXTRA_TARGETS=bench_h2d_source)
# QUICK=1 leaves out the pinned runs and the batch-1 input.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
status=0
bench=$build/bin/bench_h2d_source
link() {
  nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pstate,clocks.sm \
    --format=csv,noheader 2>/dev/null | sed "s/^/  nvidia-smi ($1): gen, max gen, width, P-state, SM clock: /"
}
{
  lscpu 2>/dev/null | grep -E "^(Model name|Socket|Core|Thread|NUMA|L2|L3|CPU\(s\)|Hypervisor)"
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null | head -1 | tr 'A-F' 'a-f' | sed 's/^0000//')
  for d in /sys/bus/pci/devices/*"${bus#0000}"; do [ -e "$d/numa_node" ] && echo "GPU $bus numa_node $(cat "$d/numa_node")"; done
  for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
    [ -d "$s" ] && echo "cpu0 idle state $(cat "$s/name") latency $(cat "$s/latency") us, disabled $(cat "$s/disable")"
  done
  echo "cpuidle driver: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)"
} | tee "$out/h2d_source_host.txt"
link "before"
# The server's case and its remedies: written by another thread, stored cached / streaming / evicted.
"$bench" --bytes 819200 --regions 4 --gaps-ms 10,200,1000 --ways idle --stores cached,streaming,evicted \
  --json "$out/h2d_source_819200.json" || status=1
link "after batch 128"
if [ "${QUICK:-0}" != 1 ]; then
  # Where the two threads run: the same CPU, and two apart.
  for pin in "0 0" "1 0" "8 0" "15 0"; do
    set -- $pin
    "$bench" --bytes 819200 --blocks 2 --regions 0 --gaps-ms 10,200 --gap-samples 8 --ways idle \
      --writer-cpu "$1" --copier-cpu "$2" --json "$out/h2d_source_pin_$1_$2.json" || status=1
  done
  "$bench" --bytes 6400 --regions 0 --gaps-ms 200,1000 --gap-samples 8 --ways idle --stores cached,streaming \
    --json "$out/h2d_source_6400.json" || status=1
  link "after batch 1"
fi
exit $status
