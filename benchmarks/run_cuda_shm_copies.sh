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
python3 - "$out" <<'PY' || status=1
import json, os, sys
out = sys.argv[1]
print(f"\n{'server':<9}{'transport':<10}{'req/s':>9}{'e2e':>7}{'server':>8}{'queue':>7}{'h2d':>6}{'compute':>8}{'d2h':>6}{'gap':>6}{'launch':>7}{'items/batch':>12}")
for label in ("default_cuda", "default_system", "exact_cuda"):
    path = f"{out}/copies_{label}.json"
    if not os.path.exists(path):
        continue
    run = json.load(open(path))["runs"][0]
    lat = {k: v.get("p50", 0) for k, v in run["latency_us"].items() if isinstance(v, dict)}
    per_batch = run.get("batch_size_executed", {}).get("per_batch_mean") or 0
    mode, transport = label.split("_")
    print(f"{mode:<9}{transport:<10}{run['throughput_rps']:>9.0f}{lat.get('e2e', 0):>7.0f}{lat.get('server_total', 0):>8.0f}"
          f"{lat.get('queue', 0):>7.0f}{lat.get('h2d', 0):>6.0f}{lat.get('compute', 0):>8.0f}{lat.get('d2h', 0):>6.0f}"
          f"{lat.get('device_gap', 0):>6.0f}{lat.get('launch', 0):>7.0f}{per_batch:>12.1f}")
PY
exit $status
