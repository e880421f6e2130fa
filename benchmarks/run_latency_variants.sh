#!/bin/bash
# Concurrency-1 latency of the policy net (CUDA graphs where there is a GPU) for each value of one
# server flag: bench_serve_latency at batch 128 and batch 1 (REQUESTS closed-loop requests after
# 100 warm-up ones, tensors in the messages), a fresh server per value, ROUNDS rounds with the order
# of the values reversed every other round so drift favours none. Prints one row per run (p50 µs of
# e2e, admit, input_stage, launch, outside the GPU spans and server_total); then, on the same server,
# chronobench closed loop at each CONCURRENCY:BATCH of LOADS (requests of BATCH items, unary, 4
# connections) and its items/s and batch reached. JSON per run under OUT_DIR/VALUE/roundN.
#
# Usage: benchmarks/run_latency_variants.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): VARIANT_FLAG=--input-arena-mib VARIANTS="auto 0" ROUNDS=2 REQUESTS=1000
#   FORWARD=graphs (or eager) SERVER_FLAGS="" (fixed flags for every server) LOADS="8:128 64:16"
#   WINDOW_MS=2000 TRIALS=3
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8061}
here=$(dirname "$0")
source "$here/server_lib.sh"
flag=${VARIANT_FLAG:---input-arena-mib}
requests=${REQUESTS:-1000}
models=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$models"' EXIT
"$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
forward_config "${FORWARD:-graphs}" >> "$models/policy_net/config.pbtxt"
status=0
rows=()
loads=()
for round in $(seq 1 "${ROUNDS:-2}"); do
  # shellcheck disable=SC2086
  for value in $(round_order "$round" ${VARIANTS:-auto 0}); do
    dir="$out/$value/round$round"
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    start_server "$build" "$models" "$dir/server.log" "$port" ${SERVER_FLAGS:-} "$flag" "$value" || { status=1; continue; }
    for batch in 128 1; do
      "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b "$batch" -n "$requests" \
        --warmup-requests 100 --label "policy_net bs$batch, $flag $value" --json "$dir/bs$batch.json" \
        > "$dir/bs$batch.txt" || status=1
      rows+=("$dir/bs$batch.json|$value|$round|$batch")
    done
    for load in ${LOADS:-8:128 64:16}; do
      conc=${load%%:*} items=${load##*:}
      "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" -b "$items" --concurrency-range "$conc" \
        --connections 4 --threads 4 -p "${WINDOW_MS:-2000}" -r "${TRIALS:-3}" --warmup-requests $((conc * 8)) \
        --json "$dir/load_${conc}x${items}.json" > "$dir/load_${conc}x${items}.txt" 2>&1 || status=1
      loads+=("$dir/load_${conc}x${items}.json|$value|$round|$load")
    done
    stop_server || status=1
  done
done
printf '%-16s %6s %6s %9s %9s %12s %9s %14s %13s\n' "${flag#--}" round batch "e2e p50" admit "input_stage" launch "outside GPU" "server_total"
for row in "${rows[@]}"; do
  IFS='|' read -r json value round batch <<< "$row"
  python3 - "$json" "$value" "$round" "$batch" <<'EOF' || status=1
import json, sys
path, value, rnd, batch = sys.argv[1:]
lat = json.load(open(path))["latency_us"]
get = lambda k: lat.get(k, {}).get("p50", float("nan"))
print(f"{value:<16} {rnd:>6} {batch:>6} {get('e2e'):9.1f} {get('admit'):9.1f} {get('input_stage'):12.1f} {get('launch'):9.1f} "
      f"{get('outside_gpu_spans'):14.1f} {get('server_total'):13.1f}")
EOF
done
printf '\n%-16s %6s %10s %10s %8s %9s\n' "${flag#--}" round "conc:batch" "items/s" batch "p50 us"
for row in "${loads[@]}"; do
  IFS='|' read -r json value round load <<< "$row"
  python3 - "$json" "$value" "$round" "$load" <<'EOF' || status=1
import json, sys
path, value, rnd, load = sys.argv[1:]
r = json.load(open(path))["runs"][0]
reached = (r.get("batch_size_executed") or {}).get("mean") or float("nan")
print(f"{value:<16} {rnd:>6} {load:>10} {r['throughput_items_per_s']:10.0f} {reached:8.1f} {r['latency_us']['e2e']['p50']:9.0f}")
EOF
done
exit $status
