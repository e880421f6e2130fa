#!/bin/bash
# chronobench's recorded runs for the policy net (issue 5): interval mode at idle gaps of 0, 200 and
# 1000 ms, and a batch sweep at concurrency 1. Starts its own chronoserve on the example models.
# Usage: benchmarks/run_chronobench.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8011}
mkdir -p "$out"
models=$(mktemp -d)
"$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
source "$(dirname "$0")/server_lib.sh"
trap 'stop_server >/dev/null 2>&1; rm -rf "$models"' EXIT
start_server "$build" "$models" "$out/bench_server.log" "$port" || exit 1
status=0
# Chart.js for --html: the Debian package, unpacked by .gpu/env.sh on the GPU machine.
[ -f /opt/deps/usr/share/javascript/chart.js/chart.min.js ] && export CHRONOBENCH_CHARTJS=/opt/deps/usr/share/javascript/chart.js/chart.min.js
bench="$build/bin/chronobench -m policy_net -u 127.0.0.1:$port"
# Interval mode: 0 and 200 ms gaps, then 1000 ms; 12 requests per window, 3 windows.
for range in 0:200:200 1000; do
  $bench -b 128 --idle-gap-range $range --measurement-request-count 12 -p 100 -r 3 -s 25 \
    --warmup-requests 5 --json "$out/chronobench_idle_${range//:/_}.json" \
    --html "$out/chronobench_idle_${range//:/_}.html" || status=1
done
# Batch sweep at concurrency 1.
$bench --batch-range 16:128:16 -p 1000 -r 4 --warmup-requests 50 \
  --json "$out/chronobench_batch.json" --csv "$out/chronobench_batch.csv" --html "$out/chronobench_batch.html" || status=1
stop_server || status=1
exit $status
