#!/bin/bash
# chronobench through the three transports on the GPU machine: the tensors in the message, in system
# shared memory, and in CUDA shared memory (the client's GPU memory, by CUDA IPC handle; chronobench
# built with CUDA). The policy net with CUDA graphs and keep-warm on one server; per round and
# transport two closed-loop points: batch-1 requests at concurrency 64 (requests batch on the server:
# with CUDA regions they are gathered on the device) and batch-128 requests at concurrency 2. Rounds
# (ROUNDS, default 2) alternate the transports' order. Prints throughput, e2e and the server's spans
# (p50) and the items per executed batch (chronobench_table); JSON per point. Transports ending in "_pre" run with
# --shared-memory-preload (inputs written once, outputs left in the regions: no client copies).
# Usage: [ROUNDS=2] [TRANSPORTS="none system cuda system_pre cuda_pre"] benchmarks/run_chronobench_shm.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8061}
rounds=${ROUNDS:-2}
transports=${TRANSPORTS:-none system cuda system_pre cuda_pre}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
warm_graph_workspace "$build" || exit 1
start_server "$build" "$models" "$out/server-cb-shm.log" "$port" || exit 1
status=0
point() {  # point TRANSPORT ROUND LABEL ARGS...
  local transport=$1 round=$2 label=$3
  shift 3
  local preload=()
  [ "${transport%_pre}" = "$transport" ] || preload=(--shared-memory-preload)
  "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" --shared-memory "${transport%_pre}" "${preload[@]}" -p 2000 -r 4 -s 15 \
    --warmup-requests 200 "$@" --json "$out/cb_shm_${transport}_${label}_r${round}.json" > "$out/cb_shm_${transport}_${label}_r${round}.log" 2>&1 \
    || { echo "chronobench $transport $label round $round failed:"; tail -5 "$out/cb_shm_${transport}_${label}_r${round}.log"; status=1; }
}
for round in $(seq 1 "$rounds"); do
  for transport in $(round_order "$round" $transports); do
    point "$transport" "$round" bs1_c64 -b 1 --concurrency-range 64
    point "$transport" "$round" bs128_c2 -b 128 --concurrency-range 2
  done
done
stop_server || status=1
rows=()
for label in bs1_c64 bs128_c2; do
  for transport in $transports; do
    for round in $(seq 1 "$rounds"); do rows+=("$label $transport r$round=$out/cb_shm_${transport}_${label}_r${round}.json"); done
  done
done
echo
chronobench_table "${rows[@]}" || status=1
exit $status
