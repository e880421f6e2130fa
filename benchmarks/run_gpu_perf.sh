#!/bin/bash
# GPU performance figures (issue 6): eager vs CUDA graphs back to back (policy net, batch 128 and 1,
# closed loop, concurrency 1), and 1 s idle gaps with keep-warm off/on, eager and graphs. One server
# per configuration so one model's keep-warm cannot warm the GPU for another.
# Usage: [IDLE_ROWS=0] benchmarks/run_gpu_perf.sh BUILD_DIR OUT_DIR [PORT]
#   IDLE_ROWS=0 leaves out the four 1 s idle-gap rows (about 160 s of the run's 190): the
#   back-to-back rows only, for a device call short of time.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8021}
mkdir -p "$out"
GRAPHS='optimization { cuda { graphs: true } }'
WARM='parameters { key: "keep_warm_ms" value { string_value: "10" } }'
source "$(dirname "$0")/server_lib.sh"
status=0
run() {  # run LABEL EXTRA_CONFIG BENCH_ARGS...
  local label=$1 extra=$2
  shift 2
  local models
  models=$(mktemp -d)
  "$build/bin/chronoserve-examples" --out "$models" >/dev/null && printf '%s\n' "$extra" >> "$models/policy_net/config.pbtxt"
  start_server "$build" "$models" "$out/server-$label.log" "$port" || { status=1; rm -rf "$models"; return; }
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net "$@" --label "$label" \
    --json "$out/perf-$label.json" || status=1
  stop_server || status=1
  rm -rf "$models"
}
for b in 128 1; do
  run eager-bs$b "" -b $b -n 1000 --warmup-requests 100
  run graph-bs$b "$GRAPHS" -b $b -n 1000 --warmup-requests 100
done
if [ "${IDLE_ROWS:-1}" != 0 ]; then
  run eager-gap1000 "" -b 128 -n 20 --warmup-requests 20 --idle-gap-ms 1000
  run eager-warm-gap1000 "$WARM" -b 128 -n 20 --warmup-requests 20 --idle-gap-ms 1000
  run graph-gap1000 "$GRAPHS" -b 128 -n 20 --warmup-requests 20 --idle-gap-ms 1000
  run graph-warm-gap1000 "$GRAPHS"$'\n'"$WARM" -b 128 -n 20 --warmup-requests 20 --idle-gap-ms 1000
fi
grep -h "captured\|launch-bound" "$out"/server-*.log | sed 's/^.*] //' | sort | uniq -c | head -20
exit $status
