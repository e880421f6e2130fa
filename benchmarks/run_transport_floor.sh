#!/bin/bash
# The transport floor under issue 6's latency ratios, TCP loopback vs the server's Unix socket
# (--grpc-unix-socket): bench_grpc_floor (ServerLive round trips back to back and after 1 s idle, raw
# 64-byte socket ping-pong without gRPC, also with the echo thread and with both threads never
# sleeping: --raw-spin), then the policy net with CUDA graphs and keep-warm (10 ms)
# through bench_serve_latency over each URL, tensors in the message and in system shared memory:
# back to back at batch 128 and 1, 1 s idle gaps at batch 128, and the first request after READY
# (FIRST_SAMPLES fresh servers per URL and transport, median). Prints e2e - GPU spans, first / steady
# and idle / back to back per URL and transport next to the floor, then the same ratios at the GPU
# spans and server_total; JSON per run and transport_floor_summary.json.
# Usage: benchmarks/run_transport_floor.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): REQUESTS=1000 IDLE_REQUESTS=10 FIRST_SAMPLES=3
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8061}
requests=${REQUESTS:-1000}
idle_requests=${IDLE_REQUESTS:-10}
first_samples=${FIRST_SAMPLES:-3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
warm_graph_workspace "$build" || exit 1
status=0
url_of() { [ "$1" = unix ] && echo "unix:$socket_path" || echo "127.0.0.1:$port"; }
bench() {  # bench URL_KIND TRANSPORT LABEL ARGS...
  local kind=$1 transport=$2 label=$3
  shift 3
  "$build/bin/bench_serve_latency" -u "$(url_of "$kind")" -m policy_net --shared-memory "$transport" "$@" \
    --label "$label" --json "$out/floor_${kind}_${transport}_${label}.json" | grep -E "^(e2e|transport|server_total) " \
    | sed "s/^/  [$kind $transport $label] /" || status=1
}

start_server "$build" "$models" "$out/server-floor.log" "$port" --grpc-unix-socket "$socket_path" || exit 1
"$build/bin/bench_grpc_floor" -u "127.0.0.1:$port" -u "unix:$socket_path" --raw-sockets --raw-spin -n "$requests" \
  --idle-requests "$idle_requests" --idle-gap-ms 1000 --json "$out/floor_grpc.json" || status=1
for kind in tcp unix; do
  for transport in system none; do
    bench "$kind" "$transport" bs128 -b 128 -n "$requests" --warmup-requests 100
    bench "$kind" "$transport" bs1 -b 1 -n "$requests" --warmup-requests 100
    bench "$kind" "$transport" gap1000 -b 128 -n "$idle_requests" --warmup-requests 5 --idle-gap-ms 1000
  done
done
stop_server || status=1
for sample in $(seq 1 "$first_samples"); do
  for kind in tcp unix; do
    for transport in system none; do
      start_server "$build" "$models" "$out/server-floor-first-$kind-$transport.log" "$port" \
        --grpc-unix-socket "$socket_path" >/dev/null || { status=1; continue; }
      bench "$kind" "$transport" "first$sample" -b 128 -n 1 --warmup-requests 0
      stop_server || status=1
    done
  done
done

python3 - "$out" "$first_samples" <<'PY' || status=1
import json, statistics, sys
out, first_samples = sys.argv[1], int(sys.argv[2])
floor = {(s["path"].split()[-1] if s["path"].startswith("gRPC") else s["path"], s["mode"]): s["p50_us"]
         for s in json.load(open(f"{out}/floor_grpc.json"))["series"]}
print(f"\n{'round trip':<40}{'back to back p50 us':>20}{'after 1 s idle p50 us':>23}{'ratio':>7}")
for (path, mode), p50 in sorted(floor.items()):
    if mode == "back_to_back":
        idle = floor.get((path, 'idle_1000ms'), 0)
        print(f"{path:<40}{p50:>20.1f}{idle:>23.1f}{idle / p50 if p50 else 0:>7.1f}")
def load(kind, transport, label):
    return {k: v["p50"] for k, v in json.load(open(f"{out}/floor_{kind}_{transport}_{label}.json"))["latency_us"].items()}
print(f"\n{'url':<6}{'tensors':<9}{'bs128 e2e':>10}{'e2e-GPU':>9}{'bs1 e2e':>9}{'bs1 transport':>14}"
      f"{'1s gaps e2e':>12}{'first e2e (median)':>19}{'first/steady':>13}{'idle/b2b':>9}")
summary = {"floor_p50_us": {f"{p} {m}": v for (p, m), v in floor.items()}, "runs": {}}
for kind in ("tcp", "unix"):
    for transport in ("system", "none"):
        b, b1, g = (load(kind, transport, l) for l in ("bs128", "bs1", "gap1000"))
        firsts = [load(kind, transport, f"first{i}")["e2e"] for i in range(1, first_samples + 1)]
        f = {"e2e": statistics.median(firsts)}
        gpu = b["h2d"] + b["compute"] + b["d2h"]
        # The same ratios at three depths: the GPU spans (what keep-warm holds), the server's time
        # (server_total) and the client's e2e (what the goals name, the host's wake-ups included).
        firsts_server = [load(kind, transport, f"first{i}")["server_total"] for i in range(1, first_samples + 1)]
        row = {"bs128_e2e_us": b["e2e"], "e2e_minus_gpu_spans_ms": (b["e2e"] - gpu) / 1000,
               "call_minus_gpu_spans_ms": (b.get("call", b["e2e"]) - gpu) / 1000,
               "idle_1s_over_back_to_back_compute": g["compute"] / b["compute"],
               "idle_1s_over_back_to_back_server_total": g["server_total"] / b["server_total"],
               "first_over_steady_server_total": statistics.median(firsts_server) / b["server_total"],
               "bs1_e2e_us": b1["e2e"], "bs1_transport_us": b1["transport"], "gap1000_e2e_us": g["e2e"],
               "first_e2e_us": f["e2e"], "first_e2e_samples_us": firsts, "first_over_steady": f["e2e"] / b["e2e"],
               "idle_1s_over_back_to_back": g["e2e"] / b["e2e"]}
        summary["runs"][f"{kind}_{transport}"] = row
        print(f"{kind:<6}{transport:<9}{b['e2e']:>10.0f}{b['e2e'] - gpu:>9.0f}{b1['e2e']:>9.0f}{b1['transport']:>14.0f}"
              f"{g['e2e']:>12.0f}{f['e2e']:>19.0f}{row['first_over_steady']:>13.2f}{row['idle_1s_over_back_to_back']:>9.2f}")
print(f"\n{'url':<6}{'tensors':<9}{'call-GPU':>9}{'idle/b2b: compute':>18}{'server_total':>13}{'e2e':>6}"
      f"{'first/steady: server_total':>27}{'e2e':>6}")
for name, row in summary["runs"].items():
    kind, transport = name.split("_")
    print(f"{kind:<6}{transport:<9}{row['call_minus_gpu_spans_ms'] * 1000:>9.0f}"
          f"{row['idle_1s_over_back_to_back_compute']:>18.2f}{row['idle_1s_over_back_to_back_server_total']:>13.2f}"
          f"{row['idle_1s_over_back_to_back']:>6.2f}{row['first_over_steady_server_total']:>27.2f}"
          f"{row['first_over_steady']:>6.2f}")
print("(call - GPU: e2e - GPU spans without the client's shared-memory copies; the same as e2e - GPU for messages)")
print("goals (issue 6, bs128): e2e - GPU spans <= 100 us; first / steady <= 1.5; 1 s idle / back to back <= 1.10")
json.dump(summary, open(f"{out}/transport_floor_summary.json", "w"), indent=2)
PY
exit $status
