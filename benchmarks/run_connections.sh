#!/bin/bash
# Does the client's connection count limit the served rate at high concurrency (issue 3)? The
# policy net with dynamic batching on (max_queue_delay 300 us, one worker), chronobench closed loop
# at concurrency 256, batch 1 per request, for several --connections / --threads pairs; the server's
# CPU use (utime+stime from /proc) per point; then the in-process reference at the batch sizes the
# batcher reached. Prints a table and writes JSON per point plus connections_summary.json.
# Usage: benchmarks/run_connections.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): CONCURRENCY=256 PAIRS="1:8 4:8 16:16" WINDOW_MS=1500 TRIALS=3
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8041}
concurrency=${CONCURRENCY:-256}
pairs=${PAIRS:-1:8 4:8 16:16}
window_ms=${WINDOW_MS:-1500}
trials=${TRIALS:-3}
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
"$build/bin/chronoserve-examples" --out "$work/examples" >/dev/null || exit 1
repo=$work/repo
write_batching_repo "$work/examples" "$repo" policy_net 300 1
status=0
start_server "$build" "$repo" "$out/server-connections.log" "$port" --warmup-runs 2 || exit 1
hz=$(getconf CLK_TCK)
for pair in $pairs; do
  conns=${pair%%:*} threads=${pair##*:}
  before=$(cpu_ticks "$server"); t0=$(date +%s.%N)
  "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" -b 1 --concurrency-range "$concurrency:$concurrency:1" \
    --connections "$conns" --threads "$threads" -p "$window_ms" -r "$trials" --warmup-requests $((concurrency * 4)) \
    --json "$out/connections_c${concurrency}_n${conns}_t${threads}.json" | tail -n 3 || status=1
  after=$(cpu_ticks "$server"); t1=$(date +%s.%N)
  python3 -c "import sys; b,a,t0,t1,hz=map(float,sys.argv[1:]); print(f'   server CPU: {(a-b)/hz/(t1-t0):.2f} cores over the point')" \
    "$before" "$after" "$t0" "$t1" "$hz" | tee "$out/connections_cpu_n${conns}_t${threads}.txt"
done
stop_server || status=1
reached=$(python3 - "$out" <<'PY'
import glob, json, sys
sizes = set()
for f in glob.glob(f"{sys.argv[1]}/connections_c*_n*_t*.json"):
    executed = json.load(open(f))["runs"][0]["batch_size_executed"] or {}
    sizes.add(max(1, round(executed.get("per_batch_mean") or 1)))  # items per executed batch (BENCHMARKS §36)
print(",".join(str(s) for s in sorted(sizes)))
PY
)
"$build/bin/bench_inprocess_throughput" --model-repository "$repo" -m policy_net --batch-sizes "${reached:-64}" -n 200 \
  --json "$out/connections_inprocess.json" || status=1
python3 - "$out" <<'PY' || status=1
import glob, json, os, re, sys
out = sys.argv[1]
inproc = {p["batch_size"]: p["items_per_s"] for p in json.load(open(f"{out}/connections_inprocess.json"))["points"]}
rows = []
for f in sorted(glob.glob(f"{out}/connections_c*_n*_t*.json")):
    m = re.search(r"_n(\d+)_t(\d+)", f)
    r = json.load(open(f))["runs"][0]
    batch_reached = (r["batch_size_executed"] or {}).get("per_batch_mean") or 0
    batch = max(1, round(batch_reached))
    cpu = open(f"{out}/connections_cpu_n{m[1]}_t{m[2]}.txt").read().split()[2]
    ref = inproc.get(batch, 0)
    rows.append({"connections": int(m[1]), "threads": int(m[2]), "items_per_s": r["throughput_items_per_s"],
                 "e2e_p50_us": r["latency_us"]["e2e"]["p50"], "batch_reached": batch_reached,
                 "server_cpu_cores": float(cpu), "inprocess_items_per_s": ref,
                 "ratio": r["throughput_items_per_s"] / ref if ref else None, "stable": r["stable"]})
print(f"{'conns':>6}{'threads':>8}{'items/s':>10}{'p50 us':>9}{'batch':>7}{'srv cores':>10}{'in-proc':>10}{'ratio':>7}")
for x in sorted(rows, key=lambda x: (x["connections"], x["threads"])):
    print(f"{x['connections']:>6}{x['threads']:>8}{x['items_per_s']:>10.0f}{x['e2e_p50_us']:>9.0f}{x['batch_reached']:>7.1f}"
          f"{x['server_cpu_cores']:>10.2f}{x['inprocess_items_per_s']:>10.0f}{(x['ratio'] or 0) * 100:>6.1f}%")
json.dump(rows, open(f"{out}/connections_summary.json", "w"), indent=2)
PY
exit $status
