#!/bin/bash
# Latency at concurrency 1 with inference on gRPC's callback API or on the asynchronous API's
# completion queues (--grpc-infer-threads): for each thread count in VARIANTS ("0" = the callback
# API), ROUNDS times in turn (the order reversed every other round), a fresh server on the example
# repository and bench_serve_latency on the policy net at batch 128 and batch 1 (closed loop, 1000
# requests after 100 warm-up requests, tensors in the message). One table: p50 of e2e, of
# server_total, of the time outside the GPU spans and of transport. JSON under OUT/THREADS/roundN.
#
# Usage: benchmarks/run_latency_apis.sh BUILD_DIR OUT_DIR [PORT]
# Environment: VARIANTS="0 4", ROUNDS=2, REQUESTS=1000
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8055}
variants=${VARIANTS:-0 4}
requests=${REQUESTS:-1000}
mkdir -p "$out"
models=$(mktemp -d)
"$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
source "$(dirname "$0")/server_lib.sh"
trap 'stop_server >/dev/null 2>&1; rm -rf "$models"' EXIT
status=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  # shellcheck disable=SC2086
  for threads in $(round_order "$round" $variants); do
    dir=$out/$threads/round$round
    mkdir -p "$dir"
    echo "== round $round, --grpc-infer-threads $threads"
    start_server "$build" "$models" "$dir/server.log" "$port" --grpc-infer-threads "$threads" > /dev/null || exit 1
    for batch in 128 1; do
      "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b $batch -n "$requests" --warmup-requests 100 \
        --label "policy_net bs$batch" --json "$dir/serve_latency_bs$batch.json" > /dev/null || status=1
    done
    stop_server || status=1
  done
done
python3 - "$out" <<'PY' || status=1
import glob, json, os, sys
out = sys.argv[1]
rows = []
for path in glob.glob(os.path.join(out, "*", "round*", "serve_latency_bs*.json")):
    threads, rnd = os.path.relpath(path, out).split(os.sep)[:2]
    d = json.load(open(path))
    lat = d["latency_us"]
    rows.append({"threads": int(threads), "round": rnd, "batch_size": d["batch_size"],
                 **{f"{k}_p50_us": lat[k]["p50"] for k in ("e2e", "server_total", "outside_gpu_spans", "transport", "compute")}})
rows.sort(key=lambda r: (r["batch_size"], r["threads"], r["round"]))
print(f"{'batch':>6}{'threads':>8}{'round':>8}{'e2e p50':>9}{'server p50':>11}{'compute p50':>12}{'outside GPU p50':>16}{'transport p50':>14}")
for r in rows:
    print(f"{r['batch_size']:>6}{r['threads']:>8}{r['round']:>8}{r['e2e_p50_us']:>9.0f}{r['server_total_p50_us']:>11.0f}"
          f"{r['compute_p50_us']:>12.0f}{r['outside_gpu_spans_p50_us']:>16.0f}{r['transport_p50_us']:>14.0f}")
print("(threads 0 = the callback API; µs)")
json.dump(rows, open(os.path.join(out, "latency_apis_summary.json"), "w"), indent=2)
PY
exit $status
