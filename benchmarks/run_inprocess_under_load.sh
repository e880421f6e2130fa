#!/bin/bash
# Is the served worker's extra cost per batch the serving code, or the host it shares? (issue 3's
# 85 % at concurrency 256.) The in-process reference (bench_inprocess_throughput: the backend's
# Launch/Finish back to back, no gRPC, no queue) for the policy net, CUDA graphs and eager, at the
# batch sizes in SIZES, twice: on a quiet machine, then while another chronoserve serves a small
# CPU model (the mlp, KIND_CPU) to chronobench at concurrency 256 over streaming, which keeps gRPC's
# and chronobench's threads as busy as a served GPU point does, on the same cores. Prints the host
# time in the Launch / Finish calls and items/s, quiet against loaded, and the load's CPU by thread.
#
# Usage: benchmarks/run_inprocess_under_load.sh BUILD_DIR OUT_DIR [PORT]
# Environment: SIZES="8,16,24,56" ITERATIONS=5000 CONCURRENCY=256 CONNECTIONS=4 THREADS=8
#   FORWARDS="graphs eager"
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8055}
sizes=${SIZES:-8,16,24,56}
iterations=${ITERATIONS:-5000}
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
write_eager_and_graph_repos "$build" "$work" || exit 1
"$build/bin/chronoserve-examples" --out "$work/load" >/dev/null || exit 1
rm -rf "$work/load/policy_net"
sed -i 's/^instance_group.*/instance_group [ { count: 1 kind: KIND_CPU } ]/' "$work/load/mlp/config.pbtxt"

inprocess() {  # FORWARD NAME
  "$build/bin/bench_inprocess_throughput" --model-repository "$work/$1" -m policy_net --batch-sizes "$sizes" \
    -n "$iterations" --json "$out/${1}_$2.json"
}
status=0
for forward in ${FORWARDS:-graphs eager}; do
  echo "== $forward, quiet machine"
  inprocess "$forward" quiet || status=1
done

start_server "$build" "$work/load" "$out/load-server.log" "$port" --allow-metrics false || exit 1
# chronobench in a loop of short runs (each prints its rate) until the in-process runs are done.
( while :; do
    "$build/bin/chronobench" -m mlp -u "127.0.0.1:$port" -b 1 --concurrency-range "${CONCURRENCY:-256}" \
      --connections "${CONNECTIONS:-4}" --threads "${THREADS:-8}" --streaming -p 1000 -r 3 \
      --warmup-requests 512 2>&1 | grep "^concurrency"
  done ) > "$out/load.txt" &
load=$!
for _ in $(seq 1 600); do [ -s "$out/load.txt" ] && break; sleep 0.1; done  # bounded: 60 s
[ -s "$out/load.txt" ] || { echo "the load did not start"; cat "$out/load-server.log" | tail; exit 1; }
thread_ticks "$server" "$work/before"; t0=$(date +%s.%N)
for forward in ${FORWARDS:-graphs eager}; do
  echo "== $forward, under load"
  inprocess "$forward" loaded || status=1
done
thread_ticks "$server" "$work/after"; t1=$(date +%s.%N)
pkill -P "$load" chronobench; kill "$load" 2>/dev/null; wait "$load" 2>/dev/null
pkill -f "$build/bin/chronobench -m mlp" 2>/dev/null
stop_server || status=1
echo "load server's CPU by thread over the loaded runs: $(thread_cores "$work/before" "$work/after" \
  "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1")")"
echo "the load (chronobench runs, requests/s and e2e p50/p99 us):"
awk '{print "  " $5 " req/s, e2e " $7}' "$out/load.txt"

python3 - "$out" ${FORWARDS:-graphs eager} <<'PY' || status=1
import json, sys
out, forwards = sys.argv[1], sys.argv[2:]
rows = []
print(f"{'forward':>8}{'batch':>6}{'quiet items/s':>14}{'loaded items/s':>15}{'ratio':>7}"
      f"{'launch quiet':>13}{'launch loaded':>14}{'finish quiet':>13}{'finish loaded':>14}")
for forward in forwards:
    try:
        quiet = {p["batch_size"]: p for p in json.load(open(f"{out}/{forward}_quiet.json"))["points"]}
        loaded = {p["batch_size"]: p for p in json.load(open(f"{out}/{forward}_loaded.json"))["points"]}
    except (OSError, ValueError, KeyError):
        print(f"{forward}: missing results")
        continue
    for bs in sorted(quiet):
        q, l = quiet[bs], loaded.get(bs)
        if l is None:
            continue
        row = {"forward": forward, "batch_size": bs, "quiet_items_per_s": q["items_per_s"],
               "loaded_items_per_s": l["items_per_s"], "quiet_launch_us": q["launch_call_mean_us"],
               "loaded_launch_us": l["launch_call_mean_us"], "quiet_finish_us": q["finish_call_mean_us"],
               "loaded_finish_us": l["finish_call_mean_us"]}
        rows.append(row)
        print(f"{forward:>8}{bs:>6}{row['quiet_items_per_s']:>14.0f}{row['loaded_items_per_s']:>15.0f}"
              f"{row['loaded_items_per_s'] / row['quiet_items_per_s']:>7.2f}{row['quiet_launch_us']:>13.1f}"
              f"{row['loaded_launch_us']:>14.1f}{row['quiet_finish_us']:>13.1f}{row['loaded_finish_us']:>14.1f}")
json.dump(rows, open(f"{out}/under_load_summary.json", "w"), indent=2)
PY
exit $status
