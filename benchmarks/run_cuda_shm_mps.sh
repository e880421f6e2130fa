#!/bin/bash
# Does CUDA MPS take away what a client's own GPU copies cost a server on the same GPU? chronobench
# --shared-memory cuda copies each request's tensors between its host memory and its GPU memory;
# without MPS the GPU time-slices between its CUDA context and the server's, and at batch-1 requests,
# concurrency 64, it served about 1/7 of the requests system shared memory did (BENCHMARKS §47).
# Runs the policy net (CUDA graphs, keep-warm) twice: on the GPU as it is, then with an MPS control
# daemon of this script's own (its pipe and log directories in a scratch directory, quit at exit;
# nothing about the GPU's settings changes), server and client both its clients. Each time: chronobench
# at batch 1, concurrency 64, through system and CUDA shared memory, and bench_serve_latency through
# CUDA shared memory at batch 128 (a check that its regions, now client::CudaSharedMemory, still serve).
# Prints the points (chronobench_table); JSON per point. Skips the MPS half when nvidia-cuda-mps-control is missing.
# Usage: benchmarks/run_cuda_shm_mps.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8071}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
warm_graph_workspace "$build" || exit 1
status=0
mps_up=0
stop_mps() {
  [ "$mps_up" = 1 ] || return 0
  echo quit | nvidia-cuda-mps-control
  mps_up=0
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
trap 'stop_server >/dev/null 2>&1; stop_mps; rm -rf "${scratch_dirs[@]}"' EXIT
run_points() {  # run_points LABEL
  local label=$1
  start_server "$build" "$models" "$out/server-mps-$label.log" "$port" || { status=1; return; }
  for transport in system cuda; do
    "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" --shared-memory "$transport" -b 1 --concurrency-range 64 \
      -p 2000 -r 4 -s 15 --warmup-requests 200 --json "$out/mps_${label}_${transport}.json" \
      > "$out/mps_${label}_${transport}.log" 2>&1 || { echo "chronobench $label $transport failed"; tail -5 "$out/mps_${label}_${transport}.log"; status=1; }
  done
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net --shared-memory cuda -b 128 -n 300 \
    --warmup-requests 50 --json "$out/mps_${label}_serve_latency_cuda.json" | grep -E "^(e2e|call|h2d|compute|d2h)" \
    | sed "s/^/  [$label bench_serve_latency cuda b128] /" || status=1
  stop_server || status=1
}
run_points as_is
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    mps_up=1
    run_points mps
    cat "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null | tail -5 | sed 's/^/  [mps control.log] /'
    stop_mps
  else
    echo "nvidia-cuda-mps-control -d failed: MPS half skipped"
  fi
else
  echo "nvidia-cuda-mps-control not found: MPS half skipped"
fi
echo
chronobench_table "as_is system=$out/mps_as_is_system.json" "as_is cuda=$out/mps_as_is_cuda.json" \
  "mps system=$out/mps_mps_system.json" "mps cuda=$out/mps_mps_cuda.json" || status=1
exit $status
