#!/bin/bash
# Is a served batch's slow h2d the copy itself or the device waiting for the host to enqueue it?
# (BENCHMARKS §70.) Fresh servers, the policy net with CUDA graphs at batch 128, concurrency 1,
# alternating: as served, and with exact device timing (the stream held until the batch is enqueued,
# so h2d is device time only). Prints each server's h2d, compute, admit and server_total p50.
# Usage: [ROUNDS=3] [REQUESTS=300] benchmarks/run_h2d_servers.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8041}
mkdir -p "$out"
GRAPHS='optimization { cuda { graphs: true } }'
EXACT='parameters { key: "exact_device_timing" value { string_value: "true" } }'
source "$(dirname "$0")/server_lib.sh"
status=0
printf '%-8s %5s %8s %8s %8s %8s %8s %8s\n' way round "h2d p50" "h2d p99" compute admit server e2e
for round in $(seq 1 "${ROUNDS:-3}"); do
  for way in served exact; do
    models=$(mktemp -d)
    "$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
    printf '%s\n' "$GRAPHS" >> "$models/policy_net/config.pbtxt"
    [ "$way" = exact ] && printf '%s\n' "$EXACT" >> "$models/policy_net/config.pbtxt"
    label=$way-$round
    start_server "$build" "$models" "$out/server-h2d-$label.log" "$port" > /dev/null || { status=1; rm -rf "$models"; continue; }
    "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n "${REQUESTS:-300}" \
      --warmup-requests 50 --label "$label" --json "$out/h2d-$label.json" > /dev/null || status=1
    stop_server || status=1
    rm -rf "$models"
    python3 - "$out/h2d-$label.json" "$way" "$round" <<'PY' || status=1
import json, sys
d = json.load(open(sys.argv[1]))["latency_us"]
p = lambda k, q="p50": d[k][q] if k in d else float("nan")
print(f"{sys.argv[2]:<8} {sys.argv[3]:>5} {p('h2d'):8.1f} {p('h2d','p99'):8.1f} {p('compute'):8.1f} {p('admit'):8.1f} {p('server_total'):8.1f} {p('e2e'):8.1f}")
PY
  done
done
exit $status
