#!/bin/bash
# Two builds of chronoserve against each other on one machine (issue 3's 85 % at concurrency 256):
# run_streaming.sh (policy net, concurrency 256, batch-1 requests, delay 0, unary and streaming)
# with every binary (server, chronobench, in-process reference) from BASE_BUILD, then from
# BUILD_DIR, ROUNDS times in turn (base, new, base, new...) so that drift in the machine falls on
# both alike, per forward (CUDA graphs, eager). Prints every run and the median per variant.
#
# Usage: BASE_BUILD=DIR benchmarks/run_ab.sh BUILD_DIR OUT_DIR [PORT]
# Environment: BASE_BUILD (required: the build to compare with, e.g. of the previous commit),
#   ROUNDS=2, FORWARDS="graphs eager", CONNECTIONS="4", and run_streaming.sh's (CONCURRENCY,
#   THREADS, INSTANCES, ...); PERF_ROUND=N samples the worker with perf (run_streaming.sh's
#   PERF_WORKER) in round N only (perf's reports take seconds per point).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8054}
base=${BASE_BUILD:?BASE_BUILD: the build to compare with}
here=$(dirname "$0")
source "$here/server_lib.sh"
status=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for variant in base new; do
    dir=$build
    [ "$variant" = base ] && dir=$base
    for forward in ${FORWARDS:-graphs eager}; do
      echo "== round $round, $variant ($dir), forward: $forward"
      profile=""
      [ "$round" = "${PERF_ROUND:-0}" ] && profile=1
      PERF_WORKER="$profile" EXTRA_CONFIG="$(forward_config "$forward")" DELAYS=0 CONNECTIONS="${CONNECTIONS:-4}" \
        bash "$here/run_streaming.sh" "$dir" "$out/$variant/round$round/$forward" "$port" || status=1
    done
  done
done

python3 - "$out" <<'PY' || status=1
import collections, glob, json, os, statistics, sys
out = sys.argv[1]
groups = collections.defaultdict(list)
for path in sorted(glob.glob(f"{out}/*/round*/*/streaming_summary.json")):
    forward = os.path.basename(os.path.dirname(path))
    variant = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(path))))
    for x in json.load(open(path)):
        groups[(forward, x["transport"], x["connections"], variant)].append(x)
fields = [("items_per_s", "items/s", 10, 0), ("batch_reached", "batch", 7, 1), ("ratio", "served/in-proc", 15, 3),
          ("launch", "launch", 8, 0), ("finish", "finish", 8, 0), ("complete", "complete", 9, 0),
          ("inprocess_launch_us", "in-proc launch", 15, 0), ("inprocess_finish_us", "in-proc finish", 15, 0)]
def value(x, key):
    if key in ("launch", "finish", "complete"):
        return x["worker_us_per_batch"].get(key, 0.0)
    return x[key] or 0.0
print("medians over the rounds (every run is in OUT/VARIANT/roundN/FORWARD/):")
print(f"{'forward':>8}{'transport':>10}{'conns':>6}{'variant':>8}{'runs':>5}" + "".join(f"{h:>{w}}" for _, h, w, _ in fields))
rows = []
for key in sorted(groups):
    runs = groups[key]
    med = {k: statistics.median(value(x, k) for x in runs) for k, _, _, _ in fields}
    rows.append(dict(zip(("forward", "transport", "connections", "variant"), key), runs=len(runs), **med,
                     each_items_per_s=[x["items_per_s"] for x in runs], each_ratio=[x["ratio"] for x in runs]))
    print(f"{key[0]:>8}{key[1]:>10}{key[2]:>6}{key[3]:>8}{len(runs):>5}"
          + "".join(f"{med[k] * (100 if k == 'ratio' else 1):>{w}.{d if k != 'ratio' else 1}f}" for k, _, w, d in fields))
json.dump(rows, open(f"{out}/ab_summary.json", "w"), indent=2)
PY
exit $status
