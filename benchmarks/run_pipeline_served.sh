#!/bin/bash
# Batch pipelining served (issue 6): the policy net with CUDA graphs, one worker, pipeline_depth 2
# (default) against 1, alternating rounds: chronobench closed loop at POINTS (concurrency:batch),
# then bench_serve_latency at concurrency 1 (batch 128) to show what pipelining costs an idle
# server (nothing: a lone batch copies on the worker's stream as before). JSON per run plus
# pipeline_served_summary.json.
# Usage: benchmarks/run_pipeline_served.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): POINTS="16:8 8:32 4:128" WINDOW_MS=2000 TRIALS=5 ROUNDS=2
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8071}
points=${POINTS:-16:8 8:32 4:128}
window_ms=${WINDOW_MS:-2000}
trials=${TRIALS:-5}
rounds=${ROUNDS:-2}
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
status=0
for depth in 1 2; do
  "$build/bin/chronoserve-examples" --out "$work/d$depth" >/dev/null || exit 1
  printf '%s\n' 'optimization { cuda { graphs: true } }' \
    "parameters { key: \"pipeline_depth\" value { string_value: \"$depth\" } }" >> "$work/d$depth/policy_net/config.pbtxt"
done
for round in $(seq 1 "$rounds"); do
  order="2 1"
  [ $((round % 2)) -eq 0 ] && order="1 2"
  for depth in $order; do
    echo "== round $round, pipeline_depth $depth"
    start_server "$build" "$work/d$depth" "$out/server_pipe_d${depth}_r$round.log" "$port" --allow-metrics false || exit 1
    for point in $points; do
      c=${point%%:*}
      b=${point##*:}
      "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" -b "$b" --concurrency-range "$c" \
        -p "$window_ms" -r "$trials" --warmup-requests 200 \
        --json "$out/pipe_served_d${depth}_r${round}_c${c}_b${b}.json" | grep -E "^concurrency|warning" || status=1
    done
    "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n 500 --warmup-requests 100 \
      --json "$out/pipe_c1_d${depth}_r$round.json" > /dev/null || status=1
    stop_server || status=1
  done
done
python3 - "$out" "$rounds" "$points" <<'PY' || status=1
import json, statistics, sys
out, rounds, points = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
rows = []
print(f"{'point':<16}{'depth 1 items/s':>16}{'depth 2 items/s':>16}{'2 / 1':>7}{'p50 us d1/d2':>16}")
for point in points:
    c, b = point.split(":")
    med = {}
    p50 = {}
    for d in ("1", "2"):
        runs = [json.load(open(f"{out}/pipe_served_d{d}_r{r}_c{c}_b{b}.json"))["runs"][0] for r in range(1, rounds + 1)]
        med[d] = statistics.median(x["throughput_items_per_s"] for x in runs)
        p50[d] = statistics.median(x["latency_us"]["e2e"]["p50"] for x in runs)
    rows.append({"concurrency": int(c), "batch": int(b), "items_per_s": med, "e2e_p50_us": p50, "ratio": med["2"] / med["1"]})
    print(f"c{c} x b{b:<10}{med['1']:>16.0f}{med['2']:>16.0f}{med['2'] / med['1']:>7.2f}{p50['1']:>9.0f}/{p50['2']:<6.0f}")
c1 = {d: statistics.median(json.load(open(f"{out}/pipe_c1_d{d}_r{r}.json"))["latency_us"]["e2e"]["p50"]
                           for r in range(1, rounds + 1)) for d in ("1", "2")}
print(f"concurrency 1, batch 128, e2e p50: depth 1 {c1['1']:.0f} us, depth 2 {c1['2']:.0f} us")
json.dump({"points": rows, "c1_bs128_e2e_p50_us": c1}, open(f"{out}/pipeline_served_summary.json", "w"), indent=2)
PY
exit $status
