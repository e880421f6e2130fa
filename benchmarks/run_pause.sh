#!/bin/bash
# Does the worker's host work slow down after it sleeps? (issue 3: a served worker's Launch takes
# 2-3x the in-process call.) bench_inprocess_throughput on the policy net, CUDA graphs and eager, at
# BATCH_SIZES, with the thread sleeping PAUSES microseconds before each batch (0 = back to back, as
# the in-process reference runs; a served worker waits for requests between batches). Prints each
# table (launch / finish call us are host time inside the calls, pauses excluded) and writes JSON.
#
# Usage: benchmarks/run_pause.sh BUILD_DIR OUT_DIR
# Environment: BATCH_SIZES=8,21 PAUSES="0 20 100" ITERATIONS=2000
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
write_eager_and_graph_repos "$build" "$work" || exit 1
status=0
for forward in graphs eager; do
  for pause in ${PAUSES:-0 20 100}; do
    echo "== $forward, pause $pause us before each batch"
    "$build/bin/bench_inprocess_throughput" --model-repository "$work/$forward" -m policy_net \
      --batch-sizes "${BATCH_SIZES:-8,21}" -n "${ITERATIONS:-2000}" --pause-us "$pause" \
      --json "$out/pause_${forward}_$pause.json" | tail -n +2 || status=1
  done
done
exit $status
