#!/bin/bash
# Why an input's host-to-device copy is sometimes 4x slower (BENCHMARKS §51, §69, §70): runs
# bench_h2d_source (sources, placements, idle gaps; benchmarks/h2d_source.cc) with the policy net's
# batch-128 input (819200 bytes) and, for scale, a batch-1 input (6400 bytes), and records the PCIe
# link as nvidia-smi reports it before and after.
# Usage: benchmarks/run_h2d_source.sh BUILD_DIR OUT_DIR   (GPU builds; EXTRA_TARGETS=bench_h2d_source)
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
status=0
link() {
  nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pstate,clocks.sm \
    --format=csv,noheader 2>/dev/null | sed "s/^/  nvidia-smi ($1): gen, max gen, width, P-state, SM clock: /"
}
link "before"
"$build/bin/bench_h2d_source" --bytes 819200 --json "$out/h2d_source_819200.json" || status=1
link "after batch 128"
"$build/bin/bench_h2d_source" --bytes 6400 --gaps-ms 200,1000 --gap-samples 8 --json "$out/h2d_source_6400.json" || status=1
link "after batch 1"
exit $status
