#!/bin/bash
# Batch pipelining (issue 6, copy/compute overlap): in-process throughput of the policy net with the
# worker's pipelined loop (launch batch i+1, its H2D on the copy stream, before finishing batch i)
# against one batch at a time, eager and CUDA graphs, at several batch sizes; then request timing
# on / off with the pipelined loop, and the host time of its Launch / Finish calls per batch either way.
# Alternating rounds; medians of the rounds. JSON per run plus pipeline_summary.json.
# Usage: benchmarks/run_pipeline.sh BUILD_DIR OUT_DIR
# Environment (defaults): BATCH_SIZES=1,8,32,128 ITERATIONS=2000 ROUNDS=3
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
sizes=${BATCH_SIZES:-1,8,32,128}
iterations=${ITERATIONS:-2000}
rounds=${ROUNDS:-3}
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
write_eager_and_graph_repos "$build" "$work" || exit 1
status=0
for round in $(seq 1 "$rounds"); do
  for forward in eager graphs; do
    for run in "pipe_on:--pipeline on --request-timing on" "pipe_off:--pipeline off --request-timing on" \
               "timing_off:--pipeline on --request-timing off"; do
      name=${run%%:*}
      # shellcheck disable=SC2086
      "$build/bin/bench_inprocess_throughput" --model-repository "$work/$forward" -m policy_net \
        --batch-sizes "$sizes" -n "$iterations" ${run#*:} \
        --json "$out/pipeline_${forward}_${name}_r$round.json" > /dev/null || status=1
    done
  done
done
python3 - "$out" "$rounds" <<'PY' || status=1
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
summary = []
print(f"{'forward':<8}{'batch':>6}{'one at a time':>15}{'pipelined':>12}{'gain':>7}{'timing off':>12}{'on/off':>8}"
      f"{'batch p50 us seq/pipe':>24}{'launch us on/off':>19}{'finish us on/off':>19}")
for forward in ("eager", "graphs"):
    runs = {}
    for name in ("pipe_on", "pipe_off", "timing_off"):
        for r in range(1, rounds + 1):
            for p in json.load(open(f"{out}/pipeline_{forward}_{name}_r{r}.json"))["points"]:
                runs.setdefault(p["batch_size"], {}).setdefault(name, []).append(p)
    for b, m in sorted(runs.items()):
        med = {k: statistics.median(x["items_per_s"] for x in v) for k, v in m.items()}
        lat = {k: statistics.median(x["batch_latency_p50_us"] for x in v) for k, v in m.items()}
        # The pipelined Launch / Finish calls' host time per batch, timing on and off: what timing costs the worker.
        call = {(k, c): statistics.median(x.get(f"{c}_call_mean_us", 0) for x in v)
                for k, v in m.items() for c in ("launch", "finish")}
        row = {"forward": forward, "batch_size": b, "items_per_s": {k: [x["items_per_s"] for x in v] for k, v in m.items()},
               "pipelined_over_one_at_a_time": med["pipe_on"] / med["pipe_off"],
               "timing_on_over_off_pipelined": med["pipe_on"] / med["timing_off"],
               "call_us": {f"{k}_{c}": v for (k, c), v in call.items()}}
        summary.append(row)
        print(f"{forward:<8}{b:>6}{med['pipe_off']:>15.0f}{med['pipe_on']:>12.0f}{row['pipelined_over_one_at_a_time']:>7.2f}"
              f"{med['timing_off']:>12.0f}{row['timing_on_over_off_pipelined']:>8.3f}{lat['pipe_off']:>12.1f} / {lat['pipe_on']:<9.1f}"
              + "".join(f"{call[('pipe_on', c)]:>11.1f} / {call[('timing_off', c)]:<5.1f}" for c in ("launch", "finish")))
json.dump(summary, open(f"{out}/pipeline_summary.json", "w"), indent=2)
PY
exit $status
