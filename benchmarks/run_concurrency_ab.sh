#!/bin/bash
# Two builds of chronoserve against each other at moderate concurrency, where a pipelined worker
# often has one batch in flight when the next is due: the policy net with CUDA graphs (on a
# CPU-only build: eager), one worker, no queue delay, batch-1 requests, closed loop at each of
# CONCURRENCIES, on a fresh server per variant and round. The client is the same for both (this
# tree's chronobench), so a difference is the server's. Rounds alternate the order (base, new;
# new, base; ...) so that drift in the machine falls on both alike. Prints every point and the
# median per variant, and writes OUT_DIR/concurrency_ab.json.
#
# Usage: BASE_BUILD=DIR benchmarks/run_concurrency_ab.sh BUILD_DIR OUT_DIR [PORT]
# Environment: BASE_BUILD (required), ROUNDS=2, CONCURRENCIES="2 4 8 16 64", WINDOW_MS=2000,
#   GRAPHS=1 (0: eager).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8063}
base=${BASE_BUILD:?BASE_BUILD: the build to compare with}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_lib.sh"
mkdir -p "$out"
scratch_dir examples || exit 1
scratch_dir models || exit 1
"$build/bin/chronoserve-examples" --out "$examples" >/dev/null || exit 1
write_batching_repo "$examples" "$models" policy_net 0 1
[ "${GRAPHS:-1}" = 1 ] && printf '%s\n' 'optimization { cuda { graphs: true } }' >> "$models/policy_net/config.pbtxt"
status=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for variant in $(round_order "$round" base new); do
    ab_start "$round" "$variant" "$build" "$base" "$out" "$models" "$port" || { status=1; continue; }
    for c in ${CONCURRENCIES:-2 4 8 16 64}; do
      "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" -b 1 --concurrency-range "$c" \
        -p "${WINDOW_MS:-2000}" -r 4 -s 25 --warmup-requests 500 --json "$run/c$c.json" |
        grep "^concurrency" || status=1
    done
    stop_server || status=1
  done
done
python3 - "$out" <<'PY' || status=1
import collections, glob, json, os, statistics, sys
out = sys.argv[1]
groups = collections.defaultdict(list)
for path in sorted(glob.glob(f"{out}/*/round*/c*.json")):
    variant = path.split("/")[-3]
    for run in json.load(open(path))["runs"]:
        lat = run["latency_us"]
        groups[(run["concurrency"], variant)].append({
            "items_per_s": run["throughput_items_per_s"],
            "e2e_p50": lat["e2e"]["p50"], "e2e_p99": lat["e2e"]["p99"],
            "server_total_p50": lat["server_total"]["p50"], "server_total_p99": lat["server_total"]["p99"],
            "batch_mean": run["batch_size_executed"].get("per_batch_mean", 0.0),
        })
keys = ["items_per_s", "e2e_p50", "e2e_p99", "server_total_p50", "server_total_p99", "batch_mean"]
print("medians over the rounds (every point is in OUT/VARIANT/roundN/cC.json):")
print(f"{'conc':>5}{'variant':>8}{'runs':>5}" + "".join(f"{k:>18}" for k in keys))
rows = []
for (c, variant), runs in sorted(groups.items()):
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    rows.append({"concurrency": c, "variant": variant, "runs": runs, "median": med})
    print(f"{c:>5}{variant:>8}{len(runs):>5}" + "".join(f"{med[k]:>18.1f}" for k in keys))
json.dump(rows, open(f"{out}/concurrency_ab.json", "w"), indent=2)
PY
exit $status
