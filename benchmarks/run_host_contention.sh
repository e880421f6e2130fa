#!/bin/bash
# How much does a busy host slow the worker's own host work? (issue 3: served vs in-process.) The
# in-process reference (bench_inprocess_throughput: the server's backend, no gRPC) for the policy
# net, CUDA graphs and eager, at BATCH_SIZES, three ways: on an idle host; pinned to the last CPU
# with HOGS processes that copy 64 MB buffers in a loop (memory traffic and cache churn, as gRPC's
# threads and a load generator make) pinned to the other CPUs; and unpinned with the hogs spread
# over every CPU (time-sliced with them too). Prints items/s per case and the ratio to idle; JSON per case.
#
# Usage: benchmarks/run_host_contention.sh BUILD_DIR OUT_DIR
# Environment: BATCH_SIZES=8,24,36 ITERATIONS=2000 HOGS=(CPUs - 1)
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
sizes=${BATCH_SIZES:-8,24,36}
iterations=${ITERATIONS:-2000}
cpus=$(nproc)
hogs=${HOGS:-$((cpus > 1 ? cpus - 1 : 1))}
bench_cpu=$((cpus - 1))
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
write_eager_and_graph_repos "$build" "$work" || exit 1

hog_pids=()
start_hogs() {  # start_hogs SPAN: the hogs round-robin over CPUs 0..SPAN-1
  for i in $(seq 0 $((hogs - 1))); do
    taskset -c $((i % $1)) python3 -c '
b = bytearray(64 << 20)
while True:
    c = bytes(b)' &
    hog_pids+=($!)
  done
}
stop_hogs() {
  [ ${#hog_pids[@]} -eq 0 ] || kill "${hog_pids[@]}" 2>/dev/null
  wait "${hog_pids[@]}" 2>/dev/null
  hog_pids=()
}
trap 'stop_hogs; stop_server >/dev/null 2>&1; rm -rf "${scratch_dirs[@]}"' EXIT

status=0
for forward in graphs eager; do
  for case in idle hogs_pinned hogs_shared; do
    launcher=()
    case $case in
      idle) ;;
      hogs_pinned) start_hogs "$bench_cpu"; launcher=(taskset -c "$bench_cpu") ;;
      hogs_shared) start_hogs "$cpus" ;;
    esac
    echo "== $forward, $case (${#hog_pids[@]} hogs; bench ${launcher[*]:-unpinned})"
    "${launcher[@]}" "$build/bin/bench_inprocess_throughput" --model-repository "$work/$forward" -m policy_net \
      --batch-sizes "$sizes" -n "$iterations" --json "$out/contention_${forward}_$case.json" | tail -n +2 || status=1
    stop_hogs
  done
done

python3 - "$out" <<'PY' || status=1
import json, sys
out = sys.argv[1]
rows = []
print(f"{'forward':>8}{'batch':>7}{'idle items/s':>14}{'hogs, pinned':>14}{'ratio':>7}{'hogs, shared':>14}{'ratio':>7}")
for forward in ("graphs", "eager"):
    cases = {c: {p["batch_size"]: p["items_per_s"] for p in json.load(open(f"{out}/contention_{forward}_{c}.json"))["points"]}
             for c in ("idle", "hogs_pinned", "hogs_shared")}
    for b, idle in sorted(cases["idle"].items()):
        pinned, shared = cases["hogs_pinned"].get(b, 0), cases["hogs_shared"].get(b, 0)
        rows.append({"forward": forward, "batch": b, "idle": idle, "hogs_pinned": pinned, "hogs_shared": shared})
        print(f"{forward:>8}{b:>7}{idle:>14.0f}{pinned:>14.0f}{pinned / idle:>7.2f}{shared:>14.0f}{shared / idle:>7.2f}")
json.dump(rows, open(f"{out}/contention_summary.json", "w"), indent=2)
PY
exit $status
