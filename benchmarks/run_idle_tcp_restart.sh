#!/bin/bash
# Whether TCP's slow start after idle is part of what an idle second costs a request whose tensors
# travel in the gRPC message (issue 6's "1 s idle / back to back"). With
# net.ipv4.tcp_slow_start_after_idle = 1 (Linux's default), a connection idle for longer than its
# retransmission timeout starts again from the initial congestion window (10 segments; on loopback
# about 640 KB), so the policy net's 819 KB batch-128 request cannot go out in one flight after an
# idle second. Policy net, CUDA graphs, keep-warm 10 ms, batch 128 over TCP loopback; for each value
# in SSAI_VALUES (alternating rounds) a fresh server, the back-to-back row and the idle-gap row.
# Restores the host's value at the end; needs root (it says so and stops otherwise).
# Usage: benchmarks/run_idle_tcp_restart.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): SSAI_VALUES="1 0 1 0" IDLE_REQUESTS=20 GAP_MS=1000
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8077}
values=${SSAI_VALUES:-1 0 1 0}
idle_requests=${IDLE_REQUESTS:-20}
gap_ms=${GAP_MS:-1000}
knob=/proc/sys/net/ipv4/tcp_slow_start_after_idle
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
original=$(cat "$knob" 2>/dev/null) || { echo "no $knob here"; exit 0; }
if ! echo "$original" > "$knob" 2>/dev/null; then
  echo "$knob is not writable here (value $original): nothing measured"
  exit 0
fi
models=$(mktemp -d)
trap 'echo "$original" > "$knob"; stop_server >/dev/null 2>&1; rm -rf "$models"' EXIT
"$build/bin/chronoserve-examples" --out "$models" > /dev/null || exit 1
printf '%s\n' 'optimization { cuda { graphs: true } }' \
  'parameters { key: "keep_warm_ms" value { string_value: "10" } }' >> "$models/policy_net/config.pbtxt"
status=0
runs=()
for value in $values; do
  run="${#runs[@]}_ssai$value"
  runs+=("$run")
  echo "$value" > "$knob" || { status=1; continue; }
  start_server "$build" "$models" "$out/server-tcp-restart-$run.log" "$port" > /dev/null || { status=1; continue; }
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n 500 --warmup-requests 50 \
    --label "${run}_b2b" --json "$out/tcp_restart_${run}_b2b.json" > /dev/null || status=1
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n "$idle_requests" --warmup-requests 5 \
    --idle-gap-ms "$gap_ms" --label "${run}_idle" --json "$out/tcp_restart_${run}_idle.json" > /dev/null || status=1
  stop_server || status=1
done
python3 - "$out" "${runs[*]}" "$gap_ms" <<'PY' || status=1
import json, sys
out, runs, gap = sys.argv[1], sys.argv[2].split(), sys.argv[3]
keys = ("e2e", "transport", "server_total", "admit", "compute", "outside_gpu_spans")
print(f"policy net bs128, graphs, keep-warm 10 ms, tensors in the message over TCP; p50 us, back to back / after {gap} ms idle")
print(f"{'run':<10}" + "".join(f"{k:>22}" for k in keys) + f"{'e2e ratio':>11}")
summary = {"gap_ms": int(gap), "runs": {}}
for run in runs:
    try:
        b2b, idle = (json.load(open(f"{out}/tcp_restart_{run}_{m}.json"))["latency_us"] for m in ("b2b", "idle"))
    except (OSError, KeyError, ValueError) as e:
        print(f"{run:<10} missing: {e}")
        continue
    row = {k: [b2b[k]["p50"], idle[k]["p50"]] for k in keys}
    summary["runs"][run] = row
    print(f"{run:<10}" + "".join(f"{row[k][0]:>10.0f} / {row[k][1]:<9.0f}" for k in keys)
          + f"{row['e2e'][1] / row['e2e'][0]:>11.2f}")
json.dump(summary, open(f"{out}/tcp_restart.json", "w"), indent=2)
PY
exit $status
