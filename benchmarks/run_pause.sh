#!/bin/bash
# Does the worker's host work slow down after it sleeps? (issue 3: a served worker's Launch takes
# 2-3x the in-process call.) bench_inprocess_throughput on the policy net, CUDA graphs and eager, at
# BATCH_SIZES, with the thread sleeping PAUSES microseconds before each batch (0 = back to back, as
# the in-process reference runs; a served worker waits for requests between batches), and with
# FRESH=on the inputs moved to new memory written by another thread before each batch (as gRPC's
# threads write the payloads a served batch gathers). Prints each table (launch / finish call us are
# host time inside the calls, pauses and rewrites excluded) and writes JSON.
#
# Usage: benchmarks/run_pause.sh BUILD_DIR OUT_DIR
# Environment: BATCH_SIZES=8,21 PAUSES="0 20 100" FRESH="off on" ITERATIONS=2000
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
write_eager_and_graph_repos "$build" "$work" || exit 1
status=0
for forward in graphs eager; do
  for fresh in ${FRESH:-off on}; do
    for pause in ${PAUSES:-0 20 100}; do
      flag=(); [ "$fresh" = on ] && flag=(--fresh-inputs)
      echo "== $forward, pause $pause us before each batch, inputs fresh from another thread: $fresh"
      "$build/bin/bench_inprocess_throughput" --model-repository "$work/$forward" -m policy_net \
        --batch-sizes "${BATCH_SIZES:-8,21}" -n "${ITERATIONS:-2000}" --pause-us "$pause" "${flag[@]}" \
        --json "$out/pause_${forward}_${pause}_fresh_$fresh.json" | tail -n +2 || status=1
    done
  done
done
exit $status
