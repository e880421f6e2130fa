#!/bin/bash
# Issue 6's ratios with each way of writing the input arena (--input-arena-store, BENCHMARKS §72).
# One fresh server per store named in STORES and round, the policy net with CUDA graphs and
# keep-warm (10 ms) at batch 128, concurrency 1, the stores alternating round by round (a store
# named twice gets a server each, shown as ROUND.PLACE). On each server, in order:
#   first   the very first request after READY (one request, no warm-up)
#   steady  REQUESTS back to back (100 warm-up requests first)
#   gap     GAPS requests, each after 1 s idle
# Prints each server's e2e / server_total / h2d / queue p50 per phase and the ratios first / steady
# and gap / steady, at the client (e2e) and at the server (server_total); after each phase, the CPU
# each of the server's worker and gRPC completion-queue threads last ran on (ps psr), since a
# worker that shares a CPU with the thread that queued its request waits for that thread (§72's
# `queue` spread between servers).
# Usage: [STORES="cached streaming adaptive"] [ROUNDS=3] [REQUESTS=300] [GAPS=15] [SERVER_FLAGS=""] \
#          benchmarks/run_arena_store_ratios.sh BUILD_DIR OUT_DIR [PORT]
#   SERVER_FLAGS: more chronoserve flags for every server (e.g. "--host-policy gpu_0,cpu-cores=15")
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8051}
mkdir -p "$out"
CONFIG=$'optimization { cuda { graphs: true } }\nparameters { key: "keep_warm_ms" value { string_value: "10" } }'
source "$(dirname "$0")/server_lib.sh"
status=0
bench() {  # bench LABEL ARGS...
  local label=$1
  shift
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 "$@" --label "$label" \
    --json "$out/ratios-$label.json" > /dev/null
  local rc=$?
  thread_cpus "$server" > "$out/cpus-$label.txt"
  return $rc
}
for round in $(seq 1 "${ROUNDS:-3}"); do
  k=0
  for store in ${STORES:-cached streaming adaptive}; do
    k=$((k + 1))  # the store's place in STORES: a store named twice gets a server (and files) each
    run="$store-$round-$k"
    models=$(mktemp -d)
    "$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
    printf '%s\n' "$CONFIG" >> "$models/policy_net/config.pbtxt"
    start_server "$build" "$models" "$out/server-ratios-$run.log" "$port" --input-arena-store "$store" \
      ${SERVER_FLAGS:-} > /dev/null || { status=1; rm -rf "$models"; continue; }
    bench "$run-first" -n 1 --warmup-requests 0 || status=1
    bench "$run-steady" -n "${REQUESTS:-300}" --warmup-requests 100 || status=1
    bench "$run-gap" -n "${GAPS:-15}" --warmup-requests 0 --idle-gap-ms 1000 || status=1
    stop_server || status=1
    rm -rf "$models"
  done
done
python3 - "$out" <<'PY' || status=1
import glob, json, os, sys
out = sys.argv[1]
def cpus(label):
    path = os.path.join(out, f"cpus-{label}.txt")
    return open(path).read().strip() if os.path.exists(path) else "?"
def p50(label, key):
    path = os.path.join(out, f"ratios-{label}.json")
    if not os.path.exists(path):
        return float("nan")
    d = json.load(open(path))["latency_us"]
    return d[key]["p50"] if key in d else float("nan")
print(f"{'store':<10} {'round':>5} | {'e2e first':>9} {'steady':>7} {'gap':>7} | {'server first':>12} {'steady':>7} {'gap':>7} |"
      f" {'h2d first':>9} {'steady':>7} {'gap':>7} | {'queue first':>11} {'steady':>7} {'gap':>7} |"
      f" first/steady e2e, server | gap/steady e2e, server | CPUs after first; steady; gap")
# A run is STORE-ROUND-PLACE (PLACE: the store's place in STORES), shown as round ROUND.PLACE.
runs = sorted({os.path.basename(f)[len("ratios-"):].rsplit("-", 1)[0] for f in glob.glob(os.path.join(out, "ratios-*.json"))},
              key=lambda r: tuple(int(x) for x in r.split("-")[-2:]))
for run in runs:
    store, rnd, place = run.rsplit("-", 2)
    rnd = f"{rnd}.{place}"
    e = [p50(f"{run}-{ph}", "e2e") for ph in ("first", "steady", "gap")]
    s = [p50(f"{run}-{ph}", "server_total") for ph in ("first", "steady", "gap")]
    h = [p50(f"{run}-{ph}", "h2d") for ph in ("first", "steady", "gap")]
    q = [p50(f"{run}-{ph}", "queue") for ph in ("first", "steady", "gap")]
    c = "; ".join(cpus(f"{run}-{ph}") for ph in ("first", "steady", "gap"))
    print(f"{store:<10} {rnd:>5} | {e[0]:9.0f} {e[1]:7.0f} {e[2]:7.0f} | {s[0]:12.0f} {s[1]:7.0f} {s[2]:7.0f} |"
          f" {h[0]:9.1f} {h[1]:7.1f} {h[2]:7.1f} | {q[0]:11.0f} {q[1]:7.0f} {q[2]:7.0f} |"
          f" {e[0]/e[1]:12.2f} {s[0]/s[1]:6.2f}  | {e[2]/e[1]:10.2f} {s[2]/s[1]:6.2f}  | {c}")
PY
exit $status
