#!/bin/bash
# Where a batch of requests in CUDA shared memory spends its h2d and d2h (BENCHMARKS §47): with
# --shared-memory-preload at batch-1 requests, concurrency 64, batches of about 12 requests had h2d
# 146-180 and d2h 451-585 us against 3 and 8 us for one request: one copy a request and input, and
# one a request and output, each from or into a region another process allocated. Is that the
# device's time or the host's enqueueing (the spans then also hold the gaps the host leaves)?
# One server each, the policy net with CUDA graphs and keep-warm: chronobench cuda_pre and
# system_pre on the default server, then cuda_pre with exact_device_timing (the stream held until
# the batch is enqueued: spans are device time only). Prints the spans and the worker's time per
# batch by phase (launch = enqueueing); JSON per point.
# Usage: benchmarks/run_cuda_shm_copies.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8081}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
scratch_dir work || exit 1
status=0
point() {  # point LABEL TRANSPORT: one chronobench point at batch 1, concurrency 64, preloaded
  "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" --shared-memory "$2" --shared-memory-preload -b 1 \
    --concurrency-range 64 -p 2000 -r 4 -s 15 --warmup-requests 200 --json "$out/copies_$1.json" \
    > "$out/copies_$1.log" 2>&1 || { echo "chronobench $1 failed"; tail -5 "$out/copies_$1.log"; status=1; }
}
for mode in default exact; do
  models=$work/models_$mode
  write_warm_graph_repo "$build" "$models" || exit 1
  [ "$mode" = default ] || echo 'parameters { key: "exact_device_timing" value { string_value: "true" } }' \
    >> "$models/policy_net/config.pbtxt"
  for transport in cuda system; do
    [ "$mode" = default ] || [ "$transport" = cuda ] || continue
    start_server "$build" "$models" "$out/server-copies-$mode-$transport.log" "$port" || { status=1; continue; }
    SECONDS=0
    point "${mode}_$transport" "$transport"
    took=$SECONDS
    stop_server || status=1
    echo "[$mode $transport] worker, ${took} s of server life under this one point:"
    worker_share "$out/server-copies-$mode-$transport.log" "$took" | grep policy_net | sed 's/^/  /'
  done
done
echo
chronobench_table "default cuda=$out/copies_default_cuda.json" "default system=$out/copies_default_system.json" \
  "exact cuda=$out/copies_exact_cuda.json" || status=1
exit $status
