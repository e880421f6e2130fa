#!/bin/bash
# The serving latency benchmark: starts chronoserve on the example repository and measures the
# policy net at batch 128 and batch 1 (closed loop, concurrency 1, 1000 requests after 100
# warm-up requests), batch 128 with a small response, and batch 128 after 200 ms / 1 s idle gaps.
# Prints tables and writes JSON under OUT_DIR.
# Usage: benchmarks/run_serve_latency.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8001}
mkdir -p "$out"
models=$(mktemp -d)
"$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
source "$(dirname "$0")/server_lib.sh"
trap 'stop_server >/dev/null 2>&1; rm -rf "$models"' EXIT
start_server "$build" "$models" "$out/server.log" "$port" || exit 1
status=0
for batch in 128 1; do
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b $batch -n 1000 --warmup-requests 100 \
    --label "policy_net bs$batch" --json "$out/serve_latency_bs$batch.json" || status=1
done
# Where transport goes: the same batch-128 request with a 512-byte response (OUTPUT__1 only).
"$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n 1000 --warmup-requests 50 \
  --outputs OUTPUT__1 --label "policy_net bs128, OUTPUT__1 only" --json "$out/serve_latency_bs128_small_response.json" || status=1
# Idle gaps (eager, no keep-warm): each measured request after a pause.
for gap in 200 1000; do
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n 20 --warmup-requests 20 \
    --idle-gap-ms $gap --label "policy_net bs128, ${gap} ms idle gaps" --json "$out/serve_latency_gap$gap.json" || status=1
done
stop_server || status=1
exit $status
