#!/bin/bash
# A served batch's h2d, server by server (BENCHMARKS §70-§71). Fresh servers, the policy net with
# CUDA graphs at batch 128, concurrency 1, the ways alternating round by round:
#   served     as served (--input-arena-store auto)
#   exact      exact device timing: the stream held until the batch is enqueued, so h2d is device
#              time only (is a slow h2d the copy, or the device waiting for the host?)
#   cached, streaming, evicted, adaptive
#              --input-arena-store: how the receiving thread writes the input into the page-locked
#              arena (does a slow h2d come from bytes left dirty in that thread's cache?)
# Prints each server's h2d, compute, admit, server_total and e2e p50.
# Usage: [WAYS="served exact"] [ROUNDS=3] [REQUESTS=300] [GAP_MS=0] benchmarks/run_h2d_servers.sh BUILD_DIR OUT_DIR [PORT]
#   GAP_MS > 0: that many ms idle before each request (bench_serve_latency --idle-gap-ms)
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8041}
mkdir -p "$out"
GRAPHS='optimization { cuda { graphs: true } }'
EXACT='parameters { key: "exact_device_timing" value { string_value: "true" } }'
source "$(dirname "$0")/server_lib.sh"
status=0
gap=${GAP_MS:-0}
gap_args=()
[ "$gap" -gt 0 ] && gap_args=(--idle-gap-ms "$gap")
printf '%-10s %5s %8s %8s %8s %8s %8s %8s\n' way round "h2d p50" "h2d p99" compute admit server e2e
for round in $(seq 1 "${ROUNDS:-3}"); do
  for way in ${WAYS:-served exact}; do
    models=$(mktemp -d)
    "$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
    printf '%s\n' "$GRAPHS" >> "$models/policy_net/config.pbtxt"
    flags=()
    case $way in
      served) ;;
      exact) printf '%s\n' "$EXACT" >> "$models/policy_net/config.pbtxt" ;;
      cached|streaming|evicted|adaptive) flags=(--input-arena-store "$way") ;;
      *) echo "unknown way '$way' (served, exact, cached, streaming, evicted, adaptive)"; exit 2 ;;
    esac
    label=$way-$round${gap_args[0]:+-gap$gap}
    start_server "$build" "$models" "$out/server-h2d-$label.log" "$port" "${flags[@]}" > /dev/null \
      || { status=1; rm -rf "$models"; continue; }
    "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n "${REQUESTS:-300}" \
      --warmup-requests 50 "${gap_args[@]}" --label "$label" --json "$out/h2d-$label.json" > /dev/null || status=1
    stop_server || status=1
    rm -rf "$models"
    python3 - "$out/h2d-$label.json" "$way" "$round" <<'PY' || status=1
import json, sys
d = json.load(open(sys.argv[1]))["latency_us"]
p = lambda k, q="p50": d[k][q] if k in d else float("nan")
print(f"{sys.argv[2]:<10} {sys.argv[3]:>5} {p('h2d'):8.1f} {p('h2d','p99'):8.1f} {p('compute'):8.1f} {p('admit'):8.1f} {p('server_total'):8.1f} {p('e2e'):8.1f}")
PY
  done
done
exit $status
