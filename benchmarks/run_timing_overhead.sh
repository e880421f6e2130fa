#!/bin/bash
# What request timing costs (goal: throughput with --request-timing on / off >= 0.99): the example
# policy net (on the GPU when there is one, KIND_AUTO) served by chronoserve with --request-timing
# on and with off, on the same model repository, loaded by chronobench in closed loop at saturation
# (concurrency 16 x batch 8 and concurrency 4 x batch 128 by default), several stability windows
# per point. Rounds alternate the order (on, off / off, on, ...) so that drift does not favour one
# mode; a mode's figure is the mean over rounds. Prints both throughputs and on/off per point and
# writes OUT_DIR/timing_overhead.json (plus each chronobench JSON and server log).
#
# Usage: benchmarks/run_timing_overhead.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): POINTS="16:8 4:128" (concurrency:batch) WINDOW_MS=3000 TRIALS=8
#   STABILITY=5 ROUNDS=2 WARMUP_REQUESTS=500 WARMUP_RUNS=2
#   INPROCESS_ROUNDS=3 INPROCESS_BATCH_SIZES=8,128 INPROCESS_ITERATIONS=500 (the in-process on/off part)
#   EXTRA_CONFIG="" (appended to the model's config.pbtxt, e.g. 'optimization { cuda { graphs: true } }')
#   REPOSITORY="" MODEL=policy_net (another model: MODEL from the repository REPOSITORY, copied first;
#   benchmarks/run_timing_overhead_resnet50.sh uses it)
# Besides the ratio of the means, each round's own on/off (its two runs are neighbours in time, so
# they share the machine's drift) and the median of those ratios, with each mode's lowest and
# highest items/s: a ratio is only settled when the spread between rounds is smaller than it.
# A quick run on the CPU: POINTS="4:8" WINDOW_MS=500 TRIALS=3 STABILITY=50 ROUNDS=1 WARMUP_REQUESTS=20 WARMUP_RUNS=1
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8021}
points=${POINTS:-16:8 4:128}
window_ms=${WINDOW_MS:-3000}
trials=${TRIALS:-8}
stability=${STABILITY:-5}
rounds=${ROUNDS:-2}
warmup_requests=${WARMUP_REQUESTS:-500}
warmup_runs=${WARMUP_RUNS:-2}
model=${MODEL:-policy_net}
mkdir -p "$out"
models=$(mktemp -d)
if [ -n "${REPOSITORY:-}" ]; then
  cp -r "$REPOSITORY/$model" "$models/" || exit 1
else
  "$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
fi
[ -z "${EXTRA_CONFIG:-}" ] || printf '%s\n' "$EXTRA_CONFIG" >> "$models/$model/config.pbtxt"
source "$(dirname "$0")/server_lib.sh"
trap 'stop_server >/dev/null 2>&1; rm -rf "$models"' EXIT

status=0
for round in $(seq 1 "$rounds"); do
  order="on off"
  [ $((round % 2)) -eq 0 ] && order="off on"
  for mode in $order; do
    echo "== round $round, --request-timing $mode"
    start_server "$build" "$models" "$out/server_${mode}_r$round.log" "$port" \
      --request-timing "$mode" --warmup-runs "$warmup_runs" || exit 1
    for point in $points; do
      c=${point%%:*}
      b=${point##*:}
      "$build/bin/chronobench" -m "$model" -u "127.0.0.1:$port" -b "$b" --concurrency-range "$c" \
        -p "$window_ms" -r "$trials" -s "$stability" --warmup-requests "$warmup_requests" \
        --json "$out/timing_${mode}_r${round}_c${c}_b${b}.json" | grep -E "^concurrency|warning" || status=1
    done
    stop_server || status=1
  done
done

# In process (no gRPC, no queue): the backend's Execute() with the worker's timing on and off,
# alternating, INPROCESS_ROUNDS times; isolates the GPU path's share of the cost.
inprocess_rounds=${INPROCESS_ROUNDS:-3}
for round in $(seq 1 "$inprocess_rounds"); do
  for mode in on off; do
    "$build/bin/bench_inprocess_throughput" --model-repository "$models" -m "$model" --one-request \
      --batch-sizes "${INPROCESS_BATCH_SIZES:-8,128}" -n "${INPROCESS_ITERATIONS:-500}" --request-timing "$mode" \
      --json "$out/timing_inprocess_${mode}_r$round.json" > /dev/null || status=1
  done
done

command -v python3 >/dev/null || { echo "python3 missing: see the JSON files in $out"; exit $status; }
python3 - "$out" "$inprocess_rounds" <<'EOF' || status=1
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
by = {}
for mode in ("on", "off"):
    for r in range(1, rounds + 1):
        for p in json.load(open(f"{out}/timing_inprocess_{mode}_r{r}.json"))["points"]:
            by.setdefault(p["batch_size"], {"on": [], "off": []})[mode].append(p["items_per_s"])
print(f"\nin process (Execute() back to back, one request per batch, {rounds} alternating rounds)")
print(f"{'batch':>6}{'on items/s':>14}{'off items/s':>14}{'on/off':>9}")
rows = []
for b, m in sorted(by.items()):
    on, off = statistics.median(m["on"]), statistics.median(m["off"])
    rows.append({"batch_size": b, "on_items_per_s": m["on"], "off_items_per_s": m["off"], "ratio_of_medians": on / off})
    print(f"{b:>6}{on:>14.0f}{off:>14.0f}{on / off:>9.3f}")
json.dump(rows, open(f"{out}/timing_overhead_inprocess.json", "w"), indent=2)
EOF
python3 - "$out" "$rounds" "$points" "$model" <<'EOF' || status=1
import json, os, statistics, sys
out, rounds, points, model = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
device = "?"
for line in open(os.path.join(out, "server_on_r1.log")):
    if "READY on [" in line:
        device = line.split("READY on [", 1)[1].split("]", 1)[0]
summary = {"model": model, "device": device, "rounds": rounds, "goal": "items/s with timing on / off >= 0.99",
           "points": []}
print(f"\n{model} on {device}, closed loop, {rounds} round(s) per mode")
print(f"{'point':<22}{'on items/s':>14}{'off items/s':>14}{'on/off':>9}{'on p50 us':>11}{'off p50 us':>11}  stable"
      f"  {'per-round on/off':<28}{'median':>7}  on range / off range")
for point in points:
    c, b = (int(x) for x in point.split(":"))
    runs = {"on": [], "off": []}
    for mode in runs:
        for r in range(1, rounds + 1):
            path = os.path.join(out, f"timing_{mode}_r{r}_c{c}_b{b}.json")
            if os.path.exists(path):
                runs[mode].append(json.load(open(path))["runs"][0])
    if not runs["on"] or not runs["off"]:
        print(f"concurrency {c}, batch {b}: missing runs")
        continue
    mean = {m: statistics.mean(r["throughput_items_per_s"] for r in runs[m]) for m in runs}
    p50 = {m: statistics.mean(r["latency_us"]["e2e"]["p50"] for r in runs[m]) for m in runs}
    stable = all(r["stable"] for m in runs for r in runs[m])
    ratio = mean["on"] / mean["off"] if mean["off"] > 0 else 0
    items = {m: [r["throughput_items_per_s"] for r in runs[m]] for m in runs}
    paired = [on / off for on, off in zip(items["on"], items["off"]) if off > 0]
    paired_median = statistics.median(paired) if paired else 0
    summary["points"].append({
        "concurrency": c, "batch_size": b, "ratio_on_off": ratio, "stable": stable,
        "ratio_per_round": paired, "median_ratio_per_round": paired_median,
        "on": {"items_per_s": mean["on"], "e2e_p50_us": p50["on"],
               "items_per_s_per_round": [r["throughput_items_per_s"] for r in runs["on"]],
               "batch_size_executed_mean": [(r["batch_size_executed"] or {}).get("mean") for r in runs["on"]]},
        "off": {"items_per_s": mean["off"], "e2e_p50_us": p50["off"],
                "items_per_s_per_round": [r["throughput_items_per_s"] for r in runs["off"]],
                "responses_without_timing": [r["responses_without_timing"] for r in runs["off"]]}})
    print(f"{f'concurrency {c}, batch {b}':<22}{mean['on']:>14.0f}{mean['off']:>14.0f}{ratio:>9.3f}"
          f"{p50['on']:>11.0f}{p50['off']:>11.0f}  {'yes' if stable else 'NO':<6}"
          f"  {' '.join(f'{x:.3f}' for x in paired):<28}{paired_median:>7.3f}"
          f"  {min(items['on']):.0f}-{max(items['on']):.0f} / {min(items['off']):.0f}-{max(items['off']):.0f}")
json.dump(summary, open(os.path.join(out, "timing_overhead.json"), "w"), indent=2)
print(f"wrote {os.path.join(out, 'timing_overhead.json')}")
EOF
exit $status
