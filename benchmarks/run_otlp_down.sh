#!/bin/bash
# Tracing must never slow the request path: the policy net at batch 1 and 128 (concurrency 1,
# 1000 requests) with tracing off, then with every request traced to a collector that is down
# (--otlp-endpoint to a closed port: exports fail, spans are dropped and counted).
# Usage: benchmarks/run_otlp_down.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8041}
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
status=0
models=$(mktemp -d)
"$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
for mode in off down; do
  extra=()
  [ $mode = down ] && extra=(--otlp-endpoint 127.0.0.1:9)
  start_server "$build" "$models" "$out/otlp_$mode.log" "$port" "${extra[@]}" || { status=1; continue; }
  for b in 1 128; do
    "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b $b -n 1000 --warmup-requests 100 \
      --label "tracing $mode bs$b" --json "$out/otlp_${mode}_bs$b.json" | grep -E "^policy|^e2e|^server_total" || status=1
  done
  stop_server || status=1
  grep -iE "drop|export" "$out/otlp_$mode.log" | sed 's/^.*] //' | sort | uniq -c | head -5
done
rm -rf "$models"
exit $status
