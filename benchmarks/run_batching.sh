#!/bin/bash
# The batching benchmark (issue 3): the policy net with dynamic batching on and off, closed loop at
# concurrency 1..256 (batch 1 per request), then the in-process reference: the same model through
# the server's backend without gRPC or queue (bench_inprocess_throughput) at fixed batch sizes and
# at the batch size the batcher reached at the highest concurrency. Writes JSON per point and
# summary.json (throughput at the top point vs the in-process figure at the batch size reached).
# About 2-3 minutes on a GPU with the defaults.
#
# Usage: benchmarks/run_batching.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): MODEL=policy_net POINTS="1 8 32 128 256" WINDOW_MS=1500 TRIALS=3
#   DELAY_US=300 INSTANCES=1 WARMUP_RUNS=2 ITERATIONS=200 BATCH_SIZES=1,8,32,64,128 MODES="on off"
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8001}
model=${MODEL:-policy_net}
points=${POINTS:-1 8 32 128 256}
window_ms=${WINDOW_MS:-1500}
trials=${TRIALS:-3}
delay_us=${DELAY_US:-300}
instances=${INSTANCES:-1}
warmup_runs=${WARMUP_RUNS:-2}
iterations=${ITERATIONS:-200}
batch_sizes=${BATCH_SIZES:-1,8,32,64,128}
modes=${MODES:-on off}
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
"$build/bin/chronoserve-examples" --out "$work/examples" >/dev/null || exit 1

status=0
for mode in $modes; do
  mode_delay=""
  [ "$mode" = on ] && mode_delay=$delay_us
  write_batching_repo "$work/examples" "$work/repo_$mode" "$model" "$mode_delay" "$instances"
  echo "== dynamic batching $mode (max_queue_delay ${delay_us} us, $instances instance(s))"
  start_server "$build" "$work/repo_$mode" "$out/server_$mode.log" "$port" --warmup-runs "$warmup_runs" --allow-metrics false || exit 1
  for c in $points; do
    "$build/bin/chronobench" -m "$model" -u "127.0.0.1:$port" -b 1 --concurrency-range "$c:$c:1" \
      -p "$window_ms" -r "$trials" --warmup-requests $((c * 4 > 50 ? c * 4 : 50)) \
      --json "$out/batching_${mode}_c$c.json" | tail -n 3 || status=1
  done
  stop_server || status=1
done

# The batch size the batcher reached at the top point (rounded): items per executed batch (each batch
# once; BENCHMARKS §36), added to the in-process sizes.
top=${points##* }
reached=""
if command -v python3 >/dev/null && [ -f "$out/batching_on_c$top.json" ]; then
  reached=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print(max(1, round((r["batch_size_executed"] or {}).get("per_batch_mean") or 1)))' \
    "$out/batching_on_c$top.json" 2>/dev/null)
fi
sizes=$batch_sizes
[ -n "$reached" ] && sizes="$batch_sizes,$reached"
echo "== in-process reference (batch sizes $sizes; batcher reached ${reached:-?} at concurrency $top)"
"$build/bin/bench_inprocess_throughput" --model-repository "$work/repo_on" -m "$model" \
  --batch-sizes "$sizes" -n "$iterations" --json "$out/inprocess.json" || status=1

if command -v python3 >/dev/null; then
  python3 - "$out" "$top" "$reached" <<'EOF' || status=1
import json, os, sys
out, top, reached = sys.argv[1], sys.argv[2], sys.argv[3]
summary = {"points": {}, "inprocess": None, "goal": "throughput at the top concurrency >= 85% of in-process at the batch reached"}
for name in sorted(os.listdir(out)):
    if name.startswith("batching_") and name.endswith(".json"):
        r = json.load(open(os.path.join(out, name)))["runs"][0]
        summary["points"][name[:-5]] = {
            "concurrency": r.get("concurrency"), "items_per_s": r["throughput_items_per_s"],
            "e2e_p50_us": r["latency_us"]["e2e"]["p50"], "e2e_p99_us": r["latency_us"]["e2e"]["p99"],
            "batch_size_executed_mean": (r["batch_size_executed"] or {}).get("mean"),
            "items_per_batch": (r["batch_size_executed"] or {}).get("per_batch_mean"), "errors": r["errors"], "stable": r["stable"]}
inproc = json.load(open(os.path.join(out, "inprocess.json")))
summary["inprocess"] = inproc
print(f"{'point':<22}{'items/s':>12}{'p50 us':>10}{'p99 us':>10}{'batch':>8}{'errors':>8}")
for k, p in summary["points"].items():  # batch: items per executed batch
    print(f"{k:<22}{p['items_per_s']:>12.0f}{p['e2e_p50_us']:>10.0f}{p['e2e_p99_us']:>10.0f}"
          f"{p['items_per_batch'] or 0:>8.1f}{p['errors']:>8}")
top_on = summary["points"].get(f"batching_on_c{top}")
ref = [p for p in inproc["points"] if reached and p["batch_size"] == int(reached)]
if top_on and ref:
    ratio = top_on["items_per_s"] / ref[0]["items_per_s"]
    summary["ratio_at_top"] = {"served_items_per_s": top_on["items_per_s"], "batch_reached": int(reached),
                               "inprocess_items_per_s": ref[0]["items_per_s"], "ratio": ratio}
    print(f"concurrency {top}, batching on: {top_on['items_per_s']:.0f} items/s at batch {int(reached)}; "
          f"in-process at batch {int(reached)}: {ref[0]['items_per_s']:.0f} items/s -> {100 * ratio:.1f}% (goal >= 85%)")
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
EOF
fi
exit $status
